//! The checks serde cannot make that belong to the file as a whole: ranges, names, references between
//! sections (a route's targets, a fallback), which fields a kind takes. What a kind's own values must be is
//! checked by the feature that owns the kind (`features::checks`).

use super::*;
use crate::model::AlertKind;

impl TimeSpan {
    fn validate(&self, key: &str) -> Result<(), ConfigError> {
        for (name, v) in [("start", &self.start), ("end", &self.end)] {
            if Self::parse(v).is_none() {
                return Err(invalid(format!("{key}.{name}"), format!("`{v}` is not a time of day as \"HH:MM\"")));
            }
        }
        Ok(())
    }
}

impl ChannelConfig {
    fn validate(&self, key: &str) -> Result<(), ConfigError> {
        let Some(kind) = self.kind() else {
            return Err(invalid(
                format!("{key}.kind"),
                format!(
                    "`{}` is not a channel kind; the kinds are {}",
                    self.settings.name(),
                    ChannelKind::NAMES.join(", ")
                ),
            ));
        };
        let (applies, required): (&[&str], &[&str]) = match kind {
            ChannelKind::Slack => (&["webhook_url_env"], &["webhook_url_env"]),
            ChannelKind::Webhook => (&["url_env", "secret_env"], &["url_env"]),
            ChannelKind::Email => (
                &["smtp_host", "smtp_port", "tls", "username_env", "password_env", "from", "to"],
                &["smtp_host", "from", "to"],
            ),
        };
        for field in ChannelSettings::KEYS {
            let set = self.keys.contains(&field);
            if set && !applies.contains(&field) {
                return Err(invalid(
                    format!("{key}.{field}"),
                    format!("does not apply to kind = \"{}\"", kind.as_str()),
                ));
            }
            if !set && required.contains(&field) {
                return Err(invalid(format!("{key}.{field}"), format!("is required for kind = \"{}\"", kind.as_str())));
            }
        }
        for (field, var) in self.secret_vars() {
            if var.is_empty() || var.contains(['=', ' ']) {
                return Err(invalid(format!("{key}.{field}"), "must name an environment variable"));
            }
        }
        if let Some(email) = self.email() {
            if email.smtp_tls().is_none() {
                return Err(invalid(
                    format!("{key}.tls"),
                    format!("`{}` is not one of starttls, tls, none", email.tls.as_deref().unwrap_or_default()),
                ));
            }
            let host = email.smtp_host.as_deref().unwrap_or_default();
            if host.is_empty() || host.contains(['/', ':', ' ']) {
                return Err(invalid(
                    format!("{key}.smtp_host"),
                    format!("`{host}` is not a host name (no scheme, port or path: `smtp.example.com`)"),
                ));
            }
            if email.smtp_port == Some(0) {
                return Err(invalid(format!("{key}.smtp_port"), "must be greater than 0"));
            }
            if email.username_env.is_some() != email.password_env.is_some() {
                let missing = if email.username_env.is_none() { "username_env" } else { "password_env" };
                return Err(invalid(format!("{key}.{missing}"), "is required with the other half of the SMTP login"));
            }
            let from = email.from.as_deref().unwrap_or_default();
            if from.parse::<lettre::message::Mailbox>().is_err() {
                return Err(invalid(format!("{key}.from"), format!("`{from}` is not an e-mail address")));
            }
            for (i, to) in email.to.iter().enumerate() {
                if to.parse::<lettre::message::Mailbox>().is_err() {
                    return Err(invalid(format!("{key}.to[{i}]"), format!("`{to}` is not an e-mail address")));
                }
            }
        }
        for kind in self.alerts.keys() {
            if kind.parse::<AlertKind>().is_err() {
                return Err(invalid(
                    format!("{key}.alerts.{kind}"),
                    format!(
                        "is not an alert kind; the kinds are {}",
                        AlertKind::ALL.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", ")
                    ),
                ));
            }
        }
        match &self.quiet_hours {
            Some(ChannelQuietHours::Span(span)) => span.validate(&format!("{key}.quiet_hours"))?,
            Some(ChannelQuietHours::Off(true)) => {
                return Err(invalid(
                    format!("{key}.quiet_hours"),
                    "is { start = \"HH:MM\", end = \"HH:MM\" }, or false for none (leave it out for the monitor's)",
                ))
            }
            _ => {}
        }
        for (field, value) in
            [("digest_interval_minutes", self.digest_interval_minutes), ("renotify_minutes", self.renotify_minutes)]
        {
            if value == Some(0) {
                return Err(invalid(format!("{key}.{field}"), "must be greater than 0"));
            }
        }
        if !(1..=300).contains(&self.timeout_seconds) {
            return Err(invalid(format!("{key}.timeout_seconds"), "must be between 1 and 300"));
        }
        Ok(())
    }
}

