//! The demo: a mock HubSpot that misbehaves on a schedule, and synthetic lead traffic from several sources.
//!
//! `leadline serve --demo` uses [`demo_config`] against a [`mock_crm::MockCrm`] on loopback (which also serves
//! the mock HubSpot API, the mock Meta Graph API and the SMS and task endpoints), runs [`run_schedule`] to
//! switch HubSpot's behaviour and [`run_traffic`] to post leads to the ingest server through the same HTTP
//! endpoints (and signatures) a real source uses. The CRM target is a real connector (`kind = "hubspot"`) with
//! a field mapping, so the demo looks like a real setup.

pub mod mock_crm;
pub mod mock_hubspot;
pub mod mock_pipedrive;
pub mod mock_salesforce;
pub mod mock_twilio;
pub mod mock_whatsapp;
pub mod waits;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use rand::Rng;
use serde_json::json;

use crate::config::{
    BackoffConfig, BreakerConfig, Config, GenericSourceSettings, GoogleAdsSourceSettings, MetaSourceSettings,
    ReconcileConfig, SignatureConfig, SignatureScheme, SourceConfig, SourceSettings, Strategy, TargetConfig,
    TargetSettings,
};
use crate::features::ingest::signature;
use crate::store::EventCountPoint;
use mock_crm::{Behaviour, MockCrm};
use mock_hubspot::{HubspotBehaviour, Secondly};
use mock_twilio::MockTwilio;
use mock_whatsapp::MockWhatsapp;

pub const WEBFORM_SECRET_ENV: &str = "LEADLINE_DEMO_WEBFORM_SECRET";
pub const META_SECRET_ENV: &str = "LEADLINE_DEMO_META_APP_SECRET";
pub const META_VERIFY_ENV: &str = "LEADLINE_DEMO_META_VERIFY_TOKEN";
pub const META_TOKEN_ENV: &str = "LEADLINE_DEMO_META_ACCESS_TOKEN";
pub const HUBSPOT_TOKEN_ENV: &str = "LEADLINE_DEMO_HUBSPOT_TOKEN";
pub const GOOGLE_KEY_ENV: &str = "LEADLINE_DEMO_GOOGLE_KEY";
pub const WHATSAPP_TOKEN_ENV: &str = "LEADLINE_DEMO_WHATSAPP_TOKEN";
pub const WHATSAPP_SECRET_ENV: &str = "LEADLINE_DEMO_WHATSAPP_APP_SECRET";
pub const TWILIO_TOKEN_ENV: &str = "LEADLINE_DEMO_TWILIO_TOKEN";
/// The key the demo's Google Ads lead form sends back in `google_key`.
pub const GOOGLE_KEY: &str = "demo-google-lead-form-key";
/// The demo's Meta lead form.
pub const META_FORM: &str = "4242";
/// The demo's Facebook page.
pub const META_PAGE: &str = "1234567890";
/// One in this many Meta webhooks is "lost" on the way by the demo (reconciliation finds them).
pub const META_WEBHOOK_LOSS_EVERY: u64 = 10;

/// Where the demo's first-contact providers listen: the mock WhatsApp Cloud API and the mock Twilio.
#[derive(Debug, Clone, Copy)]
pub struct ContactMocks {
    pub whatsapp: SocketAddr,
    pub twilio: SocketAddr,
}

/// Starts the demo's mock WhatsApp and mock Twilio on loopback (any free ports).
pub async fn start_contact_mocks() -> anyhow::Result<(MockWhatsapp, MockTwilio, ContactMocks)> {
    let (wa, whatsapp) = MockWhatsapp::start("127.0.0.1:0".parse()?).await?;
    let (tw, twilio) = MockTwilio::start("127.0.0.1:0".parse()?).await?;
    Ok((wa, tw, ContactMocks { whatsapp, twilio }))
}

/// Once Leadline listens on `addr`: the mock WhatsApp posts its status webhooks to the `hello` step's receipts.
pub fn connect_receipts(wa: &MockWhatsapp, addr: SocketAddr) {
    wa.post_receipts_to(&format!("http://{addr}/receipts/whatsapp/hello"));
}

