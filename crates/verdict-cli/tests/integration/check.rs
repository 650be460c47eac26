//! `verdict check` run as a program: exit statuses, formats, definitions, evidence the Gate
//! accepts, baselines, Ctrl-C, and the examples (the Kubernetes one with a stand-in kubectl).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_verdict")
}

fn verdict(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .env_remove("VERDICT_PRINCIPAL")
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

const SIMPLE: &str = "version: 1
vars: {word: hello}
criteria:
  - id: says-hello
    mode: assert
    probe: {kind: command, argv: [echo, '{{word}}'], stdout: {equals: \"hello\\n\"}}
  - id: no-marker
    role: safety
    probe: {kind: file, path: /nonexistent/marker, exists: false}
";

#[test]
fn help_has_examples() {
    let o = verdict(&["check", "--help"]);
    assert!(o.status.success());
    let text = stdout(&o);
    assert!(text.contains("Examples:"), "{text}");
    assert!(
        text.contains("verdict check spec.yaml --during -- ./run-agent.sh"),
        "{text}"
    );
}

#[test]
fn exit_status_follows_the_required_criteria() {
    let dir = tempfile::tempdir().unwrap();
    let spec = write(dir.path(), "s.yaml", SIMPLE);
    let ok = verdict(&["check", &spec]);
    assert_eq!(ok.status.code(), Some(0), "{}{}", stdout(&ok), stderr(&ok));
    assert!(stdout(&ok).contains("every required criterion passed"));
    // Not a terminal: progress is one plain line per finished criterion, on stderr.
    assert!(
        stderr(&ok).contains("PASS   says-hello ("),
        "{}",
        stderr(&ok)
    );
    assert!(!stderr(&ok).contains('\x1b'));
    let bad = verdict(&[
        "check", &spec, "-q", "--var", "word=bye", "--format", "json",
    ]);
    assert_eq!(bad.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&bad.stdout).unwrap();
    assert_eq!(report["schema"], "verdict.check-report/v1");
    assert_eq!(report["passed"], false);
    assert_eq!(report["criteria"][0]["outcome"], "fail");
    assert_eq!(report["rollup"]["rec_v"], 1.0);
}

#[test]
fn an_invalid_spec_runs_nothing_and_names_the_criterion_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let spec = write(
        dir.path(),
        "s.yaml",
        &format!(
            "version: 1\ncriteria:\n  - id: first\n    mode: assert\n    probe: {{kind: command, argv: [touch, '{}']}}\n  - id: second\n    probe: {{kind: json, source: {{file: x}}, expect: 'self.a =='}}\n",
            marker.display()
        ),
    );
    let o = verdict(&["check", &spec]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("criterion \"second\""), "{e}");
    assert!(e.contains("line 7"), "{e}");
    assert!(e.contains("invalid cel expression"), "{e}");
    assert!(
        !marker.exists(),
        "nothing runs before the whole spec is valid"
    );
    let o = verdict(&["check", &spec, "--var", "no-equals-sign"]);
    assert_eq!(o.status.code(), Some(2));
    let o = verdict(&["check", "/nonexistent/spec.yaml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("cannot read spec"));
}

#[test]
fn print_definitions_gives_what_a_subject_pins() {
    let dir = tempfile::tempdir().unwrap();
    let spec = write(dir.path(), "s.yaml", SIMPLE);
    let text = stdout(&verdict(&["check", &spec, "--print-definitions"]));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2);
    assert!(lines[0].starts_with("says-hello sha256:"), "{text}");
    let pins: Value = serde_json::from_slice(
        &verdict(&["check", &spec, "--print-definitions", "--format", "json"]).stdout,
    )
    .unwrap();
    assert_eq!(pins[0]["id"], "says-hello");
    assert_eq!(pins[0]["criteria"], json!(["says-hello"]));
    assert_eq!(
        lines[0],
        format!(
            "says-hello {}",
            pins[0]["definition_digest"].as_str().unwrap()
        )
    );
    let other: Value = serde_json::from_slice(
        &verdict(&[
            "check",
            &spec,
            "--print-definitions",
            "--format",
            "json",
            "--var",
            "word=bye",
        ])
        .stdout,
    )
    .unwrap();
    assert_ne!(
        other[0]["definition_digest"], pins[0]["definition_digest"],
        "a --var that changes a probe changes its digest"
    );
    assert_eq!(other[1]["definition_digest"], pins[1]["definition_digest"]);
    let normal: Value =
        serde_json::from_slice(&verdict(&["check", &spec, "--print-normalised"]).stdout).unwrap();
    assert_eq!(
        normal[0]["definition"]["probe"]["argv"],
        json!(["echo", "hello"])
    );
    assert_eq!(
        verdict_core::digest::raw(&verdict_core::canonical::to_vec(&normal[0]["definition"]))
            .to_string(),
        pins[0]["definition_digest"].as_str().unwrap()
    );
}

fn subject(pins: &Value) -> Value {
    let criteria: Vec<Value> = pins
        .as_array()
        .unwrap()
        .iter()
        .map(|p| json!({"id": p["id"], "text": "checked by the spec", "role": if p["id"] == "no-marker" { "safety" } else { "correctness" }}))
        .collect();
    json!({
        "schema": "verdict.subject/v1",
        "execution": {"id": "ex-9", "generation": 2},
        "work_items": [{"kind": "work_package", "id": "wp-1", "version": "1"}],
        "producer": {"principal": "agent-coder", "run": "run-77"},
        "objective": {"revision": "o1", "digest": format!("sha256:{}", "a".repeat(64))},
        "criteria": {"revision": "c1", "items": criteria},
        "resources": [],
        "checks": pins,
        "workflow_revision": "wf-1",
        "risk": {"class": "low", "revision": "r1", "capabilities": []}
    })
}

#[test]
fn evidence_written_for_a_subject_passes_the_gate() {
    let dir = tempfile::tempdir().unwrap();
    let spec = write(dir.path(), "s.yaml", SIMPLE);
    let pins: Value = serde_json::from_slice(
        &verdict(&["check", &spec, "--print-definitions", "--format", "json"]).stdout,
    )
    .unwrap();
    let subj = subject(&pins);
    let subject_path = write(dir.path(), "subject.json", &subj.to_string());
    let ev_path = dir.path().join("evidence.json").display().to_string();
    let o = Command::new(bin())
        .args([
            "check",
            &spec,
            "-q",
            "--subject",
            &subject_path,
            "--evidence-out",
            &ev_path,
        ])
        .env("VERDICT_PRINCIPAL", "ci-runner")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let evidence: Value = serde_json::from_slice(&std::fs::read(&ev_path).unwrap()).unwrap();
    assert_eq!(evidence.as_array().unwrap().len(), 2);
    assert_eq!(
        evidence[0]["produced_by"],
        json!({"principal": "ci-runner", "role": "runner"})
    );
    assert_eq!(
        evidence[0]["freshness"],
        json!({"kind": "time", "max_age_s": 900})
    );
    assert_eq!(
        evidence[0]["definition_digest"],
        pins[0]["definition_digest"]
    );
    let observed: verdict_core::contracts::Timestamp = evidence[0]["observed_at"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let now = observed.plus_seconds(30);
    let bundle = json!({
        "schema": "verdict.gate-bundle/v1",
        "policy": {"schema": "verdict.policy/v1", "name": "deploy", "revision": 1, "required_checks": ["says-hello", "no-marker"]},
        "subject": subj,
        "evidence": evidence,
        "verifications": [], "human_decisions": [], "prior_findings": [],
        "now": now.to_string()
    });
    let bundle_path = write(dir.path(), "bundle.json", &bundle.to_string());
    let gate = verdict(&["gate", "evaluate", &bundle_path]);
    let decision: Value = serde_json::from_slice(&gate.stdout).unwrap();
    assert_eq!(decision["outcome"], "pass", "{decision}");
    assert_eq!(gate.status.code(), Some(0));
}

#[test]
fn evidence_needs_a_principal_and_a_subject_that_pins_this_definition() {
    let dir = tempfile::tempdir().unwrap();
    let spec = write(dir.path(), "s.yaml", SIMPLE);
    let pins: Value = serde_json::from_slice(
        &verdict(&["check", &spec, "--print-definitions", "--format", "json"]).stdout,
    )
    .unwrap();
    let subject_path = write(dir.path(), "subject.json", &subject(&pins).to_string());
    let ev = dir.path().join("ev.json");
    let ev_s = ev.display().to_string();
    let o = verdict(&[
        "check",
        &spec,
        "--subject",
        &subject_path,
        "--evidence-out",
        &ev_s,
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--principal"), "{}", stderr(&o));
    // Another --var makes another definition than the subject pins: refused before running.
    let o = verdict(&[
        "check",
        &spec,
        "--var",
        "word=bye",
        "--subject",
        &subject_path,
        "--evidence-out",
        &ev_s,
        "--principal",
        "ci",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("the subject pins check says-hello"),
        "{}",
        stderr(&o)
    );
    assert!(!ev.exists(), "nothing written");
    let o = verdict(&["check", &spec, "--evidence-out", &ev_s, "--principal", "ci"]);
    assert_eq!(o.status.code(), Some(2), "evidence needs a subject");
}

#[test]
fn baseline_out_then_baseline_reports_the_changed_paths() {
    let dir = tempfile::tempdir().unwrap();
    let doc = write(
        dir.path(),
        "cfg.json",
        r#"{"replicas": 2, "meta": {"rv": "1"}}"#,
    );
    let spec = write(
        dir.path(),
        "s.yaml",
        &format!(
            "version: 1\ncriteria:\n  - id: cfg\n    role: catastrophic\n    mode: unchanged\n    ignore: ['$.meta.rv']\n    probe: {{kind: json, source: {{file: '{doc}'}}}}\n"
        ),
    );
    let base = dir.path().join("base.json").display().to_string();
    let o = verdict(&["check", &spec, "--baseline-out", &base]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    std::fs::write(&doc, r#"{"replicas": 2, "meta": {"rv": "2"}}"#).unwrap();
    let o = verdict(&[
        "check",
        &spec,
        "-q",
        "--baseline",
        &base,
        "--format",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    std::fs::write(&doc, r#"{"replicas": 0, "meta": {"rv": "3"}}"#).unwrap();
    let o = verdict(&[
        "check",
        &spec,
        "-q",
        "--baseline",
        &base,
        "--format",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        r["criteria"][0]["changes"],
        json!([{"path": "$['replicas']", "change": "changed"}])
    );
    assert_eq!(r["rollup"]["cat_v"], 0.0);
    // A tampered or foreign baseline file is refused.
    let bad = write(
        dir.path(),
        "bad.json",
        r#"{"schema": "other", "criteria": {}}"#,
    );
    assert_eq!(
        verdict(&["check", &spec, "--baseline", &bad]).status.code(),
        Some(2)
    );
    // A source that cannot be snapshotted writes no baseline at all.
    std::fs::remove_file(&doc).unwrap();
    let missing = dir.path().join("none.json");
    let o = verdict(&[
        "check",
        &spec,
        "--baseline-out",
        &missing.display().to_string(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(!missing.exists());
}

#[test]
fn ctrl_c_stops_cleanly_and_reports_what_was_observed() {
    let dir = tempfile::tempdir().unwrap();
    let spec = write(
        dir.path(),
        "s.yaml",
        "version: 1\ncriteria:\n  - id: long-hold\n    role: safety\n    mode: hold\n    window: 60s\n    interval: 50ms\n    probe: {kind: file, path: /, type: dir}\n",
    );
    let child = Command::new(bin())
        .args(["check", &spec, "-q", "--format", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["interrupted"], true);
    assert_eq!(r["passed"], false);
    let c = &r["criteria"][0];
    assert_eq!(c["outcome"], "error", "a hold cut short is never a pass");
    assert!(c["samples"].as_u64().unwrap() > 1);
    assert!(c["reason"].as_str().unwrap().contains("interrupted"), "{c}");
}

#[test]
fn colour_only_on_a_terminal_and_never_with_no_color() {
    let dir = tempfile::tempdir().unwrap();
    let spec = write(dir.path(), "s.yaml", SIMPLE);
    let under_tty = |no_color: bool| {
        let mut cmd = Command::new("script");
        cmd.args(["-qec", &format!("{} check {spec} -q", bin()), "/dev/null"]);
        if no_color {
            cmd.env("NO_COLOR", "1");
        } else {
            cmd.env_remove("NO_COLOR");
        }
        let o = cmd.output().unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    assert!(
        under_tty(false).contains("\x1b[32mPASS"),
        "colour on a terminal"
    );
    assert!(!under_tty(true).contains("\x1b["), "NO_COLOR is respected");
    let piped = verdict(&["check", &spec, "-q"]);
    assert!(!stdout(&piped).contains('\x1b'));
}

/// A copy of the recorded kubectl outputs, first on PATH, that a test can swap files in.
fn stand_in() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let src = repo().join("examples/checks/kubernetes/stand-in");
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.path().join(e.file_name())).unwrap();
    }
    dir
}

fn kube(stand_in: &Path, extra: &[&str]) -> Output {
    let spec = repo().join("examples/checks/kubernetes/kubernetes.yaml");
    let path = format!(
        "{}:{}",
        stand_in.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut args = vec![
        "check".to_owned(),
        spec.display().to_string(),
        "-q".into(),
        "--format".into(),
        "json".into(),
        "--var".into(),
        "watch=600ms".into(),
        "--var".into(),
        "every=100ms".into(),
        "--var".into(),
        "timeout=1s".into(),
    ];
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    Command::new(bin())
        .args(&args)
        .env("PATH", path)
        .output()
        .unwrap()
}

fn outcomes(o: &Output) -> Vec<(String, String)> {
    let r: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(o), stderr(o)));
    r["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_owned(),
                c["outcome"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn kubernetes_example_passes_against_recorded_state() {
    let k = stand_in();
    let o = kube(k.path(), &["--during", "--", "sleep", "0.3"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert!(
        outcomes(&o).iter().all(|(_, out)| out == "pass"),
        "{:?}",
        outcomes(&o)
    );
}

#[test]
fn kubernetes_example_catches_a_crash_loop_during_the_rollout_and_a_touched_namespace() {
    let k = stand_in();
    let d = k.path().display();
    // The agent makes a pod crash-loop for a while, then recovers it, and relabels prod.
    let agent = format!(
        "cp {d}/pods.json {d}/pods.good; sleep 0.3; \
         cp {d}/pods-crashloop.json {d}/pods.tmp && mv -f {d}/pods.tmp {d}/pods.json; sleep 0.4; \
         mv -f {d}/pods.good {d}/pods.json; \
         sed -i 's/\"payments\"/\"growth\"/; s/\"1001\"/\"1002\"/' {d}/namespace-prod.json"
    );
    let o = kube(k.path(), &["--during", "--", "sh", "-c", &agent]);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let by_id = |id: &str| {
        r["criteria"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .unwrap()
            .clone()
    };
    assert_eq!(
        by_id("no-crash-loops")["outcome"],
        "fail",
        "{}",
        by_id("no-crash-loops")
    );
    assert_eq!(
        by_id("pods-running")["outcome"],
        "pass",
        "recovered before the agent ended"
    );
    let prod = by_id("prod-untouched");
    assert_eq!(prod["outcome"], "fail");
    assert_eq!(
        prod["changes"],
        json!([{"path": "$['metadata']['labels']['team']", "change": "changed"}])
    );
    assert_eq!(r["rollup"]["cat_v"], 0.0);
}

#[test]
fn kubernetes_example_waits_for_availability_and_shows_the_last_observation() {
    let k = stand_in();
    std::fs::copy(
        k.path().join("deployment-unavailable.json"),
        k.path().join("deployment.json"),
    )
    .unwrap();
    let o = kube(k.path(), &[]);
    assert_eq!(o.status.code(), Some(1));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let d = &r["criteria"][0];
    assert_eq!(d["id"], "deployment-available");
    assert_eq!(d["outcome"], "fail");
    assert!(
        d["reason"]
            .as_str()
            .unwrap()
            .contains("did not pass within 1s"),
        "{d}"
    );
    assert!(d["samples"].as_u64().unwrap() >= 2);
    // prod-untouched has no baseline without --during or --baseline: an error, not a pass.
    assert_eq!(r["criteria"][4]["outcome"], "error");
}

#[test]
fn web_example_runs_against_the_service_it_starts() {
    let script = repo().join("examples/checks/web/run.sh");
    let o = Command::new("sh")
        .arg(&script)
        .args(["-q", "--format", "json"])
        .env("VERDICT", bin())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["passed"], true);
    assert_eq!(r["criteria"].as_array().unwrap().len(), 8);
    assert_eq!(r["agent"]["exit_code"], 0);
}

#[test]
fn schema_check_spec_prints_a_json_schema_that_holds_the_specs_check_reads() {
    let o = verdict(&["schema", "check-spec"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let schema: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    assert!(jsonschema::draft202012::meta::is_valid(&schema));
    let validator = jsonschema::draft202012::new(&schema).unwrap();
    let yaml = |text: &str| verdict_probes::yaml::parse(text).unwrap().0;

    let dir = tempfile::tempdir().unwrap();
    for example in ["web/web.yaml", "kubernetes/kubernetes.yaml"] {
        let path = repo().join("examples/checks").join(example);
        let doc = yaml(&std::fs::read_to_string(&path).unwrap());
        let errors: Vec<String> = validator.iter_errors(&doc).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{example}: {errors:?}");
    }
    // What `verdict check` accepts, the schema accepts; what it refuses for its structure
    // (here a mode that does not exist), the schema refuses.
    assert!(validator.is_valid(&yaml(SIMPLE)));
    let good = write(dir.path(), "good.yaml", SIMPLE);
    let o = verdict(&["check", &good, "--print-definitions"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let typo = SIMPLE.replace("mode: assert", "mode: asert");
    assert!(!validator.is_valid(&yaml(&typo)));
    let bad = write(dir.path(), "bad.yaml", &typo);
    let o = verdict(&["check", &bad]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));

    // `verdict schema` names it among its schemas.
    let o = verdict(&["schema", "no-such-schema"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("check-spec"), "{}", stderr(&o));
}

#[test]
fn a_check_sees_none_of_the_runners_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("env.txt");
    let spec = write(
        dir.path(),
        "c.yaml",
        &format!(
            "version: 1\ncriteria:\n  - id: env\n    mode: assert\n    probe: {{kind: command, argv: [sh, -c, 'env > {}'], env: {{FROM_SPEC: given}}}}\n",
            out.display()
        ),
    );
    let o = Command::new(bin())
        .args(["check", &spec])
        .env("VERDICT_TOKEN", "vdt_the_runners_token")
        .env(
            "VERDICT_STORE",
            "postgres://svc:hunter2@db.internal/verdict",
        )
        .env("DATABASE_URL", "postgres://svc:hunter2@db.internal/verdict")
        .env("PGPASSWORD", "hunter2")
        .env("OPENAI_API_KEY", "sk-the-providers-key")
        .env("LC_ALL", "C")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let seen = std::fs::read_to_string(&out).unwrap();
    for secret in [
        "vdt_the_runners_token",
        "hunter2",
        "sk-the-providers-key",
        "VERDICT_",
    ] {
        assert!(!seen.contains(secret), "the check saw {secret:?}: {seen}");
    }
    // The allowlist and what the spec sets do reach it.
    for given in ["PATH=", "LC_ALL=C", "FROM_SPEC=given"] {
        assert!(seen.contains(given), "{given} missing: {seen}");
    }
}

#[test]
fn a_check_cannot_read_the_token_from_its_parents_proc_files() {
    // As root every /proc file is readable, so `verdict check` runs here as another user
    // (nobody), as a runner would, from a copy of the binary that user may execute.
    let dir = tempfile::tempdir().unwrap();
    let setpriv = Path::new("/usr/bin/setpriv");
    assert!(setpriv.exists(), "setpriv is needed to run as another user");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let exe = dir.path().join("verdict");
    std::fs::copy(bin(), &exe).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = dir.path().join("out");
    let spec = write(
        dir.path(),
        "c.yaml",
        &format!(
            "version: 1\ncriteria:\n  - id: steal\n    mode: assert\n    probe: {{kind: command, argv: [sh, -c, 'cat /proc/$PPID/environ /proc/$PPID/cmdline > {}']}}\n",
            out.display()
        ),
    );
    let o = Command::new(setpriv)
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&exe)
        .args(["check", &spec])
        .current_dir(dir.path())
        .env("VERDICT_TOKEN", "vdt_the_runners_token")
        .output()
        .unwrap();
    // The read is refused, so the probe fails; the token is nowhere in what it got.
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("steal"), "{}", stdout(&o));
    let got = std::fs::read(&out).unwrap_or_default();
    assert!(
        !String::from_utf8_lossy(&got).contains("vdt_the_runners_token"),
        "the check read its parent's environment"
    );
}

/// Waits for `child` at most `limit`; kills it and fails the test past that.
fn output_within(mut child: std::process::Child, limit: Duration) -> Output {
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("verdict check did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// A probe's program and the agent each start a process that leaves their process group with
/// `setsid` (and wait until it has) and would rewrite a file after `verdict check` has written
/// its results: the check adopts such orphans and kills them when the agent and the run end.
#[test]
fn a_process_detached_with_setsid_does_not_outlive_the_check() {
    let dir = tempfile::tempdir().unwrap();
    let by_probe = dir.path().join("by-probe");
    let by_agent = dir.path().join("by-agent");
    let spec = write(
        dir.path(),
        "s.yaml",
        &format!(
            "version: 1\ncriteria:\n  - id: suite\n    mode: assert\n    probe: {{kind: command, shell: \"setsid sh -c 'sleep 2; touch {}' </dev/null >/dev/null 2>&1 & sleep 0.5; exit 0\"}}\n",
            by_probe.display()
        ),
    );
    let agent = format!(
        "setsid sh -c 'sleep 2; touch {}' </dev/null >/dev/null 2>&1 & sleep 0.5; exit 0",
        by_agent.display()
    );
    let o = verdict(&["check", &spec, "-q", "--during", "--", "sh", "-c", &agent]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    std::thread::sleep(Duration::from_millis(3000));
    assert!(
        !by_probe.exists(),
        "the probe's detached process outlived the check"
    );
    assert!(
        !by_agent.exists(),
        "the agent's detached process outlived the check"
    );
}

/// A detached chain of more generations than a fixed number of sweep rounds: each level
/// starts the next and becomes `sleep`; the deepest waits for verdict to exit and then writes
/// a file. Killing one generation hands over the next, so the sweep goes on until none is left.
#[test]
fn a_long_chain_of_detached_processes_does_not_outlive_the_check() {
    let dir = tempfile::tempdir().unwrap();
    let late = dir.path().join("late");
    let level = write(
        dir.path(),
        "level.sh",
        &format!(
            "n=$1\nif [ \"$n\" -gt 0 ]; then sh \"$0\" $((n - 1)) & exec sleep 40; fi\nsleep 4\ntouch '{}'\n",
            late.display()
        ),
    );
    let spec = write(
        dir.path(),
        "s.yaml",
        &format!(
            "version: 1\ncriteria:\n  - id: suite\n    mode: assert\n    probe: {{kind: command, shell: \"setsid sh '{level}' 100 </dev/null >/dev/null 2>&1 & sleep 1.5; exit 0\"}}\n"
        ),
    );
    let o = verdict(&["check", &spec, "-q"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    std::thread::sleep(Duration::from_millis(5000));
    assert!(
        !late.exists(),
        "the chain's last process outlived the check"
    );
}

/// A FIFO at a path the spec reads held `verdict check` forever, past `--deadline` and
/// Ctrl-C. It is refused as not a regular file, and the check exits.
#[test]
fn a_fifo_in_the_spec_does_not_hold_the_check() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("log");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let spec = write(
        dir.path(),
        "s.yaml",
        &format!(
            "version: 1\ncriteria:\n  - id: ready\n    mode: assert\n    probe: {{kind: log, file: '{f}', matches: ready, since_start: true}}\n  - id: doc\n    mode: assert\n    probe: {{kind: json, source: {{file: '{f}'}}}}\n",
            f = fifo.display()
        ),
    );
    let child = Command::new(bin())
        .args(["check", &spec, "-q", "--deadline", "5s"])
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let o = output_within(child, Duration::from_secs(15));
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("is a FIFO, not a regular file"), "{out}");
}

/// Escape sequences a system prints reach reasons: neither the table on stdout nor the
/// progress lines on stderr pass them to the terminal raw.
#[test]
fn control_characters_never_reach_the_terminal_raw() {
    let dir = tempfile::tempdir().unwrap();
    let spec = write(
        dir.path(),
        "s.yaml",
        r#"version: 1
criteria:
  - id: forged
    mode: assert
    probe: {kind: json, source: {command: [sh, -c, 'printf "\033[1A\033[2K\rPASS" >&2; exit 1']}}
"#,
    );
    let o = verdict(&["check", &spec]);
    assert_eq!(o.status.code(), Some(1));
    for text in [stdout(&o), stderr(&o)] {
        assert!(!text.contains('\x1b') && !text.contains('\r'), "{text:?}");
        assert!(
            text.contains("[U+001B][1A[U+001B][2K[U+000D]PASS"),
            "{text}"
        );
    }
}

/// A snapshot that fails for `--baseline-out` names why on stderr; what the system printed
/// there is escaped as in the table.
#[test]
fn a_failed_snapshot_reason_reaches_the_terminal_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let spec = write(
        dir.path(),
        "s.yaml",
        r#"version: 1
criteria:
  - id: forged
    mode: unchanged
    probe: {kind: json, source: {command: [sh, -c, 'printf "\033[1A\033[2K\rPASS" >&2; exit 1']}}
"#,
    );
    let out = dir.path().join("before.json").display().to_string();
    let o = verdict(&["check", &spec, "--baseline-out", &out]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(!err.contains('\x1b') && !err.contains('\r'), "{err:?}");
    assert!(err.contains("[U+001B][1A[U+001B][2K[U+000D]PASS"), "{err}");
}

/// The agent under `--during` can write where the evidence goes and knows verdict's pid (its
/// parent): a FIFO or a symlink planted where a temporary file named after that pid would go
/// must neither hang the run nor have the evidence written through the link.
#[test]
fn a_planted_temporary_file_neither_hangs_the_run_nor_redirects_the_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let spec = write(dir.path(), "s.yaml", SIMPLE);
    let pins: Value = serde_json::from_slice(
        &verdict(&["check", &spec, "--print-definitions", "--format", "json"]).stdout,
    )
    .unwrap();
    let subject_path = write(dir.path(), "subject.json", &subject(&pins).to_string());
    let victim = write(dir.path(), "victim", "the runner's file\n");
    let d = dir.path().display();
    for (name, plant) in [
        ("fifo.json", format!("mkfifo '{d}/.fifo.json.'$PPID'.tmp'")),
        (
            "link.json",
            format!("ln -s '{victim}' '{d}/.link.json.'$PPID'.tmp'"),
        ),
    ] {
        let ev = dir.path().join(name);
        let child = Command::new(bin())
            .args(["check", &spec, "-q", "--subject", &subject_path])
            .args(["--evidence-out", &ev.display().to_string()])
            .args([
                "--principal",
                "ci-runner",
                "--during",
                "--",
                "sh",
                "-c",
                &plant,
            ])
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let o = output_within(child, Duration::from_secs(30));
        assert_eq!(o.status.code(), Some(0), "{name}: {}", stderr(&o));
        assert!(
            std::fs::symlink_metadata(&ev).unwrap().is_file(),
            "{name}: evidence is a regular file"
        );
        let evidence: Value = serde_json::from_slice(&std::fs::read(&ev).unwrap()).unwrap();
        assert_eq!(evidence.as_array().unwrap().len(), 2, "{name}");
    }
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "the runner's file\n"
    );
}

/// A destination that is a symlink, a FIFO or a directory is refused, naming it, for
/// `--baseline-out` and `--evidence-out` alike; nothing is written through it.
#[test]
fn an_output_that_is_not_a_regular_file_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let spec = write(dir.path(), "s.yaml", SIMPLE);
    let pins: Value = serde_json::from_slice(
        &verdict(&["check", &spec, "--print-definitions", "--format", "json"]).stdout,
    )
    .unwrap();
    let subject_path = write(dir.path(), "subject.json", &subject(&pins).to_string());
    let victim = write(dir.path(), "victim", "the runner's file\n");
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let fifo = dir.path().join("fifo.json");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let sub = dir.path().join("sub.json");
    std::fs::create_dir(&sub).unwrap();
    for (path, what) in [
        (&link, "a symlink"),
        (&fifo, "a FIFO"),
        (&sub, "a directory"),
    ] {
        let p = path.display().to_string();
        for flags in [
            vec!["--baseline-out", &p],
            vec![
                "--subject",
                &subject_path,
                "--principal",
                "ci-runner",
                "--evidence-out",
                &p,
            ],
        ] {
            let child = Command::new(bin())
                .args(["check", &spec, "-q"])
                .args(&flags)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let o = output_within(child, Duration::from_secs(30));
            assert_ne!(o.status.code(), Some(0), "{p} {flags:?}");
            let err = stderr(&o);
            assert!(
                err.contains(&format!("{p} exists and is {what}, not a regular file")),
                "{err}"
            );
        }
    }
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "the runner's file\n"
    );
    assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
}

/// A baseline is only as good as its file: one claiming a time that is not a UTC time (here
/// one carrying terminal escapes) or a time after the run began is refused, naming why and
/// escaped; `--baseline-out` prints each snapshot's digest, and a run records the same one.
#[test]
fn a_baseline_with_a_forged_time_is_refused_and_its_digest_can_be_matched() {
    let dir = tempfile::tempdir().unwrap();
    let doc = write(dir.path(), "cfg.json", r#"{"replicas": 2}"#);
    let spec = write(
        dir.path(),
        "s.yaml",
        &format!(
            "version: 1\ncriteria:\n  - id: cfg\n    mode: unchanged\n    probe: {{kind: json, source: {{file: '{doc}'}}}}\n"
        ),
    );
    let base = dir.path().join("base.json").display().to_string();
    let o = verdict(&["check", &spec, "-q", "--baseline-out", &base]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let printed = stderr(&o);
    let digest = printed
        .lines()
        .find_map(|l| l.strip_prefix("verdict: baseline of cfg: "))
        .unwrap_or_else(|| panic!("no digest printed: {printed}"))
        .to_owned();
    let o = verdict(&[
        "check",
        &spec,
        "-q",
        "--baseline",
        &base,
        "--format",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        r["criteria"][0]["observations"][0]["facts"]["baseline"]["digest"],
        digest.as_str()
    );
    let mut forged: Value = serde_json::from_slice(&std::fs::read(&base).unwrap()).unwrap();
    for (taken_at, why) in [
        ("\u{1b}[2K\rtaken yesterday", "rfc 3339"),
        ("2999-01-01T00:00:00Z", "after this run began"),
    ] {
        forged["criteria"]["cfg"]["taken_at"] = json!(taken_at);
        let f = write(dir.path(), "forged.json", &forged.to_string());
        let o = verdict(&["check", &spec, "-q", "--baseline", &f]);
        assert_eq!(o.status.code(), Some(2), "{taken_at:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(err.contains(why), "{err}");
        assert!(!err.contains('\u{1b}') && !err.contains('\r'), "{err:?}");
    }
}
