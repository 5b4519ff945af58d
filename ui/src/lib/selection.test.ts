import { describe, expect, it } from 'vitest';
import { pinned } from './selection';
import type { DeadLetterFilter } from './api/wire';

const filter = (until: string | null): DeadLetterFilter => ({
  class: 'permanent_data',
  source: null,
  target: 'crm',
  since: null,
  until,
  text: null,
  http_status: null,
  cause: 'abc',
  lead_field: null,
  lead_value: null,
  resolution: null,
  limit: null,
  before_id: null,
});

describe('pinned', () => {
  const asOf = '2026-12-03T10:00:00.123Z';
  it('ends a filter at the preview', () => {
    expect(pinned({ ids: null, filter: filter(null) }, asOf).filter?.until).toBe(asOf);
  });
  it('keeps an earlier end the person chose', () => {
    expect(pinned({ ids: null, filter: filter('2026-12-01T00:00:00Z') }, asOf).filter?.until).toBe('2026-12-01T00:00:00Z');
  });
  it('does not let a later end reach past the preview', () => {
    expect(pinned({ ids: null, filter: filter('2027-01-01T00:00:00Z') }, asOf).filter?.until).toBe(asOf);
  });
  it('leaves the rest of the filter as it was', () => {
    const p = pinned({ ids: null, filter: filter(null) }, asOf);
    expect({ ...p.filter, until: null }).toEqual(filter(null));
  });
  it('leaves explicit ids alone', () => {
    const ids = { ids: [3, 4], filter: null };
    expect(pinned(ids, asOf)).toEqual(ids);
  });
});