impl Config {
    /// Checks everything serde cannot: references between sections, ranges, required combinations.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(url) = self.database.url.as_deref() {
            if url.starts_with("postgres://") || url.starts_with("postgresql://") {
                match url::Url::parse(url) {
                    Err(e) => return Err(invalid("database.url", format!("is not a valid PostgreSQL URL: {e}"))),
                    Ok(u) if u.path().trim_start_matches('/').is_empty() => {
                        return Err(invalid("database.url", "names no database: postgres://user@host:port/database"))
                    }
                    Ok(_) => {}
                }
            } else if url.trim().is_empty() {
                return Err(invalid("database.url", "is empty"));
            }
        }
        if self.server.max_body_bytes == 0 {
            return Err(invalid("server.max_body_bytes", "must be greater than 0"));
        }
        for (key, value) in [
            ("server.max_connections", self.server.max_connections as u64),
            ("server.header_timeout_seconds", self.server.header_timeout_seconds),
            ("server.body_timeout_seconds", self.server.body_timeout_seconds),
            ("server.max_ingest_in_flight", self.server.max_ingest_in_flight as u64),
            ("server.min_body_bytes_per_second", self.server.min_body_bytes_per_second),
            ("server.body_stall_seconds", self.server.body_stall_seconds),
            ("server.max_bodies_per_peer", self.server.max_bodies_per_peer as u64),
        ] {
            if value == 0 {
                return Err(invalid(key, "must be greater than 0"));
            }
        }
        self.server.trusted_proxy_networks()?;
        for (i, host) in self.server.allowed_hosts.iter().enumerate() {
            if host.is_empty() || host.contains(['/', ':', ' ']) {
                return Err(invalid(
                    format!("server.allowed_hosts[{i}]"),
                    format!("`{host}` is not a host name (no scheme, port or path: `leads.example.com`)"),
                ));
            }
        }
        let w = &self.worker;
        if w.batch_size == 0 {
            return Err(invalid("worker.batch_size", "must be greater than 0"));
        }
        if w.lease_seconds == 0 {
            return Err(invalid("worker.lease_seconds", "must be greater than 0"));
        }
        self.monitor.validate()?;
        for (name, source) in &self.sources {
            let key = format!("sources.{name}");
            check_name(&key, name)?;
            if source.require_signature && !source.is_signed() {
                return Err(invalid(
                    format!("{key}.require_signature"),
                    "is true but the source has no `signature` = { header, secret_env }: anyone who can reach the \
                     server could post leads to it",
                ));
            }
            if let Some(max) = source.max_body_bytes {
                if max == 0 || max > self.server.max_body_bytes {
                    return Err(invalid(
                        format!("{key}.max_body_bytes"),
                        format!("must be between 1 and server.max_body_bytes ({})", self.server.max_body_bytes),
                    ));
                }
            }
            if source.route.is_empty() {
                return Err(invalid(format!("{key}.route"), "must name at least one target"));
            }
            if let Some(tz) = source.time_zone.as_deref().filter(|tz| tz.parse::<chrono_tz::Tz>().is_err()) {
                return Err(invalid(format!("{key}.time_zone"), format!("`{tz}` is not a time zone")));
            }
            for (i, target) in source.route.iter().enumerate() {
                let Some(tc) = self.targets.get(target) else {
                    return Err(invalid(
                        format!("{key}.route"),
                        format!("names target `{target}`, which is not defined under [targets]"),
                    ));
                };
                let fetch_first = i == 0 && source.kind() == SourceKind::Meta;
                match (tc.kind(), fetch_first) {
                    (TargetKind::MetaLead, false) => {
                        return Err(invalid(
                            format!("{key}.route"),
                            format!("`{target}` (kind = \"meta_lead\") can only be the first step of a Meta source"),
                        ))
                    }
                    (kind, true) if kind != TargetKind::MetaLead => {
                        return Err(invalid(
                            format!("{key}.route"),
                            format!(
                                "must start with a kind = \"meta_lead\" target, not `{target}`: a Meta webhook carries only \
                                 ids, and the lead's answers must be fetched from the Graph API before a CRM sees it"
                            ),
                        ))
                    }
                    _ => {}
                }
            }
            if source.id_field.is_empty() {
                return Err(invalid(format!("{key}.id_field"), "must not be empty"));
            }
            if let Some(r) = &source.reconcile {
                r.validate(&format!("{key}.reconcile"), source.kind())?;
            }
            if let Some(p) = &source.poll {
                p.listing().validate(&format!("{key}.poll"), source.kind())?;
                if source.reconcile.is_some() {
                    return Err(invalid(
                        format!("{key}.reconcile"),
                        "does not go with [poll]: a polled source's list is already read at every poll",
                    ));
                }
            }
            match &source.settings {
                // A polled Meta source needs no webhook secrets; without them it takes no webhooks.
                SourceSettings::Meta(meta) if source.poll.is_some() => {
                    if source.sets_stray("signature") {
                        return Err(invalid(
                            format!("{key}.signature"),
                            "does not apply to kind = \"meta\"; use app_secret_env",
                        ));
                    }
                    if meta.app_secret_env.is_some() != meta.verify_token_env.is_some() {
                        return Err(invalid(
                            format!("{key}.app_secret_env"),
                            "and verify_token_env go together: both to take webhooks as well, neither to only poll",
                        ));
                    }
                }
                SourceSettings::Meta(meta) => {
                    if meta.app_secret_env.is_none() {
                        return Err(invalid(
                            format!("{key}.app_secret_env"),
                            "is required for kind = \"meta\" (Meta signs every webhook)",
                        ));
                    }
                    if meta.verify_token_env.is_none() {
                        return Err(invalid(
                            format!("{key}.verify_token_env"),
                            "is required for kind = \"meta\" (subscription handshake)",
                        ));
                    }
                    if source.sets_stray("signature") {
                        return Err(invalid(
                            format!("{key}.signature"),
                            "does not apply to kind = \"meta\"; use app_secret_env",
                        ));
                    }
                }
                SourceSettings::Generic(generic) => {
                    if let Some(sig) = &generic.signature {
                        if sig.scheme != SignatureScheme::HmacSha256 || sig.url.is_some() {
                            return Err(invalid(
                                format!("{key}.signature.scheme"),
                                "hubspot_v3 (and its url) is for kind = \"crm_stage\" sources: a generic source is signed \
                                 with { header, secret_env }",
                            ));
                        }
                        if sig.header.is_empty() {
                            return Err(invalid(format!("{key}.signature.header"), "must not be empty"));
                        }
                    }
                }
                // `crm_stage` and `google_ads` sources: their own checks (`features::ingest::check_kinds`).
                SourceSettings::CrmStage(_) | SourceSettings::GoogleAds(_) => {}
            }
            if source.sets_stray("stage_webhook") {
                return Err(invalid(format!("{key}.stage_webhook"), "applies only to kind = \"crm_stage\""));
            }
            if source.sets_stray("key_env") || source.sets_stray("deliver_test_leads") {
                return Err(invalid(
                    format!("{key}.key_env"),
                    "and deliver_test_leads apply only to kind = \"google_ads\"",
                ));
            }
            // Any other key of another kind (a `google_ads` source's are refused, with why, by its own check).
            if let Some(stray) = source.stray_keys().first().filter(|_| source.kind() != SourceKind::GoogleAds) {
                return Err(invalid(
                    format!("{key}.{stray}"),
                    format!("does not apply to kind = \"{}\"", source.kind().as_str()),
                ));
            }
        }
        for (name, target) in &self.targets {
            let key = format!("targets.{name}");
            check_name(&key, name)?;
            target.validate(&key)?;
            match (&target.max_lead_age_minutes, &target.fallback) {
                (Some(0), _) => return Err(invalid(format!("{key}.max_lead_age_minutes"), "must be greater than 0")),
                (Some(_), None) => {
                    return Err(invalid(format!("{key}.fallback"), "is required with max_lead_age_minutes"))
                }
                (None, Some(_)) if !target.kind().is_first_contact() => {
                    return Err(invalid(format!("{key}.max_lead_age_minutes"), "is required with fallback"))
                }
                (_, Some(f)) if f == name => {
                    return Err(invalid(format!("{key}.fallback"), "cannot be the target itself"))
                }
                (_, Some(f)) if !self.targets.contains_key(f) => {
                    return Err(invalid(
                        format!("{key}.fallback"),
                        format!("names target `{f}`, which is not defined under [targets]"),
                    ))
                }
                _ => {}
            }
            if let Some(f) = &target.on_failure {
                if f == name || !self.targets.contains_key(f) {
                    return Err(invalid(
                        format!("{key}.on_failure"),
                        format!("names `{f}`, which is not another target defined under [targets]"),
                    ));
                }
            }
            if let Some(md) = &target.missing_data {
                let key = format!("{key}.missing_data");
                if target.mapping.is_empty() {
                    return Err(invalid(
                        key,
                        "needs a field mapping: a lead goes without a field by leaving its rule out of the record",
                    ));
                }
                if md.drop.is_empty() || md.drop.iter().any(|f| f.trim().is_empty()) {
                    return Err(invalid(format!("{key}.drop"), "must list at least one field, none of them empty"));
                }
                // The fallback exists for a lead whose e-mail is good: a bad e-mail always dead-letters, whatever
                // the target finds its record by (Pipedrive and the generic target have no upsert key of the CRM).
                if let Some(email) = md.drop.iter().find(|f| names_an_email(f)) {
                    return Err(invalid(
                        format!("{key}.drop"),
                        format!(
                            "cannot list `{email}`: a lead is written without a field only when its e-mail is good; \
                             a refused e-mail stays a dead letter"
                        ),
                    ));
                }
                if let Some(upsert) = target.upsert_key_field() {
                    if md.drop.iter().any(|f| f == upsert) {
                        return Err(invalid(
                            format!("{key}.drop"),
                            format!("cannot list `{upsert}`: the target finds its record by it"),
                        ));
                    }
                }
                if let Some(tag) = &md.tag {
                    if tag.property.trim().is_empty() {
                        return Err(invalid(format!("{key}.tag.property"), "must not be empty"));
                    }
                    if md.drop.contains(&tag.property) {
                        return Err(invalid(format!("{key}.tag.property"), "cannot be a field on the drop list"));
                    }
                }
                match &md.task {
                    Some(t) if t == name => return Err(invalid(format!("{key}.task"), "cannot be the target itself")),
                    Some(t) if !self.targets.contains_key(t) => {
                        return Err(invalid(
                            format!("{key}.task"),
                            format!("names target `{t}`, which is not defined under [targets]"),
                        ))
                    }
                    _ => {}
                }
            }
        }
        if self.replay.rate_per_second.is_nan() || self.replay.rate_per_second <= 0.0 {
            return Err(invalid("replay.rate_per_second", "must be greater than 0"));
        }
        Ok(())
    }
}

