// Starts `leadline serve --demo` on a fresh database near the end of the demo's "field-format change" (HubSpot
// refuses national phone numbers: data dead letters appear at once), followed 20 s later by its "expired token"
// (the CRM is held, one alert) and 50 s after start by normal service; hands the browser link (with its token)
// to the tests.
import { startDemo } from './serve';

export default async function globalSetup() {
  const demo = await startDemo(400, Number(process.env.LEADLINE_E2E_PORT ?? '8797'), 240, true);
  process.env.LEADLINE_E2E_LINK = demo.link;
  process.env.LEADLINE_E2E_URL = demo.origin;
  process.env.LEADLINE_E2E_STARTED = String(demo.started);
  return async () => demo.stop();
}
