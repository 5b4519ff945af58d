// The first screen at the demo's fault moments: each scenario starts its own demo a few seconds before a fault,
// asserts what the verdict and the target's pill (or the source's state) say, measures how long after the fault
// began the verdict changed, and photographs the Overview into docs/screenshots/ (fault-*.png). The timings go to
// docs/screenshots/fault-timings.json beside the photographs (the README quotes them).
//
// When a fault begins: the demo logs each phase of its HubSpot schedule as it enters it (`demo HubSpot phase=…`,
// see e2e/serve.ts), so the maintenance window, the rate limit and the expired token are timed from that line. The
// partner's silence is not a HubSpot phase: it reaches the demo's threshold (10 min) at minute 30 of the demo's
// timeline, timed from the schedule's start plus the seconds to that minute. Demo time runs at wall-clock speed.
import { expect, test, type Page } from '@playwright/test';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { startDemo } from './serve';

const SHOTS = '../docs/screenshots';
const TIMINGS = `${SHOTS}/fault-timings.json`;
const LEAD = 3; // seconds before the fault each demo starts

/** Waits until the verdict's text matches and returns when it first did (ms since the epoch, to 0.1 s) and the
 * text it had then. Polled in the page every 100 ms, so the time is that of the change, not of an assertion's
 * back-off. */
async function verdictChange(page: Page, text: RegExp, timeout = 60_000): Promise<{ at: number; said: string }> {
  const handle = await page.waitForFunction(
    ([source, flags]) => {
      const said = document.querySelector('[data-testid="verdict"]')?.textContent ?? '';
      return new RegExp(source!, flags).test(said) ? said : false;
    },
    [text.source, text.flags],
    { polling: 100, timeout },
  );
  return { at: Date.now(), said: String(await handle.jsonValue()) };
}

const seconds = (from: number, to: number) => Math.round((to - from) / 100) / 10;

/** Adds one fault's figures to the timings file (each scenario writes its own entry; the others are kept). */
function record(fault: string, entry: Record<string, unknown>) {
  const all = existsSync(TIMINGS) ? (JSON.parse(readFileSync(TIMINGS, 'utf8')) as Record<string, unknown>) : {};
  all[fault] = { ...entry, measured_at: new Date().toISOString() };
  const order = ['outage', 'rate_limit', 'expired_token', 'silence'];
  const sorted = Object.fromEntries(Object.entries(all).sort(([a], [b]) => order.indexOf(a) - order.indexOf(b)));
  writeFileSync(TIMINGS, JSON.stringify(sorted, null, 2) + '\n');
  console.log(`${fault}: ${JSON.stringify(entry)}`);
}

test.describe.configure({ mode: 'serial' });

test('a CRM outage: the verdict says the CRM looks down, the pill says the breaker paused it', async ({ page }) => {
  const demo = await startDemo(120 - LEAD, 8811);
  try {
    await page.goto(demo.link);
    await expect(page.getByTestId('verdict')).toBeVisible();
    await expect(page.getByTestId('verdict')).not.toContainText('Needs a person');
    const fault = await demo.phase(/maintenance window/);
    const change = await verdictChange(page, /crm looks down/);
    expect(change.said).toContain('Needs a person');
    await expect(page.locator('[data-testid="target-pill"][data-target="crm"]')).toContainText('down — paused by the breaker');
    record('outage', {
      fault: 'HubSpot maintenance window (503 with Retry-After), demo time 120 s',
      verdict_after_seconds: seconds(fault, change.at),
      verdict: change.said,
    });
    await page.screenshot({ path: `${SHOTS}/fault-outage.png` });
  } finally {
    demo.stop();
  }
});

test('a rate limit: the verdict says slowed down until when, the pill too, and slowed-down answers are not failures', async ({ page }) => {
  const demo = await startDemo(240 - LEAD, 8812, 600);
  try {
    await page.goto(demo.link);
    await expect(page.getByTestId('verdict')).toBeVisible();
    const fault = await demo.phase(/rate limited/);
    const pill = page.locator('[data-testid="target-pill"][data-target="crm"]');
    const [change, pillAt] = await Promise.all([
      // "Slowed down", with the reason in words and the time in local time as the pill shows it (no "UTC").
      verdictChange(page, /Slowed down.*crm is rate-limited until \d{1,2}:\d{2}:\d{2}(?! UTC)/, 40_000),
      pill.filter({ hasText: /rate-limited until/ }).waitFor({ timeout: 40_000 }).then(() => Date.now()),
    ]);
    expect(change.said).toContain('leads wait and go on by themselves');
    expect(change.said).not.toContain('UTC');
    record('rate_limit', {
      fault: 'HubSpot rate limit (429 SECONDLY, one request in 2 s), demo time 240 s',
      verdict_after_seconds: seconds(fault, change.at),
      pill_after_seconds: seconds(fault, pillAt),
      verdict: change.said,
    });
    await expect(page.getByTestId('verdict')).not.toContainText('Needs a person');
    await expect(page.getByRole('figure', { name: /Delivery attempts per minute/ })).toContainText('Told to slow down (not a failure)');
    // Photographed while the verdict says so (it is back to "All well" between two of HubSpot's refusals).
    await expect(page.getByTestId('verdict')).toContainText(/Slowed down.*rate-limited until/, { timeout: 30_000 });
    await page.screenshot({ path: `${SHOTS}/fault-rate-limit.png` });
  } finally {
    demo.stop();
  }
});

