//! What a replay would do, before it is started: a selection's dead letters counted per target and category
//! (eligible, resolved, purged, queued in another replay), with those older than 24 h and those a time-sensitive
//! target's fallback will take. The replay's start (`replays.rs`) takes the same fallback rules.

use std::collections::BTreeMap;

use anyhow::Context;
use chrono::{DateTime, Utc};

use super::dead_letters::{
    push_selection, push_tally_where, push_where, Dialect, ReplaySelection, Sql, QUEUED_IN_REPLAY,
};
use super::{ms, Store};

/// A time-sensitive target: leads older than `max_lead_age_minutes` go to `fallback` instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FallbackRule {
    pub target: String,
    pub fallback: String,
    pub max_lead_age_minutes: u64,
}

/// Where a selected dead letter stands for a replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreviewCategory {
    /// An open dead letter with its data: it will be sent back.
    Eligible,
    /// Replayed, discarded or fixed by hand before.
    Resolved,
    /// Its lead's data was purged.
    Purged,
    /// Waiting in another replay that is still running.
    Queued,
}

/// One line of a preview: how many selected dead letters of `target` are in `category` (and, when eligible,
/// how many of them were received more than 24 h ago, and the fallback they will run, if any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreviewCount {
    pub target: String,
    pub category: PreviewCategory,
    pub count: i64,
    pub older_than_24h: i64,
    pub fallback: Option<String>,
}

type PreviewRow = (String, String, i64, i64, Option<String>);

fn category(name: &str) -> PreviewCategory {
    match name {
        "eligible" => PreviewCategory::Eligible,
        "resolved" => PreviewCategory::Resolved,
        "purged" => PreviewCategory::Purged,
        _ => PreviewCategory::Queued,
    }
}

/// Appends `CASE d.target WHEN … THEN <fallback if the lead is too old> END`. A lead is as old as the lead itself
/// (`lead_at`, when it says it came into being before it was received), as on the worker's path.
pub(super) fn push_fallback_case(q: &mut Sql, rules: &[FallbackRule], now: DateTime<Utc>) {
    if rules.is_empty() {
        q.push("CAST(NULL AS TEXT)");
        return;
    }
    q.push("CASE d.target");
    for rule in rules {
        q.push(" WHEN ")
            .bind(rule.target.as_str())
            .push(" THEN CASE WHEN COALESCE(e.lead_at, e.received_at) < ")
            .bind(ms(now - chrono::Duration::minutes(rule.max_lead_age_minutes as i64)))
            .push(" THEN ")
            .bind(rule.fallback.as_str())
            .push(" END");
    }
    q.push(" END");
}

impl Store {
    /// The preview's counts for a selection: per target and category. A filter the kept tally answers is counted
    /// without reading every dead letter; any other selection by one aggregate scan.
    pub async fn replay_preview(
        &self,
        selection: &ReplaySelection,
        fallbacks: &[FallbackRule],
        now: DateTime<Utc>,
    ) -> anyhow::Result<Vec<PreviewCount>> {
        dispatch!(self, replay_preview(selection, fallbacks, now))
    }
}

