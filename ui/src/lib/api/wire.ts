// Wire types of Leadline's API, generated from the Rust DTOs by tests/ts_contract.rs.
// Do not edit: run `UPDATE_TS_TYPES=1 cargo test --no-default-features --test ts_contract`.

export type ErrorBody = { code: 'not_found' | 'bad_request' | 'conflict' | 'cancelled' | 'unauthorized' | 'internal', message: string, };

export type Session = { version: string, 
/**
 * Who this session acts as in the audit: the operator's token name (`alice`), the browser token
 * (``browser token `default` ``) or the desktop's OS user.
 */
operator: string, demo: boolean, worker: boolean, sources: Array<string>, targets: Array<string>, };

export type DeskView = { 
/**
 * `choose` on a first start (nothing decided yet), `here`, or `team`.
 */
mode: 'choose' | 'here' | 'team', 
/**
 * The team server's address (team mode).
 */
server: string | null, 
/**
 * Why the OS keyring cannot keep a token here, when it cannot (connecting is then refused).
 */
keyring: string | null, 
/**
 * What went wrong at the last start in team mode (no token in the keyring, say).
 */
problem: string | null, 
/**
 * Team mode: whether the server's live feed is up now (`null` before the first try).
 */
feed_up: boolean | null, 
/**
 * Team mode: why the server refused the token, once it did (the feed has stopped).
 */
refused: string | null, };

export type DeskAnswer = { status: number, body: string, };

export type HealthView = { 
/**
 * Breaker state per target, as this process's worker sees it (empty when no worker runs here).
 */
breakers: Array<BreakerView>, 
/**
 * The one answer to "is everything all right?", from the same facts as the alerts.
 */
verdict: HealthVerdict, generated_at: string, overall: TargetHealth, targets: Array<TargetHealth>, };

export type HealthVerdict = { level: VerdictLevel, 
/**
 * In words: what is wrong (or that nothing is).
 */
reason: string, 
/**
 * Where to act: the alert's place, or the target's row; none when all is well.
 */
link: Place | null, };

export type VerdictLevel = "all_well" | "degraded" | "needs_person";

export type QueueHealth = { generated_at: string, overall: TargetHealth, targets: Array<TargetHealth>, };

export type TargetHealth = { 
/**
 * Target name, or `*` for the total over all targets.
 */
target: string, 
/**
 * Age of the oldest lead with a step due or sending (pending or running), counted from when Leadline received
 * the lead — retries and replays do not reset it — in seconds; `null` when there is none.
 */
oldest_pending_age_seconds: number | null, pending: number, running: number, 
/**
 * Steps waiting for an earlier step of their route.
 */
waiting: number, delivered: number, 
/**
 * Steps that ended as reported, not sent (a conversion too old for the platform's window, a stage the target
 * does not map): final, counted apart from delivered and dead letters.
 */
reported: number, 
/**
 * Open dead letters (not yet replayed, fixed or discarded).
 */
dead_open: number, dead_open_by_class: { [key in string]: number }, };

export type BreakerView = { target: string, state: BreakerState, opened_at: string | null, 
/**
 * What the target is doing, all things considered (a person's pause, a hold, the breaker).
 */
situation: TargetSituation, };

export type TargetSituation = { "kind": "sending" } | { "kind": "paused_by_person" } | { "kind": "refusing_credentials", credential: string, next_try: string, } | { "kind": "refusing_setup", reason: string, next_try: string, } | { "kind": "down", since: string | null, } | { "kind": "rate_limited", until: string, } | { "kind": "testing" };

export type BreakerState = "closed" | "open" | "half_open";

export type Hold = { until: string, reason: HoldReason, };

export type HoldReason = { "kind": "rate_limited" } | { "kind": "credentials", credential: string, } | { "kind": "setup", reason: string, };

export type RequestPreview = { method: string, url: string, 
/**
 * Header name and value; credentials appear as `••••`.
 */
headers: Array<[string, string]>, body: unknown, 
/**
 * What happens around it (a search first, a second request after it), in words.
 */
notes: Array<string>, };

export type ConnectionCheck = { ok: boolean, 
/**
 * What was tried and what it showed ("the token works; 3 of 190 requests used in this 10 s window"), or
 * what is wrong and what to do ("the token lacks the crm.objects.contacts.write scope").
 */
message: string, };

export type SecretReload = { target: string, ok: boolean, message: string, };

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
 * Failed attempts (retried or dead-lettered) per bucket, rate-limited answers excepted.
 */
