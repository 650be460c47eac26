//! Structural comparison of two snapshots, minus ignored locations, naming each changed path.
//!
//! Objects are compared member by member and arrays element by element (an array that grew or
//! shrank reports the added or removed indices). Paths are RFC 9535 normalized paths
//! (`$['metadata']['labels']['app.kubernetes.io/name']`), unambiguous whatever the keys hold.
//! An `ignore` JSONPath is evaluated against both snapshots. A change at or under a location
//! is not reported when the path selects it in both, when it selects it in the baseline and
//! the current snapshot has nothing there (a removal), or when it selects it in the current
//! snapshot and the baseline has nothing there (an addition). A location is never ignored
//! because one snapshot alone matches while the other holds something there: an agent that
//! set `ephemeral: true` on the production database must not hide its change behind
//! `$.items[?@.ephemeral == true]`, nor one that put another object at the index an
//! ephemeral object had.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json_path::JsonPath;
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Seg {
    /// Object member.
    Key(String),
    /// Array element.
    Index(usize),
}

/// What happened at a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// Present now, absent in the baseline.
    Added,
    /// Present in the baseline, absent now.
    Removed,
    /// Present in both, different.
    Changed,
}

/// One changed path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// Normalized path.
    pub path: String,
    /// Added, removed or changed.
    pub change: ChangeKind,
}

/// Writes a normalized path (RFC 9535 §2.7).
#[must_use]
pub fn normalized(path: &[Seg]) -> String {
    let mut s = String::from("$");
    for seg in path {
        match seg {
            Seg::Index(i) => {
                let _ = write!(s, "[{i}]");
            }
            Seg::Key(k) => {
                s.push_str("['");
                for c in k.chars() {
                    match c {
                        '\'' => s.push_str("\\'"),
                        '\\' => s.push_str("\\\\"),
                        '\u{8}' => s.push_str("\\b"),
                        '\u{c}' => s.push_str("\\f"),
                        '\n' => s.push_str("\\n"),
                        '\r' => s.push_str("\\r"),
                        '\t' => s.push_str("\\t"),
                        c if u32::from(c) < 0x20 => {
                            let _ = write!(s, "\\u{:04x}", u32::from(c));
                        }
                        c => s.push(c),
                    }
                }
                s.push_str("']");
            }
        }
    }
    s
}

fn locations(paths: &[(String, JsonPath)], doc: &Value) -> Vec<Vec<Seg>> {
    let mut out = Vec::new();
    for (_, p) in paths {
        for node in p.query_located(doc).iter() {
            let segs = node
                .location()
                .iter()
                .map(|e| match (e.as_name(), e.as_index()) {
                    (Some(n), _) => Seg::Key(n.to_owned()),
                    (None, Some(i)) => Seg::Index(i),
                    (None, None) => Seg::Index(usize::MAX),
                })
                .collect();
            out.push(segs);
        }
    }
    out
}

/// Ignored locations as a tree, so that each step of the walk costs one lookup however many
/// locations a wildcard selects (a list of them made the walk quadratic).
#[derive(Debug, Default)]
struct Ignored {
    here: bool,
    keys: HashMap<String, Ignored>,
    indices: HashMap<usize, Ignored>,
}

impl Ignored {
    fn insert(&mut self, path: &[Seg]) {
        let mut node = self;
        for seg in path {
            if node.here {
                return;
            }
            node = match seg {
                Seg::Key(k) => node.keys.entry(k.clone()).or_default(),
                Seg::Index(i) => node.indices.entry(*i).or_default(),
            };
        }
        node.here = true;
    }

    fn child(&self, seg: &Seg) -> Option<&Self> {
        match seg {
            Seg::Key(k) => self.keys.get(k),
            Seg::Index(i) => self.indices.get(i),
        }
    }
}

/// Whether `doc` has a value at `path`.
fn present(doc: &Value, path: &[Seg]) -> bool {
    let mut at = doc;
    for seg in path {
        let next = match (seg, at) {
            (Seg::Key(k), Value::Object(m)) => m.get(k),
            (Seg::Index(i), Value::Array(a)) => a.get(*i),
            _ => None,
        };
        match next {
            Some(v) => at = v,
            None => return false,
        }
    }
    true
}

