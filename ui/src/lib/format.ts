// Pure presentation logic: formatting, thresholds, wording. Unit-tested in format.test.ts.

import type { ErrorClass } from './api/wire';

/** A locale Intl accepts. Under `LANG=C` WebKit reports "C", which Intl rejects, so fall back to en-US. */
export function safeLocale(candidates: readonly (string | undefined)[]): string {
  for (const c of candidates) {
    if (!c) continue;
    try {
      return Intl.getCanonicalLocales(c)[0] ?? 'en-US';
    } catch {
      /* not a BCP 47 tag: try the next */
    }
  }
  return 'en-US';
}

export const LOCALE = safeLocale(typeof navigator === 'undefined' ? [] : [navigator.language, ...(navigator.languages ?? [])]);

/** 12,345 in the user's locale. */
export function num(n: number): string {
  return n.toLocaleString(LOCALE);
}

/** "—" for none; "12 s", "4 min", "2 h 5 min", "3 d 4 h" otherwise. */
export function formatAge(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return '—';
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  if (s < 86400) {
    const m = Math.floor((s % 3600) / 60);
    return m ? `${Math.floor(s / 3600)} h ${m} min` : `${Math.floor(s / 3600)} h`;
  }
  const h = Math.floor((s % 86400) / 3600);
  return h ? `${Math.floor(s / 86400)} d ${h} h` : `${Math.floor(s / 86400)} d`;
}

/**
 * A short duration, precise where it matters: "0.4 s", "4.2 s", "12 s", "1.5 min", "12 min", "2.5 h", "1.5 d"; "—" for
 * none. For speeds (how long a lead took), where "0 s" for 400 ms would mislead.
 */
export function formatDuration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return '—';
  const s = Math.max(0, seconds);
  const one = (v: number) => String(Math.round(v * 10) / 10);
  if (Math.round(s * 10) / 10 < 10) return `${one(s)} s`;
  if (Math.round(s) < 60) return `${Math.round(s)} s`;
  const m = s / 60;
  if (Math.round(m * 10) / 10 < 10) return `${one(m)} min`;
  if (Math.round(m) < 60) return `${Math.round(m)} min`;
  const h = s / 3600;
  if (Math.round(h * 10) / 10 < 10) return `${one(h)} h`;
  if (Math.round(h) < 24) return `${Math.round(h)} h`;
  const d = s / 86400;
  return d < 10 ? `${one(d)} d` : `${Math.round(d)} d`;
}

/** Milliseconds to a first contact's acceptance: "420 ms", then as {@link formatDuration}; "—" for none. */
export function formatMs(v: number | null | undefined): string {
  if (v === null || v === undefined) return '—';
  return v < 1000 ? `${Math.max(0, Math.round(v))} ms` : formatDuration(v / 1000);
}

/** Milliseconds to a delivery receipt, which carries whole seconds (WhatsApp's and Twilio's timestamps): no
 * milliseconds are claimed. */
export function formatReceiptMs(v: number | null | undefined): string {
  if (v === null || v === undefined) return '—';
  return v < 1000 ? 'under 1 s' : formatDuration(v / 1000);
}

export type Level = 'ok' | 'warn' | 'bad';

/** Oldest-pending thresholds: under a minute is healthy, under 15 minutes is worth a look, more is an incident. */
export function ageLevel(seconds: number | null | undefined, warnAt = 60, badAt = 900): Level {
  if (seconds === null || seconds === undefined) return 'ok';
  if (seconds >= badAt) return 'bad';
  if (seconds >= warnAt) return 'warn';
  return 'ok';
}

export function countLevel(n: number): Level {
  return n > 0 ? 'bad' : 'ok';
}

export type { ErrorClass };

/** Words a sales-ops person uses for each error class, and what to do about it. */
export const CLASS_INFO: Record<ErrorClass, { label: string; help: string }> = {
  permanent_config: {
    label: 'Setup problem',
    help: 'The CRM rejected our connection or mapping (a missing permission, a deleted field or pipeline). Fix the setup first, then replay them all.',
  },
  permanent_data: {
    label: 'Bad lead data',
    help: 'The CRM rejected this lead’s data (a required field, a phone format). Fix the mapping or the form, then replay.',
  },
  ambiguous: {
    label: 'Unknown outcome',
    help: 'The request was sent but no answer came. Check in the CRM whether the lead is there before replaying.',
  },
  transient: {
    label: 'CRM unreachable',
    help: 'The CRM or the network kept failing until Leadline gave up. Once the CRM is healthy, replay.',
  },
  rate_limited: {
    label: 'Rate limited',
    help: 'The CRM kept asking to slow down until the time budget ran out. Check your CRM plan’s API limits.',
  },
};

/** Every class, in the order the UI shows them (most urgent first): `CLASS_INFO`'s, which the generated
 * `ErrorClass` type makes exhaustive (a class added in Rust fails the type check until it is described). */
export const CLASSES = Object.keys(CLASS_INFO) as ErrorClass[];

export function classLabel(c: string): string {
  return (CLASS_INFO as Record<string, { label: string }>)[c]?.label ?? c;
}