failed: Array<number>, 
/**
 * Attempts answered "slow down" (rate-limited) per bucket: not failures.
 */
rate_limited: Array<number>, 
/**
 * Buckets starting at or after this time (Unix seconds) are still being counted: their counters are
 * incomplete and must not be read as a dip.
 */
complete_until: number, 
/**
 * Open dead letters by class (highest in the bucket).
 */
dead_open_by_class: { [key in string]: Array<number | null> }, 
/**
 * Events received per bucket, by source.
 */
volume_by_source: { [key in string]: Array<number> }, 
/**
 * Speed to CRM (received → first CRM step delivered), seconds, by source: the median of the leads delivered
 * in the bucket (`null`: none was). From a histogram, within ±9 % (see the module docs).
 */
speed_p50_by_source: { [key in string]: Array<number | null> }, 
/**
 * The slow end: the 90th percentile, seconds, by source.
 */
speed_p90_by_source: { [key in string]: Array<number | null> }, 
/**
 * Leads that reached the CRM in the last hour, all sources together: the 60 complete minutes before the
 * current one, whatever the chart's range (read from the per-minute history).
 */
speed_last_hour_delivered: number, 
/**
 * Their median speed to CRM, seconds (`null`: none did).
 */
speed_last_hour_p50: number | null, 
/**
 * Their 90th percentile, seconds (`null`: none did).
 */
speed_last_hour_p90: number | null, };

export type DeadLetterFilter = { class: ErrorClass | null, source: string | null, target: string | null, since: string | null, until: string | null, 
/**
 * Matched against the reason, the source's event id and the field.
 */
text: string | null, 
/**
 * The HTTP status of the last attempt.
 */
http_status: number | null, 
/**
 * Exactly this cause (a group).
 */
cause: string | null, 
/**
 * A field of the lead: a top-level key (`email`) or a JSON pointer (`/lead/email`)…
 */
lead_field: string | null, 
/**
 * …whose value contains this (case-insensitive), e.g. `@gmail.com` or a form id.
 */
lead_value: string | null, 
/**
 * `open` (default), `all`, or one resolution.
 */
resolution: ResolutionFilter | null, limit: number | null, 
/**
 * Page: only dead letters with a smaller delivery id.
 */
before_id: number | null, };

export type DeadLetterList = { items: Array<DeadLetter>, 
/**
 * Open dead letters by class, over everything (not only this page).
 */
open_by_class: { [key in string]: number }, };

export type DeadLetter = { delivery_id: number, event_id: number, source: string, source_ref: string, target: string, step_index: number, 
/**
 * Why it died; `null` only when the detail of a step that is not dead is read.
 */
class: ErrorClass | null, http_status: number | null, 
/**
 * The CRM's own message where it gave one, and what Leadline concluded.
 */
reason: string, 
/**
 * The reason with lead-specific values masked: what dead letters are grouped by.
 */
cause: string, 
/**
 * The field the CRM blamed, if it named one.
 */
field: string | null, attempts: number, received_at: string, 
/**
 * When it was dead-lettered (the time of its last attempt).
 */
dead_at: string, resolution: Resolution, 
/**
 * Who resolved it by hand (discarded, fixed in the CRM), when and why.
 */
resolved_by: string | null, resolved_at: string | null, resolution_note: string | null, 
/**
 * The lead's data was purged (retention): it can no longer be replayed.
 */
purged: boolean, 
/**
 * A running replay has it queued (not sent back yet).
 */
queued_in_replay: number | null, 
/**
 * A person corrected the lead's data (a field fix or an edit): what is sent now is not what was received.
 */
fixed: boolean, };

export type DeadLetterDetail = { payload: unknown, 
/**
 * The lead as received, when it was fixed since.
 */
original_payload: unknown, attempts_timeline: Array<Attempt>, fixes: Array<PayloadFix>, delivery_id: number, event_id: number, source: string, source_ref: string, target: string, step_index: number, 
/**
 * Why it died; `null` only when the detail of a step that is not dead is read.
 */
class: ErrorClass | null, http_status: number | null, 
/**
 * The CRM's own message where it gave one, and what Leadline concluded.
 */
reason: string, 
/**
 * The reason with lead-specific values masked: what dead letters are grouped by.
 */
cause: string, 
/**
 * The field the CRM blamed, if it named one.
 */
field: string | null, attempts: number, received_at: string, 
/**
 * When it was dead-lettered (the time of its last attempt).
 */
dead_at: string, resolution: Resolution, 
/**
 * Who resolved it by hand (discarded, fixed in the CRM), when and why.
 */
resolved_by: string | null, resolved_at: string | null, resolution_note: string | null, 
/**
 * The lead's data was purged (retention): it can no longer be replayed.
 */
purged: boolean, 
/**
 * A running replay has it queued (not sent back yet).
 */
queued_in_replay: number | null, 
/**
 * A person corrected the lead's data (a field fix or an edit): what is sent now is not what was received.
 */
fixed: boolean, };