fn check_name(key: &str, name: &str) -> Result<(), ConfigError> {
    let ok = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if ok {
        Ok(())
    } else {
        Err(invalid(key, "names may use only letters, digits, '_' and '-'"))
    }
}

impl MonitorConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        if self.oldest_pending_alert_seconds == 0 {
            return Err(invalid("monitor.oldest_pending_alert_seconds", "must be greater than 0"));
        }
        if self.timezone.parse::<chrono_tz::Tz>().is_err() {
            return Err(invalid(
                "monitor.timezone",
                format!("`{}` is not an IANA time zone (like \"Europe/Berlin\")", self.timezone),
            ));
        }
        let b = &self.business_hours;
        TimeSpan { start: b.start.clone(), end: b.end.clone() }.validate("monitor.business_hours")?;
        for d in &b.days {
            if !["mon", "tue", "wed", "thu", "fri", "sat", "sun"].contains(&d.as_str()) {
                return Err(invalid("monitor.business_hours.days", format!("`{d}` is not one of mon … sun")));
            }
        }
        if let Some(q) = &self.quiet_hours {
            q.validate("monitor.quiet_hours")?;
        }
        if self.digest_interval_minutes == 0 {
            return Err(invalid("monitor.digest_interval_minutes", "must be greater than 0"));
        }
        let v = &self.volume;
        if v.window_minutes == 0 || v.window_minutes > 24 * 60 {
            return Err(invalid("monitor.volume.window_minutes", "must be between 1 and 1440"));
        }
        for (name, p) in [("p_value", v.p_value), ("resolve_p_value", v.resolve_p_value)] {
            if !(p > 0.0 && p < 1.0) {
                return Err(invalid(format!("monitor.volume.{name}"), "must be between 0 and 1 (exclusive)"));
            }
        }
        if v.resolve_p_value < v.p_value {
            return Err(invalid("monitor.volume.resolve_p_value", "must be at least p_value"));
        }
        if !(0.0..1.0).contains(&v.tolerance) {
            return Err(invalid("monitor.volume.tolerance", "must be at least 0 and below 1"));
        }
        if v.baseline_weeks == 0 {
            return Err(invalid("monitor.volume.baseline_weeks", "must be at least 1"));
        }
        if self.metrics.minute_retention_hours < 25 {
            return Err(invalid(
                "monitor.metrics.minute_retention_hours",
                "must be at least 25 (the 24 h chart reads minutes)",
            ));
        }
        if self.metrics.hourly_retention_days < 8 {
            return Err(invalid(
                "monitor.metrics.hourly_retention_days",
                "must be at least 8 (the 7 d chart and the baselines read hours)",
            ));
        }
        for (kind, policy) in &self.alerts {
            if kind.parse::<AlertKind>().is_err() {
                return Err(invalid(
                    format!("monitor.alerts.{kind}"),
                    format!(
                        "is not an alert kind; the kinds are {}",
                        AlertKind::ALL.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", ")
                    ),
                ));
            }
            if policy.renotify_minutes == Some(0) {
                return Err(invalid(format!("monitor.alerts.{kind}.renotify_minutes"), "must be greater than 0"));
            }
        }
        for (name, channel) in &self.channels {
            let key = format!("monitor.channels.{name}");
            check_name(&key, name)?;
            channel.validate(&key)?;
        }
        if let Some(url) = &self.public_url {
            match url::Url::parse(url) {
                Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {}
                _ => {
                    return Err(invalid(
                        "monitor.public_url",
                        format!("`{url}` is not an http(s) address (`https://leads.example.com`)"),
                    ))
                }
            }
        }
        Ok(())
    }
}

