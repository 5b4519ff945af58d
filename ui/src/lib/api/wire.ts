// Wire types of Leadline's API, generated from the Rust DTOs by tests/ts_contract.rs.
// Do not edit: run `UPDATE_TS_TYPES=1 cargo test --no-default-features --test ts_contract`.

export type ErrorBody = { code: 'not_found' | 'bad_request' | 'conflict' | 'cancelled' | 'unauthorized' | 'internal', message: string, };

export type Session = { version: string, demo: boolean, worker: boolean, sources: Array<string>, targets: Array<string>, };

export type HealthView = { 
/**
 * Breaker state per target, as this process's worker sees it (empty when no worker runs here).
 */
breakers: Array<BreakerView>, generated_at: string, overall: TargetHealth, targets: Array<TargetHealth>, };

export type QueueHealth = { generated_at: string, overall: TargetHealth, targets: Array<TargetHealth>, };

export type TargetHealth = { 
/**
 * Target name, or `*` for the total over all targets.
 */
target: string, 
/**
 * Age of the oldest undelivered due step (pending or running), in seconds; `null` when there is none.
 */
oldest_pending_age_seconds: number | null, pending: number, running: number, 
/**
 * Steps waiting for an earlier step of their route.
 */
waiting: number, delivered: number, 
/**
 * Open dead letters (not yet replayed, fixed or discarded).
 */
dead_open: number, dead_open_by_class: { [key in string]: number }, };

export type BreakerView = { target: string, state: BreakerState, opened_at: string | null, };

export type BreakerState = "closed" | "open" | "half_open";

export type MetricSeries = { bucket_seconds: number, 
/**
 * Bucket start times, Unix seconds.
 */
at: Array<number>, 
/**
 * Highest pending count seen in the bucket (`null`: no sample).
 */
pending: Array<number | null>, 
/**
 * Highest oldest-pending age in the bucket, seconds.
 */
oldest_age_seconds: Array<number | null>, 
/**
 * Successful attempts per bucket.
 */
delivered: Array<number>, 
/**
 * Failed attempts (retried or dead-lettered) per bucket.
 */
failed: Array<number>, 
/**
 * Open dead letters by class (highest in the bucket).
 */
dead_open_by_class: { [key in string]: Array<number | null> }, 
/**
 * Events received per bucket, by source.
 */
volume_by_source: { [key in string]: Array<number> }, };

export type DeadLetterFilter = { class: string | null, source: string | null, target: string | null, since: string | null, until: string | null, 
/**
 * Matched against the reason, the source's event id and the field.
 */
text: string | null, 
/**
 * `open` (default), `all`, or one resolution.
 */
resolution: string | null, limit: number | null, 
/**
 * Page: only dead letters with a smaller delivery id.
 */
before_id: number | null, };

export type DeadLetterList = { items: Array<DeadLetter>, 
/**
 * Open dead letters by class, over everything (not only this page).
 */
open_by_class: { [key in string]: number }, };

export type DeadLetter = { delivery_id: number, event_id: number, source: string, source_ref: string, target: string, step_index: number, class: string, http_status: number | null, 
/**
 * The CRM's own message where it gave one, and what Leadline concluded.
 */
reason: string, 
/**
 * The field the CRM blamed, if it named one.
 */
field: string | null, attempts: number, received_at: string, 
/**
 * When it was dead-lettered (the time of its last attempt).
 */
dead_at: string, resolution: string, };

export type DeadLetterDetail = { payload: unknown, attempts_timeline: Array<Attempt>, delivery_id: number, event_id: number, source: string, source_ref: string, target: string, step_index: number, class: string, http_status: number | null, 
/**
 * The CRM's own message where it gave one, and what Leadline concluded.
 */
reason: string, 
/**
 * The field the CRM blamed, if it named one.
 */
field: string | null, attempts: number, received_at: string, 
/**
 * When it was dead-lettered (the time of its last attempt).
 */
dead_at: string, resolution: string, };

export type DeadLetterView = { 
/**
 * The CRM record, when a step of this lead was delivered (e.g. after a replay).
 */
crm_record: unknown, replays: Array<ReplayHistoryEntry>, payload: unknown, attempts_timeline: Array<Attempt>, delivery_id: number, event_id: number, source: string, source_ref: string, target: string, step_index: number, class: string, http_status: number | null, 
/**
 * The CRM's own message where it gave one, and what Leadline concluded.
 */
reason: string, 
/**
 * The field the CRM blamed, if it named one.
 */
field: string | null, attempts: number, received_at: string, 
/**
 * When it was dead-lettered (the time of its last attempt).
 */
dead_at: string, resolution: string, };

export type Attempt = { started_at: string, duration_ms: number, http_status: number | null, outcome: string, class: string | null, reason: string, response_excerpt: string | null, trigger: string, };

export type ReplaySelection = { ids: Array<number> | null, filter: DeadLetterFilter | null, };

export type ReplayRequest = { selection: ReplaySelection, 
/**
 * The preview's `eligible`: the replay runs only if the selection still matches it.
 */
expected: number, 
/**
 * Why (kept in the audit).
 */
reason: string, };