export type DeadLetterView = { 
/**
 * The CRM record, when a step of this lead was delivered (e.g. after a replay).
 */
crm_record: unknown, replays: Array<ReplayHistoryEntry>, 
/**
 * Whether personal data is shown as it is (after an audited reveal) rather than masked (the default).
 */
revealed: boolean, 
/**
 * Who had this lead shown unmasked, newest first (the audit).
 */
reveals: Array<Reveal>, 
/**
 * A first contact in doubt: "did this lead get our message?", for a person to answer
 * (`answer_contact_doubt`).
 */
contact_doubt: ContactDoubt | null, payload: unknown, 
/**
 * The lead as received, when it was fixed since.
 */
original_payload: unknown, attempts_timeline: Array<Attempt>, fixes: Array<PayloadFix>, delivery_id: number, event_id: number, source: string, source_ref: string, target: string, step_index: number, 
/**
 * Why it died; `null` only when the detail of a step that is not dead is read.
 */
class: ErrorClass | null, http_status: number | null, 
/**
 * The CRM's own message where it gave one, and what Leadline concluded.
 */
reason: string, 
/**
 * The reason with lead-specific values masked: what dead letters are grouped by.
 */
cause: string, 
/**
 * The field the CRM blamed, if it named one.
 */
field: string | null, attempts: number, received_at: string, 
/**
 * When it was dead-lettered (the time of its last attempt).
 */
dead_at: string, resolution: Resolution, 
/**
 * Who resolved it by hand (discarded, fixed in the CRM), when and why.
 */
resolved_by: string | null, resolved_at: string | null, resolution_note: string | null, 
/**
 * The lead's data was purged (retention): it can no longer be replayed.
 */
purged: boolean, 
/**
 * A running replay has it queued (not sent back yet).
 */
queued_in_replay: number | null, 
/**
 * A person corrected the lead's data (a field fix or an edit): what is sent now is not what was received.
 */
fixed: boolean, };

export type Attempt = { started_at: string, duration_ms: number, http_status: number | null, outcome: string, class: ErrorClass | null, reason: string, response_excerpt: string | null, trigger: string, };

export type ReplaySelection = { ids: Array<number> | null, filter: DeadLetterFilter | null, };

export type ReplayRequest = { selection: ReplaySelection, 
/**
 * The preview's `eligible`: the replay runs only if the selection still matches it.
 */
expected: number, 
/**
 * Why (kept in the audit).
 */
reason: string, options: ReplayOptions, };

export type ReplayPreview = { 
/**
 * Open dead letters that will be sent back.
 */
eligible: number, by_target: { [key in string]: number }, 
/**
 * Selected but not eligible (the sum of `reasons`).
 */
not_eligible: number, reasons: NotEligible, fallbacks: Array<FallbackPlan>, 
/**
 * Eligible leads received more than 24 h ago.
 */
older_than_24h: number, 
/**
 * The sentence the confirmation shows.
 */
summary: string, 
/**
 * When it was counted: every dead letter counted was parked before this instant. Replaying the selection
 * pinned to it ([`ReplaySelection::as_of`]) replays exactly these, not those parked since.
 */
as_of: string, };

export type ReplayReceipt = { replay_id: number, 
/**
 * Items the replay will send back.
 */
queued: number, };

export type ReplayProgress = { replay_id: number, created_at: string, actor: string, reason: string, 
/**
 * The selection as the operator made it (filter or ids).
 */
selection: unknown, status: ReplayStatus, phase: ReplayPhase, canary_size: number, rate_per_second: number, 
/**
 * Why it is not sending right now, while running (breaker open, rate-limited, paused target).
 */
waiting_for: string | null, 
/**
 * Started by Leadline after the target recovered.
 */
auto: boolean, total: number, 
/**
 * Not sent back yet.
 */
queued: number, delivered: number, in_progress: number, 
/**
 * Failed again with the same reason as before.
 */
failed_same_reason: number, 
/**
 * Failed again, but for a different reason.
 */
failed_new_reason: number, 
/**
 * Discarded or fixed by hand while the replay ran.
 */
resolved_by_hand: number, 
/**
 * Ran a time-sensitive step's fallback instead.
 */
fallbacks: number, 
/**
 * Leads whose data a person corrected (a fix-and-replay's, or fixed before).
 */
fixed: number, done: boolean, finished_at: string | null, events: Array<ReplayEvent>, };