backends! {
    shared {
        pub async fn replay_preview(
            db: &Db,
            selection: &ReplaySelection,
            fallbacks: &[FallbackRule],
            now: DateTime<Utc>,
        ) -> anyhow::Result<Vec<PreviewCount>> {
            let check_queued = any_replay_active(db).await?;
            match (&selection.ids, &selection.filter) {
                (None, Some(filter)) if filter.tally_answers() => {
                    preview_by_tally(db, filter, check_queued, fallbacks, now).await
                }
                _ => preview_by_scan(db, selection, check_queued, fallbacks, now).await,
            }
        }

        /// The preview's counts by scanning the selected dead letters (any selection).
        async fn preview_by_scan(
            db: &Db,
            selection: &ReplaySelection,
            check_queued: bool,
            rules: &[FallbackRule],
            now: DateTime<Utc>,
        ) -> anyhow::Result<Vec<PreviewCount>> {
            let mut q = Sql::new(
                DIALECT,
                "SELECT d.target, CASE WHEN d.resolution != 'open' THEN 'resolved' WHEN e.purged_at IS NOT NULL THEN 'purged'",
            );
            if check_queued {
                q.push(&format!(" WHEN {QUEUED_IN_REPLAY} IS NOT NULL THEN 'queued'"));
            }
            q.push(" ELSE 'eligible' END AS category, COUNT(*), CAST(COALESCE(SUM(CASE WHEN e.received_at < ")
                .bind(ms(now - chrono::Duration::hours(24)))
                .push(" THEN 1 ELSE 0 END), 0) AS BIGINT), ");
            push_fallback_case(&mut q, rules, now);
            q.push(" AS fallback");
            push_selection(&mut q, selection)?;
            q.push(" GROUP BY d.target, category, fallback");
            let rows: Vec<PreviewRow> = built_as(&q).fetch_all(db.reader()).await.context("cannot preview replay")?;
            Ok(rows
                .into_iter()
                .map(|(target, c, count, older_than_24h, fallback)| PreviewCount {
                    target,
                    category: category(&c),
                    count,
                    older_than_24h,
                    fallback,
                })
                .collect())
        }

        /// The same counts for a filter the kept `dead_letter_tally` answers, without reading every dead letter:
        /// the tally gives the counts by target, resolution and purge; only the dead letters queued in a running
        /// replay and those received recently (to tell which are older than 24 h or than a fallback's age) are
        /// read, from their own indexes. Equal to the scan by construction (`older = eligible − recent`).
        async fn preview_by_tally(
            db: &Db,
            filter: &crate::store::DeadLetterFilter,
            check_queued: bool,
            rules: &[FallbackRule],
            now: DateTime<Utc>,
        ) -> anyhow::Result<Vec<PreviewCount>> {
            let filter = filter.any_resolution();
            // A NULL resolution counts as open, as in the scan (`d.resolution != 'open'` is not true for it).
            let mut q = Sql::new(
                DIALECT,
                "SELECT t.target, CASE WHEN t.resolution NOT IN ('open', '') THEN 'resolved'
                        WHEN t.purged != 0 THEN 'purged' ELSE 'open' END AS category, CAST(SUM(t.n) AS BIGINT)
                   FROM dead_letter_tally t WHERE",
            );
            push_tally_where(&mut q, &filter, None);
            q.push(" GROUP BY 1, 2");
            let counts: Vec<(String, String, i64)> =
                built_as(&q).fetch_all(db.reader()).await.context("cannot preview replay")?;

            let open_unpurged = " AND COALESCE(d.resolution, 'open') = 'open' AND e.purged_at IS NULL";
            let mut queued: BTreeMap<String, i64> = BTreeMap::new();
            if check_queued {
                let mut q = Sql::new(DIALECT, "SELECT d.target, COUNT(*) FROM delivery d JOIN inbound_event e ON e.id = d.event_id");
                push_where(&mut q, &filter);
                q.push(open_unpurged);
                q.push(
                    " AND d.id IN (SELECT ri.delivery_id FROM replay r JOIN replay_item ri ON ri.replay_id = r.id
                                    WHERE r.status IN ('running', 'paused') AND ri.requeued_at IS NULL)
                      GROUP BY d.target",
                );
                let rows: Vec<(String, i64)> =
                    built_as(&q).fetch_all(db.reader()).await.context("cannot preview replay")?;
                queued.extend(rows);
            }

            // Eligible dead letters received after the earliest cut-off (24 h, or a fallback's age): per target,
            // how many are younger than 24 h and how many are younger than the target's fallback age.
            let day = ms(now - chrono::Duration::hours(24));
            let cutoff = |minutes: u64| ms(now - chrono::Duration::minutes(minutes as i64));
            let earliest = rules.iter().map(|r| cutoff(r.max_lead_age_minutes)).fold(day, i64::min);
            let mut q = Sql::new(DIALECT, "SELECT d.target, CAST(SUM(CASE WHEN e.received_at >= ");
            q.bind(day).push(" THEN 1 ELSE 0 END) AS BIGINT), ");
            if rules.is_empty() {
                q.push("CAST(0 AS BIGINT)");
            } else {
                q.push("CAST(SUM(CASE");
                for rule in rules {
                    q.push(" WHEN d.target = ")
                        .bind(rule.target.as_str())
                        .push(" THEN CASE WHEN COALESCE(e.lead_at, e.received_at) >= ")
                        .bind(cutoff(rule.max_lead_age_minutes))
                        .push(" THEN 1 ELSE 0 END");
                }
                q.push(" ELSE 0 END) AS BIGINT)");
            }
            // The lead's table drives (its time index), each lead's steps are looked up by event.
            q.push(" FROM inbound_event e CROSS JOIN delivery d");
            push_where(&mut q, &filter);
            q.push(" AND d.event_id = e.id AND e.received_at >= ").bind(earliest);
            q.push(open_unpurged);
            if check_queued {
                q.push(&format!(" AND {QUEUED_IN_REPLAY} IS NULL"));
            }
            q.push(" GROUP BY d.target");
            let recent: Vec<(String, i64, i64)> =
                built_as(&q).fetch_all(db.reader()).await.context("cannot preview replay")?;
            let recent: BTreeMap<String, (i64, i64)> = recent.into_iter().map(|(t, day, fb)| (t, (day, fb))).collect();

            let mut rows = Vec::new();
            let line = |target: &str, category, count, older_than_24h, fallback| PreviewCount {
                target: target.to_string(),
                category,
                count,
                older_than_24h,
                fallback,
            };
            for (target, c, n) in counts {
                if c != "open" {
                    if n > 0 {
                        rows.push(line(&target, category(&c), n, 0, None));
                    }
                    continue;
                }
                let queued_n = queued.get(&target).copied().unwrap_or(0);
                if queued_n > 0 {
                    rows.push(line(&target, PreviewCategory::Queued, queued_n, 0, None));
                }
                let eligible = n - queued_n;
                let (young, young_for_fallback) = recent.get(&target).copied().unwrap_or((0, 0));
                let old = eligible - young;
                let rule = rules.iter().find(|r| r.target == target);
                let to_fallback = rule.map_or(0, |_| eligible - young_for_fallback);
                // Rows with a count only, as the scan's GROUP BY gives; `old` rides on either (only its sum is used).
                let stays = eligible - to_fallback;
                if stays > 0 {
                    rows.push(line(&target, PreviewCategory::Eligible, stays, old, None));
                }
                if let (Some(rule), true) = (rule, to_fallback > 0) {
                    let old = if stays > 0 { 0 } else { old };
                    rows.push(line(&target, PreviewCategory::Eligible, to_fallback, old, Some(rule.fallback.clone())));
                }
            }
            Ok(rows)
        }
    }
    sqlite {
        const DIALECT: Dialect = Dialect::Sqlite;
        use crate::store::dead_letters::on_sqlite::any_replay_active;
        use crate::store::dead_letters::{lite as built, lite_as as built_as};
    }
    postgres {
        const DIALECT: Dialect = Dialect::Postgres;
        use crate::store::dead_letters::on_postgres::any_replay_active;
        use crate::store::dead_letters::{pg as built, pg_as as built_as};
    }
}
