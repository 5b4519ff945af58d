// Desktop mode: Tauri commands over the shared `api` layer, and the `live` event.

import { invoke } from '@tauri-apps/api/core';
import { listen } from '@tauri-apps/api/event';
import { ApiFailure, type Backend } from './backend';
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
  SourceView,
  TargetView,
  Change,
  SaveOutcome,
  SecretStored,
  SettingsView,
} from './api/wire';

/** Invokes a command; a refusal becomes an `ApiFailure` with the API's code (also used by the desk backend). */
export async function call<T>(command: string, args?: Record<string, unknown>): Promise<T> {
  try {
    return await invoke<T>(command, args);
  } catch (e) {
    const err = e as { code?: string; message?: string } | string;
    if (typeof err === 'object' && err && err.code) throw new ApiFailure(err.code, err.message ?? err.code);
    throw new ApiFailure('internal', String(err));
  }
}

/** Listens to a Tauri event until the returned function is called; `ready` once listening. */
export function on<T>(event: string, handler: (payload: T) => void, ready?: () => void): () => void {
  let stop: (() => void) | null = null;
  let closed = false;
  listen<T>(event, (e) => handler(e.payload)).then((unlisten) => {
    if (closed) unlisten();
    else {
      stop = unlisten;
      ready?.();
    }
  });
  return () => {
    closed = true;
    stop?.();
  };
}

export class TauriBackend implements Backend {
  readonly kind = 'desktop' as const;
  readonly confirmsNatively = true;

  session() {
    return call<Session>('session');
  }
  health() {
    return call<HealthView>('health');
  }
  metrics(range: string) {
    return call<MetricSeries>('metrics', { range });
  }
  deadLetters(filter: DeadLetterFilter) {
    return call<DeadLetterList>('dead_letters', { filter });
  }
  exportDeadLetters(filter: DeadLetterFilter) {
    return call<string | null>('export_dead_letters', { filter });
  }
  exportReplayReport(id: number) {
    return call<string | null>('export_replay_report', { id });
  }
  deadLetter(id: number) {
    return call<DeadLetterView>('dead_letter', { id });
  }
  deadLetterGroups(filter: DeadLetterFilter) {
    return call<DeadLetterGroup[]>('dead_letter_groups', { filter });
  }
  findLeads(q: string) {
    return call<LeadSearch>('find_leads', { q });
  }
  leadStory(id: number) {
    return call<LeadStory>('lead_story', { id });
  }
  revealLead(id: number, request: RevealRequest) {
    return call<LeadStory>('reveal_lead', { id, request });
  }
  previewReplay(selection: ReplaySelection) {
    return call<ReplayPreview>('replay_preview', { selection });
  }
  // The native dialog in the Rust command is the confirmation; `expected` is re-derived there from a fresh preview.
  replay(selection: ReplaySelection, reason: string, _expected: number, options: ReplayOptions) {
    return call<ReplayReceipt>('replay', { selection, reason, options });
  }
  replayProgress(id: number) {
    return call<ReplayProgress>('replay_progress', { id });
  }
  replays() {
    return call<ReplayProgress[]>('replays');
  }
  replayReport(id: number, outcome: string | null) {
    return call<ReplayReportItem[]>('replay_report', { id, outcome });
  }
  controlReplay(id: number, action: 'pause' | 'resume' | 'cancel') {
    return call<ReplayProgress>('control_replay', { id, action });
  }
  resolveDeadLetters(request: ResolveRequest) {
    return call<number>('resolve_dead_letters', { request });
  }
  fixDeadLetters(request: FixRequest) {
    return call<FixReport>('fix_dead_letters', { request });
  }
  fixAndReplayPreview(selection: ReplaySelection, fix: FieldFix) {
    return call<FixAndReplayPreview>('fix_and_replay_preview', { selection, fix });
  }
  fixAndReplay(request: FixAndReplayRequest) {
    return call<FixAndReplayReceipt>('fix_and_replay', { request });
  }
  editDeadLetter(id: number, request: EditRequest) {
    return call<DeadLetterView>('edit_dead_letter', { id, request });
  }
  revealDeadLetter(id: number, request: RevealRequest) {
    return call<DeadLetterView>('reveal_dead_letter', { id, request });
  }
  alerts() {
    return call<Alert[]>('alerts');
  }
  acknowledgeAlert(id: number) {
    return call<Alert>('acknowledge_alert', { id });
  }
  alertChannels() {
    return call<ChannelView[]>('alert_channels');
  }
  sources() {
    return call<SourceView[]>('sources');
  }
  reconcileNow(source: string) {
    return call<ReconciliationRun>('reconcile_now', { source });
  }
  figures(range: string) {
    return call<DeliveryFigures>('figures', { range });
  }
  targets() {
    return call<TargetView[]>('targets');
  }
  setTargetPaused(name: string, paused: boolean) {
    return call<TargetView>('set_target_paused', { name, paused });
  }
  targetPreview(name: string, lead: string) {
    return call<RequestPreview>('target_preview', { name, lead });
  }
  checkTarget(name: string) {
    return call<ConnectionCheck>('check_target', { name });
  }
  reloadSecrets() {
    return call<SecretReload[]>('reload_secrets');
  }
  autostart() {
    return call<boolean>('autostart');
  }
  setAutostart(enabled: boolean) {
    return call<boolean>('set_autostart', { enabled });
  }
  trayShown() {
    return call<boolean>('tray_shown');
  }
  quitApp() {
    return call<boolean>('quit_app');
  }
  onOpenPlace(open: (place: Place) => void): () => void {
    // A window made anew for a clicked notification (a closed window is released, not hidden): its place waits in
    // the app until this page listens, then is taken once.
    return on<Place>('open-place', open, () => {
      call<Place | null>('take_place')
        .then((p) => p && open(p))
        .catch(() => undefined);
    });
  }
  settings() {
    return call<SettingsView>('settings');
  }
  saveSettings(changes: Change[]) {
    return call<SaveOutcome>('save_settings', { edit: { changes } });
  }
  storeSecret(variable: string, value: string) {
    return call<SecretStored>('store_secret', { entry: { variable, value } });
  }

  subscribe(onEvent: (e: LiveEvent) => void, onConnection?: (up: boolean) => void): () => void {
    return on<LiveEvent>('live', onEvent, () => onConnection?.(true));
  }
}