/// The demo's configuration: four sources, a CRM, a follow-up notification and a first contact (WhatsApp, SMS when
/// WhatsApp fails for the number), all on loopback. Twilio's status callbacks go to `listen`, so a `listen` on
/// port 0 (the desktop app) leaves them out: the SMS step then confirms its sends from Twilio's list.
pub fn demo_config(crm: SocketAddr, contact: ContactMocks, listen: SocketAddr, database_url: Option<String>) -> Config {
    let base = format!("http://{crm}");
    let mut c = Config::default();
    c.server.listen = listen;
    // What every demo source shares; each sets its kind, route and id field.
    let source = || SourceConfig {
        settings: SourceSettings::Generic(GenericSourceSettings { signature: None }),
        id_field: "id".into(),
        route: Vec::new(),
        reconcile: None,
        poll: None,
        failing_alert_minutes: 15,
        max_body_bytes: None,
        require_signature: false,
        time_zone: None,
        stray: Vec::new(),
    };
    c.database.url = database_url;
    c.sources.insert(
        "webform".into(),
        SourceConfig {
            settings: SourceSettings::Generic(GenericSourceSettings {
                signature: Some(SignatureConfig {
                    header: "X-Signature-256".into(),
                    secret_env: WEBFORM_SECRET_ENV.into(),
                    scheme: SignatureScheme::HmacSha256,
                    url: None,
                }),
            }),
            id_field: "id".into(),
            route: vec!["crm".into(), "notify".into()],
            ..source()
        },
    );
    c.sources.insert(
        "meta_ads".into(),
        SourceConfig {
            settings: SourceSettings::Meta(MetaSourceSettings {
                app_secret_env: Some(META_SECRET_ENV.into()),
                verify_token_env: Some(META_VERIFY_ENV.into()),
                page_id: Some(META_PAGE.into()),
            }),
            id_field: "id".into(),
            // The webhook carries only ids: the first step fetches the lead's answers from the Graph API. Once in
            // the CRM, the lead gets a WhatsApp hello (an SMS if WhatsApp fails for the number).
            route: vec!["meta_details".into(), "crm".into(), "hello".into()],
            reconcile: Some(ReconcileConfig {
                interval_seconds: 60,
                lookback_minutes: 60,
                overlap_minutes: 5,
                form_ids: vec![META_FORM.into()],
                ..Default::default()
            }),
            ..source()
        },
    );
    c.sources.insert(
        "google_ads".into(),
        SourceConfig {
            settings: SourceSettings::GoogleAds(GoogleAdsSourceSettings {
                key_env: Some(GOOGLE_KEY_ENV.into()),
                deliver_test_leads: false,
            }),
            id_field: "id".into(),
            // Google's webhook carries the answers themselves: straight to the CRM, with the Meta leads' mapping,
            // then the first contact.
            route: vec!["crm".into(), "hello".into()],
            ..source()
        },
    );
    c.sources.insert(
        "partner_api".into(),
        SourceConfig { id_field: "/lead/ref".into(), route: vec!["crm".into()], ..source() },
    );
    let backoff = BackoffConfig { base_ms: 500, cap_ms: 30_000, max_attempts: 10, budget_seconds: 3600 };
    let breaker = BreakerConfig { consecutive_failures: 5, failure_ratio: 0.5, window: 20, cooldown_ms: 15_000 };
    // Every demo target: on the mock, quick timeouts, the same retry and breaker settings.
    let target = |url: String, strategy: Strategy, concurrency: u32| TargetConfig {
        settings: TargetSettings::Http,
        url,
        method: None,
        strategy: Some(strategy),
        api_version: "v21.0".into(),
        mapping: Vec::new(),
        rate: None,
        search_url: None,
        record_url: None,
        id_pointer: "/id".into(),
        headers: BTreeMap::new(),
        auth: None,
        timeout_ms: 1_500,
        concurrency,
        backoff: backoff.clone(),
        breaker: breaker.clone(),
        classify: Default::default(),
        max_lead_age_minutes: None,
        fallback: None,
        auto_replay: false,
        on_failure: None,
        first_contact: Default::default(),
        missing_data: None,
        stray: Vec::new(),
    };
    c.targets.insert(
        "crm".into(),
        TargetConfig {
            settings: TargetSettings::Hubspot(crate::config::HubspotSettings {
                object: None,
                id_property: Some("leadline_id".into()),
            }),
            strategy: None,
            auth: Some(crate::config::AuthConfig::BearerEnv(HUBSPOT_TOKEN_ENV.into())),
            mapping: hubspot_mapping(),
            missing_data: demo_missing_data(),
            ..target(base.clone(), Strategy::Upsert, 2)
        },
    );
    c.targets.insert(
        "notify".into(),
        TargetConfig {
            // A follow-up hours late is worse than none: replayed old leads get a call task instead.
            max_lead_age_minutes: Some(30),
            mapping: welcome_sms_mapping(),
            fallback: Some("call_task".into()),
            ..target(format!("{base}/notify/{{external_id}}"), Strategy::Upsert, 4)
        },
    );
    c.targets.insert(
        "meta_details".into(),
        TargetConfig {
            settings: TargetSettings::MetaLead(crate::config::MetaLeadSettings {
                access_token_env: Some(META_TOKEN_ENV.into()),
            }),
            strategy: None,
            ..target(format!("{base}/graph"), Strategy::Upsert, 4)
        },
    );
    c.targets.insert("call_task".into(), target(format!("{base}/tasks/{{external_id}}"), Strategy::Upsert, 4));
    c.targets.insert(
        "hello".into(),
        TargetConfig {
            settings: TargetSettings::Whatsapp(crate::config::WhatsappSettings {
                access_token_env: Some(WHATSAPP_TOKEN_ENV.into()),
                message: Some(crate::config::WhatsappConfig {
                    phone_number_id: "106540352242922".into(),
                    template: "lead_welcome".into(),
                    language: "de".into(),
                    parameters: vec!["first_name".into()],
                    app_secret_env: Some(WHATSAPP_SECRET_ENV.into()),
                    verify_token_env: None,
                }),
            }),
            strategy: None,
            mapping: first_contact_mapping(),
            // A hello hours late is worse than none: replayed old leads get a call task instead.
            max_lead_age_minutes: Some(60),
            fallback: Some("call_task".into()),
            on_failure: Some("sms".into()),
            ..target(format!("http://{}", contact.whatsapp), Strategy::Upsert, 4)
        },
    );
    let status_callback = (listen.port() != 0).then(|| format!("http://{listen}/receipts/sms/sms"));
    c.targets.insert(
        "sms".into(),
        TargetConfig {
            settings: TargetSettings::Sms(Some(crate::config::SmsConfig {
                account_sid: mock_twilio::ACCOUNT_SID.into(),
                auth_token_env: TWILIO_TOKEN_ENV.into(),
                from: Some("+15005550006".into()),
                messaging_service_sid: None,
                body: "Hi {first_name}, thanks for your request: we will call you shortly.".into(),
                status_callback,
            })),
            strategy: None,
            mapping: first_contact_mapping(),
            ..target(format!("http://{}", contact.twilio), Strategy::Upsert, 4)
        },
    );
    c.inline_secrets.insert(WHATSAPP_TOKEN_ENV.into(), mock_whatsapp::TOKEN.into());
    c.inline_secrets.insert(WHATSAPP_SECRET_ENV.into(), mock_whatsapp::APP_SECRET.into());
    c.inline_secrets.insert(TWILIO_TOKEN_ENV.into(), mock_twilio::AUTH_TOKEN.into());
    c.inline_secrets.insert(WEBFORM_SECRET_ENV.into(), "demo-webform-secret".into());
    c.inline_secrets.insert(GOOGLE_KEY_ENV.into(), GOOGLE_KEY.into());
    c.inline_secrets.insert(META_SECRET_ENV.into(), "demo-meta-app-secret".into());
    c.inline_secrets.insert(META_VERIFY_ENV.into(), "demo-verify-token".into());
    c.inline_secrets.insert(META_TOKEN_ENV.into(), mock_crm::GRAPH_TOKEN.into());
    c.inline_secrets.insert(HUBSPOT_TOKEN_ENV.into(), mock_hubspot::TOKEN.into());
    // A demo lasts minutes, not days: silences and hourly digests are shortened so they can be seen.
    c.monitor.volume.silence_minutes = 10;
    c.monitor.digest_interval_minutes = 15;
    c
}

