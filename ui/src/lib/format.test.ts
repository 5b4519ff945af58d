import { describe, expect, it } from 'vitest';
import { ageLevel, classLabel, explainError, formatAge, formatDuration, formatMs, formatReceiptMs, leadRows, LOCALE, localTimes, toQuery, urlParts } from './format';

describe('formatAge', () => {
  it('reads like a person would say it', () => {
    expect(formatAge(null)).toBe('—');
    expect(formatAge(12.9)).toBe('12 s');
    expect(formatAge(125)).toBe('2 min');
    expect(formatAge(7200)).toBe('2 h');
    expect(formatAge(7500)).toBe('2 h 5 min');
    expect(formatAge(3 * 86400 + 4 * 3600)).toBe('3 d 4 h');
    expect(formatAge(-5)).toBe('0 s');
  });
});

describe('first-contact times', () => {
  it('shows milliseconds to an acceptance, but never claims them for a receipt (whole seconds)', () => {
    expect(formatMs(null)).toBe('—');
    expect(formatMs(420)).toBe('420 ms');
    expect(formatMs(4200)).toBe('4.2 s');
    expect(formatReceiptMs(420)).toBe('under 1 s');
    expect(formatReceiptMs(9000)).toBe('9 s');
    expect(formatReceiptMs(undefined)).toBe('—');
  });
});

describe('formatDuration', () => {
  it('keeps tenths where they matter and whole units where they do not', () => {
    expect(formatDuration(null)).toBe('—');
    expect(formatDuration(0)).toBe('0 s');
    expect(formatDuration(0.125)).toBe('0.1 s');
    expect(formatDuration(0.44)).toBe('0.4 s');
    expect(formatDuration(4)).toBe('4 s');
    expect(formatDuration(4.24)).toBe('4.2 s');
    expect(formatDuration(9.97)).toBe('10 s');
    expect(formatDuration(12.4)).toBe('12 s');
    expect(formatDuration(59.7)).toBe('1 min');
    expect(formatDuration(90)).toBe('1.5 min');
    expect(formatDuration(725)).toBe('12 min');
    expect(formatDuration(3599)).toBe('1 h');
    expect(formatDuration(9000)).toBe('2.5 h');
    expect(formatDuration(86400 * 1.5)).toBe('1.5 d');
    expect(formatDuration(-3)).toBe('0 s');
  });
});

describe('ageLevel', () => {
  it('colours the oldest pending age by thresholds', () => {
    expect(ageLevel(null)).toBe('ok');
    expect(ageLevel(59)).toBe('ok');
    expect(ageLevel(60)).toBe('warn');
    expect(ageLevel(899)).toBe('warn');
    expect(ageLevel(900)).toBe('bad');
    expect(ageLevel(30, 10, 20)).toBe('bad');
  });
});

describe('wording', () => {
  it('names classes in sales-ops words', () => {
    expect(classLabel('permanent_config')).toBe('Setup problem');
    expect(classLabel('something_new')).toBe('something_new');
  });
  it('explains errors by code', () => {
    expect(explainError('cancelled', 'x')).toBe('Cancelled: nothing was changed.');
    expect(explainError('unauthorized', 'x')).toContain('not signed in');
    // A token revoked mid-session says so, and how to get back in.
    expect(explainError('unauthorized', 'this token is not valid (revoked, replaced, or mistyped): ask for a new one')).toMatch(
      /no longer accepts this browser's token .*`leadline token create NAME`/,
    );
    expect(explainError('internal', 'disk full')).toBe('disk full');
  });
});

describe('toQuery', () => {
  it('leaves out empty values', () => {
    expect(toQuery({ class: 'transient', text: '', source: null, limit: 50 })).toBe('?class=transient&limit=50');
    expect(toQuery({})).toBe('');
  });
});

describe('safeLocale', () => {
  it('falls back when the system locale is not a BCP 47 tag (LANG=C)', async () => {
    const { safeLocale } = await import('./format');
    expect(safeLocale(['C'])).toBe('en-US');
    expect(safeLocale(['C', 'de-DE'])).toBe('de-DE');
    expect(safeLocale([undefined, 'fr'])).toBe('fr');
    expect(safeLocale([])).toBe('en-US');
  });
});


