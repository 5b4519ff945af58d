// Which transport this window uses: a desk of a team server (`desk.mode === 'team'`), the desktop app running
// Leadline itself, or a browser against the server that served the page.

import { isTauri, type Backend } from './backend';
import type { DeskView } from './api/wire';

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