/// The CRM's data fallback in the demo: during the "field-format change" a lead whose phone HubSpot refuses is
/// written without it, its `hs_lead_status` saying so, and listed as "Needs a person" — not a dead letter.
/// `LEADLINE_DEMO_MISSING_DATA=off` leaves it out, so those leads become data dead letters as without the setting
/// (the end-to-end tests of fixing and replaying them start the demo so).
pub fn demo_missing_data() -> Option<crate::config::MissingDataConfig> {
    if std::env::var("LEADLINE_DEMO_MISSING_DATA").is_ok_and(|v| v == "off") {
        return None;
    }
    Some(crate::config::MissingDataConfig {
        drop: vec!["phone".into()],
        tag: Some(crate::config::MissingDataTag {
            property: "hs_lead_status".into(),
            value: "missing data: {fields}".into(),
        }),
        task: None,
    })
}

/// Length of one turn of the demo's fault schedule.
pub const CYCLE: Duration = Duration::from_secs(600);

/// The background noise of every endpoint, in every phase: network blips and timeouts after the write.
fn noise() -> Behaviour {
    Behaviour { blip_ratio: 0.02, hang_after_write_ratio: 0.01, hang_ms: 2_500, latency_ms: 20, ..Default::default() }
}

/// What the demo's HubSpot does `elapsed` into the demo: a named phase and its behaviour. Pure, so it is tested.
pub fn behaviour_at(elapsed: Duration) -> (&'static str, HubspotBehaviour) {
    let t = elapsed.as_secs() % CYCLE.as_secs();
    let normal = HubspotBehaviour {
        blip_ratio: 0.02,
        hang_after_write_ratio: 0.01,
        hang_ms: 2_500,
        latency_ms: 20,
        ..Default::default()
    };
    match t {
        0..=119 => ("normal", normal),
        120..=164 => (
            "maintenance window (503 with Retry-After)",
            HubspotBehaviour { maintenance_retry_after: Some(20), ..normal },
        ),
        165..=239 => ("normal", normal),
        240..=299 => (
            "rate limited (429 SECONDLY)",
            HubspotBehaviour { secondly: Some(Secondly { max: 1, interval_ms: 2_000 }), ..normal },
        ),
        300..=419 => (
            "field-format change (a phone validation rule refuses national numbers)",
            HubspotBehaviour { strict_phone: true, ..normal },
        ),
        420..=449 => ("expired token (401)", HubspotBehaviour { token_expired: true, ..normal }),
        _ => ("normal", normal),
    }
}