impl ReconcileConfig {
    fn validate(&self, key: &str, kind: SourceKind) -> Result<(), ConfigError> {
        if self.interval_seconds == 0 {
            return Err(invalid(format!("{key}.interval_seconds"), "must be greater than 0"));
        }
        match kind {
            SourceKind::Generic => {
                let Some(url) = &self.list_url else {
                    return Err(invalid(format!("{key}.list_url"), "is required for a generic source"));
                };
                let parsed = reqwest::Url::parse(&url.replace("{since}", "0"))
                    .map_err(|e| invalid(format!("{key}.list_url"), format!("is not a valid URL: {e}")))?;
                if !matches!(parsed.scheme(), "http" | "https") {
                    return Err(invalid(format!("{key}.list_url"), "must be http or https"));
                }
                for (name, p) in [("items_pointer", &self.items_pointer), ("next_pointer", &self.next_pointer)] {
                    if let Some(p) = p {
                        if !p.starts_with('/') {
                            return Err(invalid(format!("{key}.{name}"), "must be a JSON pointer starting with '/'"));
                        }
                    }
                }
            }
            SourceKind::Meta => {
                if self.form_ids.is_empty() {
                    return Err(invalid(format!("{key}.form_ids"), "must list at least one lead form id"));
                }
            }
            other => {
                return Err(invalid(
                    key.to_string(),
                    format!("a source of kind = \"{}\" has no list of leads to read", other.as_str()),
                ))
            }
        }
        Ok(())
    }
}

