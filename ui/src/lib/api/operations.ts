// Leadline's operations, generated from the registry (src-tauri/shells/api/operations.rs) by
// tests/ts_contract.rs. Do not edit: run `UPDATE_TS_TYPES=1 cargo test --no-default-features --test ts_contract`.

import type { Alert, ChannelView, ConnectionCheck, ContactDoubtArgs, ContactSpeed, ControlArgs, CorrectArgs, DeadLetterFilter, DeadLetterGroup, DeadLetterList, DeadLetterView, DeliveryFigures, EditArgs, FixAndReplayPreview, FixAndReplayPreviewArgs, FixAndReplayReceipt, FixAndReplayRequest, FixReport, FixRequest, HealthView, IdArgs, LeadQuery, LeadSearch, LeadStory, MetricSeries, MissingDataCounts, MissingDataLead, NoArgs, RangeArgs, ReconciliationRun, ReplayPreview, ReplayProgress, ReplayReceipt, ReplayReportItem, ReplayRequest, ReplaySelection, ReportArgs, RequestPreview, ResolveRequest, RevealArgs, SaveOutcome, SecretEntry, SecretReload, SecretStored, Session, SettingsEdit, SettingsView, SourceArgs, SourceKey, SourceView, TargetArgs, TargetPreviewArgs, TargetView } from './wire';