/// How far into the demo's timeline the partner API falls silent, as a broken integration would (and stays
/// silent). With `silence_minutes = 10`, its silence alert is due 30 minutes into the timeline: start the demo at
/// `LEADLINE_DEMO_CLOCK_OFFSET=1800` to see it at once.
pub const PARTNER_SILENT_AT: Duration = Duration::from_secs(20 * 60);

/// Where the demo's schedule starts, in seconds: `LEADLINE_DEMO_CLOCK_OFFSET` (default 0). Tests and guided tours
/// use it to begin in a given phase, e.g. `420` for the expired token. The demo's timeline then began that long
/// before the start: its seeded history covers that time (the partner's silence included, from 1200), and the
/// monitor is told it has been listening since (`StartOptions::listened_before`).
pub fn clock_offset() -> Duration {
    std::env::var("LEADLINE_DEMO_CLOCK_OFFSET")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or_default()
}

/// Puts the mock endpoints in the phase the schedule starts in, at once. Called as soon as the mock is up, before
/// Leadline prints its link: whoever sends leads right after that (a person, an end-to-end test) meets the phase
/// [`clock_offset`] asked for, not a normal HubSpot for the moment until [`run_schedule`]'s first tick.
pub fn enter_schedule(crm: &MockCrm) {
    crm.set_behaviour(noise());
    crm.hubspot().set(behaviour_at(clock_offset()).1);
}

/// Switches the mock HubSpot's behaviour along [`behaviour_at`], forever; the other mock endpoints (SMS, tasks)
/// only have background noise.
/// Records (and contacts, logs) the demo's mock CRM keeps; older ones are forgotten once a minute.
pub const DEMO_CRM_KEEPS: usize = 200;

pub async fn run_schedule(crm: MockCrm) {
    let (offset, start) = (clock_offset(), tokio::time::Instant::now());
    let mut last = "";
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    enter_schedule(&crm);
    let mut seconds = 0u64;
    loop {
        tick.tick().await;
        let (phase, behaviour) = behaviour_at(offset + start.elapsed());
        if phase != last {
            tracing::info!(phase, "demo HubSpot");
            last = phase;
        }
        crm.hubspot().set(behaviour);
        // The mock CRM lives in the app's process: once a minute it forgets what the demo no longer shows (the
        // newest 200 records are kept, idempotency keys for ten minutes — the demo's retries come within
        // seconds), so a demo left running does not grow.
        seconds += 1;
        if seconds % 60 == 0 {
            crm.forget_old(DEMO_CRM_KEEPS, Duration::from_secs(600));
            crm.hubspot().forget_old(DEMO_CRM_KEEPS);
        }
    }
}

/// Relative traffic by hour of day (0..24): quiet nights, a morning peak, a lunch dip, an evening tail.
pub fn daily_rhythm(hour: u32) -> f64 {
    const RHYTHM: [f64; 24] = [
        0.10, 0.06, 0.05, 0.05, 0.06, 0.10, 0.25, 0.50, 0.85, 1.00, 1.00, 0.90, //
        0.70, 0.80, 0.95, 0.95, 0.90, 0.80, 0.65, 0.55, 0.45, 0.35, 0.25, 0.15,
    ];
    RHYTHM[(hour % 24) as usize]
}

const FIRST: [&str; 8] = ["Anna", "Ben", "Clara", "David", "Elif", "Farid", "Greta", "Hugo"];
const LAST: [&str; 8] = ["Schmidt", "Novak", "Rossi", "Jensen", "Kaya", "Dubois", "Silva", "Berg"];

/// Leads per minute the demo traffic sends in total at `hour` (UTC), with `per_minute` at the daily peak.
fn traffic_per_minute(hour: u32, per_minute: f64) -> f64 {
    (per_minute * daily_rhythm(hour)).max(per_minute * 0.2)
}

/// Leads per hour the demo traffic sends from `source` at `hour` (UTC) with `per_minute` at the peak: the same
/// rhythm [`run_traffic`] follows, so [`seed_history`] can give the sources a believable past.
pub fn hourly_rate(source: &str, hour: u32, per_minute: f64) -> f64 {
    let share = match source {
        "webform" => 0.375,
        "google_ads" => 0.125,
        "meta_ads" | "partner_api" => 0.25,
        _ => 0.0,
    };
    traffic_per_minute(hour, per_minute) * 60.0 * share
}

