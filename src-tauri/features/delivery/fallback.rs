//! Time-sensitive steps: a lead older than its target's `max_lead_age_minutes` runs the target's `fallback`
//! instead — a welcome SMS hours late is worse than none, a call task for a sales rep is not. The worker applies
//! it to every step it claims (scheduled deliveries, retries after an outage, recovered leads); a replay applies
//! it when it sends dead letters back (`replay`). Pure.

use chrono::{DateTime, Utc};

use crate::config::TargetConfig;

pub use crate::model::lead_time;

/// The target to run instead of `config`'s for a lead from `lead_time`, at `now`: its fallback when the step is
/// time-sensitive and the lead is older than its limit; `None` otherwise.
pub fn fallback_for(config: &TargetConfig, lead_time: DateTime<Utc>, now: DateTime<Utc>) -> Option<&str> {
    let limit = chrono::Duration::minutes(i64::try_from(config.max_lead_age()?).unwrap_or(i64::MAX / 60_000));
    let fallback = config.fallback.as_deref()?;
    (now - lead_time > limit).then_some(fallback)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use serde_json::json;

    fn at(h: u32, m: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 30, h, m, 0).unwrap()
    }

    fn sms() -> TargetConfig {
        let text = r#"
[targets.sms]
url = "http://127.0.0.1:1/sms/{external_id}"
strategy = "upsert"
max_lead_age_minutes = 30
fallback = "call_task"
[targets.call_task]
url = "http://127.0.0.1:1/tasks/{external_id}"
strategy = "upsert"
"#;
        crate::config::Config::parse(text, std::path::Path::new("t.toml")).unwrap().targets["sms"].clone()
    }

    #[test]
    fn a_limit_beyond_any_duration_never_runs_the_fallback() {
        let mut config = sms();
        config.max_lead_age_minutes = Some(u64::MAX);
        assert_eq!(fallback_for(&config, at(0, 0) - chrono::Duration::days(3650), at(12, 0)), None);
    }

    #[test]
    fn a_lead_is_as_old_as_its_creation_when_it_says_so() {
        assert_eq!(lead_time(at(12, 0), &json!({"id": "1"})), at(12, 0));
        assert_eq!(lead_time(at(12, 0), &json!({"created_time": "2026-11-30T10:00:00Z"})), at(10, 0));
        assert_eq!(lead_time(at(12, 0), &json!({"created_time": "2026-11-30T11:00:00+01:00"})), at(10, 0));
        assert_eq!(lead_time(at(12, 0), &json!({"created_time": "2026-11-30T10:00:00+0000"})), at(10, 0), "Graph API");
        assert_eq!(lead_time(at(12, 0), &json!({"created_time": "2026-11-30T13:00:00Z"})), at(12, 0), "future");
        assert_eq!(lead_time(at(12, 0), &json!({"created_time": "yesterday"})), at(12, 0));
        assert_eq!(lead_time(at(12, 0), &json!({"created_time": 1_700_000_000})), at(12, 0));
    }

    #[test]
    fn only_a_too_old_lead_of_a_time_sensitive_step_runs_the_fallback() {
        let sms = sms();
        assert_eq!(fallback_for(&sms, at(12, 0), at(12, 30)), None, "exactly the limit is still in time");
        assert_eq!(fallback_for(&sms, at(12, 0), at(12, 31)), Some("call_task"));
        let plain = TargetConfig { max_lead_age_minutes: None, ..sms.clone() };
        assert_eq!(fallback_for(&plain, at(0, 0), at(23, 0)), None);
    }
}