impl TargetConfig {
    fn validate(&self, key: &str) -> Result<(), ConfigError> {
        if let Some(stray) = self.stray.first() {
            return Err(invalid(
                format!("{key}.{stray}"),
                format!("does not apply to kind = \"{}\"", self.kind().as_str()),
            ));
        }
        if !self.mapping.is_empty() {
            crate::model::mapping::validate(&self.mapping, &format!("{key}.mapping")).map_err(|e| {
                // The mapping's errors start with their own key (`targets.crm.mapping[2].transform: …`).
                let text = e.to_string();
                let (k, m) = text.split_once(": ").unwrap_or((key, &text));
                invalid(k, m)
            })?;
        }
        // Which kinds take a `strategy` belongs to the schema (the others' is fixed, `TargetConfig::strategy`);
        // what a kind's own settings must be is checked by its feature (`features::checks`).
        let fixed = match self.kind() {
            TargetKind::Http => None,
            TargetKind::Pipedrive => {
                Some("does not apply to kind = \"pipedrive\" (always a search, then person and lead created once)")
            }
            TargetKind::MetaLead => Some("does not apply to kind = \"meta_lead\" (it only reads)"),
            TargetKind::Salesforce => {
                Some("does not apply to kind = \"salesforce\" (it always upserts by external_id_field)")
            }
            TargetKind::Hubspot => Some("does not apply to kind = \"hubspot\" (records are upserted by id_property)"),
            TargetKind::Whatsapp | TargetKind::Sms => {
                Some("does not apply to a first-contact step (a message is sent once, never repeated)")
            }
            TargetKind::MetaConversions | TargetKind::GoogleAdsConversions => {
                Some("does not apply to a conversion step (each conversion carries its own key)")
            }
        };
        match (fixed, self.strategy) {
            (None, None) => {
                return Err(invalid(
                    format!("{key}.strategy"),
                    "is required: \"idempotency_key\", \"upsert\", \"search_then_create\" or \"none\"",
                ))
            }
            (Some(why), Some(_)) => return Err(invalid(format!("{key}.strategy"), why)),
            _ => {}
        }
        let url = reqwest::Url::parse(&self.url.replace("{external_id}", "x"))
            .map_err(|e| invalid(format!("{key}.url"), format!("is not a valid URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(invalid(format!("{key}.url"), "must be http or https"));
        }
        if let Some(method) = &self.method {
            reqwest::Method::from_bytes(method.as_bytes())
                .map_err(|_| invalid(format!("{key}.method"), format!("`{method}` is not an HTTP method")))?;
        }
        match self.strategy {
            Some(Strategy::Upsert) if !self.url.contains("{external_id}") => {
                return Err(invalid(format!("{key}.url"), "must contain {external_id} for strategy = \"upsert\""));
            }
            Some(Strategy::SearchThenCreate) if self.search_url.is_none() => {
                return Err(invalid(format!("{key}.search_url"), "is required for strategy = \"search_then_create\""));
            }
            _ => {}
        }
        if let Some(search) = &self.search_url {
            if !search.contains("{external_id}") {
                return Err(invalid(format!("{key}.search_url"), "must contain {external_id}"));
            }
        }
        if let Some(record) = &self.record_url {
            if !record.contains("{crm_id}") {
                return Err(invalid(format!("{key}.record_url"), "must contain {crm_id}"));
            }
        }
        if !self.id_pointer.starts_with('/') {
            return Err(invalid(format!("{key}.id_pointer"), "must be a JSON pointer starting with '/'"));
        }
        if self.timeout_ms == 0 {
            return Err(invalid(format!("{key}.timeout_ms"), "must be greater than 0"));
        }
        if self.concurrency == 0 {
            return Err(invalid(format!("{key}.concurrency"), "must be greater than 0"));
        }
        let b = &self.backoff;
        if b.base_ms == 0 {
            return Err(invalid(format!("{key}.backoff.base_ms"), "must be greater than 0"));
        }
        if b.cap_ms < b.base_ms {
            return Err(invalid(format!("{key}.backoff.cap_ms"), "must be at least base_ms"));
        }
        if b.max_attempts == 0 {
            return Err(invalid(format!("{key}.backoff.max_attempts"), "must be at least 1"));
        }
        if b.budget_seconds == 0 {
            return Err(invalid(format!("{key}.backoff.budget_seconds"), "must be greater than 0"));
        }
        let br = &self.breaker;
        if br.consecutive_failures == 0 {
            return Err(invalid(format!("{key}.breaker.consecutive_failures"), "must be at least 1"));
        }
        if !(0.0..=1.0).contains(&br.failure_ratio) {
            return Err(invalid(format!("{key}.breaker.failure_ratio"), "must be between 0 and 1"));
        }
        if br.failure_ratio > 0.0 && br.window == 0 {
            return Err(invalid(format!("{key}.breaker.window"), "must be at least 1 when failure_ratio > 0"));
        }
        for code in self.classify.status.keys() {
            match code.parse::<u16>() {
                Ok(c) if (100..=599).contains(&c) => {}
                _ => {
                    return Err(invalid(
                        format!("{key}.classify.status.{code}"),
                        "keys must be HTTP status codes (100-599)",
                    ))
                }
            }
        }
        if !self.classify.body_values.is_empty() && self.classify.body_field.is_none() {
            return Err(invalid(format!("{key}.classify.body_field"), "is required when body_values is set"));
        }
        for (name, ptr) in [
            ("body_field", &self.classify.body_field),
            ("message_pointer", &self.classify.message_pointer),
            ("field_pointer", &self.classify.field_pointer),
        ] {
            if let Some(p) = ptr {
                if !p.starts_with('/') {
                    return Err(invalid(format!("{key}.classify.{name}"), "must be a JSON pointer starting with '/'"));
                }
            }
        }
        if let Some(AuthConfig::Header { name, .. }) = &self.auth {
            reqwest::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| invalid(format!("{key}.auth.header.name"), "is not a valid header name"))?;
        }
        for name in self.headers.keys() {
            reqwest::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| invalid(format!("{key}.headers.{name}"), "is not a valid header name"))?;
        }
        Ok(())
    }
}