/** Each operation's arguments and answer. An export answers where its file was saved (`null`: not saved). */
export type Operations = {
  /** Who acts here, and what this process runs. */
  session: { args: NoArgs; answer: Session };
  /** The queue's health, each target's situation and the verdict. */
  health: { args: NoArgs; answer: HealthView };
  /** Per-minute (or hourly) metrics over `range` (`1h` unless given). */
  metrics: { args: RangeArgs; answer: MetricSeries };
  /** Delivery figures over `range` (`24h` unless given). */
  figures: { args: RangeArgs; answer: DeliveryFigures };
  /** Speed to first contact over `range` (`24h` unless given): per source, p50 and p95 from a lead's arrival to
   *  its first message accepted by the provider and to its delivery receipt. */
  contact_speed: { args: RangeArgs; answer: Array<ContactSpeed> };
  /** Each source: its volume against its baseline, reconciliation and polling. */
  sources: { args: NoArgs; answer: Array<SourceView> };
  /** A Google Ads source's key, unmasked, to paste into the lead form's webhook settings; the reveal is logged. */
  reveal_source_key: { args: SourceArgs; answer: SourceKey };
  /** Compares a source with its own list of leads now and ingests what is missing. */
  reconcile_now: { args: SourceArgs; answer: ReconciliationRun };
  /** The newest alerts. */
  alerts: { args: NoArgs; answer: Array<Alert> };
  /** Acknowledges an alert: someone is on it. */
  acknowledge_alert: { args: IdArgs; answer: Alert };
  /** The alert channels besides the desktop (Slack, e-mail, webhooks) and how each fares. */
  alert_channels: { args: NoArgs; answer: Array<ChannelView> };
  /** Dead letters matching a filter (open ones unless it says), a page at a time. */
  dead_letters: { args: DeadLetterFilter; answer: DeadLetterList };
  /** Dead letters matching a filter, grouped by cause. */
  dead_letter_groups: { args: DeadLetterFilter; answer: Array<DeadLetterGroup> };
  /** One dead letter with its lead, attempts and history; personal data masked. */
  dead_letter: { args: IdArgs; answer: DeadLetterView };
  /** The dead letter with its personal data unmasked; the reason goes to the audit. */
  reveal_dead_letter: { args: RevealArgs; answer: DeadLetterView };
  /** Replaces one dead letter's lead (the original is kept in its history). */
  edit_dead_letter: { args: EditArgs; answer: DeadLetterView };
  /** Answers "did this lead get our message?" for a first contact in doubt: it arrived (nothing is sent again,
   *  the lead's route goes on) or it did not (the message is sent once more). Either way the step is replayed. */
  answer_contact_doubt: { args: ContactDoubtArgs; answer: ReplayReceipt };
  /** Discards dead letters or marks them fixed by hand; answers how many. */
  resolve_dead_letters: { args: ResolveRequest; answer: number };
  /** Applies (or with `dry_run` previews) one field fix to the selected dead letters. */
  fix_dead_letters: { args: FixRequest; answer: FixReport };
  /** Saves the dead letters of a filter as CSV. */
  export_dead_letters: { args: DeadLetterFilter; answer: string | null };
  /** Any lead by e-mail, phone (or part of it), name, source id, CRM id or lead id: the newest 50. */
  find_leads: { args: LeadQuery; answer: LeadSearch };
  /** A lead's whole story, personal data masked. */
  lead_story: { args: IdArgs; answer: LeadStory };
  /** The lead's story with its personal data unmasked; the reason goes to the audit. */
  reveal_lead: { args: RevealArgs; answer: LeadStory };
  /** How many leads were delivered without a field the CRM refused: overall, waiting for a person, per target. */
  missing_data_counts: { args: NoArgs; answer: MissingDataCounts };
  /** Leads delivered with missing data (and those corrected since), newest first: which field was left out and
   *  why (masked), and their task. */
  missing_data: { args: NoArgs; answer: Array<MissingDataLead> };
  /** Corrects one field of a lead delivered with missing data and sends it again, as an update of its record. */
  correct_missing_data: { args: CorrectArgs; answer: MissingDataLead };
  /** A person checked a lead delivered with missing data: its "Needs a person" task is done. */
  close_missing_task: { args: IdArgs; answer: MissingDataLead };
  /** Saves the leads delivered with missing data as CSV. */
  export_missing_data: { args: NoArgs; answer: string | null };
  /** What replaying the selection would do, and when it was counted (`as_of`). */
  replay_preview: { args: ReplaySelection; answer: ReplayPreview };
  /** Replays the selection if it still holds the `expected` leads the preview counted. */
  replay: { args: ReplayRequest; answer: ReplayReceipt };
  /** The recent replays. */
  replays: { args: NoArgs; answer: Array<ReplayProgress> };
  /** One replay's progress. */
  replay_progress: { args: IdArgs; answer: ReplayProgress };
  /** A replay's leads and their outcomes (of one outcome, when given). */
  replay_report: { args: ReportArgs; answer: Array<ReplayReportItem> };
  /** Pauses, resumes or cancels a replay. */
  control_replay: { args: ControlArgs; answer: ReplayProgress };
  /** Saves a replay's whole report as CSV. */
  export_replay_report: { args: IdArgs; answer: string | null };
  /** What a field fix would change, and the replay of the leads it changes. */
  fix_and_replay_preview: { args: FixAndReplayPreviewArgs; answer: FixAndReplayPreview };
  /** Fixes, then replays exactly the leads the fix changed: one act, one reason. */
  fix_and_replay: { args: FixAndReplayRequest; answer: FixAndReplayReceipt };
  /** Each target: its endpoint, pace, hold, breaker and pause. */
  targets: { args: NoArgs; answer: Array<TargetView> };
  /** Pauses a target: nothing is sent to it, its leads queue safely. */
  pause_target: { args: TargetArgs; answer: TargetView };
  /** Resumes a paused target. */
  resume_target: { args: TargetArgs; answer: TargetView };
  /** The exact request a target would send for a stored lead (`source:id`); nothing is sent. */
  target_preview: { args: TargetPreviewArgs; answer: RequestPreview };
  /** One harmless authenticated request to the target, answered in plain words. */
  check_target: { args: TargetArgs; answer: ConnectionCheck };
  /** Reads every target's credentials again (secrets file, environment): no restart. */
  reload_secrets: { args: NoArgs; answer: Array<SecretReload> };
  /** The configuration in force, as the settings page edits it (secrets only as where they are found). */
  settings: { args: NoArgs; answer: SettingsView };
  /** Writes changes into the configuration file (comments kept) and puts them in force without a restart; a
   *  refusal names the fields at fault (HTTP 422) and writes nothing. */
  save_settings: { args: SettingsEdit; answer: SaveOutcome };
  /** Keeps a secret for a variable the configuration names in the OS keyring (never the file). */
  store_secret: { args: SecretEntry; answer: SecretStored };
};

