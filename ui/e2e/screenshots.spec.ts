// The README's pictures of each page, taken from the UI as it is now (so they cannot fall behind it): the demo
// during HubSpot's "field-format change" (data dead letters appear at once), with its four weeks of history.
// Each page is checked for what the picture is meant to show before it is taken.
import { expect, test } from '@playwright/test';
import { startDemo } from './serve';

const SHOTS = '../docs/screenshots';

test('the README pictures: overview (light, dark, and at 1024×640), dead letters (list and by cause), sources, targets, alerts', async ({ page }) => {
  test.setTimeout(120_000);
  await page.setViewportSize({ width: 1440, height: 900 });
  const demo = await startDemo(300, 8816, 240, true);
  try {
    await page.goto(demo.link);
    await expect(page.getByRole('heading', { name: 'Overview' })).toBeVisible();
    // Every page of the desk is in the navigation.
    for (const name of ['Overview', 'Dead letters', 'Find a lead', 'Sources', 'Alerts', 'Targets', 'Settings']) {
      await expect(page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: new RegExp(`^${name}`) })).toBeVisible();
    }
    await expect(page.locator('.uplot')).toHaveCount(5);
    await expect(page.getByTestId('tile-dead').locator('.big')).not.toHaveText('0', { timeout: 30_000 });
    await page.waitForTimeout(1500); // the charts' next live update, so they show the dead letters too
    await page.screenshot({ path: `${SHOTS}/overview.png` });
    await page.getByRole('button', { name: /Switch to dark theme/ }).click();
    await expect(page.locator('html')).toHaveAttribute('data-theme', 'dark');
    await page.screenshot({ path: `${SHOTS}/overview-dark.png` });
    await page.getByRole('button', { name: /Switch to light theme/ }).click();
    // The smallest laptop the desk is made for (e2e/fit.spec.ts checks every page at this size).
    await page.setViewportSize({ width: 1024, height: 640 });
    await expect.poll(() => page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(1024);
    await page.evaluate(() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done))));
    await page.screenshot({ path: `${SHOTS}/overview-1024x640.png` });
    await page.setViewportSize({ width: 1440, height: 900 });

    await page.getByRole('link', { name: /^Dead letters/ }).click();
    await page.getByTestId('view-list').click();
    const row = page.getByTestId('dlq-row').first();
    await expect(row).toBeVisible({ timeout: 30_000 });
    await row.click();
    await expect(page.getByTestId('dead-letter-panel').getByTestId('reason')).toContainText('HubSpot rejected property phone');
    await page.screenshot({ path: `${SHOTS}/dead-letters.png` });
    await page.getByTestId('view-groups').click();
    // With the lead still open beside it, the causes' actions stack instead of running off the table.
    const actions = page.getByTestId('group-row').first().getByTestId('replay-group');
    await expect(actions).toBeInViewport({ ratio: 1 });
    await page.screenshot({ path: `${SHOTS}/dead-letter-groups-with-lead.png` });
    await page.getByRole('button', { name: 'Close detail' }).click();
    await expect(page.getByTestId('group-row').first()).toBeVisible();
    await page.screenshot({ path: `${SHOTS}/dead-letter-groups.png` });

    await page.getByRole('link', { name: /^Sources/ }).click();
    await expect(page.getByTestId('source-row')).toHaveCount(4);
    await page.screenshot({ path: `${SHOTS}/sources.png` });

    await page.getByRole('link', { name: /^Targets/ }).click();
    await page.locator('[data-target="crm"]').getByRole('button', { name: 'Mapping & test' }).click();
    await expect(page.getByTestId('mapping')).toBeVisible();
    await page.screenshot({ path: `${SHOTS}/targets.png` });

    await page.getByRole('link', { name: /^Alerts/ }).click();
    await expect(page.getByTestId('alert').first()).toBeVisible({ timeout: 30_000 });
    await page.screenshot({ path: `${SHOTS}/alerts.png` });
  } finally {
    demo.stop();
  }
});
