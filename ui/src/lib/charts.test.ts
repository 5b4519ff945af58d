import { describe, expect, it } from 'vitest';
import { bucketWord, complete, incidentMarks, perMinute } from './charts';
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