export type ReplayHistoryEntry = { replay_id: number, at: string, actor: string, reason: string, prior_class: ErrorClass | null, prior_reason: string | null, };

export type DeadLetterGroup = { class: ErrorClass, target: string, cause: string, count: number, http_status: number | null, first_dead_at: string, last_dead_at: string, 
/**
 * One of them, to open as an example.
 */
example_id: number, 
/**
 * The field the CRM blamed (in the example), if it named one.
 */
field: string | null, };

export type PayloadFix = { at: string, actor: string, reason: string, operation: unknown, before: unknown, after: unknown, };

export type FallbackPlan = { target: string, fallback: string, max_lead_age_minutes: number, 
/**
 * Eligible leads older than that.
 */
count: number, };

export type NotEligible = { 
/**
 * Replayed, discarded or fixed by hand before.
 */
already_resolved: number, 
/**
 * The lead's data was purged (retention).
 */
payload_purged: number, 
/**
 * Waiting in another replay that is still running.
 */
queued_in_another_replay: number, 
/**
 * Chosen ids that are not dead letters.
 */
unknown: number, };

export type ReplayOptions = { 
/**
 * Leads sent first; the rest wait until all of these were delivered. 0: no canary.
 */
canary: number | null, 
/**
 * Leads sent back per second after the canary.
 */
rate_per_second: number | null, };

export type ReplayEvent = { at: string, kind: ReplayEventKind, detail: string, };

export type ReplayReportItem = { delivery_id: number, source: string, source_ref: string, target: string, outcome: ReplayOutcome, prior_reason: string | null, 
/**
 * The reason it failed this time, when it did.
 */
reason: string | null, fallback_to: string | null, 
/**
 * A person corrected the lead's data before it went again.
 */
fixed: boolean, };

export type ResolveRequest = { selection: ReplaySelection, 
/**
 * `discarded` or `fixed_manually`.
 */
resolution: Resolution, 
/**
 * Why (kept with each dead letter).
 */
note: string, 
/**
 * How many the operator saw; nothing happens if the selection changed.
 */
expected: number | null, };

export type FixRequest = { selection: ReplaySelection, fix: FieldFix, 
/**
 * Why (kept with each change). Not needed for a dry run.
 */
reason: string, 
/**
 * Only count and show examples.
 */
dry_run: boolean, };

export type FixAndReplayRequest = { selection: ReplaySelection, fix: FieldFix, 
/**
 * Why: kept with each change and with the replay.
 */
reason: string, 
/**
 * How many leads the preview said the fix changes: nothing happens if that is no longer true.
 */
expected_changed: number, options: ReplayOptions, };

export type FixAndReplayPreview = { fix: FixReport, 
/**
 * `null` when the fix changes no lead (then there is nothing to replay).
 */
replay: ReplayPreview | null, 
/**
 * When the selection was counted: the request pinned to it ([`ReplaySelection::as_of`]) fixes and replays
 * exactly the leads counted here, not dead letters of the same cause parked since.
 */
as_of: string, };

export type FixAndReplayReceipt = { 
/**
 * Leads whose data was corrected.
 */
fixed: number, 
/**
 * The replay that sends them again.
 */
replay_id: number, };

export type EditRequest = { payload: unknown, reason: string, };

export type RevealRequest = { 
/**
 * Why the operator needs to see the lead's personal data (kept in the audit).
 */
reason: string, };

export type Reveal = { at: string, actor: string, reason: string, };

export type LeadSearch = { 
/**
 * Newest first, at most [`FIND_LIMIT`].
 */
items: Array<LeadMatch>, 
/**
 * More leads may match than were returned.
 */
truncated: boolean, };

export type LeadMatch = { event_id: number, source: string, 
/**
 * The lead's id at its source.
 */
source_ref: string, received_at: string, 
/**
 * `webhook` or `reconciliation`.
 */
via: string, status: LeadStatus, 
/**
 * How many steps its route has.
 */
steps: number, 
/**
 * Its data was purged after its retention (found by id only).
 */
purged: boolean, };

