import { describe, expect, it } from 'vitest';
import { sortAlerts } from './alerts';
import type { Alert } from './api/wire';

const alert = (id: number, severity: string, opened_at: string) => ({ id, severity, opened_at, kind: 'silence' }) as unknown as Alert;

describe('alerts', () => {
  it('puts the most severe first, then the oldest', () => {
    const sorted = sortAlerts([
      alert(1, 'warning', '2026-11-30T09:00:00Z'),
      alert(2, 'critical', '2026-11-30T10:00:00Z'),
      alert(3, 'info', '2026-11-30T08:00:00Z'),
      alert(4, 'critical', '2026-11-30T09:30:00Z'),
    ]);
    expect(sorted.map((a) => a.id)).toEqual([4, 2, 1, 3]);
  });
});
