// Starts `leadline serve --demo` on a fresh database at a point of the demo's fault schedule and resolves with
// its browser link (with the token) once it printed it.
import { spawn, type ChildProcess } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface Demo {
  link: string;
  origin: string;
  /** The demo's mock CRM (HubSpot's API), to look at what the CRM received. */
  crm: string;
  started: number;
  stop: () => void;
}

export async function startDemo(offsetSeconds: number, port: number, rate = 240, withDeadLetters = false): Promise<Demo> {
  const bin = process.env.LEADLINE_BIN ?? '../target/debug/leadline';
  const dir = mkdtempSync(join(tmpdir(), 'leadline-e2e-'));
  const child: ChildProcess = spawn(bin, ['serve', '--demo', '--demo-rate', String(rate), '--listen', `127.0.0.1:${port}`, '--database', join(dir, 'e2e.db')], {
    env: { ...process.env, LEADLINE_DEMO_CLOCK_OFFSET: String(offsetSeconds), RUST_LOG: 'warn' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let crm = '';
  const link = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('leadline serve did not print its browser link within 30 s')), 30_000);
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      crm ||= out.match(/Demo CRM[^\n]*?(http:\/\/127\.0\.0\.1:\d+)/)?.[1] ?? '';
      const m = out.match(/(http:\/\/127\.0\.0\.1:\d+\/\?token=[0-9a-f]+)/);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    child.on('exit', (code) => reject(new Error(`leadline serve exited with ${code}`)));
  });
  const origin = new URL(link).origin;
  // The demo's own traffic follows a day's rhythm (quiet at night) and HubSpot's phone rule lasts 20 s from the
  // usual start (offset 400): so that the tests find data dead letters at any hour, a few leads with national
  // phone numbers are sent at once while the rule is on — four signed like the demo's web form, two from the partner.
  if (withDeadLetters) await sendNationalPhoneLeads(origin);
  return { link, origin, crm, started: Date.now(), stop: () => child.kill('SIGTERM') };
}

async function sendNationalPhoneLeads(origin: string): Promise<void> {
  for (let n = 1; n <= 4; n++) {
    const body = JSON.stringify({ id: `e2e-wf-${n}`, name: `Eve Tester${n}`, email: `eve${n}@example.com`, phone: `0151 2345 67${n}0`, form: 'contact-us', consent: true });
    const signature = 'sha256=' + createHmac('sha256', 'demo-webform-secret').update(body).digest('hex');
    const r = await fetch(`${origin}/ingest/webform`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-signature-256': signature }, body });
    if (r.status !== 202) throw new Error(`the demo refused a test lead: ${r.status} ${await r.text()}`);
  }
  for (let n = 1; n <= 2; n++) {
    const body = JSON.stringify({ lead: { ref: `e2e-P-${n}`, name: `Pat Tester${n}`, phone: `0170 9876 54${n}0`, email: `pat${n}@example.com` } });
    const r = await fetch(`${origin}/ingest/partner_api`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    if (r.status !== 202) throw new Error(`the demo refused a test lead: ${r.status} ${await r.text()}`);
  }
}
