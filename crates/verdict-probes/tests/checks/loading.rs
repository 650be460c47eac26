//! Spec loading: everything is validated before anything runs, and every refusal names the
//! criterion and the place in the file.

use crate::common::{problem, spec, spec_vars};
use std::collections::BTreeMap;
use verdict_probes::load::{self, Format};

fn one(criterion: &str) -> String {
    format!("version: 1\ncriteria:\n{criterion}")
}

#[test]
fn unknown_fields_are_refused_with_criterion_and_position() {
    let p = problem(&one(
        "  - id: web\n    mode: assert\n    probe:\n      kind: http\n      url: http://127.0.0.1:1/\n      stauts: 200\n",
    ));
    assert_eq!(p.criterion.as_deref(), Some("web"));
    assert!(p.message.contains("unknown field `stauts`"), "{p}");
    assert_eq!((p.line, p.column), (Some(8), Some(7)), "{p}");
    assert_eq!(p.pointer, "/criteria/0/probe/stauts");

    let top = problem("version: 1\ncritera: []\n");
    assert!(top.message.contains("unknown field `critera`"), "{top}");
    let crit = problem(&one(
        "  - id: web\n    requried: true\n    probe: {kind: tcp, address: '127.0.0.1:1'}\n",
    ));
    assert!(crit.message.contains("requried"), "{crit}");
    assert_eq!(crit.line, Some(4));
}

#[test]
fn bad_durations_are_refused() {
    for (bad, why) in [
        ("30", "needs a unit"),
        ("5d", "unknown unit"),
        ("1s1m", "misorders"),
        ("-1s", "unknown unit"),
    ] {
        let p = problem(&one(&format!(
            "  - id: slow\n    timeout: {bad}\n    probe: {{kind: tcp, address: '127.0.0.1:1'}}\n"
        )));
        assert_eq!(p.criterion.as_deref(), Some("slow"));
        assert!(p.message.contains(why), "{bad}: {p}");
        assert_eq!(p.line, Some(4), "{p}");
    }
}

#[test]
fn weights_must_be_finite_and_positive() {
    for bad in ["0", "-1", ".nan", ".inf"] {
        let p = problem(&one(&format!(
            "  - id: w\n    weight: {bad}\n    mode: assert\n    probe: {{kind: tcp, address: '127.0.0.1:1'}}\n"
        )));
        assert!(
            p.message.contains("weight") || p.message.contains("not finite"),
            "{bad}: {p}"
        );
        assert_eq!(p.line, Some(4), "{bad}: {p}");
    }
    let ok = spec(&one(
        "  - id: w\n    weight: 2.5\n    mode: assert\n    probe: {kind: tcp, address: '127.0.0.1:1'}\n",
    ));
    assert!((ok.checks[0].weight - 2.5).abs() < f64::EPSILON);
}

#[test]
fn hold_refuses_interval_zero_and_needs_a_window() {
    let p = problem(&one(
        "  - id: h\n    role: safety\n    mode: hold\n    window: 10s\n    interval: 0\n    probe: {kind: tcp, address: '127.0.0.1:1'}\n",
    ));
    assert!(
        p.message.contains("interval: 0 is refused in hold mode"),
        "{p}"
    );
    assert_eq!(p.line, Some(7));
    let p = problem(&one(
        "  - id: h\n    mode: hold\n    probe: {kind: tcp, address: '127.0.0.1:1'}\n",
    ));
    assert!(p.message.contains("needs a window"), "{p}");
    let p = problem(&one(
        "  - id: h\n    mode: hold\n    window: 10s\n    timeout: 5s\n    probe: {kind: tcp, address: '127.0.0.1:1'}\n",
    ));
    assert!(p.message.contains("shorter than the window"), "{p}");
}

