// The Overview's charts follow the live feed: leads arrive, the chart's series changes, without a reload and
// without any polling — the page's repeating timers are stopped, so only the server's events (SSE) can move it.
import { expect, test } from '@playwright/test';
import { startDemo } from './serve';

const LEADS = 5;

test('leads arrive and the waiting chart rises through the live feed, without a reload or a poll', async ({ page }) => {
  test.setTimeout(120_000);
  // Normal service at the demo's start, its own traffic at a trickle (about one lead in 30 s).
  const demo = await startDemo(0, 8827, 0.1);
  try {
    // Every repeating timer of the page does nothing (the Overview's fallback refresh among them): what changes on
    // the screen from here on was pushed by the server.
    await page.addInitScript(() => {
      window.setInterval = (() => 0) as unknown as typeof window.setInterval;
    });
    await page.goto(demo.link);
    await expect(page.getByRole('heading', { name: 'Overview' })).toBeVisible();
    // Every target paused (from the page, as its Pause button does): the leads posted below wait, so "Waiting"
    // must rise by them and stay there.
    for (const name of ['crm', 'notify', 'meta_details', 'call_task']) {
      const status = await page.evaluate(async (name) => (await fetch(`/api/targets/${name}/pause`, { method: 'POST' })).status, name);
      expect(status, `pausing ${name}`).toBe(200);
    }
    const chart = page.getByRole('figure', { name: "Waiting leads and the oldest one's age" });
    // The chart's latest point, as drawn: [time, waiting, oldest age].
    const latest = async () => JSON.parse((await chart.getAttribute('data-last')) ?? '[]') as (number | null)[];
    const waiting = async () => (await latest())[1] ?? 0;
    await expect(chart).toHaveAttribute('data-points', /^[1-9]\d*$/);
    const before = await waiting();
    expect(before, 'nothing waits yet in the demo at a trickle').toBeLessThan(LEADS);
    // The page stays the same document throughout: no reload, no navigation.
    await page.evaluate(() => ((window as unknown as { sameDocument: boolean }).sameDocument = true));

    for (let n = 1; n <= LEADS; n++) {
      const r = await page.request.post(`${demo.origin}/ingest/partner_api`, { data: { lead: { ref: `live-${n}`, name: `Liv Tester${n}`, email: `liv${n}@example.com` } } });
      expect(r.status()).toBe(202);
    }
    // Each posted lead waits at the paused CRM: the latest point of the series reaches them.
    await expect.poll(waiting, { timeout: 30_000 }).toBeGreaterThanOrEqual(LEADS);
    expect(await page.evaluate(() => (window as unknown as { sameDocument?: boolean }).sameDocument)).toBe(true);
    // The tile above it says the same.
    const tile = async () => Number(((await page.getByTestId('tile-pending').locator('.big').textContent()) ?? '0').replace(/\D/g, ''));
    expect(await tile()).toBeGreaterThanOrEqual(LEADS);
  } finally {
    demo.stop();
  }
});
