// Browser mode: JSON over fetch and a Server-Sent-Events feed against `leadline serve`.

import { ApiFailure, type Backend } from './backend';
import { explainError, toQuery } from './format';
import type {
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
  ErrorBody,
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

/** A dead-letter filter as a query string (empty values left out). */
export function filterQuery(filter: DeadLetterFilter): string {
  return toQuery({
    class: filter.class,
    source: filter.source,
    target: filter.target,
    since: filter.since,
    until: filter.until,
    text: filter.text,
    http_status: filter.http_status,
    cause: filter.cause,
    lead_field: filter.lead_field,
    lead_value: filter.lead_value,
    resolution: filter.resolution,
    limit: filter.limit,
    before_id: filter.before_id,
  });
}

export class HttpBackend implements Backend {
  readonly kind: 'desktop' | 'browser' = 'browser';
  readonly confirmsNatively: boolean = false;
  // No token here: the first link (`/?token=…`) is answered by the server with an HttpOnly session cookie and a
  // redirect to the bare address, so the page never sees the token and keeps nothing in its storage. The browser
  // sends the cookie with every same-origin fetch and with the EventSource.
  constructor(protected readonly base: string) {
    // Earlier versions kept the token in localStorage: forget it.
    try {
      window.localStorage.removeItem('leadline.token');
    } catch {
      /* storage may be unavailable */
    }
  }

  /** Fetches a file (a CSV export) and hands it to the browser to save under the server's name for it. */
  protected async download(path: string): Promise<string | null> {
    let response: Response;
    try {
      response = await fetch(this.base + path, { credentials: 'same-origin' });
    } catch {
      throw new ApiFailure('network', 'Leadline is not answering');
    }
    if (!response.ok) {
      const err = (await response.json().catch(() => null)) as Partial<ErrorBody> | null;
      throw new ApiFailure(err?.code ?? 'internal', err?.message ?? `HTTP ${response.status}`);
    }
    const name = /filename="([^"]+)"/.exec(response.headers.get('content-disposition') ?? '')?.[1] ?? 'leadline-export.csv';
    const url = URL.createObjectURL(await response.blob());
    const a = document.createElement('a');
    a.href = url;
    a.download = name;
    a.click();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
    return name;
  }
  exportDeadLetters(filter: DeadLetterFilter) {
    return this.download(`/api/export/dead-letters${filterQuery(filter)}`);
  }
  exportReplayReport(id: number) {
    return this.download(`/api/export/replays/${id}`);
  }

  /** One request to the API: its status and body text. A desk of a team server sends it through the desktop
   * app instead (see backend-desk.ts), which holds the token. */
  protected async send(method: 'GET' | 'POST' | 'PUT', path: string, body?: unknown): Promise<{ status: number; text: string }> {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = 'application/json';
    let response: Response;
    try {
      response = await fetch(this.base + path, {
        method,
        credentials: 'same-origin',
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch {
      throw new ApiFailure('network', 'Leadline is not answering');
    }
    return { status: response.status, text: await response.text() };
  }

  private async call<T>(method: 'GET' | 'POST' | 'PUT', path: string, body?: unknown, accept: number[] = []): Promise<T> {
    const { status, text } = await this.send(method, path, body);
    let json: unknown = null;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      throw new ApiFailure('internal', `Leadline answered HTTP ${status} with something that is not JSON`);
    }
    if ((status < 200 || status > 299) && !accept.includes(status)) {
      const err = json as Partial<ErrorBody> | null;
      throw new ApiFailure(err?.code ?? 'internal', err?.message ?? `HTTP ${status}`);
    }
    return json as T;
  }

  session() {
    return this.call<Session>('GET', '/api/session');
  }
  health() {
    return this.call<HealthView>('GET', '/api/health');
  }
  metrics(range: string) {
    return this.call<MetricSeries>('GET', `/api/metrics${toQuery({ range })}`);
  }
  deadLetters(filter: DeadLetterFilter) {
    return this.call<DeadLetterList>('GET', `/api/dead-letters${filterQuery(filter)}`);
  }
  deadLetterGroups(filter: DeadLetterFilter) {
    return this.call<DeadLetterGroup[]>('GET', `/api/dead-letters/groups${filterQuery(filter)}`);
  }
  deadLetter(id: number) {
    return this.call<DeadLetterView>('GET', `/api/dead-letters/${id}`);
  }
  findLeads(q: string) {
    return this.call<LeadSearch>('GET', `/api/leads?${new URLSearchParams({ q })}`);
  }
  leadStory(id: number) {
    return this.call<LeadStory>('GET', `/api/leads/${id}`);
  }
  revealLead(id: number, request: RevealRequest) {
    return this.call<LeadStory>('POST', `/api/leads/${id}/reveal`, request);
  }
  previewReplay(selection: ReplaySelection) {
    return this.call<ReplayPreview>('POST', '/api/replays/preview', selection);
  }
  replay(selection: ReplaySelection, reason: string, expected: number, options: ReplayOptions) {
    return this.call<ReplayReceipt>('POST', '/api/replays', { selection, reason, expected, options });
  }
  replayProgress(id: number) {
    return this.call<ReplayProgress>('GET', `/api/replays/${id}`);
  }
  replays() {
    return this.call<ReplayProgress[]>('GET', '/api/replays');
  }
  replayReport(id: number, outcome: string | null) {
    return this.call<ReplayReportItem[]>('GET', `/api/replays/${id}/report${toQuery({ outcome })}`);
  }
  controlReplay(id: number, action: 'pause' | 'resume' | 'cancel') {
    return this.call<ReplayProgress>('POST', `/api/replays/${id}/${action}`);
  }
  resolveDeadLetters(request: ResolveRequest) {
    return this.call<number>('POST', '/api/dead-letters/resolve', request);
  }
  fixDeadLetters(request: FixRequest) {
    return this.call<FixReport>('POST', '/api/dead-letters/fix', request);
  }
  fixAndReplayPreview(selection: ReplaySelection, fix: FieldFix) {
    return this.call<FixAndReplayPreview>('POST', '/api/dead-letters/fix-and-replay/preview', { selection, fix });
  }
  fixAndReplay(request: FixAndReplayRequest) {
    return this.call<FixAndReplayReceipt>('POST', '/api/dead-letters/fix-and-replay', request);
  }
  editDeadLetter(id: number, request: EditRequest) {
    return this.call<DeadLetterView>('POST', `/api/dead-letters/${id}/edit`, request);
  }
  revealDeadLetter(id: number, request: RevealRequest) {
    return this.call<DeadLetterView>('POST', `/api/dead-letters/${id}/reveal`, request);
  }
  alerts() {
    return this.call<Alert[]>('GET', '/api/alerts');
  }
  acknowledgeAlert(id: number) {
    return this.call<Alert>('POST', `/api/alerts/${id}/acknowledge`);
  }
  alertChannels() {
    return this.call<ChannelView[]>('GET', '/api/alert-channels');
  }
  sources() {
    return this.call<SourceView[]>('GET', '/api/sources');
  }
  reconcileNow(source: string) {
    return this.call<ReconciliationRun>('POST', `/api/sources/${encodeURIComponent(source)}/reconcile`);
  }
  figures(range: string) {
    return this.call<DeliveryFigures>('GET', `/api/figures${toQuery({ range })}`);
  }
  targets() {
    return this.call<TargetView[]>('GET', '/api/targets');
  }
  setTargetPaused(name: string, paused: boolean) {
    return this.call<TargetView>('POST', `/api/targets/${encodeURIComponent(name)}/${paused ? 'pause' : 'resume'}`);
  }
  targetPreview(name: string, lead: string) {
    return this.call<RequestPreview>('GET', `/api/targets/${encodeURIComponent(name)}/preview?lead=${encodeURIComponent(lead)}`);
  }
  checkTarget(name: string) {
    return this.call<ConnectionCheck>('POST', `/api/targets/${encodeURIComponent(name)}/check`);
  }
  reloadSecrets() {
    return this.call<SecretReload[]>('POST', '/api/secrets/reload');
  }
  settings() {
    return this.call<SettingsView>('GET', '/api/settings');
  }
  saveSettings(changes: Change[]) {
    // 422 carries the refused fields: an answer to show beside them, not a failure.
    return this.call<SaveOutcome>('PUT', '/api/settings', { changes }, [422]);
  }
  storeSecret(variable: string, value: string) {
    return this.call<SecretStored>('POST', '/api/settings/secret', { variable, value });
  }

  subscribe(onEvent: (e: LiveEvent) => void, onConnection?: (up: boolean, refused?: string) => void): () => void {
    let source: EventSource | null = null;
    let retry: ReturnType<typeof setTimeout> | null = null;
    let stopped = false;
    const connect = () => {
      if (stopped) return;
      const feed = new EventSource(`${this.base}/api/events`);
      source = feed;
      feed.onopen = () => onConnection?.(true);
      feed.onmessage = (m) => {
        try {
          onEvent(JSON.parse(m.data) as LiveEvent);
        } catch {
          /* a malformed event is ignored; the next one carries the full state */
        }
      };
      feed.onerror = () => {
        onConnection?.(false);
        // The browser retries a dropped feed by itself; an answer that is not the feed (a 401 for a revoked
        // token, a 502 from a load balancer while the server restarts) closes it for good. Ask why: a refused
        // credential stops the feed and says so; anything else is tried again in a few seconds.
        if (feed.readyState !== EventSource.CLOSED) return;
        this.session().then(
          () => (retry = setTimeout(connect, 3000)),
          (e: unknown) => {
            if (e instanceof ApiFailure && e.code === 'unauthorized') onConnection?.(false, explainError(e.code, e.message));
            else retry = setTimeout(connect, 3000);
          },
        );
      };
    };
    connect();
    return () => {
      stopped = true;
      if (retry) clearTimeout(retry);
      source?.close();
    };
  }
}