#[test]
fn invalid_regex_cel_and_jsonpath_are_refused_at_load() {
    let regex = problem(&one(
        "  - id: body\n    probe: {kind: http, url: 'http://127.0.0.1:1/', body: {matches: '(unclosed'}}\n",
    ));
    assert_eq!(regex.criterion.as_deref(), Some("body"));
    assert!(regex.message.contains("invalid regex"), "{regex}");
    assert_eq!(regex.pointer, "/criteria/0/probe/body");
    assert_eq!(regex.line, Some(4));

    let cel = problem(&one(
        "  - id: ready\n    probe:\n      kind: json\n      source: {file: x.json}\n      expect: \"self.status.ready ==\"\n",
    ));
    assert!(cel.message.contains("invalid cel expression"), "{cel}");
    assert_eq!((cel.line, cel.column), (Some(7), Some(7)), "{cel}");

    let typo = problem(&one(
        "  - id: ready\n    probe: {kind: json, source: {file: x.json}, expect: \"slef.ready\"}\n",
    ));
    assert!(typo.message.contains("unknown variable \"slef\""), "{typo}");

    let path = problem(&one(
        "  - id: pods\n    probe: {kind: json, source: {file: x.json}, select: '$.items[?'}\n",
    ));
    assert!(path.message.contains("invalid jsonpath"), "{path}");
    assert_eq!(path.pointer, "/criteria/0/probe/select");

    let ignore = problem(&one(
        "  - id: same\n    mode: unchanged\n    ignore: ['$.ok', 'metadata']\n    probe: {kind: json, source: {file: x.json}}\n",
    ));
    assert_eq!(ignore.pointer, "/criteria/0/ignore/1");

    let log = problem(&one(
        "  - id: log\n    probe: {kind: log, file: x.log, matches: '['}\n",
    ));
    assert!(log.message.contains("invalid regex"), "{log}");
}

#[test]
fn duplicate_ids_are_an_error_not_an_overwrite() {
    let p = problem(
        "version: 1\ncriteria:\n  - id: a\n    probe: {kind: tcp, address: '127.0.0.1:1'}\n  - id: a\n    probe: {kind: tcp, address: '127.0.0.1:2'}\n",
    );
    assert!(p.message.contains("duplicate criterion id \"a\""), "{p}");
    assert_eq!(p.line, Some(5));
}

#[test]
fn duplicate_keys_are_refused_in_yaml_and_json() {
    let yaml = load::load_bytes(
        b"version: 1\nversion: 1\ncriteria: []\n",
        Format::Yaml,
        &BTreeMap::new(),
    )
    .unwrap_err();
    assert!(
        yaml.to_string()
            .contains("duplicate object key \"version\""),
        "{yaml}"
    );
    assert_eq!(yaml.problem().unwrap().line, Some(2));
    let json = load::load_bytes(
        br#"{"version": 1, "criteria": [], "version": 1}"#,
        Format::Json,
        &BTreeMap::new(),
    )
    .unwrap_err();
    assert!(json.to_string().contains("duplicate object key"), "{json}");
}

#[test]
fn json_specs_are_read_strictly_and_located() {
    let text = br#"{
  "version": 1,
  "criteria": [
    {"id": "x", "weight": 0, "probe": {"kind": "tcp", "address": "127.0.0.1:1"}}
  ]
}"#;
    let e = load::load_bytes(text, Format::Json, &BTreeMap::new()).unwrap_err();
    let p = e.problem().unwrap();
    assert_eq!(p.criterion.as_deref(), Some("x"));
    assert_eq!(p.line, Some(4), "{p}");
    let big = load::load_bytes(
        br#"{"version": 9007199254740993, "criteria": []}"#,
        Format::Json,
        &BTreeMap::new(),
    );
    assert!(big.is_err());
}