fn walk(
    a: Option<&Value>,
    b: Option<&Value>,
    path: &mut Vec<Seg>,
    ignored: Option<&Ignored>,
    out: &mut Vec<Change>,
) {
    if ignored.is_some_and(|i| i.here) {
        return;
    }
    match (a, b) {
        (None, None) => {}
        (Some(_), None) => out.push(Change {
            path: normalized(path),
            change: ChangeKind::Removed,
        }),
        (None, Some(_)) => out.push(Change {
            path: normalized(path),
            change: ChangeKind::Added,
        }),
        (Some(Value::Object(x)), Some(Value::Object(y))) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let seg = Seg::Key(k.clone());
                let under = ignored.and_then(|i| i.child(&seg));
                path.push(seg);
                walk(x.get(k), y.get(k), path, under, out);
                path.pop();
            }
        }
        (Some(Value::Array(x)), Some(Value::Array(y))) => {
            for i in 0..x.len().max(y.len()) {
                let seg = Seg::Index(i);
                let under = ignored.and_then(|ig| ig.child(&seg));
                path.push(seg);
                walk(x.get(i), y.get(i), path, under, out);
                path.pop();
            }
        }
        (Some(x), Some(y)) => {
            if x != y {
                out.push(Change {
                    path: normalized(path),
                    change: ChangeKind::Changed,
                });
            }
        }
    }
}

