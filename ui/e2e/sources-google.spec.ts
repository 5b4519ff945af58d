// The setup panel of a Google Ads lead form source on the Sources page: the ingest URL to paste into Google Ads,
// the key masked until a person asks for it ("Show to copy", a logged write), then copied to the clipboard — and
// the key it shows is the one the source accepts in `google_key`. Takes docs/screenshots/sources-google.png.
import { expect, test } from '@playwright/test';

const SHOTS = '../docs/screenshots';
const link = () => process.env.LEADLINE_E2E_LINK!;

test.use({ permissions: ['clipboard-read', 'clipboard-write'] });

/** A lead as Google Ads posts it (Google's `WebhookLead`: answers by column id, the key in the body). */
function googleLead(leadId: string, key: string): string {
  return JSON.stringify({
    lead_id: leadId,
    api_version: '1.0',
    form_id: 40000000123,
    campaign_id: 50000000456,
    adgroup_id: 60000000789,
    creative_id: 70000000012,
    gcl_id: `Cj0KCQ-${leadId}`,
    google_key: key,
    is_test: false,
    user_column_data: [
      { column_name: 'Full Name', string_value: 'Gina Setup', column_id: 'FULL_NAME' },
      { column_name: 'User Email', string_value: `${leadId}@example.com`, column_id: 'EMAIL' },
    ],
  });
}

test('the Google Ads source shows the URL and a masked key; Show to copy reveals it, Copy puts it on the clipboard', async ({ page, request }) => {
  await page.setViewportSize({ width: 1440, height: 900 });
  await page.goto(link());
  await page.getByRole('link', { name: /^Sources/ }).click();
  const row = page.locator('[data-testid="source-row"][data-source="google_ads"]');
  await expect(row).toBeVisible();
  // Only the Google Ads source has a setup panel.
  await expect(page.getByTestId('webhook-setup')).toHaveCount(1);
  const setup = row.getByTestId('webhook-setup');
  await setup.getByText('Webhook for Google Ads').click();

  // The URL ends in the source's ingest path; the key is masked to its last four characters.
  await expect(setup.getByTestId('webhook-url')).toHaveText(/\/ingest\/google_ads$/);
  const masked = setup.getByTestId('webhook-key-masked');
  await expect(masked).toHaveText(/^••••.{4}$/);
  await expect(setup.getByTestId('webhook-key')).toHaveCount(0);
  await expect(setup.getByRole('button', { name: 'Copy', exact: true })).toHaveCount(0);
  const tail = ((await masked.textContent()) ?? '').slice(4);

  // Show to copy: the whole key, ending in the characters the mask showed.
  await setup.getByRole('button', { name: 'Show to copy' }).click();
  const shown = setup.getByTestId('webhook-key');
  await expect(shown).toBeVisible();
  const key = ((await shown.textContent()) ?? '').trim();
  expect(key.length).toBeGreaterThanOrEqual(12);
  expect(key.endsWith(tail)).toBe(true);
  await expect(setup.getByTestId('webhook-key-masked')).toHaveCount(0);

  // Copy: the clipboard holds exactly the key, and the toast says where to paste it.
  await setup.getByRole('button', { name: 'Copy', exact: true }).click();
  await expect(page.getByText('google_ads: key copied')).toBeVisible();
  expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(key);

  // The key shown is the key the source checks: a lead carrying it is taken, one with another key is refused.
  const path = ((await setup.getByTestId('webhook-url').textContent()) ?? '').match(/\/ingest\/\w+$/)![0];
  const accepted = await request.post(path, { headers: { 'content-type': 'application/json' }, data: googleLead(`e2e-setup-${Date.now()}`, key) });
  expect(accepted.status()).toBe(202);
  const refused = await request.post(path, { headers: { 'content-type': 'application/json' }, data: googleLead(`e2e-wrong-${Date.now()}`, `${key}x`) });
  expect(refused.status()).toBe(401);

  await row.locator('td').first().screenshot({ path: `${SHOTS}/sources-google.png` });
});
