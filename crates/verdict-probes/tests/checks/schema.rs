//! The check-spec schema is true of the loader: what the loader accepts validates, and what it
//! refuses for its structure (unknown fields, wrong types, unknown kinds, modes and other enum
//! values) the schema refuses too. (`common::spec_vars` also holds every spec the other tests
//! load to the schema.)

use crate::common::{assert_schema_accepts, schema_errors, spec, spec_vars};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use verdict_probes::duration::Dur;
use verdict_probes::load::{self, Format};
use verdict_probes::spec::ProbeDef;

/// A minimal probe of every kind the loader accepts.
fn probes() -> Vec<(&'static str, Value)> {
    vec![
        ("command", json!({"kind": "command", "argv": ["true"]})),
        (
            "json",
            json!({"kind": "json", "source": {"file": "x.json"}}),
        ),
        (
            "http",
            json!({"kind": "http", "url": "http://127.0.0.1:1/"}),
        ),
        ("tcp", json!({"kind": "tcp", "address": "127.0.0.1:1"})),
        ("dns", json!({"kind": "dns", "name": "example.com"})),
        ("file", json!({"kind": "file", "path": "/etc/hostname"})),
        (
            "log",
            json!({"kind": "log", "file": "x.log", "matches": "ERROR"}),
        ),
        ("tls", json!({"kind": "tls", "address": "127.0.0.1:1"})),
    ]
}

fn with_probe(probe: Value) -> Value {
    json!({"version": 1, "criteria": [{"id": "c", "mode": "assert", "probe": probe}]})
}

/// The loader's verdict on a spec written as JSON.
fn loads(doc: &Value) -> Result<(), String> {
    let text = serde_json::to_vec(doc).unwrap();
    load::load_bytes(&text, Format::Json, &BTreeMap::new())
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Both accept `doc`.
fn accepted(doc: &Value) {
    if let Err(e) = loads(doc) {
        panic!("loader refused {doc}: {e}");
    }
    assert_schema_accepts(doc);
}

/// Both refuse `doc`.
fn refused(doc: &Value) {
    assert!(loads(doc).is_err(), "loader accepted {doc}");
    assert!(!schema_errors(doc).is_empty(), "schema accepted {doc}");
}

/// Sets `value` at a JSON pointer, making the objects on the way (array items must exist).
fn set(doc: &Value, pointer: &str, value: Value) -> Value {
    let mut doc = doc.clone();
    let tokens: Vec<&str> = pointer.split('/').skip(1).collect();
    let (last, parents) = tokens.split_last().unwrap();
    let mut at = &mut doc;
    for t in parents {
        at = match at {
            Value::Array(items) => &mut items[t.parse::<usize>().unwrap()],
            Value::Object(m) => m.entry(*t).or_insert_with(|| json!({})),
            other => panic!("cannot go into {other}"),
        };
    }
    at.as_object_mut()
        .unwrap()
        .insert((*last).to_owned(), value);
    doc
}

/// The spec files under `dir`: every YAML file, and every JSON file with `criteria` (the
/// others are the documents a stand-in command prints).
fn spec_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        if path.is_dir() {
            spec_files(&path, out);
        } else if ext == "yaml" || ext == "yml" {
            out.push(path);
        } else if ext == "json" {
            let doc: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            if doc.get("criteria").is_some() {
                out.push(path);
            }
        }
    }
}

#[test]
fn every_example_spec_loads_and_validates() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/checks");
    let mut files = Vec::new();
    spec_files(&root, &mut files);
    assert!(
        files.len() >= 2,
        "no example specs under {}",
        root.display()
    );
    for path in files {
        let spec = load::load_file(&path, &BTreeMap::new())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let text = std::fs::read_to_string(&path).unwrap();
        let doc = if path.extension().is_some_and(|e| e == "json") {
            serde_json::from_str(&text).unwrap()
        } else {
            verdict_probes::yaml::parse(&text).unwrap().0
        };
        assert_schema_accepts(&doc);
        for c in &spec.checks {
            assert_schema_accepts(&json!({"version": 1, "criteria": [c.definition]}));
        }
    }
}

