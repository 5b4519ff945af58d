// Presentation of a source's volume state in words: one pill (level, label, help) and a line for the volume
// column. Unit-tested in sources.test.ts.

import type { PollView, SourceState, SourceStatus, SourceView } from './api/wire';
import { formatTime, num, plural } from './format';

/** "09:14" in the user's locale (minutes are precise enough for a silence or a start). */
export function clock(iso: string | null | undefined): string {
  return iso ? new Date(iso).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' }) : '?';
}

/** Every state the server can send, with a level; the generated `SourceState` type makes the list exhaustive. */
const LEVEL: Record<SourceState, '' | 'ok' | 'warn' | 'bad'> = {
  normal: 'ok',
  drop: 'warn',
  silent: 'bad',
  learning: '',
  low: '',
  listening: '',
};

export const SOURCE_STATES = Object.keys(LEVEL) as SourceState[];

/** What a source is doing: the pill's level and label, its help (a title), and the volume column's line. */
export function sourceStateText(s: SourceStatus): { level: string; label: string; help: string; volume: string } {
  const a = s.assessment;
  const level = LEVEL[s.state];
  const judged = `${num(a.observed)} in ${a.window_minutes} min`;
  const usual = a.expected !== null ? `, about ${num(Math.round(a.expected))} usual` : '';
  switch (s.state) {
    case 'normal':
      return { level, label: 'normal', help: 'Volume is what this hour of the week usually brings.', volume: judged + usual };
    case 'drop':
      return { level, label: 'fewer than usual', help: 'Improbably few leads for this hour of the week: see Alerts.', volume: judged + usual };
    case 'silent': {
      const expected = a.expected_during_silence !== null ? `, while about ${num(Math.round(a.expected_during_silence))} were expected` : '';
      return {
        level,
        label: `silent since ${clock(a.silent_since)}`,
        help: `Not one lead since ${clock(a.silent_since)}${expected}: see Alerts.`,
        volume: judged + usual,
      };
    }
    case 'learning':
      return { level, label: 'learning', help: 'Not enough history yet to know what is normal for this source.', volume: judged };
    case 'low':
      return { level, label: 'quiet hours', help: 'Too little traffic is expected now to judge (night, weekend).', volume: judged + usual };
    case 'listening': {
      const heard = a.heard_since_start ? 'leads have arrived since' : 'no lead has arrived yet';
      return {
        level,
        label: 'listening — too early to judge',
        help:
          `Leadline has been listening since ${clock(s.listening_since)}: too few leads are expected in that time to tell ` +
          `a drop from chance. Judged from ${clock(a.judged_from)}; ${heard}.`,
        volume: `judged from ${clock(a.judged_from)} · ${a.heard_since_start ? 'leads arriving' : 'nothing since the start yet'}`,
      };
    }
  }
}

/** How a source's leads reach Leadline, under its name: Meta or generic, fed by webhooks or polled. */
export function feedText(s: Pick<SourceView, 'kind' | 'poll'>): string {
  const kind =
    s.kind === 'meta' ? 'Meta Lead Ads' : s.kind === 'google_ads' ? 'Google Ads lead form' : s.poll ? 'list' : 'webhook';
  return s.poll ? `${kind} · polled` : kind;
}

/** A polled source's last and next poll ("last poll 10:41:03 · next 10:42:03"), what the last one found, and
 *  whether it failed. */
export function pollText(p: PollView, now: Date = new Date()): { level: '' | 'bad'; line: string; detail: string; help: string } {
  const every = p.interval_seconds % 60 === 0 ? `${p.interval_seconds / 60} min` : `${p.interval_seconds} s`;
  const help = `Polled every ${every}: Leadline asks the source for the leads created since its last poll (no webhook is expected).`;
  if (!p.last_poll_at) return { level: '', line: `not polled yet · next ${formatTime(p.next_poll_at, now)}`, detail: '', help };
  const line = `last poll ${formatTime(p.last_poll_at, now)} · next ${formatTime(p.next_poll_at, now)}`;
  if (p.last_error) return { level: 'bad', line, detail: `failed: ${p.last_error}`, help };
  const found = p.last_found > 0 ? `${plural(p.last_found, 'new lead', 'new leads')} last time` : 'nothing new last time';
  return { level: '', line, detail: `${found} · ${num(p.polled_7d)} polled in 7 days`, help };
}