/// Whether a `missing_data.drop` entry names an e-mail field: its last path segment (`/person/emails`,
/// `Email`, `hs_email`) is or ends in `email`/`emails`, in any case.
fn names_an_email(field: &str) -> bool {
    let last = field.rsplit('/').next().unwrap_or(field).to_ascii_lowercase();
    last.ends_with("email") || last.ends_with("emails")
}

#[cfg(test)]
mod tests {
    use super::super::examples::{parse, CHANNELS, OK};

    #[test]
    fn missing_data_never_drops_an_email() {
        let with = |drop: &str| {
            format!(
                "{OK}mapping = [{{ to = \"email\", from = \"email\" }}, {{ to = \"phone\", from = \"phone\" }}]\n\
                 missing_data = {{ drop = [{drop}] }}\n"
            )
        };
        parse(&with("\"phone\"")).expect("a phone may be dropped");
        for email in ["\"phone\", \"email\"", "\"/person/emails\"", "\"Email\""] {
            let e = parse(&with(email)).unwrap_err().to_string();
            assert!(e.starts_with("targets.crm.missing_data.drop:") && e.contains("e-mail"), "{email}: {e}");
        }
    }

    #[test]
    fn database_url_may_name_postgres() {
        let with = |url: &str| format!("[database]\nurl = \"{url}\"\n{OK}");
        for url in [
            "postgres://leadline:secret@db.internal:5432/leadline",
            "postgresql://u@localhost/leads?host=/run/postgresql",
        ] {
            let c = parse(&with(url)).unwrap();
            c.validate().unwrap();
            assert_eq!(c.database_url().unwrap(), url);
            assert!(!c.pid_file().unwrap().to_string_lossy().contains("postgres"), "no pid file named after a URL");
        }
        let e = parse(&with("postgres://u@localhost:5432")).map(|c| c.validate()).unwrap_err().to_string();
        assert!(e.contains("database.url"), "{e}");
        let e = parse(&with("postgres://u@[bad")).map(|c| c.validate()).unwrap_err().to_string();
        assert!(e.contains("database.url"), "{e}");
    }

