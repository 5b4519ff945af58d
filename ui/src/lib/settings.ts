// The settings page's pure part: a draft made from the settings in force, the changes a draft makes (one per
// field, by its path in the configuration file), and the refused fields found by path.

import type { Change, FieldError, SettingsView } from './api/wire';

/** A mapping rule as the table edits it: `from` as text (several lead fields joined by commas). */
export type RuleDraft = {
  to: string;
  from: string;
  constant: string;
  required: boolean;
  /** The rest of the rule (transform, default), kept as it is. */
  rest: Record<string, unknown>;
  /** Whether `constant` was something other than text in the file (a number, true/false…): kept as JSON then. */
  constantJson: boolean;
};

export type Draft = {
  sources: Record<string, { route: string; id_field: string; require_signature: boolean; vars: Record<string, string> }>;
  targets: Record<string, { url: string; kind: string; strategy: string; mapping: RuleDraft[]; vars: Record<string, string> }>;
  alerts: Record<string, { notify: string; renotify: string }>;
  quiet: { on: boolean; start: string; end: string; holdCritical: boolean };
};

export function ruleDraft(raw: Record<string, unknown>): RuleDraft {
  const { to, from, constant, required, ...rest } = raw;
  return {
    to: typeof to === 'string' ? to : '',
    from: Array.isArray(from) ? from.join(', ') : typeof from === 'string' ? from : '',
    constant: constant === undefined || constant === null ? '' : typeof constant === 'string' ? constant : JSON.stringify(constant),
    constantJson: constant !== undefined && constant !== null && typeof constant !== 'string',
    required: required === true,
    rest,
  };
}

/** The rule as the file holds it. */
export function ruleValue(r: RuleDraft): Record<string, unknown> {
  const out: Record<string, unknown> = { to: r.to.trim() };
  const fields = r.from.split(',').map((f) => f.trim()).filter(Boolean);
  if (fields.length === 1) out.from = fields[0];
  else if (fields.length > 1) out.from = fields;
  if (r.constant !== '') {
    let value: unknown = r.constant;
    if (r.constantJson) {
      try {
        value = JSON.parse(r.constant);
      } catch {
        value = r.constant;
      }
    }
    out.constant = value;
  }
  Object.assign(out, r.rest);
  if (r.required) out.required = true;
  return out;
}

/** The field path of a secret's variable (`targets.crm.auth.bearer_env`) → its variable. */
function vars(fields: { path: string; variable: string }[]): Record<string, string> {
  return Object.fromEntries(fields.map((f) => [f.path, f.variable]));
}

export function draftOf(s: SettingsView): Draft {
  return {
    sources: Object.fromEntries(
      s.sources.map((x) => [x.name, { route: x.route.join(', '), id_field: x.id_field, require_signature: x.require_signature, vars: vars(x.secrets) }]),
    ),
    targets: Object.fromEntries(
      s.targets.map((t) => [
        t.name,
        { url: t.url, kind: t.kind, strategy: t.strategy ?? '', mapping: t.mapping.map(ruleDraft), vars: vars(t.secrets) },
      ]),
    ),
    alerts: Object.fromEntries(
      s.alerts.map((a) => [a.kind, { notify: a.notify, renotify: a.renotify_minutes === null ? '' : String(a.renotify_minutes) }]),
    ),
    quiet: {
      on: s.quiet_hours !== null,
      start: s.quiet_hours?.start ?? '22:00',
      end: s.quiet_hours?.end ?? '07:00',
      holdCritical: s.quiet_hours_hold_critical,
    },
  };
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/** A number typed into a field: the number, or the text as it is (the server names the field when it is not one). */
function numberOrText(v: string): unknown {
  const t = v.trim();
  return /^\d+$/.test(t) ? Number(t) : t;
}

/** The changes `draft` makes to the settings in force, one per field that differs. */
export function changesOf(s: SettingsView, draft: Draft): Change[] {
  const before = draftOf(s);
  const out: Change[] = [];
  const varChanges = (was: Record<string, string>, now: Record<string, string>) => {
    for (const [path, v] of Object.entries(now)) if (was[path] !== v) out.push({ path, value: v.trim() });
  };
  for (const [name, d] of Object.entries(draft.sources)) {
    const b = before.sources[name];
    if (!b) continue;
    const key = `sources.${name}`;
    if (b.route !== d.route) out.push({ path: `${key}.route`, value: d.route.split(',').map((t) => t.trim()).filter(Boolean) });
    if (b.id_field !== d.id_field) out.push({ path: `${key}.id_field`, value: d.id_field.trim() });
    if (b.require_signature !== d.require_signature) out.push({ path: `${key}.require_signature`, value: d.require_signature });
    varChanges(b.vars, d.vars);
  }
  for (const [name, d] of Object.entries(draft.targets)) {
    const b = before.targets[name];
    if (!b) continue;
    const key = `targets.${name}`;
    if (b.url !== d.url) out.push({ path: `${key}.url`, value: d.url.trim() });
    if (b.kind !== d.kind) out.push({ path: `${key}.kind`, value: d.kind });
    if (b.strategy !== d.strategy) out.push({ path: `${key}.strategy`, value: d.strategy === '' ? null : d.strategy });
    const rules = d.mapping.map(ruleValue);
    if (!same(b.mapping.map(ruleValue), rules)) out.push({ path: `${key}.mapping`, value: rules });
    varChanges(b.vars, d.vars);
  }
  for (const [kind, d] of Object.entries(draft.alerts)) {
    const b = before.alerts[kind];
    if (!b || (b.notify === d.notify && b.renotify === d.renotify)) continue;
    const policy: Record<string, unknown> = { notify: d.notify };
    if (d.renotify.trim() !== '') policy.renotify_minutes = numberOrText(d.renotify);
    out.push({ path: `monitor.alerts.${kind}`, value: policy });
  }
  const q = draft.quiet;
  const bq = before.quiet;
  if (q.on !== bq.on || (q.on && (q.start !== bq.start || q.end !== bq.end))) {
    out.push({ path: 'monitor.quiet_hours', value: q.on ? { start: q.start.trim(), end: q.end.trim() } : null });
  }
  if (q.holdCritical !== bq.holdCritical) out.push({ path: 'monitor.quiet_hours_hold_critical', value: q.holdCritical });
  return out;
}

/** The refused messages about `path` itself or anything inside it (`targets.crm.mapping` finds
 * `targets.crm.mapping[2].to`). */
export function errorsAt(errors: FieldError[], path: string): FieldError[] {
  return errors.filter((e) => e.path === path || e.path.startsWith(`${path}.`) || e.path.startsWith(`${path}[`));
}
