//! Delivery receipts of first contacts: `POST /receipts/whatsapp/{target}` takes WhatsApp's status webhooks
//! (signed `X-Hub-Signature-256` with the app secret; `GET` answers Meta's subscription handshake) and
//! `POST /receipts/sms/{target}` Twilio's status callbacks (signed `X-Twilio-Signature` with the auth token over
//! the callback address Leadline gave Twilio). Each receipt is kept in the lead's story; a step waiting on it (in
//! doubt) decides at once; a failure of a delivered step starts its `on_failure` target or makes it a dead letter
//! (`Store::apply_receipt`). A Twilio callback or inbound message that says STOP puts the number on the opt-out
//! list. Nothing unsigned is read.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::{Path, Query, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;

use crate::config::{Config, TargetSettings, WhatsappSettings};
use crate::features::app::App;
use crate::features::ingest::signature;
use crate::features::targets::{sms::wire as twilio, whatsapp::wire as whatsapp};
use crate::model::Receipt;

pub fn router(app: App) -> Router {
    Router::new()
        .route("/receipts/whatsapp/{target}", get(whatsapp_handshake).post(whatsapp_statuses))
        .route("/receipts/sms/{target}", post(sms_callback))
        .with_state(app)
}

fn refuse(status: StatusCode, why: impl Into<String>) -> Response {
    (status, axum::Json(serde_json::json!({ "error": why.into() }))).into_response()
}

/// The secret in `var` of target `name`'s setting `key`.
fn secret(config: &Config, name: &str, key: &str, var: Option<&String>) -> Result<String, Box<Response>> {
    let var = var.ok_or_else(|| {
        Box::new(refuse(StatusCode::FORBIDDEN, format!("targets.{name}.{key} is not set: receipts cannot be checked")))
    })?;
    config.secret(&format!("targets.{name}.{key}"), var).map_err(|e| {
        tracing::error!(target = %name, error = %e, "receipt secret missing");
        Box::new(refuse(StatusCode::SERVICE_UNAVAILABLE, "the secret that checks receipts is not set"))
    })
}

async fn whatsapp_handshake(
    State(app): State<App>,
    Path(target): Path<String>,
    Query(params): Query<BTreeMap<String, String>>,
) -> Response {
    let config = &*app.config;
    let Some(TargetSettings::Whatsapp(WhatsappSettings { message: Some(w), .. })) =
        config.targets.get(&target).map(|t| &t.settings)
    else {
        return refuse(StatusCode::NOT_FOUND, format!("no whatsapp target `{target}`"));
    };
    let expected = match secret(config, &target, "whatsapp.verify_token_env", w.verify_token_env.as_ref()) {
        Ok(s) => s,
        Err(r) => return *r,
    };
    let given = params.get("hub.verify_token").map(String::as_bytes).unwrap_or_default();
    match (params.get("hub.mode").map(String::as_str), params.get("hub.challenge")) {
        (Some("subscribe"), Some(challenge))
            if bool::from(subtle::ConstantTimeEq::ct_eq(given, expected.as_bytes())) =>
        {
            (StatusCode::OK, challenge.clone()).into_response()
        }
        _ => refuse(StatusCode::FORBIDDEN, "the verify token does not match"),
    }
}

async fn whatsapp_statuses(
    State(app): State<App>,
    Path(target): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let config = &*app.config;
    let Some(TargetSettings::Whatsapp(WhatsappSettings { message: Some(w), .. })) =
        config.targets.get(&target).map(|t| &t.settings)
    else {
        return refuse(StatusCode::NOT_FOUND, format!("no whatsapp target `{target}`"));
    };
    let key = match secret(config, &target, "whatsapp.app_secret_env", w.app_secret_env.as_ref()) {
        Ok(s) => s,
        Err(r) => return *r,
    };
    let given = headers.get("x-hub-signature-256").and_then(|v| v.to_str().ok());
    if signature::verify(key.as_bytes(), &body, given).is_err() {
        tracing::warn!(target = %target, "rejected: WhatsApp receipt signature");
        return refuse(StatusCode::UNAUTHORIZED, "X-Hub-Signature-256 does not match");
    }
    let receipts = match whatsapp::parse_statuses(&body) {
        Ok(r) => r,
        Err(why) => return refuse(StatusCode::BAD_REQUEST, why),
    };
    apply(&app, config, &receipts).await
}

