// A desk of a team server: the desktop app connected to a `leadline serve` elsewhere. The calls are the browser
// mode's (the same HTTP API), sent through the desktop app, which holds the operator's token (kept in the OS
// keyring; it never enters this page) and follows the server's live feed, passed here as the same `live` events
// the local app emits, with `desk-connection` saying when the server is lost and found again.

import { ApiFailure } from './backend';
import { HttpBackend, type Method } from './backend-http';
import { TauriBackend, command, on } from './backend-tauri';
import type { DeskAnswer, DeskView, LiveEvent, Place } from './api/wire';

/** How this computer's app runs (`choose` on a first start). */
export function deskView() {
  return command<DeskView>('desk_view');
}
/** First start: run Leadline here, for one person. */
export function chooseHere() {
  return command<DeskView>('choose_here');
}
/** First start: be a desk of the team server at `server`, with the operator's token (checked on the server first). */
export function connectTeam(server: string, token: string) {
  return command<DeskView>('connect_team', { server, token });
}
/** Disconnects from the team server (asked natively), forgets the token and restarts the app. */
export function leaveTeam() {
  return command<null>('leave_team');
}

export class DeskBackend extends HttpBackend {
  override readonly kind = 'desktop' as const;
  private readonly local = new TauriBackend();

  constructor(readonly server: string) {
    super(server);
  }

  protected override async send(method: Method, path: string, body?: unknown) {
    let answer: DeskAnswer;
    try {
      answer = await command<DeskAnswer>('desk_call', { method, path, body: body ?? null });
    } catch (e) {
      // The server did not answer (down, no network): the same code as a browser's failed fetch.
      throw new ApiFailure('network', e instanceof Error ? e.message : String(e));
    }
    return { status: answer.status, text: answer.body };
  }

  protected override download(path: string) {
    return command<string | null>('desk_export', { path });
  }

  autostart() {
    return this.local.autostart();
  }
  setAutostart(enabled: boolean) {
    return this.local.setAutostart(enabled);
  }
  trayShown() {
    return this.local.trayShown();
  }
  quitApp() {
    return this.local.quitApp();
  }
  onOpenPlace(open: (place: Place) => void) {
    return this.local.onOpenPlace(open);
  }

  override subscribe(onEvent: (e: LiveEvent) => void, onConnection?: (up: boolean, refused?: string) => void): () => void {
    const said = (up: boolean, refused: string | null | undefined) =>
      onConnection?.(
        up,
        refused
          ? `The team server no longer accepts this desk's token: it was revoked or replaced. ` +
              `Ask its administrator for a new one (\`leadline token create YOUR-NAME\`), then disconnect and connect again with it.`
          : undefined,
      );
    const stopLive = on<LiveEvent>('live', onEvent);
    // The feed may have been found (or lost) before this page listened: ask once how it stands.
    const stopState = on<{ up: boolean; refused: string | null }>(
      'desk-connection',
      (c) => said(c.up, c.refused),
      () => deskView().then((v) => v.feed_up !== null && said(v.feed_up, v.refused)),
    );
    return () => {
      stopLive();
      stopState();
    };
  }
}