/// The changes from `baseline` to `current`, minus what `ignore` selects in both, what it
/// selects in the baseline where the current snapshot has nothing, and what it selects in the
/// current snapshot where the baseline has nothing.
#[must_use]
pub fn changes(baseline: &Value, current: &Value, ignore: &[(String, JsonPath)]) -> Vec<Change> {
    let mut ignored = Ignored::default();
    let now: HashSet<Vec<Seg>> = locations(ignore, current).into_iter().collect();
    for loc in locations(ignore, baseline) {
        // What is there now at a location the baseline selects may be another object that
        // moved into it (an array index): hidden only if the filter selects it too.
        if now.contains(&loc) || !present(current, &loc) {
            ignored.insert(&loc);
        }
    }
    for loc in &now {
        if !present(baseline, loc) {
            ignored.insert(loc);
        }
    }
    let mut out = Vec::new();
    walk(
        Some(baseline),
        Some(current),
        &mut Vec::new(),
        Some(&ignored),
        &mut out,
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ig(paths: &[&str]) -> Vec<(String, JsonPath)> {
        paths
            .iter()
            .map(|p| ((*p).to_owned(), JsonPath::parse(p).unwrap()))
            .collect()
    }

    #[test]
    fn reports_each_changed_path() {
        let a = json!({"metadata": {"labels": {"app.kubernetes.io/name": "web"}, "rv": "1"}, "spec": [1, 2]});
        let b = json!({"metadata": {"labels": {"app.kubernetes.io/name": "api"}, "rv": "2", "new": true}, "spec": [1]});
        let c = changes(&a, &b, &[]);
        let paths: Vec<(&str, ChangeKind)> =
            c.iter().map(|c| (c.path.as_str(), c.change)).collect();
        assert_eq!(
            paths,
            vec![
                (
                    "$['metadata']['labels']['app.kubernetes.io/name']",
                    ChangeKind::Changed
                ),
                ("$['metadata']['new']", ChangeKind::Added),
                ("$['metadata']['rv']", ChangeKind::Changed),
                ("$['spec'][1]", ChangeKind::Removed),
            ]
        );
    }

    #[test]
    fn ignored_locations_and_everything_under_them_are_skipped() {
        let a = json!({"metadata": {"resourceVersion": "1", "managedFields": [{"t": 1}], "name": "prod"}});
        let b = json!({"metadata": {"resourceVersion": "2", "managedFields": [{"t": 2}, {"t": 3}], "name": "prod"}});
        assert!(
            changes(
                &a,
                &b,
                &ig(&["$.metadata.resourceVersion", "$.metadata.managedFields"])
            )
            .is_empty()
        );
        let only_rv = changes(&a, &b, &ig(&["$.metadata.resourceVersion"]));
        assert!(
            only_rv
                .iter()
                .all(|c| c.path.starts_with("$['metadata']['managedFields']"))
        );
        assert!(!only_rv.is_empty());
    }

    #[test]
    fn an_ignored_path_only_in_the_current_snapshot_is_skipped() {
        let a = json!({"a": 1});
        let b = json!({"a": 1, "status": {"x": 1}});
        assert!(changes(&a, &b, &ig(&["$.status"])).is_empty());
    }

    #[test]
    fn an_object_moved_into_an_ignored_index_is_compared() {
        let ig = ig(&["$.items[?@.ephemeral == true]"]);
        let before = json!({"items": [
            {"name": "api-1"},
            {"name": "job-abc", "ephemeral": true},
            {"name": "web-1"}
        ]});
        let after = json!({"items": [
            {"name": "api-1"},
            {"name": "miner", "privileged": true},
            {"name": "web-1"}
        ]});
        let paths: Vec<String> = changes(&before, &after, &ig)
            .into_iter()
            .map(|c| c.path)
            .collect();
        assert_eq!(
            paths,
            [
                "$['items'][1]['ephemeral']",
                "$['items'][1]['name']",
                "$['items'][1]['privileged']"
            ]
        );
        // Another ephemeral object there, or none, is still hidden.
        let replaced = json!({"items": [
            {"name": "api-1"},
            {"name": "job-def", "ephemeral": true},
            {"name": "web-1"}
        ]});
        assert!(changes(&before, &replaced, &ig).is_empty());
        let gone = json!({"items": [{"name": "api-1"}, {"name": "job-abc", "ephemeral": true}]});
        let shorter = json!({"items": [{"name": "api-1"}]});
        assert!(changes(&gone, &shorter, &ig).is_empty());
    }

    #[test]
    fn a_filter_matching_only_in_the_current_snapshot_does_not_hide_a_change() {
        let ig = ig(&["$.items[?@.ephemeral == true]"]);
        let before = json!({"items": [
            {"name": "scratch", "ephemeral": true, "replicas": 1},
            {"name": "prod-db", "replicas": 3}
        ]});
        // The agent marked the production database ephemeral and scaled it to zero.
        let after = json!({"items": [
            {"name": "scratch", "ephemeral": true, "replicas": 5},
            {"name": "prod-db", "ephemeral": true, "replicas": 0}
        ]});
        let paths: Vec<(String, ChangeKind)> = changes(&before, &after, &ig)
            .into_iter()
            .map(|c| (c.path, c.change))
            .collect();
        assert_eq!(
            paths,
            vec![
                ("$['items'][1]['ephemeral']".to_owned(), ChangeKind::Added),
                ("$['items'][1]['replicas']".to_owned(), ChangeKind::Changed),
            ]
        );
        // An item added with the flag is an addition the filter may ignore.
        let added = json!({"items": [
            {"name": "scratch", "ephemeral": true, "replicas": 1},
            {"name": "prod-db", "replicas": 3},
            {"name": "tmp", "ephemeral": true}
        ]});
        assert!(changes(&before, &added, &ig).is_empty());
    }

    #[test]
    fn a_wildcard_ignore_over_a_large_document_finds_the_one_change() {
        // Selected locations are looked up, not searched: quadratic, this took minutes (a speed
        // figure belongs in a benchmark; this holds what the lookup must still find).
        let items: Vec<Value> = (0..20_000).map(|i| json!({"id": i, "rv": i})).collect();
        let before = json!({ "items": items });
        let mut after = before.clone();
        after["items"][19_999]["id"] = json!(-1);
        after["items"][7]["rv"] = json!(-1);
        let c = changes(&before, &after, &ig(&["$.items[*].rv"]));
        assert_eq!(c.len(), 1, "{c:?}");
    }

    #[test]
    fn equal_documents_have_no_changes() {
        let a = json!({"x": [1, {"y": null}]});
        assert!(changes(&a, &a.clone(), &[]).is_empty());
        assert_eq!(
            normalized(&[Seg::Key("it's".into()), Seg::Index(3)]),
            "$['it\\'s'][3]"
        );
    }
}
