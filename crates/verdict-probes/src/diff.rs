//! Structural comparison of two snapshots, minus ignored locations, naming each changed path.
//!
//! Objects are compared member by member and arrays element by element (an array that grew or
//! shrank reports the added or removed indices). Paths are RFC 9535 normalized paths
//! (`$['metadata']['labels']['app.kubernetes.io/name']`), unambiguous whatever the keys hold.
//! An `ignore` JSONPath is evaluated against both snapshots; a change at or under any location
//! it selects in either is not reported.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json_path::JsonPath;
use std::fmt::Write as _;

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
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

fn walk(
    a: Option<&Value>,
    b: Option<&Value>,
    path: &mut Vec<Seg>,
    ignored: &[Vec<Seg>],
    out: &mut Vec<Change>,
) {
    if ignored.iter().any(|ig| path.starts_with(ig)) {
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
                path.push(Seg::Key(k.clone()));
                walk(x.get(k), y.get(k), path, ignored, out);
                path.pop();
            }
        }
        (Some(Value::Array(x)), Some(Value::Array(y))) => {
            for i in 0..x.len().max(y.len()) {
                path.push(Seg::Index(i));
                walk(x.get(i), y.get(i), path, ignored, out);
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

/// The changes from `baseline` to `current`, minus what `ignore` selects in either.
#[must_use]
pub fn changes(baseline: &Value, current: &Value, ignore: &[(String, JsonPath)]) -> Vec<Change> {
    let mut ignored = locations(ignore, baseline);
    ignored.extend(locations(ignore, current));
    let mut out = Vec::new();
    walk(
        Some(baseline),
        Some(current),
        &mut Vec::new(),
        &ignored,
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
    fn equal_documents_have_no_changes() {
        let a = json!({"x": [1, {"y": null}]});
        assert!(changes(&a, &a.clone(), &[]).is_empty());
        assert_eq!(
            normalized(&[Seg::Key("it's".into()), Seg::Index(3)]),
            "$['it\\'s'][3]"
        );
    }
}
