//! Every dead-letter filter, on data where ignoring that filter changes the answer: the list (library and API),
//! the grouping by cause, and the replay preview (the count a replay and a bulk resolve act on) all share
//! `dlq::push_where`, and each is checked against the rows the filter should keep.

mod common;

use std::collections::BTreeSet;

use chrono::{DateTime, Duration, TimeZone, Utc};
use common::*;
use leadline::api;
use leadline::dlq::{self, DeadLetterFilter};
use leadline::model::ErrorClass;
use leadline::replay::ReplaySelection;
use leadline::store::{LeadFixture, StepFixture, StepFixtureState};
use serde_json::{json, Value};

/// One dead letter as written to the database. Ids follow the order of [`rows`], from 1.
struct Row {
    source: &'static str,
    source_ref: &'static str,
    target: &'static str,
    class: &'static str,
    status: Option<i64>,
    reason: &'static str,
    field: Option<&'static str>,
    /// Hours after [`t0`].
    dead_hours: i64,
    resolution: &'static str,
    payload: Value,
}

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 2, 8, 0, 0).unwrap()
}

fn rows() -> Vec<Row> {
    vec![
        Row {
            source: "plain",
            source_ref: "a-1",
            target: "crm",
            class: "permanent_config",
            status: Some(401),
            reason: "HTTP 401: token expired",
            field: None,
            dead_hours: 0,
            resolution: "open",
            payload: json!({"id": "a-1", "email": "ada@gmail.com", "lead": {"form": "F1"}}),
        },
        Row {
            source: "plain",
            source_ref: "a-2",
            target: "crm",
            class: "permanent_data",
            status: Some(422),
            // The field is named only in `dead_field`, so the text filter must look there to find "phone".
            reason: "HTTP 422: value '0151 1234' is not in E.164 format",
            field: Some("phone"),
            dead_hours: 1,
            resolution: "open",
            payload: json!({"id": "a-2", "email": "bob@example.com", "lead": {"form": "F1"}}),
        },
        Row {
            source: "webform",
            source_ref: "b-1",
            target: "notify",
            class: "permanent_data",
            status: Some(422),
            reason: "HTTP 422: the CRM id of the earlier step is required",
            field: Some("crmId"),
            dead_hours: 2,
            resolution: "open",
            payload: json!({"id": "b-1", "email": "cy@gmail.com", "lead": {"form": "F2"}}),
        },
        Row {
            source: "webform",
            source_ref: "b-2",
            target: "crm",
            class: "transient",
            status: Some(503),
            reason: "gave up after 3 attempts; last error: HTTP 503: 100% down",
            field: None,
            dead_hours: 3,
            resolution: "open",
            payload: json!({"id": "b-2", "email": "dee@example.org"}),
        },
        Row {
            source: "plain",
            source_ref: "a-3",
            target: "crm",
            class: "permanent_config",
            status: Some(401),
            reason: "HTTP 401: token expired",
            field: None,
            dead_hours: 4,
            resolution: "discarded",
            payload: json!({"id": "a-3", "email": "eve@gmail.com"}),
        },
        Row {
            source: "webform",
            source_ref: "b_3",
            target: "crm",
            class: "ambiguous",
            status: None,
            reason: "no answer after sending (timeout); the CRM may have the lead",
            field: None,
            dead_hours: 5,
            resolution: "open",
            payload: json!({"id": "b_3", "email": "fay@example.org"}),
        },
    ]
}

async fn seed(app: &TestApp) {
    let leads: Vec<LeadFixture> = rows()
        .into_iter()
        .map(|r| {
            let dead_at = t0() + Duration::hours(r.dead_hours);
            LeadFixture {
                source: r.source.into(),
                source_ref: r.source_ref.into(),
                received_at: dead_at - Duration::minutes(1),
                payload: r.payload,
                purged: false,
                steps: vec![StepFixture {
                    target: r.target.into(),
                    attempts: 1,
                    state: StepFixtureState::Dead {
                        at: dead_at,
                        class: ErrorClass::parse(r.class).expect("a class"),
                        http_status: r.status.map(|s| u16::try_from(s).expect("an HTTP status")),
                        reason: r.reason.into(),
                        field: r.field.map(String::from),
                        resolution: r.resolution.into(),
                    },
                }],
            }
        })
        .collect();
    app.server.app.store.insert_lead_fixtures(&leads).await.unwrap();
}

/// A filter, the dead letters it must keep, and whether the replay preview and the grouping honour it (paging
/// does not apply to either: a replay covers every match).
struct Case {
    name: &'static str,
    filter: DeadLetterFilter,
    expected: &'static [i64],
    paged: bool,
    /// The discarded row 5 matches the filter's other conditions. A replay selection looks at every resolution
    /// (the preview counts the resolved ones as not eligible), so its preview includes row 5 then.
    matches_resolved: bool,
}

