// The UI talks to Leadline through this interface. Two implementations: Tauri commands and events in the
// desktop app, fetch + Server-Sent Events against `leadline serve` in a browser. The same built UI runs in both.

import type {
  Place,
  FieldFix,
  FixAndReplayPreview,
  FixAndReplayReceipt,
  FixAndReplayRequest,
  Alert,
  ChannelView,
  ConnectionCheck,
  SecretReload,
  RequestPreview,
  DeadLetterGroup,
  EditRequest,
  RevealRequest,
  FixReport,
  FixRequest,
  ReplayOptions,
  ReplayReportItem,
  ResolveRequest,
  DeadLetterFilter,
  DeliveryFigures,
  DeadLetterList,
  DeadLetterView,
  LeadSearch,
  LeadStory,
  HealthView,
  LiveEvent,
  MetricSeries,
  ReplayPreview,
  ReplayProgress,
  ReplayReceipt,
  ReplaySelection,
  ReconciliationRun,
  Session,
  DeskView,
  SourceView,
  TargetView,
  Change,
  SaveOutcome,
  SecretStored,
  SettingsView,
} from './api/wire';

/** A failed call, with the API's machine-readable code. The UI branches on `code`, never on text. */
export class ApiFailure extends Error {
  constructor(
    public readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export interface Backend {
  readonly kind: 'desktop' | 'browser';
  /** The desktop app asks for confirmation itself, in a native dialog; the browser UI shows its own. */
  readonly confirmsNatively: boolean;
  session(): Promise<Session>;
  health(): Promise<HealthView>;
  metrics(range: string): Promise<MetricSeries>;
  deadLetters(filter: DeadLetterFilter): Promise<DeadLetterList>;
  deadLetter(id: number): Promise<DeadLetterView>;
  /** Saves the dead letters of the filter as CSV (a native save dialog in the desktop app, a download in the
   * browser): where it went, or `null` when the person cancelled. */
  exportDeadLetters(filter: DeadLetterFilter): Promise<string | null>;
  /** Saves a replay's whole report as CSV, like `exportDeadLetters`. */
  exportReplayReport(id: number): Promise<string | null>;
  deadLetterGroups(filter: DeadLetterFilter): Promise<DeadLetterGroup[]>;
  previewReplay(selection: ReplaySelection): Promise<ReplayPreview>;
  /** Starts a replay of the selection. `expected` is the preview's count (the browser path checks it on the
   * server; the desktop app asks in a native dialog and checks it there). */
  replay(selection: ReplaySelection, reason: string, expected: number, options: ReplayOptions): Promise<ReplayReceipt>;
  replayProgress(id: number): Promise<ReplayProgress>;
  replays(): Promise<ReplayProgress[]>;
  replayReport(id: number, outcome: string | null): Promise<ReplayReportItem[]>;
  controlReplay(id: number, action: 'pause' | 'resume' | 'cancel'): Promise<ReplayProgress>;
  /** Discards dead letters or marks them fixed by hand (the desktop app confirms natively). */
  resolveDeadLetters(request: ResolveRequest): Promise<number>;
  /** Applies (or with `dry_run` previews) a field fix to the selection. */
  fixDeadLetters(request: FixRequest): Promise<FixReport>;
  /** What a fix would change (before/after samples) and the replay of the leads it changes. */
  fixAndReplayPreview(selection: ReplaySelection, fix: FieldFix): Promise<FixAndReplayPreview>;
  /** Fixes, then replays exactly the leads the fix changed: one act, one reason, one confirmation (native in the
   * desktop app; in the browser the page confirms and the server checks `expected_changed`). */
  fixAndReplay(request: FixAndReplayRequest): Promise<FixAndReplayReceipt>;
  editDeadLetter(id: number, request: EditRequest): Promise<DeadLetterView>;
  /** The dead letter with its personal data unmasked; the reason goes to the audit. */
  revealDeadLetter(id: number, request: RevealRequest): Promise<DeadLetterView>;
  /** Any lead (delivered, waiting or a dead letter) by e-mail, phone (or part of it), name, source id, CRM id or
   * lead id: the newest 50. */
  findLeads(q: string): Promise<LeadSearch>;
  /** A lead's whole story, personal data masked. */
  leadStory(id: number): Promise<LeadStory>;
  /** The lead's story with its personal data unmasked; the reason goes to the audit (as a dead letter's reveal). */
  revealLead(id: number, request: RevealRequest): Promise<LeadStory>;
  alerts(): Promise<Alert[]>;
  acknowledgeAlert(id: number): Promise<Alert>;
  /** The alert channels besides the desktop (Slack, e-mail, webhooks) and how each fares. */
  alertChannels(): Promise<ChannelView[]>;
  sources(): Promise<SourceView[]>;
  /** Compares a source with its own list of leads now and ingests what is missing. */
  reconcileNow(source: string): Promise<ReconciliationRun>;
  figures(range: string): Promise<DeliveryFigures>;
  targets(): Promise<TargetView[]>;
  setTargetPaused(name: string, paused: boolean): Promise<TargetView>;
  /** The exact request a target would send for a stored lead (`source:id`); nothing is sent. */
  targetPreview(name: string, lead: string): Promise<RequestPreview>;
  /** One harmless authenticated request to the target, answered in plain words. */
  checkTarget(name: string): Promise<ConnectionCheck>;
  /** Reads every target's credentials again (secrets file, environment): no restart. */
  reloadSecrets(): Promise<SecretReload[]>;
  /** Desktop app only (absent in a browser): whether Leadline starts at login, hidden in the tray. */
  autostart?(): Promise<boolean>;
  setAutostart?(enabled: boolean): Promise<boolean>;
  /** Desktop app only: whether a system tray shows Leadline's icon (without one, Settings is where to quit). */
  trayShown?(): Promise<boolean>;
  /** Desktop app only: asks natively whether to quit; `true` when the person said yes and Leadline is ending. */
  quitApp?(): Promise<boolean>;
  /** Desktop app only: a clicked notification asks to show what it is about. Returns an unsubscribe function. */
  onOpenPlace?(open: (place: Place) => void): () => void;
  /** The configuration in force, as the settings page edits it (secrets only as where they are found). */
  settings(): Promise<SettingsView>;
  /** Writes the changes into the configuration file (comments kept) and puts them in force without a restart;
   * a refusal comes back as `saved: false` with the fields at fault, and nothing is written. */
  saveSettings(changes: Change[]): Promise<SaveOutcome>;
  /** Keeps a secret for a variable the configuration names in the OS keyring (never the file). */
  storeSecret(variable: string, value: string): Promise<SecretStored>;
  /** Live events; returns an unsubscribe function. `onConnection` hears when the feed is up or lost (it is then
   * retried), and `refused` (why, in words) when the server refuses this session's credential: the feed stops. */
  subscribe(onEvent: (e: LiveEvent) => void, onConnection?: (up: boolean, refused?: string) => void): () => void;
}

export function isTauri(): boolean {
  return typeof window !== 'undefined' && '__TAURI_INTERNALS__' in window;
}

/** The backend for how this window runs: a desk of a team server (`desk.mode === 'team'`), the desktop app running
 * Leadline itself, or a browser against the server that served the page. */
export async function createBackend(desk: DeskView | null = null): Promise<Backend> {
  if (isTauri() && desk?.mode === 'team' && desk.server) {
    const { DeskBackend } = await import('./backend-desk');
    return new DeskBackend(desk.server);
  }
  if (isTauri()) {
    const { TauriBackend } = await import('./backend-tauri');
    return new TauriBackend();
  }
  const { HttpBackend } = await import('./backend-http');
  return new HttpBackend(window.location.origin);
}
