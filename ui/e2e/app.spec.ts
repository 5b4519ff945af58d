import { expect, test } from '@playwright/test';

const link = () => process.env.LEADLINE_E2E_LINK!;

test('the overview loads and updates live', async ({ page }) => {
  await page.goto(link());
  await expect(page.getByRole('heading', { name: 'Overview' })).toBeVisible();
  await expect(page.getByText('Demo mode.')).toBeVisible();
  // The token was taken from the address and removed from it.
  await expect(page).not.toHaveURL(/token=/);
  const delivered = page.getByTestId('tile-delivered').locator('.big');
  const dead = page.getByTestId('tile-dead').locator('.big');
  const total = async () => Number(((await delivered.textContent()) ?? '0').replace(/\D/g, '')) + Number(((await dead.textContent()) ?? '0').replace(/\D/g, ''));
  const before = await total();
  // Demo traffic flows; the tiles follow without a reload.
  await expect.poll(total, { timeout: 30_000 }).toBeGreaterThan(before);
  // The charts are drawn and their data moves.
  await expect(page.locator('.uplot')).toHaveCount(4);
  await expect(page.getByRole('figure', { name: 'Leads received per source' })).toBeVisible();
});

test('a dead letter opens with its timeline, and replaying it (confirmed) delivers it', async ({ page }) => {
  await page.goto(link());
  await page.getByRole('link', { name: /Dead letters/ }).click();
  // The demo starts in its "expired token" phase: leads die as configuration errors.
  await expect(page.getByTestId('dlq-row').first()).toBeVisible({ timeout: 30_000 });
  await expect(page.getByTestId('class-permanent_config')).toBeVisible();
  // Web-form leads carry personal data; filter to them.
  await page.getByLabel('Source').selectOption('webform');
  const row = page.getByTestId('dlq-row').first();
  await expect(row).toContainText('webform', { timeout: 30_000 });
  await row.click();
  const panel = page.getByTestId('dead-letter-panel');
  await expect(panel.getByTestId('reason')).toContainText('HTTP 401');
  await expect(panel.getByTestId('attempts').locator('li').first()).toContainText('HTTP 401');
  // Personal data is masked until revealed.
  const email = panel.locator('tr', { hasText: 'email' }).locator('td');
  await expect(email).toContainText('•');
  await panel.getByText('Reveal personal data').click();
  await expect(email).toContainText('@example.com');
  await expect(email).not.toContainText('•');

  // Wait until the CRM is back (the demo's token is "renewed" 15 s after start), then replay this lead.
  const started = Number(process.env.LEADLINE_E2E_STARTED);
  await page.waitForTimeout(Math.max(0, started + 17_000 - Date.now()));
  await panel.getByTestId('replay-one').click();
  const dialog = page.getByRole('dialog');
  await expect(dialog.getByTestId('replay-summary')).toHaveText(/Replay 1 lead to crm\?/);
  await dialog.getByRole('textbox').fill('token renewed');
  await dialog.getByTestId('replay-go').click();
  await dialog.getByTestId('replay-confirm').click();
  await expect(dialog.getByTestId('replay-state')).toContainText('Finished · 1 of 1 delivered', { timeout: 30_000 });
  await dialog.getByRole('button', { name: 'Close' }).click();

  // The detail now says it was replayed, with who and why.
  await expect(panel).toContainText('This lead was replayed');
  await expect(panel).toContainText('token renewed');
  await expect(panel).toContainText('browser token');
});

test('dead letters grouped by cause: filter, replay a group with a canary, watch it, read the report', async ({ page }) => {
  test.setTimeout(120_000);
  await page.goto(link());
  await page.getByRole('link', { name: /Dead letters/ }).click();
  await expect(page.getByTestId('dlq-row').first()).toBeVisible({ timeout: 30_000 });
  // Only what the CRM answered 401, grouped by cause: the expired token is one group, however many leads.
  await page.getByLabel('HTTP status').fill('401');
  await page.getByTestId('view-groups').click();
  const group = page.getByTestId('group-row').first();
  await expect(group).toContainText('HTTP 401');
  await expect(page.getByTestId('group-row')).toHaveCount(1);
  const count = Number(((await group.locator('td').first().textContent()) ?? '0').replace(/\D/g, ''));
  expect(count).toBeGreaterThan(1);

  // Once the token is "renewed", replay the whole group: two leads first, then the rest.
  const started = Number(process.env.LEADLINE_E2E_STARTED);
  await page.waitForTimeout(Math.max(0, started + 17_000 - Date.now()));
  await group.getByTestId('replay-group').click();
  const dialog = page.getByRole('dialog');
  await expect(dialog.getByTestId('replay-summary')).toHaveText(`Replay ${count} leads to crm?`);
  await dialog.getByTestId('replay-canary').fill('2');
  await dialog.getByTestId('replay-rate').fill('50');
  await dialog.getByRole('textbox').fill('token renewed');
  await dialog.getByTestId('replay-go').click();
  await expect(dialog.getByRole('alertdialog')).toContainText('2 go first');
  await dialog.getByTestId('replay-confirm').click();
  // Progress is live, then the report: all delivered, and what happened in order.
  await expect(dialog.getByTestId('replay-state')).toContainText(`Finished · ${count} of ${count} delivered`, { timeout: 60_000 });
  await expect(dialog.getByTestId('replay-delivered')).toHaveText(String(count));
  const events = dialog.getByTestId('replay-events');
  await expect(events).toContainText('all 2 canary leads delivered');
  await expect(events).toContainText(`${count} delivered, 0 failed again`);
  await dialog.getByRole('button', { name: 'Close' }).click();
  await expect(page.getByTestId('group-row')).toHaveCount(0);
});

