import { defineConfig } from '@playwright/test';

// End-to-end tests in Debian's Chromium (no browser downloads) against a real `leadline serve --demo`,
// started by e2e/global-setup.ts. LEADLINE_BIN points at the binary (the .ci/test script sets it).
export default defineConfig({
  testDir: './e2e',
  timeout: 90_000,
  expect: { timeout: 20_000 },
  fullyParallel: false,
  workers: 1,
  reporter: [['list']],
  globalSetup: './e2e/global-setup.ts',
  use: {
    baseURL: process.env.LEADLINE_E2E_URL ?? 'http://127.0.0.1:8797',
    viewport: { width: 1280, height: 800 },
    launchOptions: {
      executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
    },
    screenshot: 'only-on-failure',
  },
});