/// Gives the demo's sources four weeks of hourly history (weekends quieter) and per-minute history for the last
/// day and the minutes of this hour before the start, so volume-drop and silence detection work from the first
/// minutes instead of after weeks of learning, and the charts have a past. What is already present is kept.
///
/// The history is the demo's timeline: started at an offset past [`PARTNER_SILENT_AT`], the partner API has no
/// events after it fell silent, so the silence the monitor sees is the one the timeline tells.
pub async fn seed_history(
    store: &crate::store::Store,
    config: &Config,
    now: chrono::DateTime<chrono::Utc>,
    per_minute: f64,
) -> anyhow::Result<()> {
    let since_timeline_began = chrono::Duration::from_std(clock_offset()).unwrap_or_default();
    let partner_silent_from = now - since_timeline_began + chrono::Duration::from_std(PARTNER_SILENT_AT)?;
    let points = history_points(now, partner_silent_from, per_minute, &mut rand::rng());
    store.seed_event_history(&points).await?;
    store.seed_delivered_history(&delivered_points(&points, config)).await
}

/// The demo's past was delivered: each seeded event counts once as delivered at every target of its source's
/// route in `config`, in the same bucket (so the delivery charts have the same past as the volume charts instead
/// of an hour of arrivals with nothing sent). Each point's `source` is the target.
pub fn delivered_points(events: &[EventCountPoint], config: &Config) -> Vec<EventCountPoint> {
    let mut sums: BTreeMap<(&str, i64, chrono::DateTime<chrono::Utc>), f64> = BTreeMap::new();
    for p in events {
        let route = config.sources.get(&p.source).map(|s| s.route.as_slice()).unwrap_or_default();
        for target in route {
            *sums.entry((target.as_str(), p.resolution_seconds, p.at)).or_default() += p.events;
        }
    }
    sums.into_iter()
        .map(|((target, resolution_seconds, at), events)| EventCountPoint {
            source: target.to_string(),
            resolution_seconds,
            at,
            events,
        })
        .collect()
}

/// The points of [`seed_history`]: hourly counts for four weeks and per-minute counts for the last day up to the
/// minute `now` falls in (that minute is counted from the events themselves). The hours the minutes cover are
/// their sums, so rolling the minutes up into hours later changes nothing; the partner API has no event in or
/// after the minute `partner_silent_from` falls in.
pub fn history_points(
    now: chrono::DateTime<chrono::Utc>,
    partner_silent_from: chrono::DateTime<chrono::Utc>,
    per_minute: f64,
    rng: &mut impl Rng,
) -> Vec<EventCountPoint> {
    use chrono::{Datelike, Timelike};
    const SOURCES: [&str; 4] = ["webform", "meta_ads", "partner_api", "google_ads"];
    let hour_ms = 3_600_000i64;
    let current = now.timestamp_millis() / hour_ms * hour_ms;
    let silent_ms = partner_silent_from.timestamp_millis();
    // Expected leads of `source` per hour in the hour starting at `at` (Unix ms).
    let expected = |source: &str, at: i64| {
        let t = chrono::DateTime::from_timestamp_millis(at).unwrap_or_default();
        let weekly = if t.weekday().num_days_from_monday() >= 5 { 0.6 } else { 1.0 };
        hourly_rate(source, t.hour(), per_minute) * weekly
    };
    // The share of `[at, at + len)` before the partner fell silent (1 for the other sources).
    let heard = |source: &str, at: i64, len: i64| {
        if source == "partner_api" {
            ((silent_ms - at) as f64 / len as f64).clamp(0.0, 1.0)
        } else {
            1.0
        }
    };
    let point = |source: &str, resolution_seconds: i64, at: i64, events: f64| EventCountPoint {
        source: source.to_string(),
        resolution_seconds,
        at: chrono::DateTime::from_timestamp_millis(at).unwrap_or_default(),
        events,
    };
    let mut points: Vec<EventCountPoint> = Vec::new();
    // Minutes: the last day, and this hour up to the start; summed per hour.
    let first_minute = current - 24 * hour_ms;
    let mut hour_sums: std::collections::HashMap<(&str, i64), f64> = std::collections::HashMap::new();
    for at in (first_minute..now.timestamp_millis() / 60_000 * 60_000).step_by(60_000) {
        let hour = at / hour_ms * hour_ms;
        for source in SOURCES {
            // A minute the partner was silent in, even in part, has none of its leads.
            if heard(source, at, 60_000) < 1.0 {
                continue;
            }
            let events = (expected(source, hour) / 60.0 * rng.random_range(0.7..1.3)).round();
            *hour_sums.entry((source, hour)).or_default() += events;
            points.push(point(source, 60, at, events));
        }
    }
    for h in 1..=28 * 24 {
        let at = current - h * hour_ms;
        for source in SOURCES {
            let events = if at >= first_minute {
                hour_sums.get(&(source, at)).copied().unwrap_or(0.0)
            } else {
                (expected(source, at) * rng.random_range(0.9..1.1) * heard(source, at, hour_ms)).round()
            };
            points.push(point(source, 3600, at, events));
        }
    }
    points
}

