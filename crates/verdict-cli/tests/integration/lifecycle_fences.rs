//! The lifecycle's hostile cases through the built binary (docs/hostile-cases.md, "Lifecycle"):
//! what `run admit` says, incomplete results, pinned approvals, a late hard failure and
//! cancellation, on SQLite and on PostgreSQL.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use serde_json::{Value, json};
use std::process::{Command, Output};

struct Env {
    store: String,
    dir: tempfile::TempDir,
    /// Dropped with the environment, also when a test panics.
    _pg: Option<verdict_store::scratch::ScratchPostgres>,
}

impl Env {
    fn sqlite() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = format!("sqlite:{}", dir.path().join("verdict.db").display());
        Self {
            store,
            dir,
            _pg: None,
        }
    }

    fn postgres() -> Self {
        let pg = verdict_store::scratch::ScratchPostgres::create_migrated("cli").unwrap();
        Self {
            store: pg.url().to_owned(),
            dir: tempfile::tempdir().unwrap(),
            _pg: Some(pg),
        }
    }

    fn run(&self, token: &str, args: &[&str]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_verdict"));
        cmd.args(args)
            .args(["--now", NOW])
            .current_dir(self.dir.path())
            .env("VERDICT_STORE", &self.store)
            .env("VERDICT_HOME", self.dir.path().join("home"))
            .env("VERDICT_TOKEN", token);
        cmd.output().unwrap()
    }

    /// `verdict init` on a manual clock (every command then acts at `--now`); the operator's
    /// token.
    fn init(&self) -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_verdict"))
            .args(["init", "--operator", "ops", "--clock", "manual"])
            .env("VERDICT_STORE", &self.store)
            .env_remove("VERDICT_TOKEN")
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    /// Adds each `(name, role, access)` principal, granted `access` on `ex-1` as `g-<name>`;
    /// their tokens, in order.
    fn staff(&self, ops: &str, who: &[(&str, &str, &str)]) -> Vec<String> {
        who.iter()
            .map(|&(name, role, access)| {
                let token = self.ok(ops, &["principal", "add", name, "--role", role]);
                self.ok(
                    ops,
                    &[
                        "grant",
                        "add",
                        &format!("g-{name}"),
                        "--principal",
                        name,
                        "--execution",
                        "ex-1",
                        "--access",
                        access,
                        "--expires",
                        "2027-01-01T00:00:00Z",
                    ],
                );
                token
            })
            .collect()
    }

    fn ok(&self, token: &str, args: &[&str]) -> String {
        let out = self.run(token, args);
        assert!(
            out.status.success(),
            "{args:?}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    /// Runs a command that must fail with `code` (exit status) and `text` in its output.
    fn fails(&self, token: &str, args: &[&str], code: i32, text: &str) -> String {
        let out = self.run(token, args);
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(code), "{args:?}: {all}");
        assert!(all.contains(text), "{args:?} does not say {text:?}: {all}");
        all
    }

    fn file(&self, name: &str, v: &Value) -> String {
        let p = self.dir.path().join(name);
        std::fs::write(&p, serde_json::to_vec(v).unwrap()).unwrap();
        p.display().to_string()
    }
}

const NOW: &str = "2026-11-30T12:00:00Z";
const DEF: &str = "sha256:ec4556a178527361344d876629bb9533c63fc8fcd216f423dd8bce76787fce86";

fn result(run: &str, sd: &str, ids: &[&str]) -> Value {
    let rows: Vec<Value> = ids
        .iter()
        .map(|id| json!({"id": id, "status": "passed", "method": "review", "evidence_refs": ["ev-1"]}))
        .collect();
    json!({"id": format!("vr-{run}"), "verifier": {"principal": "rev", "class": "reviewer", "run": run},
           "subject_digest": sd, "generation": 1, "status": "completed",
           "criteria": rows, "findings": [], "dispositions": []})
}

