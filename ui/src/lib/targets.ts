// Presentation of targets: their holds and their field-mapping rules, in words. Unit-tested in targets.test.ts.

import type { Hold } from './api/wire';
import type { Level } from './format';

/** What a hold means for the person looking at the target, or null when there is none. */
export function holdText(
  hold: Hold | null | undefined,
  now: Date = new Date(),
): { level: Level; label: string; detail: string } | null {
  if (!hold) return null;
  const until = new Date(hold.until);
  if (Number.isNaN(until.getTime()) || until <= now) return null;
  const at = until.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' });
  if (hold.reason.kind === 'credentials') {
    return {
      level: 'bad',
      label: 'refusing credentials',
      detail: `renew the token in ${hold.reason.credential}, then Reload secrets; leads wait (next try ${at})`,
    };
  }
  return { level: 'warn', label: `rate-limited until ${at}`, detail: 'the target said when to come back; leads wait' };
}

type Rule = {
  to?: string;
  /** One lead field, or several tried in order (the first with a value wins). */
  from?: string | string[] | null;
  constant?: unknown;
  transform?: unknown[];
  default?: unknown;
  required?: boolean;
};

/** One mapping rule as three cells: the CRM field, where its value comes from, and what is done to it. */
export function describeRule(raw: unknown): { to: string; from: string; then: string; required: boolean } {
  const rule = (raw ?? {}) as Rule;
  const fields = Array.isArray(rule.from) ? rule.from.join(' or ') : rule.from;
  const from =
    rule.constant !== undefined && rule.constant !== null ? `= ${JSON.stringify(rule.constant)}` : (fields ?? '—');
  const steps = (rule.transform ?? []).map(transformText);
  if (rule.default !== undefined && rule.default !== null) steps.push(`else ${JSON.stringify(rule.default)}`);
  return { to: rule.to ?? '?', from, then: steps.join(', ') || '—', required: rule.required === true };
}

function transformText(t: unknown): string {
  if (typeof t === 'string') return t.replaceAll('_', ' ');
  if (t && typeof t === 'object') {
    const [name, args] = Object.entries(t as Record<string, unknown>)[0] ?? ['?', null];
    const a = (args ?? {}) as Record<string, unknown>;
    if (name === 'phone_e164') return `phone to E.164 (default ${String(a.default_country ?? '?')})`;
    if (name === 'date') return `date as ${String(a.format ?? '?')}`;
    if (name === 'map') {
      const values = (a.values ?? {}) as Record<string, unknown>;
      const n = Object.keys(values).length;
      return `map ${n} ${n === 1 ? 'value' : 'values'}${a.default !== undefined && a.default !== null ? ` (else ${JSON.stringify(a.default)})` : ''}`;
    }
    return name.replaceAll('_', ' ');
  }
  return String(t);
}