#[test]
fn variables_are_substituted_and_change_the_digest() {
    let text = "version: 1\nvars: {ns: shop}\ncriteria:\n  - id: pods\n    probe: {kind: json, source: {command: [kubectl, get, pods, -n, '{{ns}}', -o, json]}}\n";
    let a = spec(text);
    let same = spec_vars(text, &[("ns", "shop")]);
    let b = spec_vars(text, &[("ns", "prod")]);
    assert_eq!(
        a.checks[0].definition_digest,
        same.checks[0].definition_digest
    );
    assert_ne!(a.checks[0].definition_digest, b.checks[0].definition_digest);
    assert_eq!(
        b.checks[0].definition["probe"]["source"]["command"][4],
        "prod"
    );

    let undefined = problem(
        "version: 1\ncriteria:\n  - id: x\n    probe: {kind: tcp, address: '{{host}}:80'}\n",
    );
    assert!(
        undefined.message.contains("undefined variable \"host\""),
        "{undefined}"
    );
    assert_eq!(undefined.criterion.as_deref(), Some("x"));
    assert_eq!(undefined.pointer, "/criteria/0/probe/address");
}

/// A key is a string of the spec too: an `env` name written with a variable is substituted
/// (it was once set literally as `{{ek}}`, silently), an undefined one is refused where it is
/// written, and two names that substitution makes one are refused rather than one replacing
/// the other.
#[test]
fn variables_are_substituted_in_keys_and_may_not_make_two_one() {
    let text = "version: 1\nvars: {ek: APP_MODE, v: prod}\ncriteria:\n  - id: x\n    mode: assert\n    probe: {kind: command, argv: [env], env: {'{{ek}}': '{{v}}'}}\n";
    let s = spec(text);
    assert_eq!(s.checks[0].definition["probe"]["env"]["APP_MODE"], "prod");
    assert!(
        s.checks[0].definition["probe"]["env"]
            .get("{{ek}}")
            .is_none()
    );

    let undefined = problem(
        "version: 1\ncriteria:\n  - id: x\n    mode: assert\n    probe: {kind: command, argv: [env], env: {'{{nosuchvar}}': '1'}}\n",
    );
    assert!(
        undefined
            .message
            .contains("undefined variable \"nosuchvar\""),
        "{undefined}"
    );
    assert_eq!(undefined.criterion.as_deref(), Some("x"));

    let twice = problem(
        "version: 1\nvars: {ek: MODE}\ncriteria:\n  - id: x\n    mode: assert\n    probe: {kind: command, argv: [env], env: {'{{ek}}': a, MODE: b}}\n",
    );
    assert!(
        twice.message.contains("key \"MODE\" is there twice"),
        "{twice}"
    );
}

#[test]
fn a_variable_cannot_change_the_structure_of_a_spec() {
    // The value is a string holding YAML; substitution happens after parsing, so it stays a string.
    let s = spec_vars(
        "version: 1\ncriteria:\n  - id: x\n    mode: assert\n    probe: {kind: command, argv: [echo, '{{v}}']}\n",
        &[("v", "a]\n    extra: [1")],
    );
    assert_eq!(
        s.checks[0].definition["probe"]["argv"][1],
        "a]\n    extra: [1"
    );
}

#[test]
fn normalisation_fills_defaults_and_is_idempotent() {
    let s = spec(
        "version: 1\ndefaults: {timeout: 2m}\ncriteria:\n  - id: web\n    description: words do not change the digest\n    probe: {kind: http, url: 'http://127.0.0.1:8080/healthz', method: get}\n",
    );
    let d = &s.checks[0].definition;
    assert_eq!(d["mode"], "converge");
    assert_eq!(d["role"], "correctness");
    assert_eq!(d["timeout"], "120s");
    assert_eq!(d["interval"], "1s");
    assert_eq!(d["max_interval"], "8s");
    assert_eq!(d["max_age"], "900s");
    assert_eq!(d["probe"]["method"], "GET");
    assert_eq!(d["probe"]["status"], "2xx");
    assert_eq!(d["probe"]["timeout"], "10s");
    assert!(d.get("description").is_none());
    assert!(d.get("window").is_none());

    // The normalised definition is itself a criterion and normalises to itself.
    let again = format!(
        "version: 1\ncriteria:\n  - {}\n",
        serde_json::to_string(d).unwrap()
    );
    let s2 = spec(&again);
    assert_eq!(&s2.checks[0].definition, d);
    assert_eq!(
        s2.checks[0].definition_digest,
        s.checks[0].definition_digest
    );

    // Without the description, the same digest.
    let s3 = spec(
        "version: 1\ndefaults: {timeout: 120s}\ncriteria:\n  - id: web\n    probe: {kind: http, url: 'http://127.0.0.1:8080/healthz'}\n",
    );
    assert_eq!(
        s3.checks[0].definition_digest,
        s.checks[0].definition_digest
    );
}

