// Presentation of targets: their holds and their field-mapping rules, in words. Unit-tested in targets.test.ts.

import type { TargetSituation } from './api/wire';
import type { Level } from './format';

/** What a target is doing, in words: one pill (level and label) and a line of detail. The same words on the
 * Overview and the Targets page. */
export function situationText(s: TargetSituation, now: Date = new Date()): { level: Level; label: string; detail: string } {
  const time = (iso: string | null) =>
    iso ? new Date(iso).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' }) : '?';
  switch (s.kind) {
    case 'sending':
      return { level: 'ok', label: 'sending', detail: 'leads go out as they come' };
    case 'paused_by_person':
      return { level: 'warn', label: 'paused by a person', detail: 'its leads wait until someone resumes it' };
    case 'refusing_credentials':
      return {
        level: 'bad',
        label: 'refusing credentials',
        detail: `renew the token in ${s.credential}, then Reload secrets; leads wait (next try ${time(s.next_try)})`,
      };
    case 'refusing_setup':
      return {
        level: 'bad',
        label: 'refusing its setup',
        detail: `${s.reason}; fix the step's settings — leads wait (next try ${time(s.next_try)})`,
      };
    case 'down':
      return {
        level: 'bad',
        label: 'down — paused by the breaker',
        detail: `it kept failing${s.since ? ` (since ${time(s.since)})` : ''}; one lead tests it after a pause, leads wait`,
      };
    case 'rate_limited':
      return new Date(s.until) > now
        ? { level: 'warn', label: `rate-limited until ${time(s.until)}`, detail: 'the target said when to come back; leads wait' }
        : { level: 'ok', label: 'sending', detail: 'leads go out as they come' };
    case 'testing':
      return { level: 'warn', label: 'testing with one lead', detail: 'after failures, one lead checks whether it answers again' };
  }
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

/** What kind of target this is and how it writes a lead, in one sentence (the Targets page's detail). */
export function kindSentence(kind: string, strategy: string): string {
  switch (kind) {
    case 'http':
      return `Any JSON endpoint (${strategy.replaceAll('_', ' ')}).`;
    case 'meta_lead':
      return 'Fetches each Meta lead’s answers from the Graph API before any CRM sees it.';
    case 'hubspot':
      return 'HubSpot: records upserted in batches by a unique property.';
    case 'salesforce':
      return 'Salesforce: upsert by an external id field, with OAuth token refresh.';
    case 'pipedrive':
      return 'Pipedrive: the person found or created, then the lead created.';
    default:
      return `${kind.replaceAll('_', ' ')}.`;
  }
}