    #[test]
    fn errors_name_the_key() {
        let bad_route = OK.replace("route = [\"crm\"]", "route = [\"hubspot\"]");
        let e = parse(&bad_route).unwrap_err().to_string();
        assert!(e.starts_with("sources.webform.route:"), "{e}");
        assert!(e.contains("hubspot"), "{e}");

        let bad_backoff = format!("{OK}\n[targets.crm.backoff]\nbase_ms = 0\n");
        let e = parse(&bad_backoff).unwrap_err().to_string();
        assert!(e.starts_with("targets.crm.backoff.base_ms:"), "{e}");

        let upsert = OK.replace("idempotency_key", "upsert");
        let e = parse(&upsert).unwrap_err().to_string();
        assert!(e.starts_with("targets.crm.url:") && e.contains("{external_id}"), "{e}");

        let unknown = format!("{OK}\n[worker]\nbatch = 3\n");
        let e = parse(&unknown).unwrap_err().to_string();
        assert!(e.contains("batch"), "{e}");

        let status = format!("{OK}\n[targets.crm.classify.status]\n\"4xx\" = \"transient\"\n");
        let e = parse(&status).unwrap_err().to_string();
        assert!(e.starts_with("targets.crm.classify.status.4xx:"), "{e}");

        let meta = OK.replace("route = [\"crm\"]", "route = [\"crm\"]\nkind = \"meta\"");
        let e = parse(&meta).unwrap_err().to_string();
        assert!(e.starts_with("sources.webform.route:") && e.contains("meta_lead"), "{e}");

        let fetch =
            "\n[targets.fetch]\nkind = \"meta_lead\"\nurl = \"https://graph.facebook.com\"\naccess_token_env = \"T\"\n";
        let meta =
            format!("{}{fetch}", OK.replace("route = [\"crm\"]", "route = [\"fetch\", \"crm\"]\nkind = \"meta\""));
        let e = parse(&meta).unwrap_err().to_string();
        assert!(e.starts_with("sources.webform.app_secret_env:"), "{e}");

        let late = format!("{}{fetch}", OK.replace("route = [\"crm\"]", "route = [\"crm\", \"fetch\"]"));
        let e = parse(&late).unwrap_err().to_string();
        assert!(e.starts_with("sources.webform.route:") && e.contains("first step of a Meta source"), "{e}");

        let no_strategy = OK.replace("strategy = \"idempotency_key\"", "");
        let e = parse(&no_strategy).unwrap_err().to_string();
        assert!(e.starts_with("targets.crm.strategy:"), "{e}");
    }

