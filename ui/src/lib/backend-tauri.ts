// Desktop mode: every operation is a Tauri command of its name, its arguments the operation's (the window sends it
// on to Leadline's engine, which runs it with the same dispatcher as the HTTP API); and the `live` event.

import { invoke } from '@tauri-apps/api/core';
import { listen } from '@tauri-apps/api/event';
import { ApiFailure, type AnswerOf, type ArgsParam, type Backend } from './backend';
import type { OperationName } from './api/operations';
import type { LiveEvent, Place } from './api/wire';

/** Invokes a command; a refusal becomes an `ApiFailure` with the API's code (also used by the desk backend). */
export async function command<T>(name: string, args?: Record<string, unknown>): Promise<T> {
  try {
    return await invoke<T>(name, args);
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

  // A confirmed operation is asked in a native dialog by the engine first; an export's file is saved by the window.
  call<N extends OperationName>(name: N, ...args: ArgsParam<N>): Promise<AnswerOf<N>> {
    return command<AnswerOf<N>>(name, (args[0] ?? {}) as Record<string, unknown>);
  }
  autostart() {
    return command<boolean>('autostart');
  }
  setAutostart(enabled: boolean) {
    return command<boolean>('set_autostart', { enabled });
  }
  trayShown() {
    return command<boolean>('tray_shown');
  }
  quitApp() {
    return command<boolean>('quit_app');
  }
  onOpenPlace(open: (place: Place) => void): () => void {
    // A window made anew for a clicked notification (a closed window is released, not hidden): its place waits in
    // the app until this page listens, then is taken once.
    return on<Place>('open-place', open, () => {
      command<Place | null>('take_place')
        .then((p) => p && open(p))
        .catch(() => undefined);
    });
  }

  subscribe(onEvent: (e: LiveEvent) => void, onConnection?: (up: boolean) => void): () => void {
    return on<LiveEvent>('live', onEvent, () => onConnection?.(true));
  }
}