fn case(name: &'static str, filter: DeadLetterFilter, expected: &'static [i64]) -> Case {
    Case { name, filter, expected, paged: false, matches_resolved: false }
}

impl Case {
    /// Row 5 matches this filter once the resolution is left out.
    fn and_resolved(self) -> Case {
        Case { matches_resolved: true, ..self }
    }
}

fn at(hours: i64) -> Option<DateTime<Utc>> {
    Some(t0() + Duration::hours(hours))
}

fn cases() -> Vec<Case> {
    let f = DeadLetterFilter::default;
    let s = |v: &str| Some(v.to_string());
    vec![
        case("no filter: the open ones", f(), &[1, 2, 3, 4, 6]).and_resolved(),
        case("class", DeadLetterFilter { class: Some("permanent_data".parse().unwrap()), ..f() }, &[2, 3]),
        case("source", DeadLetterFilter { source: s("webform"), ..f() }, &[3, 4, 6]),
        case("target", DeadLetterFilter { target: s("notify"), ..f() }, &[3]),
        // `since` includes its instant (row 2 died exactly then)…
        case("since", DeadLetterFilter { since: at(1), ..f() }, &[2, 3, 4, 6]).and_resolved(),
        // …`until` excludes its instant (row 3 died exactly then).
        case("until", DeadLetterFilter { until: at(2), ..f() }, &[1, 2]),
        case("since and until", DeadLetterFilter { since: at(1), until: at(3), ..f() }, &[2, 3]),
        case("text in the reason", DeadLetterFilter { text: s("E.164"), ..f() }, &[2]),
        case("text in the event id", DeadLetterFilter { text: s("b-2"), ..f() }, &[4]),
        case("text in the field only", DeadLetterFilter { text: s("phone"), ..f() }, &[2]),
        case("text is trimmed", DeadLetterFilter { text: s("  E.164 "), ..f() }, &[2]),
        // LIKE's wildcards are literal characters in the text filter.
        case("text with an underscore", DeadLetterFilter { text: s("_"), ..f() }, &[6]),
        case("text with a percent sign", DeadLetterFilter { text: s("%"), ..f() }, &[4]),
        case("blank text filters nothing", DeadLetterFilter { text: s("   "), ..f() }, &[1, 2, 3, 4, 6]).and_resolved(),
        case("http status", DeadLetterFilter { http_status: Some(422), ..f() }, &[2, 3]),
        case("cause", DeadLetterFilter { cause: s("HTTP 401: token expired"), ..f() }, &[1]).and_resolved(),
        case("lead field", DeadLetterFilter { lead_field: s("email"), lead_value: s("gmail"), ..f() }, &[1, 3])
            .and_resolved(),
        case(
            "lead field as a JSON pointer, case-insensitive",
            DeadLetterFilter { lead_field: s("/lead/form"), lead_value: s("f2"), ..f() },
            &[3],
        ),
        case(
            "resolution all",
            DeadLetterFilter { resolution: Some("all".parse().unwrap()), ..f() },
            &[1, 2, 3, 4, 5, 6],
        ),
        case("resolution discarded", DeadLetterFilter { resolution: Some("discarded".parse().unwrap()), ..f() }, &[5]),
        case(
            "two filters together",
            DeadLetterFilter {
                class: Some("permanent_config".parse().unwrap()),
                resolution: Some("all".parse().unwrap()),
                ..f()
            },
            &[1, 5],
        ),
        Case {
            name: "limit",
            filter: DeadLetterFilter { limit: Some(2), ..f() },
            expected: &[4, 6],
            paged: true,
            matches_resolved: false,
        },
        Case {
            name: "before id",
            filter: DeadLetterFilter { before_id: Some(4), ..f() },
            expected: &[1, 2, 3],
            paged: true,
            matches_resolved: false,
        },
    ]
}

fn ids(letters: &[dlq::DeadLetter]) -> BTreeSet<i64> {
    letters.iter().map(|d| d.delivery_id).collect()
}

