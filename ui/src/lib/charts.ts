// What the Overview's charts show: counters without the bucket still being counted, the bucket's unit in words,
// and the incidents to mark on the time axis. Unit-tested in charts.test.ts.

import type { Alert, MetricSeries } from './api/wire';

/** "per minute", "per 15 min", "per hour": the unit of a counter drawn per bucket. */
export function bucketWord(seconds: number): string {
  if (seconds === 60) return 'per minute';
  if (seconds === 3600) return 'per hour';
  if (seconds % 3600 === 0) return `per ${seconds / 3600} h`;
  if (seconds % 60 === 0) return `per ${seconds / 60} min`;
  return `per ${seconds} s`;
}

/** A counter with the buckets still being counted left out (null): a partly counted bucket is not a dip. */
export function complete(values: number[], series: Pick<MetricSeries, 'at' | 'complete_until'>): (number | null)[] {
  return values.map((v, i) => ((series.at[i] ?? 0) >= series.complete_until ? null : v));
}

/** A span of time to shade on a chart: an incident, from when it opened until it was resolved (or now). */
export interface Mark {
  from: number; // Unix seconds
  to: number;
  label: string;
}

/** Incidents worth seeing on the time axis: a target down, a refused credential, a silent source. */
const INCIDENT_KINDS: Record<string, string> = {
  breaker_open: 'down',
  credentials: 'credential refused',
  silence: 'silence',
  source_failing: 'source failing',
};

export function incidentMarks(alerts: Alert[], now: Date = new Date()): Mark[] {
  return alerts
    .filter((a) => a.kind in INCIDENT_KINDS)
    .map((a) => ({
      from: Date.parse(a.opened_at) / 1000,
      to: (a.resolved_at ? Date.parse(a.resolved_at) : now.getTime()) / 1000,
      label: `${INCIDENT_KINDS[a.kind]}: ${a.key}`,
    }))
    .filter((m) => Number.isFinite(m.from) && m.to >= m.from);
}

/** Leads per minute over the last `minutes` complete minutes of a per-minute series; null without data. */
export function perMinute(values: number[], series: Pick<MetricSeries, 'at' | 'complete_until' | 'bucket_seconds'>, minutes = 5): number | null {
  if (series.bucket_seconds !== 60) return null;
  const done = values.filter((_, i) => (series.at[i] ?? 0) < series.complete_until);
  const last = done.slice(-minutes);
  if (last.length === 0) return null;
  return last.reduce((a, b) => a + b, 0) / last.length;
}