#[test]
fn the_digest_is_the_raw_sha256_of_the_canonical_definition() {
    let s = spec(
        "version: 1\ncriteria:\n  - id: t\n    mode: assert\n    probe: {kind: tcp, address: '127.0.0.1:9'}\n",
    );
    let c = &s.checks[0];
    let canonical = verdict_core::canonical::to_vec(&c.definition);
    assert_eq!(c.definition_digest, verdict_core::digest::raw(&canonical));
    assert_eq!(
        String::from_utf8(canonical).unwrap(),
        r#"{"id":"t","max_age":"900s","mode":"assert","probe":{"address":"127.0.0.1:9","expect":"open","kind":"tcp","timeout":"10s"},"required":true,"role":"correctness","weight":1}"#
    );
}

#[test]
fn mode_fields_that_do_not_apply_are_refused() {
    let p = problem(&one(
        "  - id: a\n    mode: assert\n    window: 5s\n    probe: {kind: tcp, address: '127.0.0.1:1'}\n",
    ));
    assert!(
        p.message.contains("window does not apply to assert mode"),
        "{p}"
    );
    let p = problem(&one(
        "  - id: a\n    ignore: ['$.x']\n    probe: {kind: tcp, address: '127.0.0.1:1'}\n",
    ));
    assert!(
        p.message.contains("ignore does not apply to converge mode"),
        "{p}"
    );
}

#[test]
fn probe_definitions_are_checked() {
    for (probe, needle) in [
        ("{kind: nope}", "unknown probe kind"),
        ("{url: 'http://x/'}", "needs a kind"),
        ("{kind: http, url: 'ftp://x/'}", "must be http or https"),
        ("{kind: tcp, address: 'nohost'}", "host:port"),
        ("{kind: command}", "needs argv"),
        ("{kind: command, argv: [a], shell: b}", "not both"),
        (
            "{kind: json, source: {}}",
            "exactly one of command, file, url",
        ),
        (
            "{kind: json, source: {file: a, url: 'http://x/'}}",
            "exactly one of command, file, url",
        ),
        (
            "{kind: json, source: {file: a}, quantifier: most}",
            "unknown quantifier",
        ),
        (
            "{kind: json, source: {file: a}, quantifier: {count: {min: 3, max: 1}}}",
            "above max",
        ),
        ("{kind: file, path: a, mode: '999'}", "octal"),
        ("{kind: file, path: a, sha256: 'abc'}", "64 lowercase hex"),
        (
            "{kind: file, path: a, exists: false, size: {min: 1}}",
            "cannot be combined",
        ),
        (
            "{kind: dns, name: x, contains: [not-an-ip]}",
            "not an ip address",
        ),
        (
            "{kind: http, url: 'http://x/', status: 700}",
            "not an http status",
        ),
        (
            "{kind: http, url: 'http://x/', body: {}}",
            "at least one of",
        ),
        ("{kind: tcp, address: 'h:1', timeout: 0}", "greater than 0"),
        (
            "{kind: log, file: a, command: [b], matches: x}",
            "exactly one of file, command",
        ),
    ] {
        let p = problem(&one(&format!(
            "  - id: p\n    mode: assert\n    probe: {probe}\n"
        )));
        assert!(p.message.contains(needle), "{probe}: {p}");
        assert_eq!(p.criterion.as_deref(), Some("p"));
    }
}

