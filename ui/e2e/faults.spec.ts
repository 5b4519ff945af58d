// The first screen at the demo's fault moments: each scenario starts its own demo a few seconds before a fault,
// asserts what the verdict and the target's pill (or the source's state) say, measures how long after the fault
// began the verdict changed, and photographs the Overview into docs/screenshots/ (fault-*.png).
import { expect, test, type Page } from '@playwright/test';
import { startDemo } from './serve';

const SHOTS = '../docs/screenshots';
const LEAD = 3; // seconds before the fault each demo starts

async function verdictChange(page: Page, started: number, text: RegExp): Promise<number> {
  await expect(page.getByTestId('verdict')).toContainText(text, { timeout: 60_000 });
  return Math.round((Date.now() - started) / 1000) - LEAD;
}

test.describe.configure({ mode: 'serial' });

test('a CRM outage: the verdict says the CRM looks down, the pill says the breaker paused it', async ({ page }) => {
  const demo = await startDemo(120 - LEAD, 8811);
  try {
    await page.goto(demo.link);
    await expect(page.getByTestId('verdict')).toBeVisible();
    await expect(page.getByTestId('verdict')).not.toContainText('Needs a person');
    const after = await verdictChange(page, demo.started, /crm looks down/);
    console.log(`outage: verdict changed ${after} s after HubSpot went into maintenance`);
    await expect(page.getByTestId('verdict')).toContainText('Needs a person');
    await expect(page.locator('[data-testid="target-pill"][data-target="crm"]')).toContainText('down — paused by the breaker');
    await page.screenshot({ path: `${SHOTS}/fault-outage.png` });
  } finally {
    demo.stop();
  }
});

test('a rate limit: the pill says until when, and slowed-down answers are not failures', async ({ page }) => {
  const demo = await startDemo(240 - LEAD, 8812, 600);
  try {
    await page.goto(demo.link);
    const pill = page.locator('[data-testid="target-pill"][data-target="crm"]');
    await expect(pill).toContainText(/rate-limited until/, { timeout: 40_000 });
    console.log(`rate limit: the crm pill said so ${Math.round((Date.now() - demo.started) / 1000) - LEAD} s after HubSpot began limiting`);
    await expect(page.getByTestId('verdict')).not.toContainText('Needs a person');
    await expect(page.getByRole('figure', { name: /Delivery attempts per minute/ })).toContainText('Told to slow down (not a failure)');
    await page.screenshot({ path: `${SHOTS}/fault-rate-limit.png` });
  } finally {
    demo.stop();
  }
});

test('an expired token: the verdict names the credential, the pill says the CRM refuses it, nothing is dead-lettered', async ({ page }) => {
  const demo = await startDemo(420 - LEAD, 8813);
  try {
    await page.goto(demo.link);
    const after = await verdictChange(page, demo.started, /refused its credential \(LEADLINE_DEMO_HUBSPOT_TOKEN\)/);
    console.log(`expired token: verdict changed ${after} s after HubSpot began refusing the token`);
    await expect(page.locator('[data-testid="target-pill"][data-target="crm"]')).toContainText('refusing credentials');
    // A refused token dead-letters nothing (a lead or two from the phone rule just before may be there).
    await expect(page.getByTestId('tile-dead')).not.toContainText('Setup problem');
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
    const after = await verdictChange(page, demo.started, /No leads from partner_api/);
    console.log(`silence: verdict changed ${after + LEAD} s after the start (${after} s after the partner's silence reached 10 min)`);
    await expect(page.getByTestId('verdict')).toContainText('Needs a person');
    // The other sources' leads are being delivered meanwhile: photographed once the Delivered tile shows it.
    await expect(page.getByTestId('tile-delivered').locator('.big')).not.toHaveText('0');
    await page.screenshot({ path: `${SHOTS}/fault-silence.png` });

    // The Sources page says what is happening to each source: the partner is silent since a time, the others are not.
    await page.getByRole('link', { name: 'Sources' }).click();
    const state = (source: string) => page.getByTestId('source-row').filter({ hasText: source }).getByTestId('source-state');
    await expect(state('partner_api')).toHaveText(/^silent since \d{1,2}:\d{2}/);
    await expect(state('webform')).not.toContainText('silent');
    await expect(state('meta_ads')).not.toContainText('silent');

    // One silence, one alert: not also a "fewer leads than usual" for the same source.
    await page.getByRole('link', { name: /^Alerts/ }).click();
    const active = page.getByTestId('alert').filter({ hasText: 'partner_api' });
    await expect(active).toHaveCount(1);
    await expect(active).toContainText('No leads from partner_api');
  } finally {
    demo.stop();
  }
});
