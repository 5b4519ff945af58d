// The UI talks to Leadline through this interface: one `call(name, args)` for every operation of the registry
// (`api/operations.ts`, generated from src-tauri/shells/api/operations.rs), over one of two transports — Tauri's
// `invoke` in the desktop app (backend-tauri.ts), `fetch` against `leadline serve` in a browser (backend-http.ts)
// or, for a desk of a team server, through the desktop app's `desk_call` (backend-desk.ts). The same built UI runs
// in all three; connect.ts picks one. This module imports no transport, so nothing imports in a circle.

import type { OperationName, Operations } from './api/operations';
import type { LiveEvent, Place } from './api/wire';

/** A failed call, with the API's machine-readable code. The UI branches on `code`, never on text. */
export class ApiFailure extends Error {
  constructor(
    public readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export type ArgsOf<N extends OperationName> = Operations[N]['args'];
export type AnswerOf<N extends OperationName> = Operations[N]['answer'];
/** An operation's arguments: optional when it takes none. */
export type ArgsParam<N extends OperationName> = {} extends ArgsOf<N> ? [args?: ArgsOf<N>] : [args: ArgsOf<N>];

export interface Backend {
  readonly kind: 'desktop' | 'browser';
  /** The desktop app asks for confirmation itself, in a native dialog; the browser UI shows its own and sends the
   * count it showed (`expected`), which the server checks. */
  readonly confirmsNatively: boolean;
  /** Runs an operation. An export saves its file (a native save dialog in the desktop app, a download in the
   * browser) and answers where it went, or `null` when the person cancelled. */
  call<N extends OperationName>(name: N, ...args: ArgsParam<N>): Promise<AnswerOf<N>>;
  /** Desktop app only (absent in a browser): whether Leadline starts at login, hidden in the tray. */
  autostart?(): Promise<boolean>;
  setAutostart?(enabled: boolean): Promise<boolean>;
  /** Desktop app only: whether a system tray shows Leadline's icon (without one, Settings is where to quit). */
  trayShown?(): Promise<boolean>;
  /** Desktop app only: asks natively whether to quit; `true` when the person said yes and Leadline is ending. */
  quitApp?(): Promise<boolean>;
  /** Desktop app only: a clicked notification asks to show what it is about. Returns an unsubscribe function. */
  onOpenPlace?(open: (place: Place) => void): () => void;
  /** Live events; returns an unsubscribe function. `onConnection` hears when the feed is up or lost (it is then
   * retried), and `refused` (why, in words) when the server refuses this session's credential: the feed stops. */
  subscribe(onEvent: (e: LiveEvent) => void, onConnection?: (up: boolean, refused?: string) => void): () => void;
}

export function isTauri(): boolean {
  return typeof window !== 'undefined' && '__TAURI_INTERNALS__' in window;
}