async fn sms_callback(
    State(app): State<App>,
    Path(target): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let config = &*app.config;
    let Some(TargetSettings::Sms(Some(s))) = config.targets.get(&target).map(|t| &t.settings) else {
        return refuse(StatusCode::NOT_FOUND, format!("no sms target `{target}`"));
    };
    let Some(callback) = &s.status_callback else {
        return refuse(StatusCode::FORBIDDEN, format!("targets.{target}.sms.status_callback is not set"));
    };
    let token = match secret(config, &target, "sms.auth_token_env", Some(&s.auth_token_env)) {
        Ok(t) => t,
        Err(r) => return *r,
    };
    // The address Twilio signed: the configured callback as Twilio reaches it, with this request's query (the
    // step's key Leadline added).
    let base = callback.split('?').next().unwrap_or(callback);
    let url = match &query {
        Some(q) if !q.is_empty() => format!("{base}?{q}"),
        _ => base.to_string(),
    };
    let form = form_pairs(&body);
    let given = headers.get("x-twilio-signature").and_then(|v| v.to_str().ok());
    if !twilio::verify(&token, &url, &form, given) {
        tracing::warn!(target = %target, "rejected: Twilio callback signature");
        return refuse(StatusCode::UNAUTHORIZED, "X-Twilio-Signature does not match");
    }
    let now = app.clock.now();
    let get = |k: &str| form.iter().find(|(n, _)| n == k).map(|(_, v)| v.trim().to_string());
    // An inbound message that unsubscribes (Twilio's opt-out keywords), or a callback of a send refused for it.
    let stop = matches!(get("OptOutType").as_deref(), Some("STOP"))
        || get("Body").is_some_and(|b| {
            ["STOP", "STOPALL", "UNSUBSCRIBE", "CANCEL", "END", "QUIT", "OPTOUT"].contains(&b.to_uppercase().as_str())
        });
    if stop {
        if let Some(from) = get("From") {
            if let Err(e) = app.store.opt_out(&from, "the number replied STOP", now).await {
                tracing::error!(error = %format!("{e:#}"), "cannot record an opt-out");
                return refuse(StatusCode::SERVICE_UNAVAILABLE, "cannot record it now");
            }
        }
        return StatusCode::NO_CONTENT.into_response();
    }
    if get("ErrorCode").as_deref() == Some("21610") {
        if let Some(to) = get("To") {
            if let Err(e) = app.store.opt_out(&to, "Twilio: the recipient unsubscribed (21610)", now).await {
                tracing::error!(error = %format!("{e:#}"), "cannot record an opt-out");
            }
        }
    }
    let step =
        query.as_deref().map(form_pairs_str).and_then(|q| q.into_iter().find(|(k, _)| k == "step")).map(|(_, v)| v);
    let Some(receipt) = twilio::parse_callback(&form, step, now) else {
        return StatusCode::NO_CONTENT.into_response();
    };
    apply(&app, config, std::slice::from_ref(&receipt)).await
}

async fn apply(app: &App, config: &Config, receipts: &[Receipt]) -> Response {
    let fallbacks: BTreeMap<String, String> =
        config.targets.iter().filter_map(|(n, t)| Some((n.clone(), t.on_failure.clone()?))).collect();
    for r in receipts {
        // A failure reported while its step is still being written waits for it (at most a lease).
        let mut tries = 0;
        let result = loop {
            match app.store.apply_receipt(r, &fallbacks, app.clock.now()).await {
                Ok(a) if a.step_running && tries < 100 => {
                    tries += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                other => break other,
            }
        };
        match result {
            Ok(applied) => {
                tracing::info!(
                    status = r.status.as_str(),
                    delivery_id = ?applied.delivery_id,
                    fallback = ?applied.fallback_started,
                    failed = applied.step_failed,
                    "receipt"
                );
            }
            Err(e) => {
                // Not answered 2xx: the provider sends it again.
                tracing::error!(error = %format!("{e:#}"), "cannot apply a receipt");
                return refuse(StatusCode::SERVICE_UNAVAILABLE, "cannot record the receipt now");
            }
        }
    }
    if let Some(worker) = &app.worker {
        worker.wake.notify_one();
    }
    StatusCode::OK.into_response()
}

/// The fields of a form-encoded body, in order.
fn form_pairs(body: &[u8]) -> Vec<(String, String)> {
    form_pairs_str(&String::from_utf8_lossy(body))
}

fn form_pairs_str(text: &str) -> Vec<(String, String)> {
    url::form_urlencoded::parse(text.as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned())).collect()
}
