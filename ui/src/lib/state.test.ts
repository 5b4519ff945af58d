import { describe, expect, it } from 'vitest';
import { parseHash, placeLabel, placeView, viewHash } from './state.svelte';

describe('routes', () => {
  it('round-trips views through the address', () => {
    for (const h of [
      '#/overview',
      '#/dead-letters',
      '#/dead-letters/42',
      '#/dead-letters?target=crm&cause=Property+values+were+not+valid%3A+phone+%22%E2%80%A6%22',
      '#/alerts',
      '#/targets',
      '#/targets/crm',
      '#/sources/partner_api',
      '#/glossary',
      '#/leads',
      '#/leads/7',
      '#/leads?q=eve1%40example.com',
      '#/leads/7?q=0151+234',
    ]) {
      expect(viewHash(parseHash(h))).toBe(h);
    }
  });
  it('falls back to the overview', () => {
    expect(parseHash('')).toEqual({ page: 'overview' });
    expect(parseHash('#/nonsense')).toEqual({ page: 'overview' });
    expect(parseHash('#/dead-letters/abc')).toEqual({ page: 'dead-letters' });
    expect(parseHash('#/leads/abc')).toEqual({ page: 'leads' });
  });
  it('reads a lead search and a lead from the address', () => {
    expect(parseHash('#/leads/7?q=eve1%40example.com')).toEqual({ page: 'leads', id: 7, q: 'eve1@example.com' });
    expect(viewHash({ page: 'leads', q: 'Ada Lovelace' })).toBe('#/leads?q=Ada+Lovelace');
  });
});

describe('places', () => {
  it('opens the thing an alert is about', () => {
    const group = { page: 'dead_letters', target: 'crm', source: null, cause: 'phone "…" is invalid' } as const;
    expect(placeView(group)).toEqual({ page: 'dead-letters', target: 'crm', cause: 'phone "…" is invalid' });
    expect(parseHash(viewHash(placeView(group)))).toEqual(placeView(group));
    expect(placeLabel(group)).toBe('Open the cause group');
    const target = { page: 'targets', target: 'crm', source: null, cause: null } as const;
    expect(placeView(target)).toEqual({ page: 'targets', target: 'crm' });
    expect(placeLabel(target)).toBe('Open crm on Targets');
    expect(placeView({ page: 'sources', target: null, source: 'partner_api', cause: null })).toEqual({ page: 'sources', source: 'partner_api' });
    expect(placeView({ page: 'targets', target: null, source: null, cause: null })).toEqual({ page: 'targets' });
  });
});
