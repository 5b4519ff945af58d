// Application-wide reactive state: the backend, the session, live health, alerts, the current view.

import type { Backend } from './backend';
import type { Alert, DeskView, HealthView, Place, Session } from './api/wire';

export type View =
  | { page: 'overview' }
  | { page: 'dead-letters'; id?: number; target?: string; cause?: string }
  | { page: 'leads'; id?: number; q?: string }
  | { page: 'sources'; source?: string }
  | { page: 'alerts' }
  | { page: 'targets'; target?: string }
  | { page: 'settings' }
  | { page: 'glossary' };

/**
 * Reads a view from the address: `#/dead-letters/42`, `#/dead-letters?target=crm&cause=…` (a cause group),
 * `#/targets/crm`, `#/sources/partner_api`, `#/leads?q=eve@example.com` (a search), `#/leads/7?q=…` (a lead's
 * story). Anything else is the overview.
 */
export function parseHash(hash: string): View {
  const [path = '', query = ''] = hash.replace(/^#\/?/, '').split('?', 2);
  const parts = path.split('/').map((p) => decodeURIComponent(p));
  const q = new URLSearchParams(query);
  switch (parts[0]) {
    case 'dead-letters': {
      const id = Number(parts[1]);
      if (Number.isInteger(id) && id > 0) return { page: 'dead-letters', id };
      const v: View = { page: 'dead-letters' };
      if (q.get('target')) v.target = q.get('target')!;
      if (q.get('cause')) v.cause = q.get('cause')!;
      return v;
    }
    case 'leads': {
      const v: View = { page: 'leads' };
      const id = Number(parts[1]);
      if (Number.isInteger(id) && id > 0) v.id = id;
      if (q.get('q')) v.q = q.get('q')!;
      return v;
    }
    case 'sources':
      return parts[1] ? { page: 'sources', source: parts[1] } : { page: 'sources' };
    case 'alerts':
      return { page: 'alerts' };
    case 'glossary':
      return { page: 'glossary' };
    case 'settings':
      return { page: 'settings' };
    case 'targets':
      return parts[1] ? { page: 'targets', target: parts[1] } : { page: 'targets' };
    default:
      return { page: 'overview' };
  }
}

export function viewHash(v: View): string {
  switch (v.page) {
    case 'dead-letters': {
      if (v.id) return `#/dead-letters/${v.id}`;
      const q = new URLSearchParams();
      if (v.target) q.set('target', v.target);
      if (v.cause) q.set('cause', v.cause);
      return q.size ? `#/dead-letters?${q}` : '#/dead-letters';
    }
    case 'leads': {
      const q = v.q ? `?${new URLSearchParams({ q: v.q })}` : '';
      return `${v.id ? `#/leads/${v.id}` : '#/leads'}${q}`;
    }
    case 'sources':
      return v.source ? `#/sources/${encodeURIComponent(v.source)}` : '#/sources';
    case 'targets':
      return v.target ? `#/targets/${encodeURIComponent(v.target)}` : '#/targets';
    default:
      return `#/${v.page}`;
  }
}

/** The view of a place the backend names (an alert's, the verdict's). */
export function placeView(p: Place): View {
  switch (p.page) {
    case 'dead_letters': {
      const v: View = { page: 'dead-letters' };
      if (p.target) v.target = p.target;
      if (p.cause) v.cause = p.cause;
      return v;
    }
    case 'targets':
      return p.target ? { page: 'targets', target: p.target } : { page: 'targets' };
    case 'sources':
      return p.source ? { page: 'sources', source: p.source } : { page: 'sources' };
    default:
      return { page: 'alerts' };
  }
}

/** The words of a link to a place: "Open crm on Targets", "Open the cause group". */
export function placeLabel(p: Place): string {
  switch (p.page) {
    case 'dead_letters':
      return p.cause ? 'Open the cause group' : p.target ? `Open ${p.target}'s dead letters` : 'Open dead letters';
    case 'targets':
      return p.target ? `Open ${p.target} on Targets` : 'Open targets';
    case 'sources':
      return p.source ? `Open ${p.source} on Sources` : 'Open sources';
    default:
      return 'Open alerts';
  }
}

class AppState {
  backend = $state<Backend | null>(null);
  session = $state<Session | null>(null);
  health = $state<HealthView | null>(null);
  alerts = $state<Alert[]>([]);
  connected = $state(true);
  /** When the connection was lost (what the window shows is from then), while it is lost. */
  lostAt = $state<Date | null>(null);
  /** The desktop app: how it runs (here, a desk of a team server, or still to choose); `null` in a browser. */
  desk = $state<DeskView | null>(null);
  /** Why the server refused this session's credential (a revoked token), once it did: nothing shown is live. */
  refused = $state<string | null>(null);
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