#[test]
fn specs_need_version_one_and_criteria() {
    assert!(
        problem("version: 2\ncriteria: []\n")
            .message
            .contains("unsupported spec version")
    );
    assert!(
        problem("version: 1\ncriteria: []\n")
            .message
            .contains("at least one criterion")
    );
    assert!(problem("criteria: []\n").message.contains("version"));
    assert!(problem("- 1\n").message.contains("object"));
}

#[test]
fn default_modes_follow_the_role() {
    let s = spec(
        "version: 1\ncriteria:\n  - id: c\n    probe: {kind: tcp, address: 'h:1'}\n  - id: s\n    role: safety\n    probe: {kind: tcp, address: 'h:1'}\n  - id: k\n    role: catastrophic\n    probe: {kind: tcp, address: 'h:1'}\n",
    );
    let modes: Vec<&str> = s.checks.iter().map(|c| c.mode().as_str()).collect();
    assert_eq!(modes, ["converge", "assert", "assert"]);
}

/// Three mistakes in three places are reported in one run, each located, and an unknown field
/// names the field it was probably meant to be.
#[test]
fn every_mistake_is_reported_at_once_with_did_you_mean() {
    let text = "version: 1\ndefaults: {probe_timeout: 0s}\ncriteria:\n  - id: web\n    probe:\n      kind: http\n      url: http://127.0.0.1:1/\n      stauts: 200\n      methd: GET\n  - id: port\n    wieght: 2\n    probe: {kind: tcp, address: '127.0.0.1:1'}\n  - id: ok\n    probe: {kind: tcp, address: '127.0.0.1:1'}\n  - id: ok\n    probe: {kind: tcp, address: '127.0.0.1:1'}\n";
    let e = load::load_bytes(text.as_bytes(), Format::Yaml, &BTreeMap::new()).unwrap_err();
    let ps = e.problems();
    let found: Vec<(&str, Option<usize>)> =
        ps.iter().map(|p| (p.pointer.as_str(), p.line)).collect();
    assert_eq!(
        found,
        vec![
            ("/defaults/probe_timeout", Some(2)),
            ("/criteria/0/probe/stauts", Some(8)),
            ("/criteria/0/probe/methd", Some(9)),
            ("/criteria/1/wieght", Some(11)),
            ("/criteria/3/id", Some(15)),
        ],
        "{e}"
    );
    let said = e.to_string();
    for hint in [
        "did you mean `status`?",
        "did you mean `method`?",
        "did you mean `weight`?",
        "duplicate criterion id \"ok\"",
    ] {
        assert!(said.contains(hint), "{hint}: {said}");
    }
    assert_eq!(ps[1].criterion.as_deref(), Some("web"));
    // A name nothing is close to gets the list of what is allowed instead of a guess.
    let p = problem(&one(
        "  - id: web\n    zzzzzz: 1\n    probe: {kind: tcp, address: '127.0.0.1:1'}\n",
    ));
    assert!(!p.message.contains("did you mean"), "{p}");
    assert!(p.message.contains("`probe`"), "{p}");
}

/// A HEAD answer has no body: `body` or `expect` would pass having judged 0 bytes.
#[test]
fn head_with_a_body_expectation_is_refused_naming_the_field() {
    for (field, value) in [("body", "{not_matches: error}"), ("expect", "self.ok")] {
        let p = problem(&one(&format!(
            "  - id: web\n    probe: {{kind: http, url: 'http://127.0.0.1:1/', method: head, {field}: {value}}}\n"
        )));
        assert_eq!(p.criterion.as_deref(), Some("web"), "{p}");
        assert_eq!(p.pointer, format!("/criteria/0/probe/{field}"), "{p}");
        assert!(p.message.contains("method HEAD"), "{p}");
    }
    spec(&one(
        "  - id: web\n    probe: {kind: http, url: 'http://127.0.0.1:1/', method: HEAD, status: 200}\n",
    ));
}
