//! Targets: where a lead's steps go. [`connector::Connector`] is what a connector is; each vendor is a folder with
//! its pure wire format (`wire.rs`) and its connector (`mod.rs`); [`connector_for`] is the one place that maps a
//! configured kind to its connector, and [`check`] the one place that runs each kind's checks of its settings
//! (each vendor's `check.rs`). Connectors import neither the delivery worker nor the store.
//!
//! - [`generic`]: any JSON endpoint (`kind = "http"`), with an idempotency strategy and an optional field mapping.
//! - [`hubspot`], [`salesforce`], [`pipedrive`]: each CRM in its own API.
//! - [`meta_lead`]: the first step of a Meta source, which fetches the lead from the Graph API.
//! - [`whatsapp`], [`sms`]: first-contact steps, a message to the lead, sent once ([`contact`]).
//!
//! Beside them: [`mapping`] (a lead → a CRM record), [`classify`] (what a generic answer means), [`vendor`] (what
//! the vendors' wire formats share) and [`request`] (sending a request, reading its answer).

pub mod classify;
pub mod connector;
pub mod contact;
pub mod conversion;
pub mod generic;
pub mod google_ads_conversions;
pub mod hubspot;
pub mod mapping;
pub mod meta_conversions;
pub mod meta_lead;
pub mod pipedrive;
pub mod request;
pub mod salesforce;
pub mod sms;
pub mod vendor;
pub mod whatsapp;

use std::sync::Arc;

use crate::clock::Clock;
use crate::config::{Config, ConfigError, TargetConfig, TargetKind, TargetSettings};

pub use connector::{
    AttemptReport, ConnectionCheck, Connector, ContactBook, Exchange, LinkBook, NearLimit, NoContacts, NoLinks,
    PacingHints, RequestPreview,
};
pub use generic::HttpTarget;
pub use request::{AnswerWatch, Unwatched, EXCERPT_CHARS};

/// Each target's kind-specific settings, checked by the kind's own `check` (the configuration's validation has
/// checked what every target shares: URL, strategy, retries, mapping, references). Fails naming the key.
pub fn check(config: &Config) -> Result<(), ConfigError> {
    for (name, target) in &config.targets {
        let key = format!("targets.{name}");
        match &target.settings {
            // Everything an `http` target has is shared, and checked by the configuration's validation.
            TargetSettings::Http => {}
            TargetSettings::MetaLead(s) => meta_lead::check::check(&key, target, s)?,
            TargetSettings::Pipedrive(s) => pipedrive::check::check(&key, target, s)?,
            TargetSettings::Salesforce(s) => salesforce::check::check(&key, target, s)?,
            TargetSettings::Hubspot(s) => hubspot::check::check(&key, target, s)?,
            TargetSettings::Whatsapp(s) => whatsapp::check::check(&key, target, s)?,
            TargetSettings::Sms(s) => sms::check::check(&key, target, s.as_ref())?,
            TargetSettings::MetaConversions(s) => meta_conversions::check::check(&key, s)?,
            TargetSettings::GoogleAdsConversions(s) => google_ads_conversions::check::check(&key, s)?,
        }
    }
    Ok(())
}

/// The connector of target `name`, reading its credentials now; it reads the time on `clock`.
pub fn connector_for(
    name: &str,
    config: &TargetConfig,
    all: &Config,
    clock: Clock,
) -> anyhow::Result<Arc<dyn Connector>> {
    Ok(match config.kind() {
        TargetKind::Http => Arc::new(HttpTarget::new(name, config, all, clock)?),
        TargetKind::MetaLead => Arc::new(meta_lead::MetaLeadStep::new(name, config, all, clock)?),
        TargetKind::Pipedrive => Arc::new(pipedrive::PipedriveTarget::new(name, config, all, clock)?),
        TargetKind::Salesforce => Arc::new(salesforce::SalesforceTarget::new(name, config, all, clock)?),
        TargetKind::Hubspot => Arc::new(hubspot::HubspotTarget::new(name, config, all, clock)?),
        TargetKind::Whatsapp => Arc::new(whatsapp::WhatsappStep::new(name, config, all, clock)?),
        TargetKind::Sms => Arc::new(sms::SmsStep::new(name, config, all, clock)?),
        TargetKind::MetaConversions => Arc::new(meta_conversions::MetaConversionsStep::new(name, config, all, clock)?),
        TargetKind::GoogleAdsConversions => {
            Arc::new(google_ads_conversions::GoogleConversionsStep::new(name, config, all, clock)?)
        }
    })
}
