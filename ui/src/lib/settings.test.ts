import { describe, expect, it } from 'vitest';
import { changesOf, draftOf, errorsAt, ruleDraft, ruleValue } from './settings';
import type { SettingsView } from './api/wire';

const view: SettingsView = {
  file: '/etc/leadline.toml',
  read_only: null,
  sources: [{ name: 'webform', kind: 'generic', id_field: 'id', route: ['crm'], require_signature: false, secrets: [] }],
  targets: [
    {
      name: 'crm',
      kind: 'hubspot',
      url: 'https://api.hubapi.com',
      strategy: null,
      mapping: [
        { to: 'email', from: '/fields/email', required: true },
        { to: 'phone', from: ['phone', '/fields/phone'], transform: ['trim'] },
        { to: 'lifecyclestage', constant: 'lead' },
      ],
      secrets: [{ path: 'targets.crm.auth.bearer_env', variable: 'HUBSPOT_TOKEN', found: 'environment' }],
    },
  ],
  alerts: [{ kind: 'silence', notify: 'immediate', renotify_minutes: 60, configured: false }],
  quiet_hours: null,
  quiet_hours_hold_critical: false,
  timezone: 'UTC',
  keyring: { available: false, message: 'no session bus' },
};

describe('settings changes', () => {
  it('an untouched draft changes nothing', () => {
    expect(changesOf(view, draftOf(view))).toEqual([]);
  });

  it('each edited field is one change at its path', () => {
    const d = draftOf(view);
    d.targets.crm!.url = ' https://api.hubapi.eu ';
    d.targets.crm!.vars['targets.crm.auth.bearer_env'] = 'HUBSPOT_EU_TOKEN';
    d.alerts.silence!.notify = 'digest';
    d.alerts.silence!.renotify = '';
    d.quiet.on = true;
    d.sources.webform!.route = 'crm, sms';
    expect(changesOf(view, d)).toEqual([
      { path: 'sources.webform.route', value: ['crm', 'sms'] },
      { path: 'targets.crm.url', value: 'https://api.hubapi.eu' },
      { path: 'targets.crm.auth.bearer_env', value: 'HUBSPOT_EU_TOKEN' },
      { path: 'monitor.alerts.silence', value: { notify: 'digest' } },
      { path: 'monitor.quiet_hours', value: { start: '22:00', end: '07:00' } },
    ]);
  });

  it('a mapping is sent whole, each rule as the file holds it, transforms kept', () => {
    const d = draftOf(view);
    d.targets.crm!.mapping[1]!.to = 'mobilephone';
    const change = changesOf(view, d)[0]!;
    expect(change.path).toBe('targets.crm.mapping');
    expect(change.value).toEqual([
      { to: 'email', from: '/fields/email', required: true },
      { to: 'mobilephone', from: ['phone', '/fields/phone'], transform: ['trim'] },
      { to: 'lifecyclestage', constant: 'lead' },
    ]);
  });

  it('a constant that was not text stays what it was', () => {
    expect(ruleValue(ruleDraft({ to: 'score', constant: 5 }))).toEqual({ to: 'score', constant: 5 });
  });

  it('a refused field is found at its path and inside it', () => {
    const errors = [
      { path: 'targets.crm.mapping[1].to', message: 'x' },
      { path: 'targets.crm.url', message: 'y' },
      { path: 'targets.crm2.url', message: 'z' },
    ];
    expect(errorsAt(errors, 'targets.crm.mapping').map((e) => e.message)).toEqual(['x']);
    expect(errorsAt(errors, 'targets.crm.url').map((e) => e.message)).toEqual(['y']);
  });
});