export type LeadStatus = "delivered" | "waiting" | "dead_letter" | "resolved" | "test";

export type LeadStory = { 
/**
 * Per step (same order as `steps`), the CRM record's web address when the target's `record_url` is set
 * and the step has a CRM id.
 */
crm_urls: Array<string | null>, 
/**
 * Whether personal data is shown as it is (after an audited reveal) rather than masked (the default).
 */
revealed: boolean, 
/**
 * Who had this lead shown unmasked, newest first (the audit).
 */
reveals: Array<Reveal>, 
/**
 * Every death of any of its steps, oldest first: each its own episode, never overwritten.
 */
episodes: Array<Episode>, 
/**
 * Its steps delivered without a field the CRM refused (a target's `missing_data`): which field, why.
 */
missing_data: Array<MissingDataLead>, 
/**
 * Its first contacts' receipts (sent, delivered, read, failed), oldest first, each naming its step by
 * `delivery_id`.
 */
receipts: Array<ReceiptEntry>, event_id: number, source: string, source_ref: string, received_at: string, 
/**
 * `webhook` or `reconciliation`.
 */
via: string, 
/**
 * 1 as first received; a source that sent the lead again with new content makes the next revision.
 */
revision: number, revised_at: string | null, 
/**
 * When the lead came into being at its source, when earlier than its reception.
 */
lead_at: string | null, payload: unknown, 
/**
 * The lead as received, when it was fixed since.
 */
original_payload: unknown, 
/**
 * When its data was purged after its retention.
 */
purged_at: string | null, status: LeadStatus, steps: Array<LeadStep>, fixes: Array<PayloadFix>, };

export type LeadRecord = { event_id: number, source: string, source_ref: string, received_at: string, 
/**
 * `webhook` or `reconciliation`.
 */
via: string, 
/**
 * 1 as first received; a source that sent the lead again with new content makes the next revision.
 */
revision: number, revised_at: string | null, 
/**
 * When the lead came into being at its source, when earlier than its reception.
 */
lead_at: string | null, payload: unknown, 
/**
 * The lead as received, when it was fixed since.
 */
original_payload: unknown, 
/**
 * When its data was purged after its retention.
 */
purged_at: string | null, status: LeadStatus, steps: Array<LeadStep>, fixes: Array<PayloadFix>, };

export type LeadStep = { delivery_id: number, step_index: number, target: string, 
/**
 * `waiting`, `pending`, `running`, `delivered`, `dead`, or `reported`: a conversion step that ended without
 * sending (too old for the platform's window, a stage not mapped), a final state of its own (stored as such
 * since migration 0016: never delivered, never a dead letter, never tried again).
 */
state: string, 
/**
 * A reported step's words ("reported: too old for Meta's 7-day window …").
 */
reported: string | null, 
/**
 * Counted attempts.
 */
attempts: number, next_attempt_at: string | null, delivered_at: string | null, dead_at: string | null, dead_class: ErrorClass | null, dead_reason: string | null, 
/**
 * For a dead letter: `open`, `replayed`, `fixed_manually` or `discarded`.
 */
resolution: string | null, 
/**
 * The step's own target when a replay ran its fallback instead.
 */
fallback_of: string | null, 
/**
 * The CRM's record id: from the delivered answer, else the link a look-up-then-create target keeps.
 */
crm_id: string | null, 
/**
 * Every attempt, oldest first.
 */
attempts_timeline: Array<Attempt>, 
/**
 * The replays that sent this step again, newest first.
 */
replays: Array<ReplayHistoryEntry>, };

export type FieldFix = { field: string, } & ({ "op": "set", value: unknown, } | { "op": "normalize_phone", country_code: string, } | { "op": "trim" } | { "op": "lowercase" } | { "op": "replace", from: string, to: string, } | { "op": "remove" });

export type FieldOp = { "op": "set", value: unknown, } | { "op": "normalize_phone", country_code: string, } | { "op": "trim" } | { "op": "lowercase" } | { "op": "replace", from: string, to: string, } | { "op": "remove" };

export type FixReport = { 
/**
 * Leads whose data changes (or changed).
 */
changed: number, 
/**
 * Leads the fix leaves as they are (nothing to fix, or the field is missing).
 */
unchanged: number, 
/**
 * Up to five examples: the field before and after.
 */
samples: Array<FixSample>, };