describe('leadRows', () => {
  it('flattens a Meta lead into its answers, without the raw field_data', () => {
    const rows = leadRows({
      leadgen_id: '9',
      fields: { full_name: 'Ada Lovelace', email: 'ada@example.com', 'when_should_we_call?': 'morning' },
      field_data: [{ name: 'email', values: ['ada@example.com'] }],
    });
    expect(rows).toEqual([
      ['leadgen_id', '9'],
      ['fields.full_name', 'Ada Lovelace'],
      ['fields.email', 'ada@example.com'],
      ['fields.when_should_we_call?', 'morning'],
    ]);
  });
  it('keeps lists and deep values as values, and nested personal fields are personal', () => {
    expect(leadRows({ lead: { phone: '+49', tags: ['a'] } })).toEqual([['lead.phone', '+49'], ['lead.tags', ['a']]]);
    expect(leadRows('not an object')).toEqual([]);
  });
});

describe('localTimes', () => {
  const local = (iso: string, seconds = true) =>
    new Date(iso).toLocaleTimeString(LOCALE, seconds ? { hour: '2-digit', minute: '2-digit', second: '2-digit' } : { hour: '2-digit', minute: '2-digit' });

  it('shows the times the backend wrote in UTC in local time, as the pills do', () => {
    const now = new Date('2026-03-02T04:50:00Z');
    expect(localTimes('crm is rate-limited until 04:52:03 UTC: leads wait and go on by themselves', now)).toBe(
      `crm is rate-limited until ${local('2026-03-02T04:52:03Z')}: leads wait and go on by themselves`,
    );
    expect(localTimes('Nothing since 03:49 UTC, while about 30 were expected.', now)).toBe(
      `Nothing since ${local('2026-03-02T03:49:00Z', false)}, while about 30 were expected.`,
    );
    // Several in one text; a text without one is left alone.
    expect(localTimes('from 01:00 UTC to 02:30 UTC', now)).toBe(`from ${local('2026-03-02T01:00:00Z', false)} to ${local('2026-03-02T02:30:00Z', false)}`);
    expect(localTimes('HTTP 503 at the CRM; 12:30 in the lead’s own words', now)).toBe('HTTP 503 at the CRM; 12:30 in the lead’s own words');
    expect(localTimes('not a time: 25:61 UTC', now)).toBe('not a time: 25:61 UTC');
  });

  it('takes a time without a date on the day nearest to now', () => {
    // Just after midnight UTC, "23:58 UTC" was two minutes ago, not tomorrow night.
    const now = new Date('2026-03-02T00:01:00Z');
    expect(localTimes('silent since 23:58 UTC', now)).toBe(`silent since ${local('2026-03-01T23:58:00Z', false)}`);
    expect(localTimes('opened 2026-02-27 09:14 UTC', now)).toBe(
      `opened ${new Date('2026-02-27T09:14:00Z').toLocaleString(LOCALE, { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' })}`,
    );
  });
});

describe('urlParts', () => {
  it('cuts an address after its separators, never inside the scheme, and loses nothing', () => {
    const url = 'https://api.hubapi.com/crm/v3/objects/contacts/batch/upsert?a=1&b=2';
    const parts = urlParts(url);
    expect(parts).toEqual(['https://', 'api.hubapi.com/', 'crm/', 'v3/', 'objects/', 'contacts/', 'batch/', 'upsert?', 'a=1&', 'b=2']);
    expect(parts.join('')).toBe(url);
  });
  it('keeps an address without a path whole after its scheme', () => {
    expect(urlParts('http://127.0.0.1:35625')).toEqual(['http://', '127.0.0.1:35625']);
    expect(urlParts('http://127.0.0.1:35625/tasks/{external_id}')).toEqual(['http://', '127.0.0.1:35625/', 'tasks/', '{external_id}']);
  });
});
