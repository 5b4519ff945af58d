import { describe, expect, it } from 'vitest';
import { parseHash, viewHash } from './state.svelte';

describe('routes', () => {
  it('round-trips views through the address', () => {
    for (const h of ['#/overview', '#/dead-letters', '#/dead-letters/42', '#/alerts', '#/targets']) {
      expect(viewHash(parseHash(h))).toBe(h);
    }
  });
  it('falls back to the overview', () => {
    expect(parseHash('')).toEqual({ page: 'overview' });
    expect(parseHash('#/nonsense')).toEqual({ page: 'overview' });
    expect(parseHash('#/dead-letters/abc')).toEqual({ page: 'dead-letters' });
  });
});
