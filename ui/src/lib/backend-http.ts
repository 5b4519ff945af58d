// Browser mode: each operation is an HTTP request to `leadline serve` (its method and path from the registry,
// `api/operations.ts`), and the live feed is Server-Sent Events.

import { ApiFailure, type AnswerOf, type ArgsParam, type Backend } from './backend';
import { explainError } from './format';
import { OPERATIONS, type OperationName } from './api/operations';
import type { ErrorBody, LiveEvent } from './api/wire';

export type Method = 'GET' | 'POST' | 'PUT';

/** The request for an operation, as the server's router reads it (the same as `Operation::request` in Rust): the
 * path's `{name}` parameters filled in from the arguments; for a GET the others as the query, in the order of their
 * names (null and empty text left out); otherwise the others as the JSON body, or none when none is left. */
export function request(name: OperationName, args: object = {}): { method: Method; path: string; body?: unknown } {
  const op = OPERATIONS[name];
  const rest: Record<string, unknown> = { ...args };
  const path = op.path.replace(/\{(\w+)\}/g, (_, key: string) => {
    const value = rest[key];
    if (typeof value !== 'string' && typeof value !== 'number') throw new Error(`${name} needs \`${key}\` for its path`);
    delete rest[key];
    return encodeURIComponent(String(value));
  });
  if (op.method !== 'GET') return Object.keys(rest).length ? { method: op.method, path, body: rest } : { method: op.method, path };
  const query = new URLSearchParams();
  for (const key of Object.keys(rest).sort()) {
    const value = rest[key];
    if (value === null || value === undefined || value === '') continue;
    query.append(key, String(value));
  }
  const q = query.toString();
  return { method: op.method, path: q ? `${path}?${q}` : path };
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
  /** One request to the API: its status and body text. A desk of a team server sends it through the desktop
   * app instead (see backend-desk.ts), which holds the token. */
  protected async send(method: Method, path: string, body?: unknown): Promise<{ status: number; text: string }> {
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

  async call<N extends OperationName>(name: N, ...args: ArgsParam<N>): Promise<AnswerOf<N>> {
    const { method, path, body } = request(name, args[0] ?? {});
    if (OPERATIONS[name].file) return (await this.download(path)) as AnswerOf<N>;
    const { status, text } = await this.send(method, path, body);
    let json: unknown = null;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      throw new ApiFailure('internal', `Leadline answered HTTP ${status} with something that is not JSON`);
    }
    // 422 from an operation that may refuse (a settings save) carries the refused fields: an answer to show beside
    // them, not a failure.
    const refusal = status === 422 && OPERATIONS[name].refusal;
    if ((status < 200 || status > 299) && !refusal) {
      const err = json as Partial<ErrorBody> | null;
      throw new ApiFailure(err?.code ?? 'internal', err?.message ?? `HTTP ${status}`);
    }
    return json as AnswerOf<N>;
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
        this.call('session').then(
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
