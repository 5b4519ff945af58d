// Settings without TOML: a person changes a target's URL in the app. The file changes and keeps every comment,
// the change is in force at once (the next lead goes to the new address, same process, no restart); an invalid
// value is refused with its field named beside it and the file left as it was.
import { expect, test } from '@playwright/test';
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const PORT = 8819;

/** A CRM endpoint that takes any lead (a JSON POST answered 201 with an id, Leadline's plain `http` target with
 * `strategy = "idempotency_key"`) and remembers what it received. */
async function crm(): Promise<{ url: string; received: unknown[]; server: Server }> {
  const received: unknown[] = [];
  const server = createServer((req: IncomingMessage, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      received.push(JSON.parse(body || 'null'));
      res.writeHead(201, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id: `crm-${received.length}` }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return { url: `http://127.0.0.1:${port}/leads`, received, server };
}

const CONFIG = (crmUrl: string) => `# Leadline at ACME: owned by sales ops (ask Jo before changing targets)

[sources.webform]
# the marketing site's contact form
route = ["crm"]   # one step

[targets.crm]
url = "${crmUrl}"  # the CRM the leads go to
strategy = "idempotency_key"
auth = { bearer_env = "E2E_CRM_TOKEN" }  # the token comes from the environment

# How a lead becomes the CRM's record
[[targets.crm.mapping]]
to = "email"   # the CRM's key
from = "/email"
required = true

[[targets.crm.mapping]]
to = "full_name"
from = ["/name", "/full_name"]

# Alerts: nights are quiet
[monitor]
quiet_hours = { start = "22:00", end = "07:00" }  # office hours only
`;

async function serve(config: string, db: string): Promise<{ link: string; child: ChildProcess }> {
  const bin = process.env.LEADLINE_BIN ?? '../target/debug/leadline';
  const child = spawn(bin, ['serve', '--config', config, '--listen', `127.0.0.1:${PORT}`, '--database', db], {
    env: { ...process.env, RUST_LOG: 'warn', E2E_CRM_TOKEN: 'e2e-token' },
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
  return { link, child };
}

async function sendLead(id: string): Promise<void> {
  const r = await fetch(`http://127.0.0.1:${PORT}/ingest/webform`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ id, name: 'Ada Tester', email: `${id}@example.com` }),
  });
  expect(r.status).toBe(202);
}

test('a setting edited in the app is written into the file, comments kept, and in force without a restart', async ({ page }) => {
  test.setTimeout(120_000);
  const dir = mkdtempSync(join(tmpdir(), 'leadline-settings-'));
  const [first, second] = [await crm(), await crm()];
  const file = join(dir, 'leadline.toml');
  writeFileSync(file, CONFIG(first.url));
  const original = readFileSync(file, 'utf8');
  const { link, child } = await serve(file, join(dir, 'leadline.db'));
  try {
    // Before: leads go to the first CRM.
    await sendLead('before-1');
    await expect.poll(() => first.received.length, { timeout: 20_000 }).toBe(1);

    await page.setViewportSize({ width: 1440, height: 900 });
    await page.goto(link);
    await page.getByRole('link', { name: 'Settings' }).click();
    await expect(page).toHaveURL(/#\/settings$/);
    await expect(page.getByTestId('settings-file')).toHaveText(file);
    const url = page.getByLabel('targets.crm.url');
    await expect(url).toHaveValue(first.url);

    // An invalid value: refused, its field named beside it, the file as it was.
    await url.fill('ftp://crm.example.com/leads');
    await page.getByTestId('save-settings').click();
    const refused = page.getByTestId('target-settings').getByTestId('field-error');
    await expect(refused).toHaveCount(1);
    await expect(refused).toHaveAttribute('data-path', 'targets.crm.url');
    await expect(refused).toContainText('must be http or https');
    expect(readFileSync(file, 'utf8')).toBe(original);

    // A valid one: saved, only that line of the file differs (its comment kept), in force at once.
    await url.fill(second.url);
    await page.getByTestId('save-settings').click();
    await expect(page.getByText('in force now: no restart')).toBeVisible();
    await expect(refused).toHaveCount(0);
    const saved = readFileSync(file, 'utf8');
    const differ = original.split('\n').map((line, i) => [line, saved.split('\n')[i]] as const).filter(([a, b]) => a !== b);
    expect(differ).toEqual([[`url = "${first.url}"  # the CRM the leads go to`, `url = "${second.url}"  # the CRM the leads go to`]]);
    for (const comment of original.split('\n').filter((l) => l.includes('#'))) {
      if (!comment.startsWith('url')) expect(saved).toContain(comment);
    }
    await page.locator('main').evaluate((m) => m.scrollTo(0, 0));
    await page.screenshot({ path: '../docs/screenshots/settings.png' });
    await page.setViewportSize({ width: 1024, height: 640 });
    await page.screenshot({ path: join(dir, 'settings-1024x640.png') });
    console.log(`settings at 1024x640: ${join(dir, 'settings-1024x640.png')}`);

    // In force without a restart: the same process sends the next lead to the new address.
    await sendLead('after-1');
    await expect.poll(() => second.received.length, { timeout: 20_000 }).toBe(1);
    expect(first.received.length).toBe(1);
    expect(child.exitCode).toBeNull();
    // The Targets page shows the new address too.
    await page.getByRole('link', { name: 'Targets' }).click();
    await expect(page.getByText(new URL(second.url).origin)).toBeVisible();
  } finally {
    child.kill('SIGTERM');
    first.server.close();
    second.server.close();
  }
});
