import { describe, expect, it } from 'vitest';
import type { Assessment, PollView, SourceStatus } from './api/wire';
import { formatTime, num } from './format';
import { clock, feedText, pollText, SOURCE_STATES, sourceStateText } from './sources';

const assessment: Assessment = {
  baseline: 'hour_of_week',
  window_minutes: 15,
  observed: 28,
  expected: 30.4,
  p_value: 0.6,
  drop: 'clear',
  silent_minutes: 0.3,
  expected_during_silence: 0.5,
  silent_since: '2026-11-30T09:59:40Z',
  silence: 'clear',
  heard_since_start: true,
  judged_from: null,
};
const status = (over: Partial<SourceStatus>, a: Partial<Assessment> = {}): SourceStatus => ({
  source: 'partner_api',
  state: 'normal',
  assessment: { ...assessment, ...a },
  last_event_at: '2026-11-30T09:59:40Z',
  expected_per_hour_now: 120,
  listening_since: '2026-11-30T09:30:00Z',
  ...over,
});

describe('sourceStateText', () => {
  it('gives every state a label and a help title', () => {
    for (const state of SOURCE_STATES) {
      const t = sourceStateText(status({ state }, { judged_from: '2026-11-30T10:06:00Z' }));
      expect(t.label, state).not.toBe('');
      expect(t.help.length, state).toBeGreaterThan(20);
    }
  });
  it('says since when a silent source has been silent, and what was expected', () => {
    const t = sourceStateText(status({ state: 'silent' }, { silent_since: '2026-11-30T09:14:00Z', expected_during_silence: 241.6, silence: 'raise' }));
    expect(t.level).toBe('bad');
    expect(t.label).toBe(`silent since ${clock('2026-11-30T09:14:00Z')}`);
    expect(t.label).toMatch(/^silent since \d{1,2}:\d{2}/);
    expect(t.help).toContain('about 242 were expected');
  });
  it('right after a start, says when the source will be judged and whether leads came', () => {
    const early = status({ state: 'listening', listening_since: '2026-11-30T10:00:00Z' }, { judged_from: '2026-11-30T10:06:00Z', p_value: null, heard_since_start: false });
    const t = sourceStateText(early);
    expect(t.label).toBe('listening — too early to judge');
    expect(t.volume).toBe(`judged from ${clock('2026-11-30T10:06:00Z')} · nothing since the start yet`);
    expect(t.help).toContain(`since ${clock('2026-11-30T10:00:00Z')}`);
    expect(sourceStateText({ ...early, assessment: { ...early.assessment, heard_since_start: true } }).volume).toContain('leads arriving');
  });
  it('shows the judged window and the usual count', () => {
    expect(sourceStateText(status({ state: 'drop' })).volume).toBe('28 in 15 min, about 30 usual');
  });
});

describe('polled sources', () => {
  const poll: PollView = {
    interval_seconds: 60,
    last_poll_at: '2026-11-30T10:41:03Z',
    next_poll_at: '2026-11-30T10:42:03Z',
    last_found: 3,
    last_error: null,
    polled_7d: 1204,
  };
  const now = new Date('2026-11-30T10:41:30Z');
  it('says it is polled rather than webhook-fed', () => {
    expect(feedText({ kind: 'meta', poll })).toBe('Meta Lead Ads · polled');
    expect(feedText({ kind: 'meta', poll: null })).toBe('Meta Lead Ads');
    expect(feedText({ kind: 'generic', poll })).toBe('list · polled');
    expect(feedText({ kind: 'generic', poll: null })).toBe('webhook');
  });
  it('shows the last and the next poll and what the last one found', () => {
    const t = pollText(poll, now);
    expect(t.line).toBe(`last poll ${formatTime(poll.last_poll_at, now)} · next ${formatTime(poll.next_poll_at, now)}`);
    expect(t.detail).toBe(`3 new leads last time · ${num(1204)} polled in 7 days`);
    expect(t.help).toContain('every 1 min');
    expect(t.level).toBe('');
  });
  it('marks a failed poll with its reason, and a source not polled yet', () => {
    const failed = pollText({ ...poll, last_found: 0, last_error: 'Meta asked to wait until 10:50' }, now);
    expect(failed.level).toBe('bad');
    expect(failed.detail).toBe('failed: Meta asked to wait until 10:50');
    expect(pollText({ ...poll, last_poll_at: null, interval_seconds: 90 }, now).line).toMatch(/^not polled yet · next /);
    expect(pollText({ ...poll, interval_seconds: 90 }, now).help).toContain('every 90 s');
  });
});