export type FixSample = { delivery_id: number, before: unknown, after: unknown, };

export type Alert = { id: number, kind: AlertKind, key: string, severity: Severity, title: string, detail: string, opened_at: string, last_seen_at: string, occurrences: number, acknowledged_at: string | null, acknowledged_by: string | null, resolved_at: string | null, resolution_note: string | null, state: AlertState, 
/**
 * When it was last announced (notification or digest); `null` while not announced.
 */
notified_at: string | null, 
/**
 * How many times it was announced (re-notifications included).
 */
notifications: number, 
/**
 * Waiting to be announced: in the next digest, or when quiet hours end.
 */
held: Held | null, 
/**
 * Where a person acts on it (derived from kind and key, not stored).
 */
place: Place, };

export type ChannelView = { name: string, kind: string, 
/**
 * Announcements not sent yet (held for a digest or quiet hours, or failing).
 */
waiting: number, last_sent_at: string | null, 
/**
 * The last failure, while announcements it concerns still wait.
 */
trouble: ChannelTrouble | null, };

export type ChannelTrouble = { channel: string, 
/**
 * Announcements waiting after at least one failed send.
 */
failing: number, last_error: string, last_attempt_at: string, };

export type Place = { page: Page, 
/**
 * The target the thing is about (its row on Targets, or the dead letters' target filter).
 */
target: string | null, 
/**
 * The source the thing is about (its row on Sources).
 */
source: string | null, 
/**
 * The cause group on Dead letters (with `target`).
 */
cause: string | null, };

export type Page = "alerts" | "targets" | "sources" | "dead_letters";

export type SourceView = { 
/**
 * `generic` or `meta`.
 */
kind: string, reconciles: boolean, 
/**
 * Whether requests must carry a valid signature; an unsigned source takes leads from anyone who reaches it.
 */
signed: boolean, last_reconciliation: ReconciliationRun | null, 
/**
 * Leads recovered by reconciliation in the last 7 days.
 */
recovered_7d: number, 
/**
 * Poll mode: Leadline asks the source for its leads (last and next poll); `None` for a webhook-fed source.
 */
poll: PollView | null, 
/**
 * What to paste into the ad platform's webhook settings (Google Ads: the URL and the key); `None` for a
 * source set up elsewhere.
 */
webhook: WebhookSetup | null, source: string, 
/**
 * What is happening, in one word (see [`SourceState`]).
 */
state: SourceState, assessment: Assessment, last_event_at: string | null, 
/**
 * Events per hour the baseline expects at this hour.
 */
expected_per_hour_now: number | null, 
/**
 * Since when Leadline has been listening to its sources (its start, in a real run).
 */
listening_since: string, };

export type WebhookSetup = { 
/**
 * `/ingest/{source}` on this server.
 */
path: string, 
/**
 * The whole address, when `monitor.public_url` says how the server is reached from outside.
 */
url: string | null, 
/**
 * The key Google sends back in each lead, masked like every secret (`••••` and its last 4 characters);
 * `None` when the source's `key_env` cannot be read. The key itself comes only from `reveal_source_key`, an
 * explicit, logged action of the person pasting it into Google Ads.
 */
key_masked: string | null, 
/**
 * Google's test leads ("send test data") are delivered like any other (`deliver_test_leads`).
 */
delivers_test_leads: boolean, };

export type SourceStatus = { source: string, 
/**
 * What is happening, in one word (see [`SourceState`]).
 */
state: SourceState, assessment: Assessment, last_event_at: string | null, 
/**
 * Events per hour the baseline expects at this hour.
 */
expected_per_hour_now: number | null, 
/**
 * Since when Leadline has been listening to its sources (its start, in a real run).
 */
listening_since: string, };

export type SourceState = "normal" | "drop" | "silent" | "learning" | "low" | "listening";

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
expected_during_silence: number | null, 
/**
 * When the silence began: the last event, or the start of listening when nothing came since.
 */
silent_since: string | null, silence: Verdict, 
/**
 * An event arrived since Leadline started listening (always, when it has listened all along).
 */
heard_since_start: boolean, 
/**
 * Too little has been listened to for any window to be judged yet, but it will be: the first time at which
 * a window clipped to the listening time expects enough to judge. `None` once windows are judged, and when
 * not even the full windows would be (a quiet hour).
 */
judged_from: string | null, };

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