/** A compact local time: "14:03:22" today, "Nov 28, 14:03" otherwise. */
export function formatTime(iso: string | null | undefined, now: Date = new Date()): string {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '—';
  const sameDay = d.toDateString() === now.toDateString();
  return sameDay
    ? d.toLocaleTimeString(LOCALE, { hour: '2-digit', minute: '2-digit', second: '2-digit' })
    : d.toLocaleString(LOCALE, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
}

/**
 * A text the backend wrote, with its times in the reader's local time, as the pills and every other time on screen
 * show them. The backend writes times into its sentences as "04:52:03 UTC", "09:14 UTC" or "2026-03-02 09:14 UTC",
 * because the same sentences go to notifications, Slack, e-mail and logs, where saying UTC is the honest choice;
 * here "rate-limited until 04:52:03 UTC" reads "rate-limited until 06:52:03" beside a pill that says the same. A
 * time without a date is taken on the day that puts it nearest to `now` (the sentences speak of the last and next
 * hours; the local time of day is the same on any day but across a change of summer time).
 */
export function localTimes(text: string, now: Date = new Date()): string {
  const day = 86_400_000;
  return text.replace(
    /\b(?:(\d{4})-(\d{2})-(\d{2}) )?(\d{1,2}):(\d{2})(?::(\d{2}))? UTC\b/g,
    (match, y?: string, mo?: string, d?: string, h?: string, mi?: string, sec?: string) => {
      const [hour, minute, second] = [Number(h), Number(mi), Number(sec ?? 0)];
      if (hour > 23 || minute > 59 || second > 59) return match;
      const time: Intl.DateTimeFormatOptions = sec ? { hour: '2-digit', minute: '2-digit', second: '2-digit' } : { hour: '2-digit', minute: '2-digit' };
      if (y) {
        const at = new Date(Date.UTC(Number(y), Number(mo) - 1, Number(d), hour, minute, second));
        return at.toLocaleString(LOCALE, { year: 'numeric', month: 'short', day: 'numeric', ...time });
      }
      const base = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate(), hour, minute, second);
      const at = [base - day, base, base + day].reduce((best, t) => (Math.abs(t - now.getTime()) < Math.abs(best - now.getTime()) ? t : best));
      return new Date(at).toLocaleTimeString(LOCALE, time);
    },
  );
}

export function plural(n: number, one: string, many: string): string {
  return `${num(n)} ${n === 1 ? one : many}`;
}

/** Query string of a filter object, leaving out empty values. */
export function toQuery(params: Record<string, string | number | null | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === null || v === undefined || v === '') continue;
    q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}

/** Explains an API failure in plain words, by its code. */
export function explainError(code: string, message: string): string {
  switch (code) {
    case 'unauthorized':
      // A token that stopped working (revoked, replaced) says so; a browser that never signed in gets the way in.
      if (/not valid|revoked/.test(message)) {
        return 'Leadline no longer accepts this browser\'s token (it was revoked or replaced). Ask whoever runs Leadline for a new sign-in link (`leadline token create NAME`) and open it.';
      }
      return 'This browser is not signed in to Leadline. Open the sign-in link with your token (`leadline token create NAME` makes one; on your own machine, the link `leadline serve` printed on its first start, or `leadline reset-token`).';
    case 'conflict':
      return `${message} — the list changed while you were deciding. Look at the preview again.`;
    case 'cancelled':
      return 'Cancelled: nothing was changed.';
    case 'not_found':
      return `${message}. It may have been replayed or resolved meanwhile.`;
    case 'network':
      return 'Leadline is not answering. Is it still running?';
    default:
      return message;
  }
}

/**
 * A lead as rows for display: nested objects flattened to dotted paths (`fields.email`, `lead.phone`), so each
 * value is shown on its own row (personal values arrive masked from the server unless revealed). A Meta lead's raw `field_data` is left
 * out: its answers are the `fields.*` rows.
 */
export function leadRows(payload: unknown, prefix = '', depth = 0): [string, unknown][] {
  if (!payload || typeof payload !== 'object' || Array.isArray(payload)) return prefix ? [[prefix, payload]] : [];
  const rows: [string, unknown][] = [];
  for (const [k, v] of Object.entries(payload as Record<string, unknown>)) {
    if (!prefix && k === 'field_data' && Array.isArray(v)) continue;
    const path = prefix ? `${prefix}.${k}` : k;
    if (v && typeof v === 'object' && !Array.isArray(v) && depth < 3) rows.push(...leadRows(v, path, depth + 1));
    else rows.push([path, v]);
  }
  return rows;
}


/**
 * An address cut after each path separator (`/`, `?`, `&`; not inside the `//` of the scheme), for a narrow column
 * to break it where a reader expects: `https://api.example.com/crm/v3` → `https://`, `api.example.com/`, `crm/`, `v3`.
 * Joined again, the parts are the address.
 */
export function urlParts(url: string): string[] {
  return url.split(/(?<=[/?&])(?!\/)/).filter((p) => p !== '');
}