#[test]
fn every_probe_kind_is_described_and_its_unknown_fields_refused() {
    let kinds: Vec<&str> = probes().iter().map(|(k, _)| *k).collect();
    assert_eq!(kinds, ProbeDef::KINDS);
    for (kind, probe) in probes() {
        let doc = with_probe(probe.clone());
        accepted(&doc);
        refused(&set(&doc, "/criteria/0/probe/bogus", json!(1)));
        // A field of another kind is as unknown as a made-up one.
        let foreign = if kind == "http" { "argv" } else { "url" };
        refused(&set(
            &doc,
            &format!("/criteria/0/probe/{foreign}"),
            json!("x"),
        ));
        let mut no_kind = probe.clone();
        no_kind.as_object_mut().unwrap().remove("kind");
        refused(&with_probe(no_kind));
    }
}

#[test]
fn structural_mistakes_are_refused_by_the_schema_as_by_the_loader() {
    let tcp = with_probe(json!({"kind": "tcp", "address": "127.0.0.1:1"}));
    let http = with_probe(json!({"kind": "http", "url": "http://127.0.0.1:1/"}));
    let json_probe = with_probe(json!({"kind": "json", "source": {"file": "x.json"}}));
    let file = with_probe(json!({"kind": "file", "path": "x"}));
    let dns = with_probe(json!({"kind": "dns", "name": "example.com"}));
    let log = with_probe(json!({"kind": "log", "file": "x.log", "matches": "E"}));
    for doc in [&tcp, &http, &json_probe, &file, &dns, &log] {
        accepted(doc);
    }
    let cases: Vec<(&Value, &str, Value)> = vec![
        // Unknown fields, at every level.
        (&tcp, "/critera", json!([])),
        (&tcp, "/criteria/0/requried", json!(true)),
        (&tcp, "/defaults", json!({"timout": "1s"})),
        (
            &http,
            "/criteria/0/probe/tls",
            json!({"insecure": true, "ca_file": "x"}),
        ),
        (&http, "/criteria/0/probe/body", json!({"contain": "x"})),
        (
            &json_probe,
            "/criteria/0/probe/source",
            json!({"file": "x", "path": "y"}),
        ),
        (
            &json_probe,
            "/criteria/0/probe/quantifier",
            json!({"count": {"min": 1, "most": 2}}),
        ),
        // Wrong types.
        (&tcp, "/version", json!("1")),
        (&tcp, "/criteria", json!({"c": {}})),
        (&tcp, "/criteria/0/weight", json!("heavy")),
        (&tcp, "/criteria/0/required", json!("yes")),
        (&tcp, "/criteria/0/id", json!(7)),
        (&tcp, "/criteria/0/probe", json!("tcp://127.0.0.1:1")),
        (&tcp, "/criteria/0/probe/address", json!(["127.0.0.1", 1])),
        (&tcp, "/defaults/max_output", json!("8MiB")),
        (&tcp, "/vars", json!({"nested": {"a": 1}})),
        (&tcp, "/vars", json!(["a"])),
        (&http, "/criteria/0/probe/status", json!(true)),
        (&http, "/criteria/0/probe/status", json!([])),
        (&http, "/criteria/0/probe/status", json!(700)),
        (&http, "/criteria/0/probe/headers", json!({"a": 1})),
        (&http, "/criteria/0/probe/follow_redirects", json!("no")),
        (&file, "/criteria/0/probe/size", json!({"min": -1})),
        (&log, "/criteria/0/probe/count", json!(3)),
        (
            &tcp,
            "/criteria/0/probe",
            json!({"kind": "command", "argv": "true"}),
        ),
        (
            &tcp,
            "/criteria/0/probe",
            json!({"kind": "command", "argv": ["true"], "exit_code": "0"}),
        ),
        (
            &tcp,
            "/criteria/0/probe",
            json!({"kind": "command", "argv": ["true"], "exit_code": 3_000_000_000_i64}),
        ),
        // Unknown kinds, modes and other enumerated values.
        (&tcp, "/criteria/0/probe/kind", json!("ping")),
        (&tcp, "/criteria/0/probe/kind", json!(1)),
        (&tcp, "/criteria/0/mode", json!("eventually")),
        (&tcp, "/criteria/0/mode", json!("Assert")),
        (&tcp, "/criteria/0/role", json!("nice-to-have")),
        (&tcp, "/criteria/0/probe/expect", json!("listening")),
        (&tcp, "/criteria/0/probe/unreachable", json!("pass")),
        (&dns, "/criteria/0/probe/type", json!("PTR")),
        (&file, "/criteria/0/probe/type", json!("socket")),
        (&json_probe, "/criteria/0/probe/quantifier", json!("most")),
        (&http, "/criteria/0/probe/status", json!("6xx")),
        // Values the format itself fixes.
        (&tcp, "/version", json!(2)),
        (&tcp, "/criteria", json!([])),
        (&tcp, "/criteria/0/id", json!("Web")),
        (&tcp, "/criteria/0/weight", json!(0)),
        (&tcp, "/defaults/max_output", json!(0)),
        (&tcp, "/criteria/0/max_age", json!(30)),
        (&tcp, "/criteria/0/max_age", json!("5d")),
        (&tcp, "/criteria/0/max_age", json!("1s1m")),
        (&tcp, "/criteria/0/max_age", json!("1.5m30s")),
        (&tcp, "/defaults/timeout", json!("-1s")),
    ];
    for (base, pointer, value) in cases {
        refused(&set(base, pointer, value));
    }
    // Required fields.
    let mut no_id = tcp.clone();
    no_id["criteria"][0].as_object_mut().unwrap().remove("id");
    refused(&no_id);
    let mut no_probe = tcp.clone();
    no_probe["criteria"][0]
        .as_object_mut()
        .unwrap()
        .remove("probe");
    refused(&no_probe);
    refused(&json!({"version": 1}));
}