export type PollView = { interval_seconds: number, 
/**
 * When the source was last asked (the latest of its forms).
 */
last_poll_at: string | null, 
/**
 * When it is asked next.
 */
next_poll_at: string | null, 
/**
 * Leads new to Leadline in the last poll (all forms).
 */
last_found: number, 
/**
 * Why the last poll failed (the first failing form's reason); `None` when it worked.
 */
last_error: string | null, 
/**
 * Leads that came by polling in the last 7 days.
 */
polled_7d: number, };

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
 * `http`, `meta_lead`, ... (what the target speaks).
 */
kind: string, 
/**
 * Scheme, host and port of the target's URL (never credentials or paths with ids).
 */
endpoint: string, strategy: string, 
/**
 * Nothing is sent before `until`: the target said when to come back, or refused a credential.
 */
hold: Hold | null, 
/**
 * The rate requests are paced to (declared, or learned from the target's headers), like `190/10s`.
 */
rate: string | null, 
/**
 * Requests that may be in flight now (lowered while the target answers 429).
 */
concurrency: number, 
/**
 * How a lead becomes this target's record (the configured rules, as written).
 */
mapping: unknown[], breaker: BreakerState | null, breaker_opened_at: string | null, paused: boolean, paused_by: string | null, paused_at: string | null, };

export type SettingsView = { 
/**
 * The file saved settings are written to.
 */
file: string | null, 
/**
 * Why settings cannot be saved here (the demo's built-in configuration); `None`: they can.
 */
read_only: string | null, sources: Array<SourceSettings>, targets: Array<TargetSettings>, 
/**
 * One per alert kind, the configured policy or the default.
 */
alerts: Array<AlertSettings>, quiet_hours: QuietHours | null, quiet_hours_hold_critical: boolean, 
/**
 * The IANA time zone quiet hours are read in.
 */
timezone: string, 
/**
 * Whether secrets entered here can be kept (a Secret Service is reachable), and why not.
 */
keyring: KeyringStatus, };

export type SourceSettings = { name: string, 
/**
 * `generic` or `meta`.
 */
kind: string, id_field: string, route: Array<string>, require_signature: boolean, secrets: Array<SecretField>, };

export type TargetSettings = { name: string, 
/**
 * `http`, `hubspot`, `salesforce`, `pipedrive` or `meta_lead`.
 */
kind: string, url: string, 
/**
 * `http` targets: `idempotency_key`, `upsert`, `search_then_create` or `none`.
 */
strategy: string | null, 
/**
 * The field mapping rules as in the file (`to`, `from`, `constant`, `transform`, `default`, `required`).
 */
mapping: Array<Record<string, unknown>>, secrets: Array<SecretField>, };

export type SecretField = { 
/**
 * The field's path in the file (`targets.crm.auth.bearer_env`).
 */
path: string, 
/**
 * The variable it names (`HUBSPOT_TOKEN`).
 */
variable: string, 
/**
 * Where its value is found now; `None`: nowhere, the target or source cannot start.
 */
found: SecretSource | null, };

export type SecretSource = "inline" | "secrets_file" | "environment" | "keyring";

export type AlertSettings = { 
/**
 * The alert kind (`silence`, `breaker_open`…).
 */
kind: string, 
/**
 * `immediate`, `digest` or `none`.
 */
notify: string, renotify_minutes: number | null, 
/**
 * Whether the file sets it (else it is the default).
 */
configured: boolean, };

export type QuietHours = { start: string, end: string, };

export type KeyringStatus = { available: boolean, 
/**
 * Why not, and what to do instead.
 */
message: string | null, };

export type FieldError = { 
/**
 * The key (`targets.crm.url`, `targets.crm.mapping[1].to`); empty when the problem is not one field's.
 */
path: string, message: string, };

export type SaveOutcome = { saved: boolean, errors: Array<FieldError>, settings: SettingsView, };

export type SettingsEdit = { changes: Array<Change>, };

export type Change = { path: string, value: unknown, };

export type SecretEntry = { variable: string, value: string, };

export type SecretStored = { message: string, settings: SettingsView, };

export type LiveEvent = { "kind": "health", "data": HealthView } | { "kind": "alerts_changed" } | { "kind": "replay_changed", "data": { replay_id: number, } } | { "kind": "sources_changed" };

export type ErrorClass = "transient" | "rate_limited" | "permanent_data" | "permanent_config" | "ambiguous";

export type DeliveryState = "waiting" | "pending" | "running" | "delivered" | "dead";

