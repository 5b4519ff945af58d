import { describe, expect, it } from 'vitest';
import { describeRule, holdText } from './targets';

describe('holdText', () => {
  const now = new Date('2026-11-30T10:00:00Z');
  it('says nothing for no hold or a hold that has passed', () => {
    expect(holdText(null, now)).toBeNull();
    expect(holdText({ until: '2026-11-30T09:59:59Z', reason: { kind: 'rate_limited' } }, now)).toBeNull();
  });
  it('names the credential a person must renew', () => {
    const t = holdText({ until: '2026-11-30T10:00:30Z', reason: { kind: 'credentials', credential: 'META_PAGE_TOKEN' } }, now);
    expect(t?.level).toBe('bad');
    expect(t?.label).toBe('refusing credentials');
    expect(t?.detail).toContain('META_PAGE_TOKEN');
  });
  it('says until when a target is rate-limited', () => {
    const t = holdText({ until: '2026-11-30T10:05:00Z', reason: { kind: 'rate_limited' } }, now);
    expect(t?.level).toBe('warn');
    expect(t?.label).toMatch(/^rate-limited until /);
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
