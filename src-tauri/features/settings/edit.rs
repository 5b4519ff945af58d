//! Writing a settings change back into the user's TOML file: the edit is made on a `toml_edit` document of the
//! file as it is, so every comment, the order of the keys and the formatting of what was not changed stay as the
//! person wrote them; a changed value keeps the comment beside it. Pure: text in, text out.

use serde_json::Value as Json;
use toml_edit::{Array, ArrayOfTables, DocumentMut, InlineTable, Item, Table, TableLike, Value};

/// One change: the dotted path of a key (`targets.crm.url`, `monitor.alerts.silence`) and its new value
/// (`null` removes the key). A table or a list is given whole and replaces the one there, element by element,
/// so the comments of the elements that stay are kept.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, ts_rs::TS)]
pub struct Change {
    pub path: String,
    #[ts(type = "unknown")]
    pub value: Json,
}

/// Applies `changes` in order to the TOML `text`. Fails with the path of the change that cannot be made (a
/// path through a value that is not a table) and why.
pub fn apply(text: &str, changes: &[Change]) -> Result<String, (String, String)> {
    let mut doc: DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| (String::new(), e.to_string()))?;
    for change in changes {
        set(&mut doc, &change.path, &change.value).map_err(|m| (change.path.clone(), m))?;
    }
    Ok(doc.to_string())
}

fn keys(path: &str) -> Result<Vec<&str>, String> {
    let keys: Vec<&str> = path.split('.').collect();
    if keys.iter().any(|k| k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')) {
        return Err(format!("`{path}` is not a settings path (names joined by dots)"));
    }
    Ok(keys)
}

fn set(doc: &mut DocumentMut, path: &str, value: &Json) -> Result<(), String> {
    let keys = keys(path)?;
    let (last, parents) = keys.split_last().expect("split gives at least one key");
    let mut table: &mut dyn TableLike = doc.as_table_mut();
    let mut inline = false;
    for key in parents {
        if table.get(key).is_none() {
            if value.is_null() {
                return Ok(()); // removing what is not there
            }
            let new = if inline {
                Item::Value(Value::InlineTable(InlineTable::new()))
            } else {
                let mut t = Table::new();
                t.set_implicit(true);
                Item::Table(t)
            };
            table.insert(key, new);
        }
        (table, inline) = match table.get_mut(key).expect("present or just inserted") {
            Item::Table(t) => (t as &mut dyn TableLike, false),
            Item::Value(Value::InlineTable(t)) => (t as &mut dyn TableLike, true),
            _ => return Err(format!("`{key}` is not a table")),
        };
    }
    if value.is_null() {
        table.remove(last);
        return Ok(());
    }
    match table.get_mut(last) {
        Some(item) => set_item(item, value),
        None => {
            table.insert(last, if inline { Item::Value(new_value(value)) } else { new_item(value) });
        }
    }
    Ok(())
}

/// Replaces what `item` holds with `new`, keeping the formatting of what stays: a scalar keeps the comment
/// beside it, a table keeps its header comment and the comments of the keys that stay, a list of tables keeps
/// the tables that stay.
fn set_item(item: &mut Item, new: &Json) {
    match (item, new) {
        (Item::Value(v), _) => set_value(v, new),
        (Item::Table(t), Json::Object(map)) => set_table(t, map, false),
        (Item::ArrayOfTables(tables), Json::Array(list)) if list.iter().all(Json::is_object) => {
            set_tables(tables, list)
        }
        (item, new) => *item = new_item(new),
    }
}

fn set_table(table: &mut dyn TableLike, map: &serde_json::Map<String, Json>, inline: bool) {
    let gone: Vec<String> = table.iter().map(|(k, _)| k.to_string()).filter(|k| !map.contains_key(k)).collect();
    for key in gone {
        table.remove(&key);
    }
    for (key, value) in map {
        if value.is_null() {
            table.remove(key);
            continue;
        }
        match table.get_mut(key) {
            Some(item) => set_item(item, value),
            None => {
                table.insert(key, if inline { Item::Value(new_value(value)) } else { new_item(value) });
            }
        }
    }
}

fn set_tables(tables: &mut ArrayOfTables, list: &[Json]) {
    while tables.len() > list.len() {
        tables.remove(tables.len() - 1);
    }
    for (i, value) in list.iter().enumerate() {
        let Json::Object(map) = value else { continue };
        match tables.get_mut(i) {
            Some(t) => set_table(t, map, false),
            None => {
                let mut t = Table::new();
                set_table(&mut t, map, false);
                tables.push(t);
            }
        }
    }
}

fn set_value(value: &mut Value, new: &Json) {
    match (value, new) {
        (Value::InlineTable(t), Json::Object(map)) => set_table(t, map, true),
        (Value::Array(a), Json::Array(list)) => {
            while a.len() > list.len() {
                a.remove(a.len() - 1);
            }
            for (i, item) in list.iter().enumerate() {
                match a.get_mut(i) {
                    Some(v) => set_value(v, item),
                    None => a.push(new_value(item)),
                }
            }
        }
        (value, new) => {
            let decor = value.decor().clone();
            *value = new_value(new);
            *value.decor_mut() = decor;
        }
    }
}

