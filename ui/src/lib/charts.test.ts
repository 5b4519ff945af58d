import { describe, expect, it } from 'vitest';
import { attemptsEmptyText, bucketWord, complete, deadLettersEmptyText, incidentMarks, perMinute, speedEmptyText, speedSentence } from './charts';
import type { Alert } from './api/wire';

describe('charts', () => {
  it('names the bucket', () => {
    expect(bucketWord(60)).toBe('per minute');
    expect(bucketWord(900)).toBe('per 15 min');
    expect(bucketWord(3600)).toBe('per hour');
  });
  it('leaves the bucket still being counted out instead of drawing a dip', () => {
    const s = { at: [0, 60, 120], complete_until: 120 };
    expect(complete([5, 6, 1], s)).toEqual([5, 6, null]);
  });
  it('leaves out the bucket still being counted in a series with gaps too', () => {
    expect(complete([2.5, null, 3], { at: [0, 60, 120], complete_until: 120 })).toEqual([2.5, null, null]);
  });
  it('says how fast leads reach the CRM in words', () => {
    const s = (delivered: number, p50: number | null, p90: number | null) =>
      speedSentence({ speed_last_hour_delivered: delivered, speed_last_hour_p50: p50, speed_last_hour_p90: p90 });
    expect(s(412, 4.1, 12.3)).toBe('Half of leads reach the CRM within 4.1 s; 9 in 10 within 12 s (last hour, 412 leads).');
    expect(s(2300, 95, 3600 * 2.5)).toBe('Half of leads reach the CRM within 1.6 min; 9 in 10 within 2.5 h (last hour, 2,300 leads).');
    expect(s(4, 0.4, 2)).toBe('Half of leads reach the CRM within 0.4 s; all 4 within 2 s (last hour).');
    expect(s(1, 3, 3)).toBe('The one lead delivered in the last hour reached the CRM within 3 s.');
    expect(s(0, null, null)).toBe('Nothing was delivered in the last hour.');
  });
  it('says why the speed chart is empty', () => {
    const base = { at: [0, 3600, 7200], complete_until: 7200, bucket_seconds: 3600 };
    expect(speedEmptyText({ ...base, speed_p50_by_source: {} })).toBe('Nothing was delivered in this period.');
    expect(speedEmptyText({ ...base, speed_p50_by_source: { web: [null, null, null] } })).toBe('Nothing was delivered in this period.');
    expect(speedEmptyText({ ...base, speed_p50_by_source: { web: [null, null, 2.1] } })).toBe('Leads were delivered only in the current hour, still being counted.');
  });
  it('says why the delivery-attempts chart is empty', () => {
    const none = { at: [0, 60, 120], complete_until: 120, bucket_seconds: 60, delivered: [0, 0, 0], failed: [0, 0, 0], rate_limited: [0, 0, 0] };
    expect(attemptsEmptyText({ ...none, volume_by_source: {} }, 0)).toBe('No lead arrived in this period, so there was nothing to send.');
    expect(attemptsEmptyText({ ...none, volume_by_source: { web: [0, 0, 0] } }, 0)).toBe('No lead arrived in this period, so there was nothing to send.');
    expect(attemptsEmptyText({ ...none, volume_by_source: { web: [3, 0, 0], partner: [0, 1, 0] } }, 4)).toBe(
      'No delivery was attempted in this period although 4 leads arrived: they wait — the verdict above says why.',
    );
    // Nothing waits now: no claim that anything does.
    expect(attemptsEmptyText({ ...none, volume_by_source: { web: [3, 0, 0], partner: [0, 1, 0] } }, 0)).toBe(
      'No delivery attempt was recorded in this period (4 leads arrived).',
    );
    expect(attemptsEmptyText({ ...none, delivered: [0, 0, 2], volume_by_source: { web: [0, 0, 2] } }, 0)).toBe(
      'Leads were sent only in the current minute, still being counted.',
    );
  });
  it('does not call the dead-letter chart empty while dead letters are open but not sampled yet', () => {
    expect(deadLettersEmptyText(6)).toBe('6 dead letters are open now: the chart draws them at the next minute.');
    expect(deadLettersEmptyText(1)).toBe('1 dead letter is open now: the chart draws it at the next minute.');
    expect(deadLettersEmptyText(0)).toMatch(/^No dead letter was open in this period/);
  });
  it('averages leads per minute over the last complete minutes', () => {
    const s = { at: [0, 60, 120, 180], complete_until: 180, bucket_seconds: 60 };
    expect(perMinute([10, 20, 30, 1], s, 2)).toBe(25);
    expect(perMinute([1], { at: [0], complete_until: 0, bucket_seconds: 60 })).toBeNull();
    expect(perMinute([1, 2], { at: [0, 900], complete_until: 1800, bucket_seconds: 900 })).toBeNull();
  });
  it('marks incidents from their alerts, open ones until now', () => {
    const base = { id: 1, severity: 'critical', title: '', detail: '', last_seen_at: '', occurrences: 1, acknowledged_at: null, acknowledged_by: null, resolution_note: null } as unknown as Alert;
    const alerts = [
      { ...base, kind: 'breaker_open', key: 'crm', opened_at: '2026-11-30T10:00:00Z', resolved_at: '2026-11-30T10:05:00Z' },
      { ...base, kind: 'credentials', key: 'HUBSPOT_TOKEN', opened_at: '2026-11-30T10:10:00Z', resolved_at: null },
      { ...base, kind: 'reconciliation_found', key: 'meta', opened_at: '2026-11-30T10:10:00Z', resolved_at: null },
    ] as Alert[];
    const marks = incidentMarks(alerts, new Date('2026-11-30T10:12:00Z'));
    expect(marks).toEqual([
      { from: Date.parse('2026-11-30T10:00:00Z') / 1000, to: Date.parse('2026-11-30T10:05:00Z') / 1000, label: 'down: crm' },
      { from: Date.parse('2026-11-30T10:10:00Z') / 1000, to: Date.parse('2026-11-30T10:12:00Z') / 1000, label: 'credential refused: HUBSPOT_TOKEN' },
    ]);
  });
});