#[tokio::test]
async fn each_dead_letter_filter_changes_the_answer_of_the_list_the_groups_and_the_replay_preview() {
    let app = spawn().await;
    seed(&app).await;
    let a = &app.server.app;
    let all_open: BTreeSet<i64> = [1, 2, 3, 4, 6].into();
    let rows = rows();
    for c in cases() {
        let expected: BTreeSet<i64> = c.expected.iter().copied().collect();
        // The data is such that ignoring this filter would give another answer.
        if c.name != "no filter: the open ones" && c.name != "blank text filters nothing" {
            assert_ne!(expected, all_open, "{}: the case does not test its filter", c.name);
        }

        // The list: the library's, and the API's (which checks the filter first).
        let listed = dlq::list(&a.store, &c.filter).await.unwrap();
        assert_eq!(ids(&listed), expected, "list, {}", c.name);
        let newest_first: Vec<i64> = listed.iter().map(|d| d.delivery_id).collect();
        assert!(newest_first.windows(2).all(|w| w[0] > w[1]), "{}: {newest_first:?}", c.name);
        let api_list = api::dead_letters(a, &c.filter).await.unwrap();
        assert_eq!(ids(&api_list.items), expected, "api list, {}", c.name);
        if c.paged {
            continue;
        }

        // The groups: one per class, target and cause among the expected rows, with their counts.
        let mut want: Vec<(String, String, String, i64)> = Vec::new();
        for id in &expected {
            let r = &rows[(*id - 1) as usize];
            let key = (r.class.to_string(), r.target.to_string(), dlq::cause_of(r.reason));
            match want.iter_mut().find(|w| (&w.0, &w.1, &w.2) == (&key.0, &key.1, &key.2)) {
                Some(w) => w.3 += 1,
                None => want.push((key.0, key.1, key.2, 1)),
            }
        }
        want.sort();
        let mut got: Vec<(String, String, String, i64)> = api::dead_letter_groups(a, &c.filter)
            .await
            .unwrap()
            .into_iter()
            .map(|g| (g.class.as_str().to_string(), g.target, g.cause, g.count))
            .collect();
        got.sort();
        assert_eq!(got, want, "groups, {}", c.name);

        // The replay preview: what a replay of this filter would send back (open ones) and leave (resolved). A
        // replay selection looks at every resolution by design, whatever the filter says (`push_selection`).
        if c.filter.resolution.is_some() {
            continue;
        }
        let selection = ReplaySelection { ids: None, filter: Some(c.filter.clone()) };
        let preview = api::replay_preview(a, &selection).await.unwrap();
        let mut selected = expected.clone();
        if c.matches_resolved {
            selected.insert(5);
        }
        let open = selected.iter().filter(|id| rows[(**id - 1) as usize].resolution == "open").count() as i64;
        assert_eq!(
            (preview.eligible, preview.not_eligible),
            (open, selected.len() as i64 - open),
            "preview, {}",
            c.name
        );
        // Chosen ids are narrowed by the filter too: those outside it count as unknown, never as eligible.
        let chosen = ReplaySelection { ids: Some(vec![1, 2, 3, 4, 5, 6]), filter: Some(c.filter.clone()) };
        let preview = api::replay_preview(a, &chosen).await.unwrap();
        assert_eq!(preview.eligible, open, "preview of ids, {}", c.name);
        assert_eq!(preview.reasons.unknown, 6 - selected.len() as i64, "preview of ids, {}", c.name);
    }
    app.server.shutdown().await.unwrap();
}

/// Filters the API refuses rather than ignore: a wrong class, an empty time range, a status that is not one,
/// a lead field without a value (or the reverse), a lead field that is not a name or pointer.
#[tokio::test]
async fn filters_that_cannot_be_honoured_are_refused_not_ignored() {
    let app = spawn().await;
    seed(&app).await;
    let a = &app.server.app;
    let s = |v: &str| Some(v.to_string());
    // A class is typed: an unknown one is refused where it is read (the query string), naming the known ones.
    let bogus = "bogus".parse::<leadline::store::ErrorClass>().unwrap_err().to_string();
    assert!(bogus.contains("permanent_data"), "{bogus}");
    let refused = [
        DeadLetterFilter { since: at(2), until: at(2), ..Default::default() },
        DeadLetterFilter { http_status: Some(42), ..Default::default() },
        DeadLetterFilter { lead_field: s("email"), ..Default::default() },
        DeadLetterFilter { lead_value: s("gmail"), ..Default::default() },
        DeadLetterFilter { lead_field: s("e'mail"), lead_value: s("x"), ..Default::default() },
    ];
    for f in refused {
        assert!(matches!(api::dead_letters(a, &f).await, Err(api::ApiError::BadRequest(_))), "list {f:?}");
        assert!(matches!(api::dead_letter_groups(a, &f).await, Err(api::ApiError::BadRequest(_))), "groups {f:?}");
        let selection = ReplaySelection { ids: None, filter: Some(f.clone()) };
        assert!(matches!(api::replay_preview(a, &selection).await, Err(api::ApiError::BadRequest(_))), "preview {f:?}");
    }
    app.server.shutdown().await.unwrap();
}
