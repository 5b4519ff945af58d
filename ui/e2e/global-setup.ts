// Starts `leadline serve --demo` on a fresh database near the end of the demo's "field-format change" (HubSpot
// refuses national phone numbers: data dead letters appear at once), followed 20 s later by its "expired token"
// (the CRM is held, one alert) and 50 s after start by normal service; hands the browser link (with its token)
// to the tests.
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export default async function globalSetup() {
  const bin = process.env.LEADLINE_BIN ?? '../target/debug/leadline';
  const dir = mkdtempSync(join(tmpdir(), 'leadline-e2e-'));
  const port = process.env.LEADLINE_E2E_PORT ?? '8797';
  const child = spawn(bin, ['serve', '--demo', '--demo-rate', '240', '--listen', `127.0.0.1:${port}`, '--database', join(dir, 'e2e.db')], {
    env: { ...process.env, LEADLINE_DEMO_CLOCK_OFFSET: '400', RUST_LOG: 'warn' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const link = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('leadline serve did not print its browser link within 30 s')), 30_000);
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const m = out.match(/(http:\/\/127\.0\.0\.1:\d+\/\?token=[0-9a-f]+)/);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    child.on('exit', (code) => reject(new Error(`leadline serve exited with ${code}`)));
  });
  process.env.LEADLINE_E2E_LINK = link;
  process.env.LEADLINE_E2E_URL = new URL(link).origin;
  process.env.LEADLINE_E2E_STARTED = String(Date.now());
  return async () => {
    child.kill('SIGTERM');
  };
}