    #[test]
    fn a_key_of_another_kind_is_refused_by_name() {
        let salesforce = r#"
        [sources.webform]
        route = ["crm"]
        [targets.crm]
        kind = "salesforce"
        url = "https://login.salesforce.com"
        external_id_field = "Leadline_Id__c"
        client_id_env = "SF_ID"
        client_secret_env = "SF_SECRET"
        refresh_token_env = "SF_REFRESH"
        mapping = [{ to = "LastName", from = "/fields/name" }]
    "#;
        let c = parse(salesforce).unwrap();
        let crate::config::TargetSettings::Salesforce(s) = &c.targets["crm"].settings else { panic!() };
        assert_eq!(
            (s.external_id_field.as_deref(), s.oauth.refresh_token_env.as_deref()),
            (Some("Leadline_Id__c"), Some("SF_REFRESH"))
        );
        for (extra, key) in [
            ("id_property = \"email\"", "targets.crm.id_property:"),
            ("stages = { lead = \"Lead\" }", "targets.crm.stages:"),
            ("api_token_env = \"T\"", "targets.crm.api_token_env:"),
        ] {
            let e = parse(&salesforce.replace("kind = \"salesforce\"", &format!("kind = \"salesforce\"\n{extra}")))
                .unwrap_err()
                .to_string();
            assert!(e.starts_with(key) && e.ends_with("does not apply to kind = \"salesforce\""), "{extra}: {e}");
        }
        let e = parse(&format!("{OK}access_token_env = \"T\"\n")).unwrap_err().to_string();
        assert_eq!(e, "targets.crm.access_token_env: does not apply to kind = \"http\"");
    }

    #[test]
    fn a_wrong_channel_names_its_field() {
        let with = |from: &str, to: &str| {
            let text = format!("{OK}{CHANNELS}");
            assert!(text.contains(from), "{from}");
            parse(&text.replacen(from, to, 1)).unwrap_err().to_string()
        };
        for (from, to, key) in [
            ("kind = \"slack\"", "kind = \"sms\"", "monitor.channels.oncall.kind:"),
            ("webhook_url_env = \"SLACK_WEBHOOK_URL\"", "", "monitor.channels.oncall.webhook_url_env:"),
            (
                "webhook_url_env = \"SLACK_WEBHOOK_URL\"",
                "webhook_url_env = \"S\"\nurl_env = \"U\"",
                "monitor.channels.oncall.url_env:",
            ),
            ("new_cause = \"none\"", "new_causes = \"none\"", "monitor.channels.oncall.alerts.new_causes:"),
            ("quiet_hours = false", "quiet_hours = true", "monitor.channels.oncall.quiet_hours:"),
            ("from = \"Leadline <alerts@example.com>\"", "from = \"alerts at example\"", "monitor.channels.mail.from:"),
            ("to = [\"ops@example.com\"]", "to = [\"ops@example.com\", \"nobody\"]", "monitor.channels.mail.to[1]:"),
            ("to = [\"ops@example.com\"]", "", "monitor.channels.mail.to:"),
            ("smtp_host = \"smtp.example.com\"", "smtp_host = \"smtp://x\"", "monitor.channels.mail.smtp_host:"),
            ("smtp_host = \"smtp.example.com\"", "smtp_host = \"s\"\ntls = \"ssl\"", "monitor.channels.mail.tls:"),
            ("username_env = \"SMTP_USER\"", "", "monitor.channels.mail.username_env:"),
            ("url_env = \"HOOK_URL\"", "", "monitor.channels.hook.url_env:"),
            ("start = \"20:00\"", "start = \"8pm\"", "monitor.channels.hook.quiet_hours.start:"),
            ("public_url = \"https://leads.example.com\"", "public_url = \"leads\"", "monitor.public_url:"),
        ] {
            let e = with(from, to);
            assert!(e.starts_with(key), "{from} -> {to}: {e}");
        }
    }
}
