import { describe, expect, it } from 'vitest';
import { describeRule, kindSentence, situationText } from './targets';

describe('situationText', () => {
  const now = new Date('2026-11-30T10:00:00Z');
  it('says what each situation means in words', () => {
    expect(situationText({ kind: 'sending' }, now)).toMatchObject({ level: 'ok', label: 'sending' });
    expect(situationText({ kind: 'paused_by_person' }, now)).toMatchObject({ level: 'warn', label: 'paused by a person' });
    const refused = situationText({ kind: 'refusing_credentials', credential: 'HUBSPOT_TOKEN', next_try: '2026-11-30T10:00:15Z' }, now);
    expect(refused.level).toBe('bad');
    expect(refused.detail).toContain('HUBSPOT_TOKEN');
    expect(refused.detail).toContain('Reload secrets');
    expect(situationText({ kind: 'down', since: '2026-11-30T09:58:00Z' }, now)).toMatchObject({ level: 'bad', label: 'down — paused by the breaker' });
    expect(situationText({ kind: 'rate_limited', until: '2026-11-30T10:01:00Z' }, now).label).toMatch(/^rate-limited until /);
    expect(situationText({ kind: 'testing' }, now).level).toBe('warn');
  });
  it('does not call a rate limit that has passed a rate limit', () => {
    expect(situationText({ kind: 'rate_limited', until: '2026-11-30T09:59:00Z' }, now).label).toBe('sending');
  });
});

describe('describeRule', () => {
  it('reads a rule with transforms, a default and a requirement', () => {
    const r = describeRule({
      to: 'phone',
      from: '/fields/phone_number',
      transform: ['trim', { phone_e164: { default_country: '+49' } }],
      default: 'unknown',
      required: false,
    });
    expect(r).toEqual({ to: 'phone', from: '/fields/phone_number', then: 'trim, phone to E.164 (default +49), else "unknown"', required: false });
  });
  it('shows constants and value maps', () => {
    expect(describeRule({ to: 'source', constant: 'Meta' }).from).toBe('= "Meta"');
    expect(describeRule({ to: 's', from: 'form_id', transform: [{ map: { values: { a: 1, b: 2 }, default: 0 } }] }).then).toBe('map 2 values (else 0)');
    expect(describeRule({ to: 'email', from: 'email', required: true }).required).toBe(true);
  });
  it('reads a list of lead fields as alternatives', () => {
    expect(describeRule({ to: 'email', from: ['email', '/lead/email', '/fields/email'] }).from).toBe('email or /lead/email or /fields/email');
  });
});

describe('kindSentence', () => {
  it('says what each kind of target does, never just its name', () => {
    expect(kindSentence('http', 'idempotency_key')).toBe('Any JSON endpoint (idempotency key).');
    expect(kindSentence('hubspot', 'upsert')).toBe('HubSpot: records upserted in batches by a unique property.');
    expect(kindSentence('salesforce', 'upsert')).toMatch(/^Salesforce: upsert by an external id/);
    expect(kindSentence('pipedrive', 'search_then_create')).toMatch(/^Pipedrive: /);
    expect(kindSentence('meta_lead', 'upsert')).toMatch(/Graph API/);
  });
});
