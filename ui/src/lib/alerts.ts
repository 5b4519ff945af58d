// Alerts as a person triages them: the worst first, and where to act on each. Unit-tested in alerts.test.ts.

import type { Alert, Severity } from './api/wire';

const SEVERITY_RANK: Record<Severity, number> = { critical: 0, warning: 1, info: 2 };

/** Most severe first; within a severity, the longest-running first (it has waited longest for a person). */
export function sortAlerts(alerts: Alert[]): Alert[] {
  return [...alerts].sort(
    (a, b) => (SEVERITY_RANK[a.severity] ?? 3) - (SEVERITY_RANK[b.severity] ?? 3) || Date.parse(a.opened_at) - Date.parse(b.opened_at),
  );
}

/** The page where an alert of `kind` is acted on, and the button's words. */
export function alertPage(kind: string): { page: 'targets' | 'sources' | 'dead-letters'; label: string } | null {
  switch (kind) {
    case 'credentials':
    case 'permanent_config':
    case 'breaker_open':
    case 'retry_budget':
      return { page: 'targets', label: 'Open targets' };
    case 'silence':
    case 'volume_drop':
    case 'source_failing':
    case 'reconciliation_found':
      return { page: 'sources', label: 'Open sources' };
    case 'dead_letter_growth':
    case 'auto_replay':
    case 'new_cause':
      return { page: 'dead-letters', label: 'Open dead letters' };
    default:
      return null;
  }
}