test('an expired token: the verdict names the credential, the pill says the CRM refuses it, nothing is dead-lettered', async ({ page }) => {
  const demo = await startDemo(420 - LEAD, 8813);
  try {
    await page.goto(demo.link);
    const fault = await demo.phase(/expired token/);
    const change = await verdictChange(page, /refused its credential \(LEADLINE_DEMO_HUBSPOT_TOKEN\)/);
    expect(change.said).toContain('Needs a person');
    await expect(page.locator('[data-testid="target-pill"][data-target="crm"]')).toContainText('refusing credentials');
    // A refused token dead-letters nothing (a lead or two from the phone rule just before may be there).
    await expect(page.getByTestId('tile-dead')).not.toContainText('Setup problem');
    record('expired_token', {
      fault: 'HubSpot refuses the token (401), demo time 420 s',
      verdict_after_seconds: seconds(fault, change.at),
      verdict: change.said,
    });
    await page.screenshot({ path: `${SHOTS}/fault-expired-token.png` });
  } finally {
    demo.stop();
  }
});

test('a silent source: the verdict names it, its state says since when, and one alert says so', async ({ page }) => {
  await page.setViewportSize({ width: 1440, height: 900 });
  // The partner API falls silent 20 min into the demo's timeline; its silence reaches the demo's threshold
  // (silence_minutes = 10) at 30 min. The demo starts just before, its seeded history standing for the 30 min.
  const demo = await startDemo(1800 - LEAD, 8814);
  try {
    await page.goto(demo.link);
    await expect(page.getByTestId('verdict')).toBeVisible();
    const change = await verdictChange(page, /No leads from partner_api/);
    expect(change.said).toContain('Needs a person');
    record('silence', {
      // Counted from the partner's last lead, which came a moment before minute 20: the change can read as a
      // fraction of a second before minute 30.
      fault: "the partner API's silence reaches the 10 min threshold, demo time 1800 s (its last lead came just before 1200 s)",
      verdict_after_seconds: seconds(demo.timelineAt(1800), change.at),
      verdict: change.said,
    });
    // The other sources' leads are being delivered meanwhile: photographed once the Delivered tile shows it.
    await expect(page.getByTestId('tile-delivered').locator('.big')).not.toHaveText('0');
    await page.screenshot({ path: `${SHOTS}/fault-silence.png` });

    // The Sources page says what is happening to each source: the partner is silent since a time, the others are not.
    await page.getByRole('link', { name: 'Sources' }).click();
    const state = (source: string) => page.getByTestId('source-row').filter({ hasText: source }).getByTestId('source-state');
    await expect(state('partner_api')).toHaveText(/^silent since \d{1,2}:\d{2}/);
    await expect(state('webform')).not.toContainText('silent');
    await expect(state('meta_ads')).not.toContainText('silent');

    // One silence, one alert: not also a "fewer leads than usual" for the same source. Its time is local too.
    await page.getByRole('link', { name: /^Alerts/ }).click();
    const active = page.getByTestId('alert').filter({ hasText: 'partner_api' });
    await expect(active).toHaveCount(1);
    await expect(active).toContainText('No leads from partner_api');
    await expect(active).toContainText(/Nothing since \d{1,2}:\d{2}( [AP]M)?,/);
    await expect(active).not.toContainText('UTC');

    // Acknowledging it changes it visibly and says who is on it.
    await active.getByRole('button', { name: /Acknowledge/ }).click();
    // The demo's browser link acts under its token's name (`default`).
    await expect(active.getByTestId('acked-by')).toHaveText('browser token `default` is on it');
    await expect(active).toHaveClass(/acked/);
    await expect(active).toContainText(/acknowledged by browser token `default` at \d{1,2}:\d{2}/);
    await expect(active.getByRole('button', { name: /Acknowledge/ })).toHaveCount(0);
  } finally {
    demo.stop();
  }
});