export type OperationName = keyof Operations;

/** How an operation travels: its HTTP method and path (`{name}`: the argument of that name), whether it only
* reads, whether a person confirms it, whether it answers a file, and whether HTTP 422 carries a refusal as its
* answer. */
export type OperationRoute = {
  method: 'GET' | 'POST' | 'PUT';
  path: string;
  access: 'read' | 'write';
  confirmed: boolean;
  file: boolean;
  refusal: boolean;
};

export const OPERATIONS: { readonly [N in OperationName]: OperationRoute } = {
  session: { method: 'GET', path: '/api/session', access: 'read', confirmed: false, file: false, refusal: false },
  health: { method: 'GET', path: '/api/health', access: 'read', confirmed: false, file: false, refusal: false },
  metrics: { method: 'GET', path: '/api/metrics', access: 'read', confirmed: false, file: false, refusal: false },
  figures: { method: 'GET', path: '/api/figures', access: 'read', confirmed: false, file: false, refusal: false },
  contact_speed: { method: 'GET', path: '/api/contact-speed', access: 'read', confirmed: false, file: false, refusal: false },
  sources: { method: 'GET', path: '/api/sources', access: 'read', confirmed: false, file: false, refusal: false },
  reveal_source_key: { method: 'POST', path: '/api/sources/{source}/key', access: 'write', confirmed: false, file: false, refusal: false },
  reconcile_now: { method: 'POST', path: '/api/sources/{source}/reconcile', access: 'write', confirmed: false, file: false, refusal: false },
  alerts: { method: 'GET', path: '/api/alerts', access: 'read', confirmed: false, file: false, refusal: false },
  acknowledge_alert: { method: 'POST', path: '/api/alerts/{id}/acknowledge', access: 'write', confirmed: false, file: false, refusal: false },
  alert_channels: { method: 'GET', path: '/api/alert-channels', access: 'read', confirmed: false, file: false, refusal: false },
  dead_letters: { method: 'GET', path: '/api/dead-letters', access: 'read', confirmed: false, file: false, refusal: false },
  dead_letter_groups: { method: 'GET', path: '/api/dead-letters/groups', access: 'read', confirmed: false, file: false, refusal: false },
  dead_letter: { method: 'GET', path: '/api/dead-letters/{id}', access: 'read', confirmed: false, file: false, refusal: false },
  reveal_dead_letter: { method: 'POST', path: '/api/dead-letters/{id}/reveal', access: 'write', confirmed: false, file: false, refusal: false },
  edit_dead_letter: { method: 'POST', path: '/api/dead-letters/{id}/edit', access: 'write', confirmed: false, file: false, refusal: false },
  answer_contact_doubt: { method: 'POST', path: '/api/dead-letters/{id}/contact-doubt', access: 'write', confirmed: true, file: false, refusal: false },
  resolve_dead_letters: { method: 'POST', path: '/api/dead-letters/resolve', access: 'write', confirmed: true, file: false, refusal: false },
  fix_dead_letters: { method: 'POST', path: '/api/dead-letters/fix', access: 'write', confirmed: true, file: false, refusal: false },
  export_dead_letters: { method: 'GET', path: '/api/export/dead-letters', access: 'read', confirmed: false, file: true, refusal: false },
  find_leads: { method: 'GET', path: '/api/leads', access: 'read', confirmed: false, file: false, refusal: false },
  lead_story: { method: 'GET', path: '/api/leads/{id}', access: 'read', confirmed: false, file: false, refusal: false },
  reveal_lead: { method: 'POST', path: '/api/leads/{id}/reveal', access: 'write', confirmed: false, file: false, refusal: false },
  missing_data_counts: { method: 'GET', path: '/api/missing-data/counts', access: 'read', confirmed: false, file: false, refusal: false },
  missing_data: { method: 'GET', path: '/api/missing-data', access: 'read', confirmed: false, file: false, refusal: false },
  correct_missing_data: { method: 'POST', path: '/api/missing-data/{id}/correct', access: 'write', confirmed: false, file: false, refusal: false },
  close_missing_task: { method: 'POST', path: '/api/missing-data/{id}/close', access: 'write', confirmed: false, file: false, refusal: false },
  export_missing_data: { method: 'GET', path: '/api/export/missing-data', access: 'read', confirmed: false, file: true, refusal: false },
  replay_preview: { method: 'POST', path: '/api/replays/preview', access: 'read', confirmed: false, file: false, refusal: false },
  replay: { method: 'POST', path: '/api/replays', access: 'write', confirmed: true, file: false, refusal: false },
  replays: { method: 'GET', path: '/api/replays', access: 'read', confirmed: false, file: false, refusal: false },
  replay_progress: { method: 'GET', path: '/api/replays/{id}', access: 'read', confirmed: false, file: false, refusal: false },
  replay_report: { method: 'GET', path: '/api/replays/{id}/report', access: 'read', confirmed: false, file: false, refusal: false },
  control_replay: { method: 'POST', path: '/api/replays/{id}/{action}', access: 'write', confirmed: false, file: false, refusal: false },
  export_replay_report: { method: 'GET', path: '/api/export/replays/{id}', access: 'read', confirmed: false, file: true, refusal: false },
  fix_and_replay_preview: { method: 'POST', path: '/api/dead-letters/fix-and-replay/preview', access: 'read', confirmed: false, file: false, refusal: false },
  fix_and_replay: { method: 'POST', path: '/api/dead-letters/fix-and-replay', access: 'write', confirmed: true, file: false, refusal: false },
  targets: { method: 'GET', path: '/api/targets', access: 'read', confirmed: false, file: false, refusal: false },
  pause_target: { method: 'POST', path: '/api/targets/{name}/pause', access: 'write', confirmed: false, file: false, refusal: false },
  resume_target: { method: 'POST', path: '/api/targets/{name}/resume', access: 'write', confirmed: false, file: false, refusal: false },
  target_preview: { method: 'GET', path: '/api/targets/{name}/preview', access: 'read', confirmed: false, file: false, refusal: false },
  check_target: { method: 'POST', path: '/api/targets/{name}/check', access: 'read', confirmed: false, file: false, refusal: false },
  reload_secrets: { method: 'POST', path: '/api/secrets/reload', access: 'write', confirmed: false, file: false, refusal: false },
  settings: { method: 'GET', path: '/api/settings', access: 'read', confirmed: false, file: false, refusal: false },
  save_settings: { method: 'PUT', path: '/api/settings', access: 'write', confirmed: false, file: false, refusal: true },
  store_secret: { method: 'POST', path: '/api/settings/secret', access: 'write', confirmed: false, file: false, refusal: false },
};