test('without the token, the browser can neither read nor change anything', async ({ page, request }) => {
  const r = await request.post('/api/replays', { data: { selection: { ids: [1], filter: null }, expected: 1, reason: 'x' } });
  expect(r.status()).toBe(401);
  expect((await r.json()).code).toBe('unauthorized');
  // Reading needs the credential too, even on loopback.
  expect((await request.get('/api/health')).status()).toBe(401);
  await page.goto('/');
  await expect(page.getByText('This browser is not signed in to Leadline')).toBeVisible();
});

test('the first link signs the browser in with an HttpOnly cookie; the page keeps no token', async ({ page, context }) => {
  await page.goto(link());
  await expect(page.getByRole('heading', { name: 'Overview' })).toBeVisible();
  await expect(page).not.toHaveURL(/token=/);
  const cookies = await context.cookies();
  const session = cookies.find((c) => c.name === 'leadline_session');
  expect(session?.httpOnly).toBe(true);
  expect(session?.sameSite).toBe('Strict');
  // Nothing in the page's reach holds the token.
  const token = new URL(link()).searchParams.get('token')!;
  const stored = await page.evaluate(() => JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }) + document.cookie);
  expect(stored).not.toContain(token);
  // A reload keeps working on the cookie alone, the live feed included.
  await page.reload();
  await expect(page.getByRole('heading', { name: 'Overview' })).toBeVisible();
  await expect(page.getByText('This browser is not signed in to Leadline')).toHaveCount(0);
});

test('the sources page shows each source against its usual volume, and reconciling recovers lost Meta leads', async ({ page }) => {
  test.setTimeout(150_000);
  await page.goto(link());
  await page.getByRole('link', { name: 'Sources' }).click();
  const rows = page.getByTestId('source-row');
  await expect(rows).toHaveCount(3);
  // The demo's sources come with four weeks of history: they are compared by hour of week.
  await expect(rows.filter({ hasText: 'webform' })).toContainText('own history, by hour of week');
  // A source without a signature is flagged; signed ones are not.
  await expect(rows.filter({ hasText: 'partner_api' }).getByTestId('unsigned')).toBeVisible();
  await expect(rows.filter({ hasText: 'webform' }).getByTestId('unsigned')).toHaveCount(0);
  // The demo loses one Meta webhook in ten; the mock Graph API still lists every lead.
  const meta = rows.filter({ hasText: 'meta_ads' });
  await expect
    .poll(
      async () => {
        await meta.getByRole('button', { name: 'Reconcile now' }).click();
        await expect(meta.getByRole('button', { name: 'Reconcile now' })).toBeEnabled();
        return (await meta.textContent()) ?? '';
      },
      { timeout: 120_000, intervals: [5_000] },
    )
    .toMatch(/recovered in 7 days/);
  await expect(page.getByTestId('figures')).toContainText('meta_ads → crm');
});

test('targets: each target shows its field mapping, a dry run shows the exact request, and a connection test says what works', async ({ page, request }) => {
  await page.goto(link());
  await page.getByRole('link', { name: 'Targets' }).click();
  await expect(page.locator('[data-target="meta_details"]')).toContainText('meta lead');

  // The welcome SMS declares a mapping: each rule is shown in words.
  await page.locator('[data-target="notify"]').getByRole('button', { name: 'Mapping & test' }).click();
  const detail = page.getByTestId('target-detail');
  const mapping = detail.getByTestId('mapping');
  await expect(mapping.locator('tr', { hasText: '/lead/phone' })).toContainText('phone to E.164 (default +49)');
  await expect(mapping.locator('tr', { hasText: '/lead/template' })).toContainText('= "welcome-v2"');

  // A lead of the partner API (which sends its fields under `lead`): the SMS mapping reads a top-level `phone`, so
  // the dry run names the missing field instead of showing a request — nothing would be sent.
  const posted = await request.post('/ingest/partner_api', {
    data: { lead: { ref: 'E2E-1', name: 'Ada Lovelace', phone: '+4915112345678', email: 'ada@example.com' } },
  });
  expect(posted.status()).toBe(202);
  await detail.getByLabel('Lead').fill('partner_api:E2E-1');
  await detail.getByRole('button', { name: 'Show the request' }).click();
  await expect(detail.getByTestId('preview-error')).toContainText('`/lead/phone` ← `phone` is missing');

  // The CRM step of the same lead: the envelope, exactly as it would be sent, with its idempotency key.
  await page.locator('[data-target="crm"]').getByRole('button', { name: 'Mapping & test' }).click();
  await expect(detail).toContainText('No field mapping');
  await detail.getByLabel('Lead').fill('partner_api:E2E-1');
  await detail.getByRole('button', { name: 'Show the request' }).click();
  const preview = detail.getByTestId('preview');
  await expect(preview).toContainText('POST');
  await expect(preview).toContainText('Idempotency-Key: partner_api:E2E-1:crm');
  await expect(preview).toContainText('"external_id": "partner_api:E2E-1"');

  // The Meta step's page token is checked with one harmless request.
  await page.locator('[data-target="meta_details"]').getByRole('button', { name: 'Mapping & test' }).click();
  await detail.getByRole('button', { name: 'Test connection' }).click();
  await expect(detail.getByTestId('check')).toContainText('works: it belongs to "Leadline demo page"');
});