/// Posts synthetic leads to the ingest server at `ingest` (about `per_minute` at the daily peak) forever.
/// The `partner_api` source falls silent `partner_silent_at` into the demo's timeline (which began
/// [`clock_offset`] before the start), as a broken integration would. Every Meta lead is listed by the mock
/// Graph API on `crm`, but one in ten of their webhooks is "lost" on the way, so reconciliation has something to
/// find.
pub async fn run_traffic(ingest: SocketAddr, per_minute: f64, partner_silent_at: Duration, crm: MockCrm) {
    let client = reqwest::Client::new();
    let (offset, start) = (clock_offset(), tokio::time::Instant::now());
    let mut n: u64 = 0;
    let mut meta_sent: u64 = 0;
    loop {
        let hour = chrono::Timelike::hour(&chrono::Utc::now());
        let rate = traffic_per_minute(hour, per_minute) / 60.0;
        let wait = { -(1.0 - rand::rng().random::<f64>()).ln() / rate };
        tokio::time::sleep(Duration::from_secs_f64(wait.min(30.0))).await;
        n += 1;
        let (url, body, header, answers) = synthetic_request(ingest, n, offset + start.elapsed() < partner_silent_at);
        if url.ends_with("/meta_ads") {
            if let Some(mut value) = serde_json::from_str::<serde_json::Value>(&body)
                .ok()
                .and_then(|b| b.pointer("/entry/0/changes/0/value").cloned())
            {
                // Meta keeps the answers; the webhook carried only ids.
                value["field_data"] = answers.unwrap_or_default();
                let id = value.get("leadgen_id").map(|v| v.to_string()).unwrap_or_default();
                crm.list_lead(META_FORM, &id, chrono::Utc::now(), value);
            }
            meta_sent += 1;
            // Every tenth webhook is "lost", starting early so there is something to find soon after start.
            if meta_sent % META_WEBHOOK_LOSS_EVERY == 3 {
                continue;
            }
        }
        let mut req = client.post(&url).header("content-type", "application/json").body(body.clone());
        if let Some((name, value)) = &header {
            req = req.header(name.as_str(), value.as_str());
        }
        match req.send().await {
            Ok(r) if r.status().is_success() => {}
            Ok(r) => tracing::warn!(status = %r.status(), url, "demo traffic rejected"),
            Err(e) => tracing::warn!(error = %e, "demo traffic failed"),
        }
        // Sources retry webhooks: now and then the same one arrives twice.
        if rand::rng().random_bool(0.03) {
            let mut req = client.post(&url).header("content-type", "application/json").body(body);
            if let Some((name, value)) = header {
                req = req.header(name, value);
            }
            let _ = req.send().await;
        }
    }
}

/// The CRM's mapping: HubSpot contact properties from the three sources' lead shapes (a web form's flat fields,
/// the partner's `lead` object, a Meta lead's `fields`). The phone goes as the lead gave it, so the demo's
/// "field-format change" has something to refuse (the fix: a `phone_e164` transform, or fix and replay).
fn hubspot_mapping() -> Vec<crate::features::targets::mapping::FieldRule> {
    serde_json::from_value(json!([
        {"to": "leadline_id", "from": "$external_id", "required": true},
        {"to": "email", "from": ["email", "/lead/email", "/fields/email"], "transform": ["trim", "lowercase"], "required": true},
        {"to": "firstname", "from": ["name", "/lead/name", "/fields/full_name"], "transform": ["trim", "first_name"]},
        {"to": "lastname", "from": ["name", "/lead/name", "/fields/full_name"], "transform": ["trim", "last_name"]},
        {"to": "phone", "from": ["phone", "/lead/phone", "/fields/phone_number"], "transform": ["trim"]},
        {"to": "leadline_source", "from": "$source", "transform": [{"map": {"values": {
            "webform": "Web form", "meta_ads": "Facebook Lead Ads", "google_ads": "Google Ads lead form",
            "partner_api": "Partner API"}, "default": "Other"}}]},
        {"to": "hs_lead_status", "constant": "NEW"}
    ]))
    .expect("the demo's mapping is valid")
}

/// The welcome SMS: a field mapping (visible on the Targets page) from the web form's lead and the CRM step's
/// result to the SMS service's request.
fn welcome_sms_mapping() -> Vec<crate::features::targets::mapping::FieldRule> {
    serde_json::from_value(json!([
        {"to": "/lead/phone", "from": "phone", "transform": [{"phone_e164": {"default_country": "+49"}}], "required": true},
        {"to": "/lead/first_name", "from": "name", "transform": ["trim", "first_name"], "default": "there"},
        {"to": "/lead/template", "constant": "welcome-v2"},
        {"to": "/previous_steps/crm/crm_id", "from": "/$previous_steps/crm/crm_id", "required": true},
        {"to": "/external_id", "from": "$external_id"}
    ]))
    .expect("the demo's mapping is valid")
}