/// A new key's item under a `[table]`: a table of its own for a table, `[[…]]` tables for a list of tables.
fn new_item(new: &Json) -> Item {
    match new {
        Json::Object(map) => {
            let mut t = Table::new();
            set_table(&mut t, map, false);
            Item::Table(t)
        }
        Json::Array(list) if !list.is_empty() && list.iter().all(Json::is_object) => {
            let mut tables = ArrayOfTables::new();
            set_tables(&mut tables, list);
            Item::ArrayOfTables(tables)
        }
        other => Item::Value(new_value(other)),
    }
}

/// A new inline value.
fn new_value(new: &Json) -> Value {
    match new {
        Json::Bool(b) => (*b).into(),
        Json::Number(n) => match n.as_i64() {
            Some(i) => i.into(),
            None => n.as_f64().unwrap_or_default().into(),
        },
        Json::String(s) => s.as_str().into(),
        Json::Array(list) => Value::Array(list.iter().map(new_value).collect::<Array>()),
        Json::Object(map) => {
            let mut t = InlineTable::new();
            set_table(&mut t, map, true);
            Value::InlineTable(t)
        }
        // Removal is handled by the caller; an empty text stands in where a null slips into a list.
        Json::Null => "".into(),
    }
}

/// The key path (`targets.crm.mapping[1].to`) of the key or value of `text` at byte `offset`: where a parse
/// error's span points, so the error can be shown beside its field.
pub fn path_at(text: &str, offset: usize) -> Option<String> {
    let doc = toml_edit::Document::parse(text).ok()?;
    let mut best: Option<(usize, String)> = None;
    walk_table(doc.as_table(), "", offset, &mut best);
    best.map(|(_, p)| p)
}

fn consider(span: Option<std::ops::Range<usize>>, offset: usize, path: &str, best: &mut Option<(usize, String)>) {
    if let Some(s) = span {
        if s.start <= offset && offset < s.end.max(s.start + 1) {
            let width = s.end - s.start;
            if best.as_ref().is_none_or(|(w, p)| width < *w || (width == *w && path.len() > p.len())) {
                *best = Some((width, path.to_string()));
            }
        }
    }
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

fn walk_table(table: &dyn TableLike, prefix: &str, offset: usize, best: &mut Option<(usize, String)>) {
    for (key, item) in table.iter() {
        let path = join(prefix, key);
        if let Some(k) = table.key(key) {
            consider(k.span(), offset, &path, best);
        }
        walk_item(item, &path, offset, best);
    }
}

fn walk_item(item: &Item, path: &str, offset: usize, best: &mut Option<(usize, String)>) {
    match item {
        Item::Table(t) => walk_table(t, path, offset, best),
        Item::ArrayOfTables(tables) => {
            for (i, t) in tables.iter().enumerate() {
                walk_table(t, &format!("{path}[{i}]"), offset, best);
            }
        }
        Item::Value(v) => walk_value(v, path, offset, best),
        Item::None => {}
    }
}

fn walk_value(value: &Value, path: &str, offset: usize, best: &mut Option<(usize, String)>) {
    consider(value.span(), offset, path, best);
    match value {
        Value::InlineTable(t) => walk_table(t, path, offset, best),
        Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                walk_value(v, &format!("{path}[{i}]"), offset, best);
            }
        }
        _ => {}
    }
}

