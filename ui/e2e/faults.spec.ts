// The first screen at the demo's fault moments: each scenario starts its own demo a few seconds before a fault,
// asserts what the verdict and the target's pill say, measures how long after the fault began the verdict
// changed, and photographs the Overview into docs/screenshots/ (fault-*.png).
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