fn applying(env: &Env, token: &str) -> Vec<String> {
    let h: Value = serde_json::from_str(&env.ok(token, &["history", "ex-1", "--json"])).unwrap();
    h["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["not_applicable"] == json!([]))
        .map(|d| d["decision"]["outcome"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn the_lifecycle_fences_through_the_commands() {
    for env in [Env::sqlite(), Env::postgres()] {
        // A manual clock: every command below acts at --now.
        let ops = env.init();
        let [coder, ci, rev, alice] = <[String; 4]>::try_from(env.staff(
            &ops,
            &[
                ("coder", "producer", "write"),
                ("ci", "runner", "write"),
                ("rev", "verifier", "read"),
                ("alice", "human", "write"),
            ],
        ))
        .unwrap();
        let policy = json!({"schema": "verdict.policy/v1", "name": "merge", "revision": 1,
                            "required_checks": ["unit-tests"], "required_verifiers": ["reviewer"]});
        let pd = env.ok(&ops, &["policy", "set", &env.file("policy.json", &policy)]);
        let subject = json!({
            "schema": "verdict.subject/v1",
            "execution": {"id": "ex-1", "generation": 1},
            "work_items": [], "producer": {"principal": "coder", "run": "run-coder"},
            "objective": {"revision": "1", "digest": DEF},
            "criteria": {"revision": "1", "items": [
                {"id": "tests-pass", "text": "unit tests pass"},
                {"id": "docs-updated", "text": "the docs say what changed"}]},
            "resources": [], "checks": [{"id": "unit-tests", "definition_digest": DEF, "criteria": ["tests-pass"]}],
            "workflow_revision": "1", "risk": {"class": "low", "revision": "1", "capabilities": []}
        });
        let sd = env.ok(
            &coder,
            &["subject", "put", &env.file("subject.json", &subject)],
        );
        let ev = |id: &str, outcome: &str| {
            json!({"id": id, "kind": "check", "check": "unit-tests", "subject_digest": sd,
                   "definition_digest": DEF, "produced_by": {"principal": "ci", "role": "runner"},
                   "outcome": outcome, "content_digest": DEF, "observed_at": "2026-11-30T11:59:00Z",
                   "freshness": {"kind": "content"}})
        };
        env.ok(
            &ci,
            &[
                "evidence",
                "add",
                &env.file("ev1.json", &ev("ev-1", "pass")),
            ],
        );
        let req = env.ok(&coder, &["request", "create", "ex-1"]);
        let admit = |run: &str| {
            env.ok(
                &ops,
                &[
                    "run",
                    "admit",
                    &req,
                    "--verifier",
                    "rev",
                    "--class",
                    "reviewer",
                    "--run",
                    run,
                ],
            )
        };

        // Preflight decided nothing: run admit says only that the run was admitted.
        assert_eq!(admit("run-1"), "admitted run-1");

        // An incomplete result is refused and ends its run; a new run's complete one counts.
        let partial = env.file("partial.json", &result("run-1", &sd, &["tests-pass"]));
        env.fails(
            &rev,
            &["result", "submit", &partial],
            2,
            "no row for docs-updated",
        );
        let h: Value = serde_json::from_str(&env.ok(&ops, &["history", "ex-1", "--json"])).unwrap();
        assert_eq!(h["runs"][0]["status"], "unavailable");
        assert!(
            h["runs"][0]["detail"]
                .as_str()
                .unwrap()
                .contains("invalid_output"),
            "{h}"
        );
        assert_eq!(admit("run-2"), "admitted run-2");
        let whole = env.file(
            "whole.json",
            &result("run-2", &sd, &["tests-pass", "docs-updated"]),
        );
        env.ok(&rev, &["result", "submit", &whole]);
        // A manual-clock store prints the run's report, the clock beside the decision.
        let d: Value = serde_json::from_str(&env.ok(&ci, &["gate", "run", "ex-1"])).unwrap();
        assert_eq!(d["clock"], "manual");
        assert_eq!(d["decision"]["outcome"], "pass");

        // status shows the digests a decision must name; a stale one is refused.
        let status = env.ok(&alice, &["status", "ex-1"]);
        assert!(status.starts_with("ex-1: pass applies"), "{status}");
        assert!(
            status.contains(&format!("subject {sd} (generation 1)")),
            "{status}"
        );
        assert!(
            status.contains(&format!("policy {pd} (gate default, revision 1)")),
            "{status}"
        );
        env.fails(
            &alice,
            &[
                "decide",
                "ex-1",
                "--subject",
                DEF,
                "--policy",
                &pd,
                "--approve",
                "--reason",
                "ok",
            ],
            2,
            "conflict",
        );
        env.fails(
            &alice,
            &[
                "decide",
                "ex-1",
                "--subject",
                &sd,
                "--policy",
                DEF,
                "--approve",
                "--reason",
                "ok",
            ],
            2,
            "conflict",
        );
        env.fails(
            &alice,
            &["decide", "ex-1", "--approve", "--reason", "ok"],
            2,
            "--subject",
        );
        assert_eq!(applying(&env, &alice), vec!["pass"], "nothing was recorded");

        // A run cancelled by an operator (never by its verifier).
        assert_eq!(admit("run-x"), "admitted run-x");
        env.fails(
            &rev,
            &["run", "cancel", "run-x", "--reason", "mine"],
            2,
            "permission_denied",
        );
        let c = env.ok(&ops, &["run", "cancel", "run-x", "--reason", "not needed"]);
        assert_eq!(c, "run run-x cancelled by ops (operator): not needed");

        // A late hard failure: the pass stops applying at once, and after the Gate runs again
        // only the rework applies.
        env.ok(
            &ci,
            &[
                "evidence",
                "add",
                &env.file("ev2.json", &ev("ev-2", "fail")),
            ],
        );
        let out = env.fails(&alice, &["status", "ex-1"], 1, "evidence_set_moved");
        assert!(!out.contains("pass applies"), "{out}");
        env.fails(&ci, &["gate", "run", "ex-1"], 1, "\"rework\"");
        assert_eq!(applying(&env, &alice), vec!["rework"]);

        // Preflight that decides says what it found.
        let skipped = admit("run-3");
        assert!(
            skipped.starts_with("admitted run-3; preflight decided rework")
                && skipped.contains("check_failed"),
            "{skipped}"
        );

        // The producer cancels its execution; nothing applies and nothing new is taken.
        env.fails(
            &rev,
            &["execution", "cancel", "ex-1", "--reason", "x"],
            2,
            "permission_denied",
        );
        let c = env.ok(
            &coder,
            &["execution", "cancel", "ex-1", "--reason", "withdrawn"],
        );
        assert_eq!(c, "execution ex-1 cancelled by coder (producer): withdrawn");
        let out = env.fails(&alice, &["status", "ex-1"], 1, "execution_cancelled");
        assert!(out.contains("withdrawn"), "{out}");
        env.fails(&ci, &["gate", "run", "ex-1"], 2, "cancelled");
        assert!(applying(&env, &alice).is_empty());
        let audit = Command::new(env!("CARGO_BIN_EXE_verdict"))
            .args(["audit", "verify"])
            .env("VERDICT_STORE", &env.store)
            .output()
            .unwrap();
        assert!(
            audit.status.success(),
            "{}",
            String::from_utf8_lossy(&audit.stdout)
        );
    }
}

#[test]
fn the_cancel_commands_show_an_example() {
    for args in [&["execution", "cancel"][..], &["run", "cancel"]] {
        let mut a = args.to_vec();
        a.push("--help");
        let out = Command::new(env!("CARGO_BIN_EXE_verdict"))
            .args(&a)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("Example"), "{args:?} --help:\n{text}");
    }
}

/// Each write that names a stored record, run by a principal no grant lets see it, with the
/// stored id and with one of the same length that names nothing: the same exit status, output
/// and error, but for the id it repeats.
#[test]
fn a_write_out_of_scope_says_the_same_for_a_record_that_exists_and_one_that_does_not() {
    for env in [Env::sqlite(), Env::postgres()] {
        // A manual clock: every command below acts at --now.
        let ops = env.init();
        let add =
            |name: &str, role: &str| env.ok(&ops, &["principal", "add", name, "--role", role]);
        let coder = add("coder", "producer");
        add("rev", "verifier");
        for (p, a) in [("coder", "write"), ("rev", "read")] {
            env.ok(
                &ops,
                &[
                    "grant",
                    "add",
                    &format!("g-{p}"),
                    "--principal",
                    p,
                    "--execution",
                    "ex-1",
                    "--access",
                    a,
                    "--expires",
                    "2027-01-01T00:00:00Z",
                ],
            );
        }
        // None of these holds a grant.
        let coder2 = add("coder-2", "producer");
        let ci2 = add("ci-2", "runner");
        let rev2 = add("rev-2", "verifier");
        let bob = add("bob", "human");
        let policy = json!({"schema": "verdict.policy/v1", "name": "merge", "revision": 1,
                            "required_checks": ["unit-tests"], "required_verifiers": ["reviewer"]});
        let pd = env.ok(&ops, &["policy", "set", &env.file("policy.json", &policy)]);
        let subject = json!({
            "schema": "verdict.subject/v1",
            "execution": {"id": "ex-1", "generation": 1},
            "work_items": [], "producer": {"principal": "coder", "run": "run-coder"},
            "objective": {"revision": "1", "digest": DEF},
            "criteria": {"revision": "1", "items": [{"id": "tests-pass", "text": "unit tests pass"}]},
            "resources": [], "checks": [{"id": "unit-tests", "definition_digest": DEF, "criteria": ["tests-pass"]}],
            "workflow_revision": "1", "risk": {"class": "low", "revision": "1", "capabilities": []}
        });
        let sd = env.ok(
            &coder,
            &["subject", "put", &env.file("subject.json", &subject)],
        );
        let req = env.ok(&coder, &["request", "create", "ex-1"]);
        env.ok(
            &ops,
            &[
                "run",
                "admit",
                &req,
                "--verifier",
                "rev",
                "--class",
                "reviewer",
                "--run",
                "run-1",
            ],
        );
        // A digest of the same form that names nothing.
        let unknown = format!("sha256:{}", "0".repeat(64));
        let ev = |subject: &str| {
            json!({"id": "ev-9", "kind": "check", "check": "unit-tests", "subject_digest": subject,
                   "definition_digest": DEF, "produced_by": {"principal": "ci-2", "role": "runner"},
                   "outcome": "pass", "content_digest": DEF, "observed_at": "2026-11-30T11:59:00Z",
                   "freshness": {"kind": "content"}})
        };
        let res = |run: &str| {
            let mut r = result(run, &sd, &["tests-pass"]);
            r["verifier"]["principal"] = json!("rev-2");
            r
        };
        // Who writes, the arguments naming the stored record and those naming nothing, and the
        // two ids.
        type Case<'a> = (&'a str, Vec<String>, Vec<String>, &'a str, &'a str);
        let cases: Vec<Case> = vec![
            (
                coder2.as_str(),
                vec!["request".into(), "create".into(), "ex-1".into()],
                vec!["request".into(), "create".into(), "ex-9".into()],
                "ex-1",
                "ex-9",
            ),
            (
                coder2.as_str(),
                ["execution", "cancel", "ex-1", "--reason", "x"]
                    .map(String::from)
                    .to_vec(),
                ["execution", "cancel", "ex-9", "--reason", "x"]
                    .map(String::from)
                    .to_vec(),
                "ex-1",
                "ex-9",
            ),
            (
                bob.as_str(),
                [
                    "decide",
                    "ex-1",
                    "--subject",
                    sd.as_str(),
                    "--policy",
                    pd.as_str(),
                    "--approve",
                    "--reason",
                    "ok",
                ]
                .map(String::from)
                .to_vec(),
                [
                    "decide",
                    "ex-9",
                    "--subject",
                    sd.as_str(),
                    "--policy",
                    pd.as_str(),
                    "--approve",
                    "--reason",
                    "ok",
                ]
                .map(String::from)
                .to_vec(),
                "ex-1",
                "ex-9",
            ),
            (
                rev2.as_str(),
                [
                    "run",
                    "admit",
                    req.as_str(),
                    "--verifier",
                    "rev-2",
                    "--class",
                    "reviewer",
                    "--run",
                    "run-2",
                ]
                .map(String::from)
                .to_vec(),
                [
                    "run",
                    "admit",
                    unknown.as_str(),
                    "--verifier",
                    "rev-2",
                    "--class",
                    "reviewer",
                    "--run",
                    "run-2",
                ]
                .map(String::from)
                .to_vec(),
                req.as_str(),
                unknown.as_str(),
            ),
            (
                rev2.as_str(),
                vec![
                    "result".into(),
                    "submit".into(),
                    env.file("r1.json", &res("run-1")),
                ],
                vec![
                    "result".into(),
                    "submit".into(),
                    env.file("r9.json", &res("run-9")),
                ],
                "run-1",
                "run-9",
            ),
            (
                ci2.as_str(),
                vec![
                    "evidence".into(),
                    "add".into(),
                    env.file("e1.json", &ev(&sd)),
                ],
                vec![
                    "evidence".into(),
                    "add".into(),
                    env.file("e9.json", &ev(&unknown)),
                ],
                sd.as_str(),
                unknown.as_str(),
            ),
        ];
        for (token, stored_args, missing_args, stored, missing) in &cases {
            let stored_args: Vec<&str> = stored_args.iter().map(String::as_str).collect();
            let missing_args: Vec<&str> = missing_args.iter().map(String::as_str).collect();
            let a = env.run(token, &stored_args);
            let b = env.run(token, &missing_args);
            let err = String::from_utf8_lossy(&a.stderr).into_owned();
            assert_eq!(a.status.code(), Some(2), "{stored_args:?}: {a:?}");
            assert!(err.contains("permission_denied"), "{stored_args:?}: {err}");
            assert_eq!(
                (
                    b.status.code(),
                    String::from_utf8_lossy(&b.stdout).into_owned(),
                    String::from_utf8_lossy(&b.stderr).replace(missing, stored),
                ),
                (
                    a.status.code(),
                    String::from_utf8_lossy(&a.stdout).into_owned(),
                    err
                ),
                "{missing_args:?} is answered differently from {stored_args:?}"
            );
        }
        // An operator, who may see everything, is told what is not stored.
        env.fails(&ops, &["request", "create", "ex-9"], 2, "not found");
        env.fails(
            &ops,
            &["execution", "cancel", "ex-9", "--reason", "x"],
            2,
            "not found",
        );
    }
}

/// The audit chain as exported: one event per line.
fn chain(env: &Env) -> Vec<Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_verdict"))
        .args(["audit", "export"])
        .env("VERDICT_STORE", &env.store)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A producer granted one execution names, in that execution's first subject, a mission it
/// holds no grant on, so that the mission's verifier and person would check and approve its
/// work: refused at `subject put` with only its denial written, and the Gate never passes. A
/// producer holding a write grant on the mission names it, and the mission's verifier and
/// person then work the execution through to a pass.
#[test]
fn a_producer_names_a_mission_only_under_a_grant_on_it() {
    for env in [Env::sqlite(), Env::postgres()] {
        // A manual clock: every command below acts at --now.
        let ops = env.init();
        let add =
            |name: &str, role: &str| env.ok(&ops, &["principal", "add", name, "--role", role]);
        let (coder2, coder_m, ci, rev_m, hum_m) = (
            add("coder2", "producer"),
            add("coder-m", "producer"),
            add("ci", "runner"),
            add("rev-m", "verifier"),
            add("hum-m", "human"),
        );
        // coder2 may work ex-2 only; the mission's verifier and person are trusted on mis-x only.
        for (id, p, kind, scope, access) in [
            ("g-coder2", "coder2", "--execution", "ex-2", "write"),
            ("g-ci", "ci", "--execution", "ex-2", "write"),
            ("g-ci-m", "ci", "--mission", "mis-x", "write"),
            ("g-rev-m", "rev-m", "--mission", "mis-x", "read"),
            ("g-hum-m", "hum-m", "--mission", "mis-x", "write"),
            ("g-coder-m", "coder-m", "--mission", "mis-x", "write"),
        ] {
            env.ok(
                &ops,
                &[
                    "grant",
                    "add",
                    id,
                    "--principal",
                    p,
                    kind,
                    scope,
                    "--access",
                    access,
                    "--expires",
                    "2027-01-01T00:00:00Z",
                ],
            );
        }
        // A person approves every risk class.
        let policy = json!({"schema": "verdict.policy/v1", "name": "merge", "revision": 1,
                            "required_checks": ["unit-tests"], "required_verifiers": ["reviewer"],
                            "risk": {"low": {"human": true}}});
        let pd = env.ok(&ops, &["policy", "set", &env.file("policy.json", &policy)]);
        let subject = |execution: &str, producer: &str, mission: Option<&str>| {
            let mut s = json!({
                "schema": "verdict.subject/v1",
                "execution": {"id": execution, "generation": 1},
                "work_items": [], "producer": {"principal": producer, "run": "run-1"},
                "objective": {"revision": "1", "digest": DEF},
                "criteria": {"revision": "1", "items": [{"id": "tests-pass", "text": "unit tests pass"}]},
                "resources": [], "checks": [{"id": "unit-tests", "definition_digest": DEF, "criteria": ["tests-pass"]}],
                "workflow_revision": "1", "risk": {"class": "low", "revision": "1", "capabilities": []}
            });
            if let Some(m) = mission {
                s["mission"] = json!(m);
            }
            env.file(&format!("subject-{execution}-{producer}.json"), &s)
        };
        let evidence = |execution: &str, sd: &str| {
            let ev = json!({"id": format!("ev-{execution}"), "kind": "check", "check": "unit-tests",
                   "subject_digest": sd, "definition_digest": DEF,
                   "produced_by": {"principal": "ci", "role": "runner"}, "outcome": "pass",
                   "content_digest": DEF, "observed_at": "2026-11-30T11:59:00Z",
                   "freshness": {"kind": "content"}});
            env.file(&format!("ev-{execution}.json"), &ev)
        };
        let admit = |request: &str, run: &str| {
            env.run(
                &ops,
                &[
                    "run",
                    "admit",
                    request,
                    "--verifier",
                    "rev-m",
                    "--class",
                    "reviewer",
                    "--run",
                    run,
                ],
            )
        };
        let decide = |execution: &str, sd: &str| {
            env.run(
                &hum_m,
                &[
                    "decide",
                    execution,
                    "--subject",
                    sd,
                    "--policy",
                    &pd,
                    "--approve",
                    "--reason",
                    "looks fine",
                ],
            )
        };

        // The first subject of ex-2 names mis-x: refused, naming the mission and the grant it
        // needs, and only the denial is written.
        let before = chain(&env);
        let out = env.fails(
            &coder2,
            &["subject", "put", &subject("ex-2", "coder2", Some("mis-x"))],
            2,
            "permission_denied",
        );
        assert!(
            out.contains("mission \"mis-x\"") && out.contains("no write grant in force on mission"),
            "{out}"
        );
        let after = chain(&env);
        assert_eq!(after.len(), before.len() + 1, "{after:?}");
        assert_eq!(after.last().unwrap()["table"], "denials");
        let out = env.run(&ops, &["gate", "run", "ex-2"]);
        assert!(!out.status.success(), "{out:?}");

        // Its own work, in no mission, is put; the mission's verifier and person do not cover
        // it, and the Gate does not pass it.
        let sd2 = env.ok(
            &coder2,
            &["subject", "put", &subject("ex-2", "coder2", None)],
        );
        env.ok(&ci, &["evidence", "add", &evidence("ex-2", &sd2)]);
        let req2 = env.ok(&coder2, &["request", "create", "ex-2"]);
        let out = admit(&req2, "run-2");
        assert!(!out.status.success(), "{out:?}");
        let out = decide("ex-2", &sd2);
        assert!(!out.status.success(), "{out:?}");
        let out = env.run(&ops, &["gate", "run", "ex-2", "--format", "text"]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success() && !text.starts_with("pass"), "{text}");

        // A producer granted write on the mission names it; the mission's verifier and person
        // work the execution, and it passes.
        let sd3 = env.ok(
            &coder_m,
            &["subject", "put", &subject("ex-3", "coder-m", Some("mis-x"))],
        );
        env.ok(&ci, &["evidence", "add", &evidence("ex-3", &sd3)]);
        let req3 = env.ok(&coder_m, &["request", "create", "ex-3"]);
        let out = admit(&req3, "run-3");
        assert!(out.status.success(), "{out:?}");
        let result = json!({"id": "vr-run-3",
            "verifier": {"principal": "rev-m", "class": "reviewer", "run": "run-3"},
            "subject_digest": sd3, "generation": 1, "status": "completed",
            "criteria": [{"id": "tests-pass", "status": "passed", "method": "review", "evidence_refs": ["ev-ex-3"]}],
            "findings": [], "dispositions": []});
        env.ok(
            &rev_m,
            &["result", "submit", &env.file("result-3.json", &result)],
        );
        let out = decide("ex-3", &sd3);
        assert!(out.status.success(), "{out:?}");
        let d: Value = serde_json::from_str(&env.ok(&ops, &["gate", "run", "ex-3"])).unwrap();
        assert_eq!(d["decision"]["outcome"], "pass", "{d}");
    }
}

/// A producer states its work `low`. Under a policy whose risk table asks a person of `high`
/// work, the stated class alone escapes the review; a `risk_floor` of `high` makes the same
/// subject need the approval (docs/hostile-cases.md, "Lifecycle").
#[test]
fn a_subject_stated_low_under_a_high_risk_floor_needs_a_person() {
    for env in [Env::sqlite(), Env::postgres()] {
        // A manual clock: every command below acts at --now.
        let ops = env.init();
        let [coder, ci, alice] = <[String; 3]>::try_from(env.staff(
            &ops,
            &[
                ("coder", "producer", "write"),
                ("ci", "runner", "write"),
                ("alice", "human", "write"),
            ],
        ))
        .unwrap();
        let policy = |revision: u64, floor: Option<&str>| {
            let mut p = json!({"schema": "verdict.policy/v1", "name": "merge", "revision": revision,
                               "required_checks": ["unit-tests"], "risk": {"high": {"human": true}}});
            if let Some(f) = floor {
                p["risk_floor"] = json!(f);
            }
            p
        };
        env.ok(
            &ops,
            &["policy", "set", &env.file("p1.json", &policy(1, None))],
        );
        let subject = json!({
            "schema": "verdict.subject/v1",
            "execution": {"id": "ex-1", "generation": 1},
            "work_items": [], "producer": {"principal": "coder", "run": "run-coder"},
            "objective": {"revision": "1", "digest": DEF},
            "criteria": {"revision": "1", "items": [{"id": "tests-pass", "text": "unit tests pass"}]},
            "resources": [], "checks": [{"id": "unit-tests", "definition_digest": DEF, "criteria": ["tests-pass"]}],
            "workflow_revision": "1", "risk": {"class": "low", "revision": "1", "capabilities": []}
        });
        let sd = env.ok(
            &coder,
            &["subject", "put", &env.file("subject.json", &subject)],
        );
        let ev = json!({"id": "ev-1", "kind": "check", "check": "unit-tests", "subject_digest": sd,
                        "definition_digest": DEF, "produced_by": {"principal": "ci", "role": "runner"},
                        "outcome": "pass", "content_digest": DEF, "observed_at": "2026-11-30T11:59:00Z",
                        "freshness": {"kind": "content"}});
        env.ok(&ci, &["evidence", "add", &env.file("ev1.json", &ev)]);

        // Taken at its word, the low subject passes without anyone looking.
        let d: Value = serde_json::from_str(&env.ok(&ci, &["gate", "run", "ex-1"])).unwrap();
        assert_eq!(d["decision"]["outcome"], "pass", "{d}");

        // Under a floor of high the same subject needs a person.
        let pd = env.ok(
            &ops,
            &[
                "policy",
                "set",
                &env.file("p2.json", &policy(2, Some("high"))),
            ],
        );
        let out = env.run(&ci, &["gate", "run", "ex-1"]);
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let d: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(d["decision"]["outcome"], "human_required", "{d}");
        let reasons = d["decision"]["reasons"].as_array().unwrap();
        assert_eq!(reasons.len(), 1, "{d}");
        assert_eq!(reasons[0]["code"], "human_review_required");
        assert!(
            reasons[0]["detail"]
                .as_str()
                .unwrap()
                .contains("raised to high by the policy's risk_floor"),
            "{d}"
        );

        // A person's approval bound to this subject and policy lets it pass.
        env.ok(
            &alice,
            &[
                "decide",
                "ex-1",
                "--subject",
                &sd,
                "--policy",
                &pd,
                "--approve",
                "--reason",
                "looked at it",
            ],
        );
        let d: Value = serde_json::from_str(&env.ok(&ci, &["gate", "run", "ex-1"])).unwrap();
        assert_eq!(d["decision"]["outcome"], "pass", "{d}");
    }
}

/// Runs the Gate and returns its decision; the exit status says whether it passed.
fn gate_run(env: &Env, token: &str, passes: bool) -> Value {
    let out = env.run(token, &["gate", "run", "ex-1"]);
    assert_eq!(
        out.status.code(),
        Some(if passes { 0 } else { 1 }),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    report["decision"].clone()
}

/// A person approves a change under a policy that asks a person to review it; a second
/// reviewer then answers `inconclusive` on the required criterion. The approval cleared only
/// the review the person saw, so `gate run` says `human_required`, not `pass`; an approval
/// naming the decision seen before is refused with nothing written, and one naming the
/// current decision clears it.
#[test]
fn an_approval_clears_only_what_the_person_saw_through_the_commands() {
    for env in [Env::sqlite(), Env::postgres()] {
        // A manual clock: every command below acts at --now.
        let ops = env.init();
        let [coder, ci, rev, rev2, alice] = <[String; 5]>::try_from(env.staff(
            &ops,
            &[
                ("coder", "producer", "write"),
                ("ci", "runner", "write"),
                ("rev", "verifier", "read"),
                ("rev2", "verifier", "read"),
                ("alice", "human", "write"),
            ],
        ))
        .unwrap();
        let policy = json!({"schema": "verdict.policy/v1", "name": "merge", "revision": 1,
                            "required_checks": ["unit-tests"], "required_verifiers": ["reviewer"],
                            "risk": {"low": {"human": true}}});
        let pd = env.ok(&ops, &["policy", "set", &env.file("policy.json", &policy)]);
        let subject = json!({
            "schema": "verdict.subject/v1",
            "execution": {"id": "ex-1", "generation": 1},
            "work_items": [], "producer": {"principal": "coder", "run": "run-coder"},
            "objective": {"revision": "1", "digest": DEF},
            "criteria": {"revision": "1", "items": [{"id": "tests-pass", "text": "unit tests pass"}]},
            "resources": [], "checks": [{"id": "unit-tests", "definition_digest": DEF, "criteria": ["tests-pass"]}],
            "workflow_revision": "1", "risk": {"class": "low", "revision": "1", "capabilities": []}
        });
        let sd = env.ok(
            &coder,
            &["subject", "put", &env.file("subject.json", &subject)],
        );
        let ev = json!({"id": "ev-1", "kind": "check", "check": "unit-tests", "subject_digest": sd,
                        "definition_digest": DEF, "produced_by": {"principal": "ci", "role": "runner"},
                        "outcome": "pass", "content_digest": DEF, "observed_at": "2026-11-30T11:59:00Z",
                        "freshness": {"kind": "content"}});
        env.ok(&ci, &["evidence", "add", &env.file("ev1.json", &ev)]);
        let req = env.ok(&coder, &["request", "create", "ex-1"]);
        let answer = |verifier: &str, token: &str, run: &str, status: &str| {
            env.ok(
                &ops,
                &[
                    "run",
                    "admit",
                    &req,
                    "--verifier",
                    verifier,
                    "--class",
                    "reviewer",
                    "--run",
                    run,
                ],
            );
            let mut r = result(run, &sd, &["tests-pass"]);
            r["verifier"]["principal"] = json!(verifier);
            r["criteria"][0]["status"] = json!(status);
            let file = env.file(&format!("{run}.json"), &r);
            env.ok(token, &["result", "submit", &file]);
        };
        answer("rev", &rev, "run-1", "passed");
        let first = gate_run(&env, &ci, false);
        assert_eq!(first["outcome"], "human_required", "{first}");
        let first_key = first["evaluation_key"].as_str().unwrap().to_owned();
        let decide = |key: &str, reason: &str| {
            env.run(
                &alice,
                &[
                    "decide",
                    "ex-1",
                    "--subject",
                    &sd,
                    "--policy",
                    &pd,
                    "--reviewed-decision",
                    key,
                    "--approve",
                    "--reason",
                    reason,
                ],
            )
        };
        assert!(decide(&first_key, "risk reviewed").status.success());
        assert_eq!(gate_run(&env, &ci, true)["outcome"], "pass");

        // The attack: a second reviewer answers `inconclusive` after the approval.
        answer("rev2", &rev2, "run-2", "inconclusive");
        let later = gate_run(&env, &ci, false);
        assert_eq!(later["outcome"], "human_required", "{later}");
        let standing: Vec<&Value> = later["reasons"].as_array().unwrap().iter().collect();
        assert_eq!(standing.len(), 1, "{later}");
        assert_eq!(standing[0]["code"], "criterion_inconclusive");
        assert_eq!(standing[0]["criterion"], "tests-pass");
        let later_key = later["evaluation_key"].as_str().unwrap().to_owned();

        // Approving what was seen before is refused and writes nothing.
        let before = chain(&env).len();
        let out = decide(&first_key, "looked again");
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(2), "{all}");
        assert!(
            all.contains("conflict") && all.contains(&first_key) && all.contains(&later_key),
            "{all}"
        );
        assert_eq!(chain(&env).len(), before, "nothing recorded");
        assert_eq!(gate_run(&env, &ci, false)["outcome"], "human_required");

        // Approving the decision now shown clears it.
        assert!(
            decide(&later_key, "inconclusive is acceptable here")
                .status
                .success()
        );
        assert_eq!(gate_run(&env, &ci, true)["outcome"], "pass");
        let audit = Command::new(env!("CARGO_BIN_EXE_verdict"))
            .args(["audit", "verify"])
            .env("VERDICT_STORE", &env.store)
            .output()
            .unwrap();
        assert!(audit.status.success());
    }
}
