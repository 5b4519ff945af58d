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
  /** When the process was spawned (ms since the epoch). */
  spawned: number;
  /** When the demo's timeline began running (ms since the epoch): its schedule's first phase, logged as
   *  `demo HubSpot phase=…` when the schedule starts, `offsetSeconds` into the timeline. */
  started: number;
  /** When the demo's HubSpot entered a phase whose name matches (ms since the epoch), from the demo's log; waits
   *  for it. The moment a fault begins, to time what the screen says from. */
  phase: (name: RegExp, timeoutMs?: number) => Promise<number>;
  /** The wall time at which the demo's timeline reaches `seconds` (as `LEADLINE_DEMO_CLOCK_OFFSET` counts). */
  timelineAt: (seconds: number) => number;
  stop: () => void;
}

/** `missingData`: the demo's CRM target keeps its `missing_data` (leads whose phone HubSpot refuses are written
 *  without it, not dead-lettered); otherwise `LEADLINE_DEMO_MISSING_DATA=off`, so that the phone rule makes the
 *  data dead letters the tests of fixing and replaying look at. */
export async function startDemo(offsetSeconds: number, port: number, rate = 240, withDeadLetters = false, missingData = false): Promise<Demo> {
  const bin = process.env.LEADLINE_BIN ?? '../target/debug/leadline';
  const dir = mkdtempSync(join(tmpdir(), 'leadline-e2e-'));
  const spawned = Date.now();
  // Warnings, and the demo's own info lines: each phase of its fault schedule is logged when it begins.
  const child: ChildProcess = spawn(bin, ['serve', '--demo', '--demo-rate', String(rate), '--listen', `127.0.0.1:${port}`, '--database', join(dir, 'e2e.db')], {
    env: {
      ...process.env,
      LEADLINE_DEMO_CLOCK_OFFSET: String(offsetSeconds),
      LEADLINE_DEMO_MISSING_DATA: missingData ? 'on' : 'off',
      RUST_LOG: 'warn,leadline::demo=info',
      NO_COLOR: '1',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const phases: { name: string; at: number }[] = [];
  const waiting: (() => void)[] = [];
  let errText = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    const at = Date.now();
    errText += chunk.toString().replace(/\x1b\[[0-9;]*m/g, '');
    const lines = errText.split('\n');
    errText = lines.pop() ?? '';
    for (const line of lines) {
      const m = line.match(/demo HubSpot phase="?([^"]+?)"?\s*$/);
      if (m) {
        phases.push({ name: m[1]!, at });
        waiting.splice(0).forEach((wake) => wake());
      } else {
        process.stderr.write(line + '\n');
      }
    }
  });
  const phase = (name: RegExp, timeoutMs = 60_000) =>
    new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the demo did not enter a phase like ${name} within ${timeoutMs} ms: ${JSON.stringify(phases)}`)), timeoutMs);
      const look = () => {
        const p = phases.find((p) => name.test(p.name));
        if (p) {
          clearTimeout(timer);
          resolve(p.at);
        } else {
          waiting.push(look);
        }
      };
      look();
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
  // The schedule starts (and logs its first phase) once the demo's history is seeded, after the link.
  const started = await phase(/./, 60_000);
  const origin = new URL(link).origin;
  // The demo's own traffic follows a day's rhythm (quiet at night) and HubSpot's phone rule lasts 20 s from the
  // usual start (offset 400): so that the tests find data dead letters at any hour, a few leads with national
  // phone numbers are sent at once while the rule is on — four signed like the demo's web form, two from the partner.
  if (withDeadLetters) await sendNationalPhoneLeads(origin);
  const timelineAt = (seconds: number) => started + (seconds - offsetSeconds) * 1000;
  return { link, origin, crm, spawned, started, phase, timelineAt, stop: () => child.kill('SIGTERM') };
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
