// What the Overview's charts show: counters without the bucket still being counted, the bucket's unit in words,
// the incidents to mark on the time axis, and speed to CRM in words. Unit-tested in charts.test.ts.

import type { Alert, MetricSeries } from './api/wire';
import { formatDuration, num } from './format';

/** "per minute", "per 15 min", "per hour": the unit of a counter drawn per bucket. */
export function bucketWord(seconds: number): string {
  if (seconds === 60) return 'per minute';
  if (seconds === 3600) return 'per hour';
  if (seconds % 3600 === 0) return `per ${seconds / 3600} h`;
  if (seconds % 60 === 0) return `per ${seconds / 60} min`;
  return `per ${seconds} s`;
}

/** A counter with the buckets still being counted left out (null): a partly counted bucket is not a dip. */
export function complete(values: (number | null)[], series: Pick<MetricSeries, 'at' | 'complete_until'>): (number | null)[] {
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

/** Tick steps for an axis of durations in seconds: ticks fall on whole seconds, minutes, hours, days. */
export const DURATION_STEPS = [
  0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800,
];

/**
 * Speed to CRM over the last hour (the 60 complete minutes before this one) in one sentence: "Half of leads reach
 * the CRM within 4 s; 9 in 10 within 12 s (last hour, 412 leads)". Under ten leads, the 90th percentile is the
 * slowest of them, and it says so.
 */
export function speedSentence(series: Pick<MetricSeries, 'speed_last_hour_delivered' | 'speed_last_hour_p50' | 'speed_last_hour_p90'>): string {
  const n = Math.round(series.speed_last_hour_delivered);
  const p50 = series.speed_last_hour_p50;
  const p90 = series.speed_last_hour_p90;
  if (n === 0 || p50 === null || p90 === null) return 'Nothing was delivered in the last hour.';
  if (n === 1) return `The one lead delivered in the last hour reached the CRM within ${formatDuration(p50)}.`;
  const half = `Half of leads reach the CRM within ${formatDuration(p50)}`;
  if (n < 10) return `${half}; all ${n} within ${formatDuration(p90)} (last hour).`;
  return `${half}; 9 in 10 within ${formatDuration(p90)} (last hour, ${num(n)} leads).`;
}

/**
 * What the speed chart says when it has nothing to draw: nothing delivered at all, or deliveries only in the bucket
 * still being counted (not drawn), which must not read as "nothing delivered" beside a sentence counting them.
 */
export function speedEmptyText(series: Pick<MetricSeries, 'at' | 'complete_until' | 'bucket_seconds' | 'speed_p50_by_source'>): string {
  const current = Object.values(series.speed_p50_by_source).some((v) => v.some((x, i) => x !== null && (series.at[i] ?? 0) >= series.complete_until));
  if (!current) return 'Nothing was delivered in this period.';
  return `Leads were delivered only in the current ${bucketWord(series.bucket_seconds).replace(/^per /, '')}, still being counted.`;
}

/** Why the delivery-attempts chart is empty: nothing arrived to send, leads arrived but none was tried (when
 * `waiting` leads wait now: the verdict says why), or attempts were made only in the bucket still being counted. */
export function attemptsEmptyText(
  series: Pick<MetricSeries, 'at' | 'complete_until' | 'bucket_seconds' | 'delivered' | 'failed' | 'rate_limited' | 'volume_by_source'>,
  waiting: number,
): string {
  const bucket = bucketWord(series.bucket_seconds).replace(/^per /, '');
  const current = (i: number) => (series.at[i] ?? 0) >= series.complete_until;
  const tried = [series.delivered, series.failed, series.rate_limited].some((v) => v.some((x, i) => x > 0 && current(i)));
  if (tried) return `Leads were sent only in the current ${bucket}, still being counted.`;
  const received = Object.values(series.volume_by_source).reduce((sum, v) => sum + v.reduce((a, b) => a + b, 0), 0);
  const arrived = `${num(received)} ${received === 1 ? 'lead' : 'leads'} arrived`;
  // "They wait" only when leads do wait now; otherwise (history kept from before, say) just the figures.
  if (received > 0 && waiting > 0) return `No delivery was attempted in this period although ${arrived}: they wait — the verdict above says why.`;
  if (received > 0) return `No delivery attempt was recorded in this period (${arrived}).`;
  return 'No lead arrived in this period, so there was nothing to send.';
}

/** Why the open-dead-letters chart is empty. The gauge is sampled once a minute, so dead letters parked since the
 * last sample are open now (`openNow`, the tile beside it) but not drawn yet: the chart must not say none is open. */
export function deadLettersEmptyText(openNow: number): string {
  if (openNow === 1) return '1 dead letter is open now: the chart draws it at the next minute.';
  if (openNow > 1) return `${num(openNow)} dead letters are open now: the chart draws them at the next minute.`;
  return 'No dead letter was open in this period: no lead failed for good, or each one was dealt with.';
}