/// Whether an error about `key` is about the change of `path`: the key itself, a key inside it
/// (`targets.crm.mapping[2].to` for a new mapping), or the table it sits in (`targets.crm.auth` for a change of
/// `targets.crm.auth.bearer_env`).
pub fn blames(path: &str, key: &str) -> bool {
    key == path
        || key.starts_with(&format!("{path}."))
        || key.starts_with(&format!("{path}["))
        || path.starts_with(&format!("{key}."))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const FILE: &str = r#"# Leadline at ACME — owned by sales ops (ask Jo before changing targets)

[sources.webform]
# the marketing site's form
route = ["crm"]   # one step

[targets.crm]
kind = "http"
url = "http://127.0.0.1:9/leads"  # the staging CRM until March
strategy = "idempotency_key"

# How a lead becomes a record
[[targets.crm.mapping]]
to = "email"   # primary key in the CRM
from = "/email"
required = true

[[targets.crm.mapping]]
to = "phone"
from = "/phone"

[monitor]
timezone = "Europe/Berlin"   # our office
"#;

    fn change(path: &str, value: Json) -> Change {
        Change { path: path.into(), value }
    }

    /// The lines that differ between two texts (same length assumed when only values change).
    fn changed_lines(a: &str, b: &str) -> Vec<(String, String)> {
        a.lines().zip(b.lines()).filter(|(x, y)| x != y).map(|(x, y)| (x.to_string(), y.to_string())).collect()
    }

    #[test]
    fn a_changed_value_is_the_only_difference_and_keeps_its_comment() {
        let out = apply(FILE, &[change("targets.crm.url", json!("https://crm.example.com/leads"))]).unwrap();
        assert_eq!(out.lines().count(), FILE.lines().count());
        assert_eq!(
            changed_lines(FILE, &out),
            vec![(
                "url = \"http://127.0.0.1:9/leads\"  # the staging CRM until March".to_string(),
                "url = \"https://crm.example.com/leads\"  # the staging CRM until March".to_string()
            )]
        );
        assert!(out.starts_with("# Leadline at ACME"));
    }

    #[test]
    fn a_new_table_is_added_and_the_rest_is_untouched() {
        let out = apply(
            FILE,
            &[
                change("monitor.alerts.silence", json!({"notify": "digest", "renotify_minutes": 30})),
                change("monitor.quiet_hours", json!({"start": "22:00", "end": "07:00"})),
            ],
        )
        .unwrap();
        assert!(out.starts_with(FILE.trim_end()), "{out}");
        let parsed: toml::Value = toml::from_str(&out).unwrap();
        assert_eq!(parsed["monitor"]["alerts"]["silence"]["notify"].as_str(), Some("digest"));
        assert_eq!(parsed["monitor"]["alerts"]["silence"]["renotify_minutes"].as_integer(), Some(30));
        assert_eq!(parsed["monitor"]["quiet_hours"]["start"].as_str(), Some("22:00"));
        assert_eq!(parsed["monitor"]["timezone"].as_str(), Some("Europe/Berlin"));
    }

    #[test]
    fn a_mapping_given_whole_keeps_the_comments_of_the_rules_that_stay() {
        let rules = json!([
            {"to": "email", "from": "/email", "required": true},
            {"to": "mobile", "from": "/phone"},
            {"to": "source", "constant": "web"},
        ]);
        let out = apply(FILE, &[change("targets.crm.mapping", rules)]).unwrap();
        assert!(out.contains("to = \"email\"   # primary key in the CRM"), "{out}");
        assert!(out.contains("# How a lead becomes a record"), "{out}");
        let parsed: toml::Value = toml::from_str(&out).unwrap();
        let mapping = parsed["targets"]["crm"]["mapping"].as_array().unwrap();
        assert_eq!(mapping.len(), 3);
        assert_eq!(mapping[1]["to"].as_str(), Some("mobile"));
        assert_eq!(mapping[2]["constant"].as_str(), Some("web"));
        // Fewer rules: the last ones go, the first stays as written.
        let out =
            apply(FILE, &[change("targets.crm.mapping", json!([{"to": "email", "from": "/email", "required": true}]))])
                .unwrap();
        assert!(!out.contains("phone"), "{out}");
        assert!(out.contains("# primary key in the CRM"), "{out}");
    }

    #[test]
    fn null_removes_a_key_and_inline_tables_stay_inline() {
        let text = "[targets.crm]\nurl = \"http://x\"\nauth = { bearer_env = \"CRM_TOKEN\" } # from the vault\n";
        let out = apply(text, &[change("targets.crm.auth.bearer_env", json!("HUBSPOT_TOKEN"))]).unwrap();
        assert_eq!(out, text.replace("CRM_TOKEN", "HUBSPOT_TOKEN"));
        let out = apply(text, &[change("targets.crm.auth", Json::Null)]).unwrap();
        assert_eq!(out, "[targets.crm]\nurl = \"http://x\"\n");
        let out = apply(text, &[change("targets.crm.url.deeper", json!(1))]).unwrap_err();
        assert_eq!(out.0, "targets.crm.url.deeper");
    }

    #[test]
    fn the_path_of_a_position_names_the_key_there() {
        let at = |needle: &str| FILE.find(needle).unwrap();
        assert_eq!(path_at(FILE, at("http://127")).as_deref(), Some("targets.crm.url"));
        assert_eq!(path_at(FILE, at("\"phone\"")).as_deref(), Some("targets.crm.mapping[1].to"));
        assert_eq!(path_at(FILE, at("\"crm\"]")).as_deref(), Some("sources.webform.route[0]"));
        assert_eq!(path_at(FILE, at("timezone")).as_deref(), Some("monitor.timezone"));
    }

    #[test]
    fn an_error_is_blamed_on_the_change_it_is_about() {
        assert!(blames("targets.crm.url", "targets.crm.url"));
        assert!(blames("targets.crm.mapping", "targets.crm.mapping[2].to"));
        assert!(blames("targets.crm.auth.bearer_env", "targets.crm.auth"));
        assert!(!blames("targets.crm.url", "targets.crm.urls"));
        assert!(!blames("targets.crm", "targets.crm2.url"));
    }
}
