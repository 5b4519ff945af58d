// A team server: two `leadline serve` processes on one PostgreSQL database, two people with tokens of their own.
// Alice has the desk open in a browser on the first process; Bob works through the API (Bearer token, as the
// headless client does) on the second. Alice's desk sees Bob's replay live, with his name on it and in the lead's
// story; then Alice's token is revoked and her open page says so at once instead of going on as if live.
//
// Needs PostgreSQL: `.ci/test` starts a throwaway cluster and exports LEADLINE_TEST_PG_URL; without it the test
// is skipped (and says why).
import { expect, test } from '@playwright/test';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const PORTS = [8823, 8824];
const BIN = process.env.LEADLINE_BIN ?? '../target/debug/leadline';
const LEADS = 6;

/** A CRM that refuses every lead with a validation error (422) until told to accept them, then answers 201 and
 * keeps each accepted request's Idempotency-Key. */
async function crm(): Promise<{ url: string; accept: () => void; accepted: string[]; server: Server }> {
  let accepting = false;
  const accepted: string[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      if (!accepting) {
        res.writeHead(422, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ message: 'email: this address is on the block list' }));
        return;
      }
      // One record per lead: Leadline names each lead's delivery by its Idempotency-Key.
      accepted.push(String(req.headers['idempotency-key'] ?? ''));
      res.writeHead(201, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id: `crm-${accepted.length}` }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return { url: `http://127.0.0.1:${port}/leads`, accept: () => (accepting = true), accepted, server };
}

/** A fresh database in the test cluster; its URL. */
function freshDatabase(admin: string): string {
  const name = `e2e_team_${Date.now()}`;
  execFileSync('psql', [admin, '-q', '-c', `CREATE DATABASE ${name}`], { stdio: 'inherit' });
  const url = new URL(admin);
  url.pathname = `/${name}`;
  return url.toString();
}

const CONFIG = (db: string, crmUrl: string) => `
[database]
url = "${db}"

[worker]
poll_interval_ms = 200

[sources.webform]
route = ["crm"]

[targets.crm]
url = "${crmUrl}"
strategy = "idempotency_key"

[replay]
canary_size = 1
rate_per_second = 1
`;

function serve(config: string, port: number): ChildProcess {
  return spawn(BIN, ['serve', '--config', config, '--listen', `127.0.0.1:${port}`], {
    env: { ...process.env, RUST_LOG: 'warn' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
}

async function up(port: number) {
  await expect
    .poll(async () => (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => null))?.status ?? 0, { timeout: 30_000 })
    .toBe(200);
}

/** `leadline token create NAME`: the token it prints once. */
function token(config: string, name: string): string {
  const out = execFileSync(BIN, ['token', 'create', name, '--config', config], { encoding: 'utf8' });
  const m = /^Token for .*: ([0-9a-f]+)$/m.exec(out);
  if (!m) throw new Error(`no token in: ${out}`);
  return m[1]!;
}

test('a team server: a desk sees a replay another operator started, under their name, and a revoked token is refused mid-session', async ({ page }) => {
  const admin = process.env.LEADLINE_TEST_PG_URL;
  test.skip(!admin, 'needs PostgreSQL: LEADLINE_TEST_PG_URL (.ci/test starts a cluster and sets it)');
  test.setTimeout(120_000);
  const dir = mkdtempSync(join(tmpdir(), 'leadline-team-'));
  const mock = await crm();
  const config = join(dir, 'leadline.toml');
  writeFileSync(config, CONFIG(freshDatabase(admin!), mock.url));
  // The first process makes the schema; the second starts on it.
  const children: ChildProcess[] = [serve(config, PORTS[0]!)];
  try {
    await up(PORTS[0]!);
    children.push(serve(config, PORTS[1]!));
    await up(PORTS[1]!);
    const [alice, bob] = [token(config, 'alice'), token(config, 'bob')];
    const [deskA, apiB] = PORTS.map((p) => `http://127.0.0.1:${p}`) as [string, string];
    const asBob = async (method: string, path: string, body?: unknown) => {
      const r = await fetch(apiB + path, {
        method,
        headers: { authorization: `Bearer ${bob}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      expect(r.status, `${method} ${path}`).toBeLessThan(300);
      return r.json();
    };

    // Alice signs in on the first process.
    await page.setViewportSize({ width: 1440, height: 900 });
    await page.goto(`${deskA}/?token=${alice}`);
    await expect(page.getByTestId('verdict')).toBeVisible();

    // Leads arrive at the second process; the CRM refuses them: dead letters, seen on Alice's desk.
    for (let i = 1; i <= LEADS; i++) {
      const r = await fetch(`${apiB}/ingest/webform`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ id: `team-${i}`, email: `team-${i}@example.com` }),
      });
      expect(r.status).toBe(202);
    }
    await page.getByRole('link', { name: /^Dead letters/ }).click();
    await expect(page.getByRole('group', { name: 'Open dead letters by class' })).toContainText(`All classes ${LEADS}`);

    // Bob replays them through the API, on the other process, once the CRM takes them again.
    mock.accept();
    const list = (await asBob('GET', '/api/dead-letters?target=crm')) as { items: { delivery_id: number }[] };
    const selection = { ids: list.items.map((d) => d.delivery_id), filter: null };
    expect(selection.ids).toHaveLength(LEADS);
    const preview = (await asBob('POST', '/api/replays/preview', selection)) as { eligible: number };
    const receipt = (await asBob('POST', '/api/replays', {
      selection,
      expected: preview.eligible,
      reason: 'the CRM lifted its block list',
      options: { canary: 1, rate_per_second: 1 },
    })) as { replay_id: number };

    // Alice's desk shows it while it runs (paced at one lead a second), under Bob's name.
    const row = page.getByTestId('replay-row');
    await expect(row).toContainText(`Replay ${receipt.replay_id} by bob`);
    await expect(row).toContainText('the CRM lifted its block list');
    await page.screenshot({ path: '../docs/screenshots/team-replay.png' });
    await expect.poll(() => mock.accepted.length, { timeout: 60_000 }).toBe(LEADS);
    expect(new Set(mock.accepted).size, 'six different leads, none twice').toBe(LEADS);
    expect(mock.accepted).not.toContain('');
    await expect(page.getByRole('group', { name: 'Open dead letters by class' })).toContainText('All classes 0');

    // The lead's story names who replayed it and why.
    await page.goto(`${deskA}/#/leads?q=team-1@example.com`);
    await page.getByTestId('lead-match').first().click();
    await expect(page.getByTestId('lead-story')).toContainText(/Replayed .* by bob: “the CRM lifted its block list”/);

    // Alice's token is revoked while her page is open: it says so at once, and her next action is refused.
    await expect(page.getByTestId('refused')).toHaveCount(0);
    execFileSync(BIN, ['token', 'revoke', 'alice', '--config', config]);
    await expect(page.getByTestId('refused')).toContainText("no longer accepts this browser's token", { timeout: 15_000 });
    await expect(page.getByTestId('refused')).toContainText('no longer live');
    await page.screenshot({ path: '../docs/screenshots/team-revoked.png' });
    const refused = await page.evaluate(async () => (await fetch('/api/health')).status);
    expect(refused).toBe(401);
    // Bob's token still works.
    await asBob('GET', '/api/health');
  } finally {
    for (const c of children) c.kill('SIGTERM');
    mock.server.close();
  }
});
