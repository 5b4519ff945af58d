// Presentation of a source's volume state in words: one pill (level, label, help) and a line for the volume
// column. Unit-tested in sources.test.ts.

import type { SourceState, SourceStatus } from './api/wire';
import { num } from './format';

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
