// Takes the README's screenshots of the browser UI: starts `leadline serve --demo` (in the demo's "expired
// token" phase, so there are dead letters and an alert), waits for traffic, and photographs each page.
//   node ui/scripts/screenshots.mjs <leadline binary> <output folder>
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium } from '@playwright/test';

const [bin = '../target/debug/leadline', outArg = '../docs/screenshots'] = process.argv.slice(2);
const out = resolve(outArg);
mkdirSync(out, { recursive: true });
const dir = mkdtempSync(join(tmpdir(), 'leadline-shots-'));
const server = spawn(bin, ['serve', '--demo', '--demo-rate', '300', '--listen', '127.0.0.1:8798', '--database', join(dir, 'shots.db')], {
  env: { ...process.env, LEADLINE_DEMO_CLOCK_OFFSET: '400', RUST_LOG: 'warn' },
  stdio: ['ignore', 'pipe', 'inherit'],
});
const link = await new Promise((ok, fail) => {
  let text = '';
  server.stdout.on('data', (c) => {
    text += c;
    const m = text.match(/(http:\/\/127\.0\.0\.1:\d+\/\?token=[0-9a-f]+)/);
    if (m) ok(m[1]);
  });
  setTimeout(() => fail(new Error('no browser link')), 30000);
});
process.on('exit', () => server.kill('SIGTERM'));
process.on('uncaughtException', (e) => {
  console.error(e);
  process.exit(1);
});
// Let the demo run through its rate-limit, field-format and expired-token phases.
await new Promise((r) => setTimeout(r, 75000));
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
});
async function shot(name, { width = 1280, height = 800, scheme = 'light', hash = '#/overview', before } = {}) {
  const page = await browser.newPage({ viewport: { width, height }, colorScheme: scheme });
  await page.goto(link);
  await page.evaluate((h) => (location.hash = h), hash);
  await page.waitForTimeout(2500);
  if (before) await before(page);
  await page.screenshot({ path: join(out, `${name}.png`) });
  await page.close();
  console.log(`${name}.png`);
}
await shot('overview');
await shot('overview-dark', { scheme: 'dark' });
await shot('overview-1024x640', { width: 1024, height: 640 });
await shot('dead-letters', {
  hash: '#/dead-letters',
  before: async (page) => {
    await page.getByLabel('Source').selectOption('webform');
    await page.waitForTimeout(800);
    await page.getByTestId('dlq-row').first().click();
    await page.waitForTimeout(1200);
  },
});
await shot('replay-confirm', {
  hash: '#/dead-letters',
  before: async (page) => {
    await page.getByTestId('class-permanent_config').click();
    await page.waitForTimeout(800);
    await page.getByTestId('replay-all').click();
    await page.waitForTimeout(800);
    await page.getByRole('dialog').getByRole('textbox').fill('HubSpot token renewed');
    await page.getByTestId('replay-go').click();
    await page.waitForTimeout(500);
  },
});
await shot('dead-letter-groups', {
  hash: '#/dead-letters',
  before: async (page) => {
    await page.getByTestId('view-groups').click();
    await page.waitForTimeout(1200);
  },
});
await shot('replay-progress', {
  hash: '#/dead-letters',
  before: async (page) => {
    await page.getByTestId('view-groups').click();
    await page.waitForTimeout(800);
    await page.getByTestId('replay-group').first().click();
    await page.waitForTimeout(800);
    const dialog = page.getByRole('dialog');
    await dialog.getByTestId('replay-canary').fill('5');
    await dialog.getByTestId('replay-rate').fill('2');
    await dialog.getByRole('textbox').fill('HubSpot token renewed');
    await dialog.getByTestId('replay-go').click();
    await dialog.getByTestId('replay-confirm').click();
    await page.waitForTimeout(6000);
  },
});
await shot('sources', { hash: '#/sources' });
await shot('alerts', { hash: '#/alerts' });
await browser.close();
server.kill('SIGTERM');