/** Each operation's example arguments, and the request Leadline's router answers for them (backend-http.test.ts
* checks that the client builds the same). */
export const EXAMPLES: {
  readonly [N in OperationName]: {
    args: Record<string, unknown>;
    request: { method: string; path: string; body: unknown };
  };
} = {
  session: {
    args: {},
    request: { method: 'GET', path: "/api/session", body: null },
  },
  health: {
    args: {},
    request: { method: 'GET', path: "/api/health", body: null },
  },
  metrics: {
    args: {"range":"1h"},
    request: { method: 'GET', path: "/api/metrics?range=1h", body: null },
  },
  figures: {
    args: {"range":"24h"},
    request: { method: 'GET', path: "/api/figures?range=24h", body: null },
  },
  contact_speed: {
    args: {"range":"24h"},
    request: { method: 'GET', path: "/api/contact-speed?range=24h", body: null },
  },
  sources: {
    args: {},
    request: { method: 'GET', path: "/api/sources", body: null },
  },
  reveal_source_key: {
    args: {"source":"google"},
    request: { method: 'POST', path: "/api/sources/google/key", body: null },
  },
  reconcile_now: {
    args: {"source":"meta"},
    request: { method: 'POST', path: "/api/sources/meta/reconcile", body: null },
  },
  alerts: {
    args: {},
    request: { method: 'GET', path: "/api/alerts", body: null },
  },
  acknowledge_alert: {
    args: {"id":1},
    request: { method: 'POST', path: "/api/alerts/1/acknowledge", body: null },
  },
  alert_channels: {
    args: {},
    request: { method: 'GET', path: "/api/alert-channels", body: null },
  },
  dead_letters: {
    args: {"target":"crm"},
    request: { method: 'GET', path: "/api/dead-letters?target=crm", body: null },
  },
  dead_letter_groups: {
    args: {"target":"crm"},
    request: { method: 'GET', path: "/api/dead-letters/groups?target=crm", body: null },
  },
  dead_letter: {
    args: {"id":1},
    request: { method: 'GET', path: "/api/dead-letters/1", body: null },
  },
  reveal_dead_letter: {
    args: {"id":1,"reason":"the customer asked what we received"},
    request: { method: 'POST', path: "/api/dead-letters/1/reveal", body: {"reason":"the customer asked what we received"} },
  },
  edit_dead_letter: {
    args: {"id":3,"payload":{"email":"ada@example.com","id":"P-3","name":"Ada Lovelace"},"reason":"the e-mail address had a typo"},
    request: { method: 'POST', path: "/api/dead-letters/3/edit", body: {"payload":{"email":"ada@example.com","id":"P-3","name":"Ada Lovelace"},"reason":"the e-mail address had a typo"} },
  },
  answer_contact_doubt: {
    args: {"arrived":true,"id":1,"note":"the lead confirmed on the phone"},
    request: { method: 'POST', path: "/api/dead-letters/1/contact-doubt", body: {"arrived":true,"note":"the lead confirmed on the phone"} },
  },
  resolve_dead_letters: {
    args: {"expected":1,"note":"a test lead","resolution":"discarded","selection":{"ids":[2]}},
    request: { method: 'POST', path: "/api/dead-letters/resolve", body: {"expected":1,"note":"a test lead","resolution":"discarded","selection":{"ids":[2]}} },
  },
  fix_dead_letters: {
    args: {"dry_run":false,"fix":{"field":"company","op":"set","value":"Analytical Engines"},"reason":"the CRM requires a company","selection":{"ids":[3]}},
    request: { method: 'POST', path: "/api/dead-letters/fix", body: {"dry_run":false,"fix":{"field":"company","op":"set","value":"Analytical Engines"},"reason":"the CRM requires a company","selection":{"ids":[3]}} },
  },
  export_dead_letters: {
    args: {"target":"crm"},
    request: { method: 'GET', path: "/api/export/dead-letters?target=crm", body: null },
  },
  find_leads: {
    args: {"q":"example.com"},
    request: { method: 'GET', path: "/api/leads?q=example.com", body: null },
  },
  lead_story: {
    args: {"id":1},
    request: { method: 'GET', path: "/api/leads/1", body: null },
  },
  reveal_lead: {
    args: {"id":1,"reason":"the customer asked what we received"},
    request: { method: 'POST', path: "/api/leads/1/reveal", body: {"reason":"the customer asked what we received"} },
  },
  missing_data_counts: {
    args: {},
    request: { method: 'GET', path: "/api/missing-data/counts", body: null },
  },
  missing_data: {
    args: {},
    request: { method: 'GET', path: "/api/missing-data", body: null },
  },
  correct_missing_data: {
    args: {"fix":{"country_code":"+49","field":"phone","op":"normalize_phone"},"id":1,"reason":"the customer confirmed the number"},
    request: { method: 'POST', path: "/api/missing-data/1/correct", body: {"fix":{"country_code":"+49","field":"phone","op":"normalize_phone"},"reason":"the customer confirmed the number"} },
  },
  close_missing_task: {
    args: {"id":1},
    request: { method: 'POST', path: "/api/missing-data/1/close", body: null },
  },
  export_missing_data: {
    args: {},
    request: { method: 'GET', path: "/api/export/missing-data", body: null },
  },
  replay_preview: {
    args: {"ids":[1]},
    request: { method: 'POST', path: "/api/replays/preview", body: {"ids":[1]} },
  },
  replay: {
    args: {"expected":1,"reason":"the CRM accepts it again","selection":{"ids":[1]}},
    request: { method: 'POST', path: "/api/replays", body: {"expected":1,"reason":"the CRM accepts it again","selection":{"ids":[1]}} },
  },
  replays: {
    args: {},
    request: { method: 'GET', path: "/api/replays", body: null },
  },
  replay_progress: {
    args: {"id":1},
    request: { method: 'GET', path: "/api/replays/1", body: null },
  },
  replay_report: {
    args: {"id":1,"outcome":"delivered"},
    request: { method: 'GET', path: "/api/replays/1/report?outcome=delivered", body: null },
  },
  control_replay: {
    args: {"action":"pause","id":1},
    request: { method: 'POST', path: "/api/replays/1/pause", body: null },
  },
  export_replay_report: {
    args: {"id":1},
    request: { method: 'GET', path: "/api/export/replays/1", body: null },
  },
  fix_and_replay_preview: {
    args: {"fix":{"field":"name","op":"set","value":"Ada King"},"selection":{"ids":[4]}},
    request: { method: 'POST', path: "/api/dead-letters/fix-and-replay/preview", body: {"fix":{"field":"name","op":"set","value":"Ada King"},"selection":{"ids":[4]}} },
  },
  fix_and_replay: {
    args: {"expected_changed":1,"fix":{"field":"name","op":"set","value":"Ada King"},"reason":"the CRM wants the full name","selection":{"ids":[4]}},
    request: { method: 'POST', path: "/api/dead-letters/fix-and-replay", body: {"expected_changed":1,"fix":{"field":"name","op":"set","value":"Ada King"},"reason":"the CRM wants the full name","selection":{"ids":[4]}} },
  },
  targets: {
    args: {},
    request: { method: 'GET', path: "/api/targets", body: null },
  },
  pause_target: {
    args: {"name":"crm"},
    request: { method: 'POST', path: "/api/targets/crm/pause", body: null },
  },
  resume_target: {
    args: {"name":"crm"},
    request: { method: 'POST', path: "/api/targets/crm/resume", body: null },
  },
  target_preview: {
    args: {"lead":"plain:P-1","name":"crm"},
    request: { method: 'GET', path: "/api/targets/crm/preview?lead=plain%3AP-1", body: null },
  },
  check_target: {
    args: {"name":"crm"},
    request: { method: 'POST', path: "/api/targets/crm/check", body: null },
  },
  reload_secrets: {
    args: {},
    request: { method: 'POST', path: "/api/secrets/reload", body: null },
  },
  settings: {
    args: {},
    request: { method: 'GET', path: "/api/settings", body: null },
  },
  save_settings: {
    args: {"changes":[{"path":"targets.crm.timeout_ms","value":800}]},
    request: { method: 'PUT', path: "/api/settings", body: {"changes":[{"path":"targets.crm.timeout_ms","value":800}]} },
  },
  store_secret: {
    args: {"value":"pat-na1-example","variable":"HUBSPOT_TOKEN"},
    request: { method: 'POST', path: "/api/settings/secret", body: {"value":"pat-na1-example","variable":"HUBSPOT_TOKEN"} },
  },
};
