// Starts `leadline serve --demo` on a fresh database at a point of the demo's fault schedule and resolves with
// its browser link (with the token) once it printed it.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface Demo {
  link: string;
  origin: string;
  started: number;
  stop: () => void;
}

export async function startDemo(offsetSeconds: number, port: number, rate = 240): Promise<Demo> {
  const bin = process.env.LEADLINE_BIN ?? '../target/debug/leadline';
  const dir = mkdtempSync(join(tmpdir(), 'leadline-e2e-'));
  const child: ChildProcess = spawn(bin, ['serve', '--demo', '--demo-rate', String(rate), '--listen', `127.0.0.1:${port}`, '--database', join(dir, 'e2e.db')], {
    env: { ...process.env, LEADLINE_DEMO_CLOCK_OFFSET: String(offsetSeconds), RUST_LOG: 'warn' },
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
  return { link, origin: new URL(link).origin, started: Date.now(), stop: () => child.kill('SIGTERM') };
}