export type Resolution = "open" | "replayed" | "fixed_manually" | "discarded";

export type ResolutionFilter = "open" | "replayed" | "fixed_manually" | "discarded" | "all";

export type Severity = "critical" | "warning" | "info";

export type AlertKind = "permanent_config" | "credentials" | "oldest_pending" | "breaker_open" | "new_cause" | "dead_letter_growth" | "retry_budget" | "silence" | "volume_drop" | "source_failing" | "reconciliation_found" | "auto_replay";

export type AlertState = "open" | "acknowledged" | "resolved";

export type Held = "digest" | "quiet_hours";

export type ReplayStatus = "running" | "paused" | "cancelled" | "finished";

export type ReplayPhase = "canary" | "canary_failed" | "rest";

export type ReplayOutcome = "delivered" | "in_progress" | "queued" | "failed_same_reason" | "failed_new_reason" | "resolved_by_hand";

export type ReplayEventKind = "started" | "canary_sent" | "canary_passed" | "canary_failed" | "waiting" | "resumed" | "continued" | "paused" | "cancelled" | "finished";

export type ContactDoubt = { 
/**
 * `whatsapp` or `sms`.
 */
channel: string, 
/**
 * When the message whose answer was lost left.
 */
sent_at: string, };

export type ContactDoubtArgs = { id: number, 
/**
 * `true`: the lead got the message (nothing is sent again, the route goes on); `false`: send it once more.
 */
arrived: boolean, 
/**
 * How the person knows (kept with the replay), e.g. "the lead confirmed on the phone".
 */
note: string, };

export type ContactSpeed = { source: string, 
/**
 * Messages accepted.
 */
accepted: number, accepted_p50_ms: number | null, accepted_p95_ms: number | null, 
/**
 * Messages with a delivery receipt.
 */
delivered: number, delivered_p50_ms: number | null, delivered_p95_ms: number | null, };

export type ControlArgs = { id: number, action: 'cancel' | 'pause' | 'resume', };

export type CorrectArgs = { id: number, fix: FieldFix, reason: string, };

export type EditArgs = { id: number, payload: unknown, reason: string, };

export type Episode = { id: number, delivery_id: number, target: string, died_at: string, class: ErrorClass | null, http_status: number | null, reason: string | null, cause: string | null, field: string | null, 
/**
 * `open`, `replayed`, `fixed_manually` or `discarded`.
 */
resolution: string, resolved_at: string | null, resolved_by: string | null, 
/**
 * How: the operator's note, or the replay's reason.
 */
resolution_note: string | null, 
/**
 * The replay that sent the step again after this death.
 */
replay_id: number | null, };

export type ExportFile = { name: string, body: string, };

export type FixAndReplayPreviewArgs = { selection: ReplaySelection, fix: FieldFix, };

export type IdArgs = { id: number, };

export type LeadQuery = { 
/**
 * An e-mail address, a phone number (or part of one), a name, the source's id, the CRM's record id or the
 * lead's id.
 */
q: string, };

export type MissingDataCounts = { delivered: number, 
/**
 * Of those, waiting for a person in Leadline ("Needs a person").
 */
needs_a_person: number, 
/**
 * Per target: (target, delivered with missing data).
 */
by_target: Array<[string, number]>, };

export type MissingDataLead = { delivery_id: number, event_id: number, source: string, source_ref: string, target: string, delivered_at: string | null, 
/**
 * The CRM record it became.
 */
crm_id: string | null, 
/**
 * Each field left out and the refusal that dropped it.
 */
fields: Array<MissingField>, 
/**
 * `open` ("Needs a person"), `follow_up` (a follow-up step asks), `done` (checked), `corrected`.
 */
task: string | null, };

export type MissingField = { field: string, reason: string, at: string, };

export type NoArgs = Record<symbol, never>;

export type RangeArgs = { range: string | null, };

export type ReceiptEntry = { delivery_id: number, provider_id: string, 
/**
 * `sent`, `delivered`, `read` or `failed`.
 */
status: string, error_code: string | null, error_title: string | null, at: string, };

export type ReportArgs = { id: number, outcome: string | null, };

export type RevealArgs = { id: number, 
/**
 * Why the operator needs to see the lead's personal data (kept in the audit).
 */
reason: string, };

export type SourceArgs = { source: string, };

export type SourceKey = { source: string, key: string, };

export type TargetArgs = { name: string, };

export type TargetPreviewArgs = { name: string, lead: string, };
