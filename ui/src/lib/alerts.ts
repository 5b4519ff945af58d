// Alerts as a person triages them: the worst first, and where to act on each. Unit-tested in alerts.test.ts.

import type { Alert, Severity } from './api/wire';

const SEVERITY_RANK: Record<Severity, number> = { critical: 0, warning: 1, info: 2 };

/** Most severe first; within a severity, the longest-running first (it has waited longest for a person). */
export function sortAlerts(alerts: Alert[]): Alert[] {
  return [...alerts].sort(
    (a, b) => (SEVERITY_RANK[a.severity] ?? 3) - (SEVERITY_RANK[b.severity] ?? 3) || Date.parse(a.opened_at) - Date.parse(b.opened_at),
  );
}