#[test]
fn fields_a_probe_needs_one_of_are_held_to_one() {
    let url = "http://127.0.0.1:1/";
    for probe in [
        json!({"kind": "command", "shell": "true"}),
        json!({"kind": "command", "argv": null, "shell": "true"}),
        json!({"kind": "log", "command": ["journalctl"], "matches": "E"}),
        json!({"kind": "log", "file": "x.log", "command": null, "matches": "E"}),
        json!({"kind": "json", "source": {"command": ["kubectl"]}}),
        json!({"kind": "json", "source": {"url": url, "headers": {"a": "b"}, "tls": {"insecure": true}}, "unreachable": "fail"}),
        json!({"kind": "json", "source": {"file": "x.json", "url": null, "headers": null}, "unreachable": null}),
    ] {
        accepted(&with_probe(probe));
    }
    for probe in [
        json!({"kind": "command", "argv": ["true"], "shell": "true"}),
        json!({"kind": "command", "stdin": "x"}),
        json!({"kind": "command", "argv": null, "shell": null}),
        json!({"kind": "log", "file": "x.log", "command": ["cat"], "matches": "E"}),
        json!({"kind": "log", "matches": "E"}),
        json!({"kind": "json", "source": {"file": "x.json", "url": url}}),
        json!({"kind": "json", "source": {}}),
        json!({"kind": "json", "source": {"file": "x.json", "headers": {"a": "b"}}}),
        json!({"kind": "json", "source": {"command": ["kubectl"], "tls": {"insecure": true}}}),
        json!({"kind": "json", "source": {"file": "x.json"}, "unreachable": "fail"}),
    ] {
        refused(&with_probe(probe));
    }
}