/// The first contact's record (WhatsApp and SMS alike): the phone in E.164 and the first name, from a Meta or
/// Google lead's `fields`.
fn first_contact_mapping() -> Vec<crate::features::targets::mapping::FieldRule> {
    serde_json::from_value(json!([
        {"to": "to", "from": ["phone", "/lead/phone", "/fields/phone_number"],
            "transform": [{"phone_e164": {"default_country": "+49"}}], "required": true},
        {"to": "first_name", "from": ["name", "/lead/name", "/fields/full_name"], "transform": ["trim", "first_name"], "default": "there"}
    ]))
    .expect("the demo's mapping is valid")
}

/// One synthetic request: URL, body and signature header, and for a Meta lead the answers Meta keeps
/// (`field_data`, fetched by the lead's first step). Lead `n` picks its source and data.
pub fn synthetic_request(
    ingest: SocketAddr,
    n: u64,
    partner_active: bool,
) -> (String, String, Option<(String, String)>, Option<serde_json::Value>) {
    let mut rng = rand::rng();
    let first = FIRST[rng.random_range(0..FIRST.len())];
    let last = LAST[rng.random_range(0..LAST.len())];
    let phone = if rng.random_bool(0.85) {
        format!("+49151{:08}", rng.random_range(0..100_000_000u32))
    } else {
        format!("0151 {:04} {:04}", rng.random_range(0..10_000u32), rng.random_range(0..10_000u32))
    };
    let email = format!("{}.{}{}@example.com", first.to_lowercase(), last.to_lowercase(), n);
    let pick = n % 4;
    if pick == 0 {
        let id = 900_000_000_000u64 + n;
        let body = json!({"object": "page", "entry": [{"id": 1234567890, "time": chrono::Utc::now().timestamp(),
            "changes": [{"field": "leadgen", "value": {"leadgen_id": id, "page_id": 1234567890, "form_id": 4242,
            "ad_id": 777, "created_time": chrono::Utc::now().timestamp()}}]}]})
        .to_string();
        let sig = signature::sign(b"demo-meta-app-secret", body.as_bytes());
        // Field names as a Meta lead form defines them: standard questions and one custom question.
        let when = ["morning", "afternoon", "evening"][(n % 3) as usize];
        let answers = json!([
            {"name": "full_name", "values": [format!("{first} {last}")]},
            {"name": "email", "values": [email]},
            {"name": "phone_number", "values": [phone]},
            {"name": "when_should_we_call?", "values": [when]}
        ]);
        (format!("http://{ingest}/ingest/meta_ads"), body, Some(("X-Hub-Signature-256".into(), sig)), Some(answers))
    } else if n % 8 == 6 {
        // Google's `WebhookLead` (Webhook implementation guide): answers by column id, int64 ids, the key in the
        // body; now and then a test lead from the form editor's "send test data".
        let body = json!({"lead_id": format!("GL-{n}-{}", rng.random::<u32>()), "api_version": "1.0",
        "form_id": 40_000_000_123u64, "campaign_id": 50_000_000_456u64, "adgroup_id": 60_000_000_789u64,
        "creative_id": 70_000_000_012u64, "gcl_id": format!("Cj0KCQ-demo-{n}"), "google_key": GOOGLE_KEY,
        "is_test": n % 80 == 6,
        "user_column_data": [
            {"column_name": "Full Name", "string_value": format!("{first} {last}"), "column_id": "FULL_NAME"},
            {"column_name": "User Email", "string_value": email, "column_id": "EMAIL"},
            {"column_name": "User Phone", "string_value": phone, "column_id": "PHONE_NUMBER"}
        ]})
        .to_string();
        (format!("http://{ingest}/ingest/google_ads"), body, None, None)
    } else if pick == 1 && partner_active {
        let body = json!({"lead": {"ref": format!("P-{n}"), "name": format!("{first} {last}"), "phone": phone,
            "email": email, "product": "solar-check"}})
        .to_string();
        (format!("http://{ingest}/ingest/partner_api"), body, None, None)
    } else {
        let body = json!({"id": format!("wf-{n}-{}", rng.random::<u32>()), "name": format!("{first} {last}"),
            "email": email, "phone": phone, "form": "contact-us", "consent": true})
        .to_string();
        let sig = signature::sign(b"demo-webform-secret", body.as_bytes());
        (format!("http://{ingest}/ingest/webform"), body, Some(("X-Signature-256".into(), sig)), None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_covers_every_fault_each_cycle() {
        let phases: std::collections::BTreeSet<&str> =
            (0..CYCLE.as_secs()).map(|s| behaviour_at(Duration::from_secs(s)).0).collect();
        assert_eq!(phases.len(), 5, "{phases:?}");
        assert_eq!(behaviour_at(Duration::from_secs(130)).1.maintenance_retry_after, Some(20));
        assert!(behaviour_at(Duration::from_secs(430)).1.token_expired);
        assert!(behaviour_at(Duration::from_secs(350)).1.strict_phone);
        assert_eq!(behaviour_at(Duration::from_secs(250)).1.secondly.map(|s| s.max), Some(1));
        // The schedule repeats.
        assert_eq!(behaviour_at(Duration::from_secs(130 + 600)).0, behaviour_at(Duration::from_secs(130)).0);
    }

    #[test]
    fn the_seeded_past_is_delivered_along_each_sources_route() {
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let config = demo_config(addr, ContactMocks { whatsapp: addr, twilio: addr }, addr, None);
        let at: chrono::DateTime<chrono::Utc> = "2026-03-02T10:00:00Z".parse().unwrap();
        let event =
            |source: &str, events| EventCountPoint { source: source.into(), resolution_seconds: 60, at, events };
        let delivered =
            delivered_points(&[event("webform", 5.0), event("meta_ads", 3.0), event("partner_api", 2.0)], &config);
        let got: BTreeMap<&str, f64> = delivered.iter().map(|p| (p.source.as_str(), p.events)).collect();
        // webform → crm, notify; meta_ads → meta_details, crm, hello; partner_api → crm.
        assert_eq!(got, BTreeMap::from([("crm", 10.0), ("hello", 3.0), ("meta_details", 3.0), ("notify", 5.0)]));
        assert!(delivered.iter().all(|p| p.at == at && p.resolution_seconds == 60));
    }

    #[test]
    fn seeded_history_has_no_partner_lead_after_its_silence_and_hours_agree_with_their_minutes() {
        let now: chrono::DateTime<chrono::Utc> = "2026-03-02T10:17:42Z".parse().unwrap();
        let points = |silent_from| history_points(now, silent_from, 240.0, &mut rand::rng());
        let minutes = |p: &[EventCountPoint], source: &str| -> Vec<chrono::DateTime<chrono::Utc>> {
            p.iter().filter(|p| p.source == source && p.resolution_seconds == 60).map(|p| p.at).collect()
        };
        // Started 29 min 57 s into the timeline: the partner fell silent 9 min 57 s ago, at 10:07:45.
        let silent_from: chrono::DateTime<chrono::Utc> = "2026-03-02T10:07:45Z".parse().unwrap();
        let seeded = points(silent_from);
        let partner = minutes(&seeded, "partner_api");
        assert_eq!(partner.iter().max().map(|t| t.to_rfc3339()).as_deref(), Some("2026-03-02T10:06:00+00:00"));
        assert_eq!(
            minutes(&seeded, "webform").iter().max().map(|t| t.to_rfc3339()).as_deref(),
            Some("2026-03-02T10:16:00+00:00")
        );
        // Each hour the minutes cover is their sum: a roll-up of the minutes into hours changes nothing.
        for source in ["webform", "partner_api"] {
            let hour: chrono::DateTime<chrono::Utc> = "2026-03-02T08:00:00Z".parse().unwrap();
            let sum: f64 = seeded
                .iter()
                .filter(|p| p.source == source && p.resolution_seconds == 60)
                .filter(|p| p.at >= hour && p.at < hour + chrono::Duration::hours(1))
                .map(|p| p.events)
                .sum();
            let hourly = seeded.iter().find(|p| p.source == source && p.resolution_seconds == 3600 && p.at == hour);
            assert_eq!(hourly.map(|p| p.events), Some(sum), "{source}");
            assert!(sum > 0.0);
        }
        // Silent since yesterday: no partner minute at all, and its older hours stop at the silence.
        let seeded = points(now - chrono::Duration::hours(30));
        assert!(minutes(&seeded, "partner_api").is_empty());
        let last_hour = seeded.iter().filter(|p| p.source == "partner_api" && p.events > 0.0).map(|p| p.at).max();
        assert_eq!(
            last_hour,
            Some(now - chrono::Duration::hours(30) - chrono::Duration::minutes(17) - chrono::Duration::seconds(42))
        );
        // The silence still to come: the partner is heard up to the start.
        let seeded = points(now + chrono::Duration::minutes(5));
        assert_eq!(minutes(&seeded, "partner_api").iter().max(), minutes(&seeded, "webform").iter().max());
    }

    #[test]
    fn demo_config_is_valid() {
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let c = demo_config(a, ContactMocks { whatsapp: a, twilio: a }, "127.0.0.1:2".parse().unwrap(), None);
        crate::features::checks::check(&c).unwrap();
    }
}