export type ReplayPreview = { 
/**
 * Open dead letters that will be requeued.
 */
eligible: number, by_target: { [key in string]: number }, 
/**
 * Chosen ids that are not open dead letters (already replayed, resolved, or unknown).
 */
not_eligible: number, 
/**
 * Eligible leads received more than 24 h ago (stale for time-sensitive follow-ups).
 */
older_than_24h: number, 
/**
 * The sentence the confirmation shows.
 */
summary: string, };

export type ReplayReceipt = { replay_id: number, requeued: number, };

export type ReplayProgress = { replay_id: number, created_at: string, actor: string, reason: string, total: number, delivered: number, in_progress: number, 
/**
 * Failed again with the same reason as before.
 */
failed_same_reason: number, 
/**
 * Failed again, but for a different reason.
 */
failed_new_reason: number, done: boolean, };

export type ReplayHistoryEntry = { replay_id: number, at: string, actor: string, reason: string, prior_class: string | null, prior_reason: string | null, };

export type Alert = { id: number, kind: string, key: string, severity: string, title: string, detail: string, opened_at: string, last_seen_at: string, occurrences: number, acknowledged_at: string | null, acknowledged_by: string | null, resolved_at: string | null, resolution_note: string | null, 
/**
 * `open`, `acknowledged` or `resolved`.
 */
state: string, 
/**
 * When it was last announced (notification or digest); `null` while not announced.
 */
notified_at: string | null, 
/**
 * How many times it was announced (re-notifications included).
 */
notifications: number, };

export type SourceView = { 
/**
 * `generic` or `meta`.
 */
kind: string, reconciles: boolean, last_reconciliation: ReconciliationRun | null, 
/**
 * Leads recovered by reconciliation in the last 7 days.
 */
recovered_7d: number, source: string, 
/**
 * `normal`, `drop`, `silent`, `learning` (not enough history), `low` (too little traffic expected now to
 * judge) or `starting` (Leadline has been listening for less than the shortest window).
 */
state: string, assessment: Assessment, last_event_at: string | null, 
/**
 * Events per hour the baseline expects at this hour.
 */
expected_per_hour_now: number | null, };

export type SourceStatus = { source: string, 
/**
 * `normal`, `drop`, `silent`, `learning` (not enough history), `low` (too little traffic expected now to
 * judge) or `starting` (Leadline has been listening for less than the shortest window).
 */
state: string, assessment: Assessment, last_event_at: string | null, 
/**
 * Events per hour the baseline expects at this hour.
 */
expected_per_hour_now: number | null, };

export type Assessment = { baseline: BaselineKind, 
/**
 * The window the verdict rests on (the most significant of the windows judged), minutes.
 */
window_minutes: number, 
/**
 * Events received in that window.
 */
observed: number, 
/**
 * Events the baseline expected in that window (before the tolerance), if it can tell.
 */
expected: number | null, 
/**
 * P(a count this low) under the baseline lowered by the tolerance, corrected for the number of windows.
 */
p_value: number | null, drop: Verdict, 
/**
 * Minutes since the last event.
 */
silent_minutes: number | null, 
/**
 * Events the baseline expected during that silence.
 */
expected_during_silence: number | null, silence: Verdict, };

export type BaselineKind = "hour_of_week" | "hour_of_day" | "business_hours" | "learning";

export type Verdict = "raise" | "clear" | "keep";

export type ReconciliationRun = { id: number, source: string, started_at: string, finished_at: string | null, 
/**
 * Leads created after this were listed.
 */
since: string, listed: number, 
/**
 * Listed by the source, never received as a webhook.
 */
missing: number, 
/**
 * Of those, stored now (the rest arrived in the meantime).
 */
ingested: number, 
/**
 * The source's ids of the recovered leads (the first 100).
 */
missing_refs: Array<string>, error: string | null, };

export type DeliveryFigures = { since: string, until: string, routes: Array<RouteFigures>, targets: Array<TargetFigures>, };

export type RouteFigures = { source: string, target: string, 
/**
 * Steps delivered in the period.
 */
delivered: number, 
/**
 * Received → delivered, seconds (nearest-rank percentiles); `null` when nothing was delivered.
 */
speed_p50_seconds: number | null, speed_p95_seconds: number | null, 
/**
 * Share of finished scheduled steps delivered by their first counted attempt (0–1).
 */
first_attempt_success: number | null, 
/**
 * Dead-lettered in the period.
 */
dead_letters: number, dead_letters_per_day: number, };

export type TargetFigures = { target: string, 
/**
 * Time the breaker was not closed (open or probing) in the period, seconds.
 */
breaker_open_seconds: number, 
/**
 * Times it opened in the period.
 */
breaker_openings: number, };

export type TargetView = { name: string, 
/**
 * Scheme, host and port of the target's URL (never credentials or paths with ids).
 */
endpoint: string, strategy: string, breaker: BreakerState | null, breaker_opened_at: string | null, paused: boolean, paused_by: string | null, paused_at: string | null, };

export type LiveEvent = { "kind": "health", "data": HealthView } | { "kind": "alerts_changed" } | { "kind": "replay_changed", "data": { replay_id: number, } } | { "kind": "sources_changed" };