#[test]
fn fields_a_mode_does_not_use_are_refused() {
    let criterion = |fields: Value| {
        let mut c = json!({"id": "c", "probe": {"kind": "tcp", "address": "127.0.0.1:1"}});
        for (k, v) in fields.as_object().unwrap() {
            c[k] = v.clone();
        }
        json!({"version": 1, "criteria": [c]})
    };
    for ok in [
        json!({"mode": "assert", "max_age": "1m"}),
        json!({"role": "safety", "timeout": null}),
        json!({"timeout": "5s", "interval": "1s", "max_interval": "2s"}),
        json!({"role": "correctness", "mode": "converge", "timeout": "5s"}),
        json!({"role": "safety", "mode": "converge", "interval": "1s"}),
        json!({"mode": "hold", "window": "5s", "interval": "1s", "timeout": "10s"}),
        json!({"role": "catastrophic", "mode": "hold", "window": "0"}),
        json!({"mode": "unchanged", "ignore": ["$.a"]}),
    ] {
        accepted(&criterion(ok));
    }
    for bad in [
        json!({"mode": "assert", "timeout": "5s"}),
        json!({"mode": "assert", "interval": "1s"}),
        json!({"role": "safety", "window": "5s"}),
        json!({"role": "catastrophic", "max_interval": "5s"}),
        json!({"window": "5s"}),
        json!({"role": "correctness", "ignore": []}),
        json!({"mode": "converge", "ignore": ["$.a"]}),
        json!({"mode": "hold"}),
        json!({"mode": "hold", "window": null}),
        json!({"mode": "hold", "window": "5s", "max_interval": "1s"}),
        json!({"mode": "hold", "window": "5s", "ignore": []}),
        json!({"mode": "unchanged", "timeout": "5s"}),
        json!({"mode": "unchanged", "window": "5s"}),
    ] {
        refused(&criterion(bad));
    }
}

#[test]
fn the_duration_pattern_accepts_every_duration_the_loader_reads() {
    let texts = [
        "0",
        "0s",
        "0ms",
        "500ms",
        "2s",
        "1.5s",
        "1.s",
        ".25s",
        "2m",
        "1m30s",
        "1h",
        "1.5h",
        "1h2m3s4ms",
        "1h30m",
        "2m0.5s",
        " 3s ",
        "30",
        "1.5",
        "s",
        "5d",
        "1s1m",
        "1s1s",
        "1.5m30s",
        "1..5s",
        "-1s",
        "1 s",
        "ms",
        "1sm",
        "+1s",
        "1h1h",
    ];
    for text in texts {
        let doc = json!({
            "version": 1,
            "defaults": {"timeout": text},
            "criteria": [{"id": "c", "probe": {"kind": "tcp", "address": "127.0.0.1:1"}}]
        });
        let errors = schema_errors(&doc);
        match Dur::parse(text) {
            Ok(_) => assert!(errors.is_empty(), "{text:?}: {errors:?}"),
            // What the grammar refuses, the pattern refuses (only the week and millisecond
            // limits are the loader's alone, and none of these exceeds them).
            Err(_) => assert!(!errors.is_empty(), "{text:?} accepted by the schema"),
        }
    }
}

#[test]
fn a_variable_reference_may_stand_for_any_constrained_string() {
    // The loader substitutes before it reads, so a reference can be a mode, a kind, a
    // duration or an id; the schema cannot judge those and lets them through.
    let text = "version: 1\nvars: {m: assert, k: tcp, t: 20s, who: web}\ncriteria:\n  - id: '{{who}}'\n    mode: '{{ m }}'\n    max_age: '{{t}}'\n    probe: {kind: '{{k}}', address: '127.0.0.1:1', unreachable: '{{u}}'}\n";
    let s = spec_vars(text, &[("u", "fail")]);
    assert_eq!(s.checks[0].definition["mode"], "assert");
    assert_eq!(s.checks[0].definition["probe"]["kind"], "tcp");
    // Text that only looks like a reference is not one, and is judged as written.
    let not_a_reference = with_probe(json!({"kind": "tcp", "address": "x:1", "expect": "{{ 1 }}"}));
    refused(&not_a_reference);
    // Nulls stand for absent optional fields, for the loader and the schema alike.
    let nulls = spec(
        "version: 1\ncriteria:\n  - id: c\n    mode: assert\n    weight:\n    probe: {kind: tcp, address: '127.0.0.1:1', timeout: null}\n",
    );
    assert_eq!(nulls.checks[0].definition["weight"], 1.0);
}
