// Application-wide reactive state: the backend, the session, live health, alerts, the current view.

import type { Backend } from './backend';
import type { Alert, HealthView, Session } from './api/wire';

export type View =
  | { page: 'overview' }
  | { page: 'dead-letters'; id?: number }
  | { page: 'sources' }
  | { page: 'alerts' }
  | { page: 'targets' };

export function parseHash(hash: string): View {
  const parts = hash.replace(/^#\/?/, '').split('/');
  switch (parts[0]) {
    case 'dead-letters': {
      const id = Number(parts[1]);
      return Number.isInteger(id) && id > 0 ? { page: 'dead-letters', id } : { page: 'dead-letters' };
    }
    case 'sources':
      return { page: 'sources' };
    case 'alerts':
      return { page: 'alerts' };
    case 'targets':
      return { page: 'targets' };
    default:
      return { page: 'overview' };
  }
}

export function viewHash(v: View): string {
  if (v.page === 'dead-letters' && v.id) return `#/dead-letters/${v.id}`;
  return `#/${v.page}`;
}

class AppState {
  backend = $state<Backend | null>(null);
  session = $state<Session | null>(null);
  health = $state<HealthView | null>(null);
  alerts = $state<Alert[]>([]);
  connected = $state(true);
  view = $state<View>({ page: 'overview' });
  /** Bumped on every live health change: pages refetch what depends on it. */
  tick = $state(0);
  replayTick = $state(0);
  /** Bumped when a reconciliation ran. */
  sourcesTick = $state(0);
  toast = $state<{ kind: 'ok' | 'bad'; text: string } | null>(null);

  get openAlerts(): number {
    return this.alerts.filter((a) => a.state === 'open').length;
  }

  showToast(kind: 'ok' | 'bad', text: string) {
    this.toast = { kind, text };
    const current = this.toast;
    setTimeout(() => {
      if (this.toast === current) this.toast = null;
    }, 6000);
  }
}

export const app = new AppState();
