//! The lifecycle commands run as the built binary, each flow on SQLite and on PostgreSQL.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use serde_json::{Value, json};
use std::path::Path;
use std::process::{Command, Output};

struct Env {
    store: String,
    dir: tempfile::TempDir,
    /// Dropped with the environment, also when a test panics.
    _pg: Option<verdict_store::scratch::ScratchPostgres>,
}

/// The bodies of the store's denials of unauthenticated attempts.
fn unauthenticated_denials(store: &str) -> Vec<String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let location = verdict_store::Location::resolve(Some(store)).unwrap();
            let store = verdict_store::open(&location).await.unwrap();
            store
                .denials_of(verdict_store::UNAUTHENTICATED)
                .await
                .unwrap()
                .into_iter()
                .map(|row| row.body)
                .collect()
        })
}

impl Env {
    fn sqlite() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = format!("sqlite:{}", dir.path().join("store/verdict.db").display());
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

    fn run(&self, token: Option<&str>, args: &[&str]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_verdict"));
        cmd.args(args)
            .current_dir(self.dir.path())
            .env("VERDICT_STORE", &self.store)
            .env("VERDICT_HOME", self.dir.path().join("home"))
            .env_remove("VERDICT_TOKEN");
        if let Some(t) = token {
            cmd.env("VERDICT_TOKEN", t);
        }
        cmd.output().unwrap()
    }

    fn ok(&self, token: Option<&str>, args: &[&str]) -> String {
        let out = self.run(token, args);
        assert!(
            out.status.success(),
            "{args:?}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    fn file(&self, name: &str, v: &Value) -> String {
        let p = self.dir.path().join(name);
        std::fs::write(&p, serde_json::to_vec(v).unwrap()).unwrap();
        p.display().to_string()
    }
}

fn both(body: impl Fn(&Env)) {
    body(&Env::sqlite());
    body(&Env::postgres());
}

const NOW: &str = "2026-11-30T12:00:00Z";
/// The commit the walk's subject names, and so the one its GitHub export may be about.
const COMMIT: &str = "cccccccccccccccccccccccccccccccccccccccc";
const DEF: &str = "sha256:ec4556a178527361344d876629bb9533c63fc8fcd216f423dd8bce76787fce86";

#[test]
fn quickstart_twice_then_status_history_and_audit() {
    both(|env| {
        let first = env.ok(None, &["quickstart"]);
        assert!(
            first.contains("gate: rework") && first.contains("\nfinal decision: pass\n"),
            "{first}"
        );
        // The first run initialised the empty store and showed its operator's token once; a
        // second run needs it, since nobody but an operator adds principals.
        let ops = first
            .lines()
            .find(|l| l.starts_with("vdt_"))
            .unwrap()
            .to_owned();
        let again = env.run(None, &["quickstart"]);
        assert_eq!(again.status.code(), Some(2));
        let err = String::from_utf8_lossy(&again.stderr);
        assert!(
            err.contains("already initialised") && err.contains("--token or VERDICT_TOKEN"),
            "{err}"
        );
        // The first subject was sent back for the injection the scripted reviewer found.
        assert!(
            first.contains("gate: rework (") && first.contains("gate: pass"),
            "{first}"
        );
        let second = env.ok(Some(&ops), &["quickstart"]);
        assert!(second.contains("quickstart-2"), "{second}");
        assert!(!second.contains("vdt_"), "{second}");
        let status = env.ok(
            Some(&ops),
            &["status", "quickstart-1", "--gate", "quickstart"],
        );
        assert!(status.starts_with("quickstart-1: pass applies"), "{status}");
        let history: Value = serde_json::from_str(&env.ok(
            Some(&ops),
            &["history", "quickstart-2", "--gate", "quickstart", "--json"],
        ))
        .unwrap();
        assert_eq!(history["decisions"].as_array().unwrap().len(), 2);
        assert_eq!(
            history["decisions"][0]["not_applicable"],
            json!(["subject_moved"])
        );
        for d in history["decisions"].as_array().unwrap() {
            env.ok(
                Some(&ops),
                &[
                    "gate",
                    "replay",
                    d["decision"]["evaluation_key"].as_str().unwrap(),
                ],
            );
        }
        env.ok(None, &["audit", "verify"]);
    });
}

/// The commands quickstart prints after `inspect it with:`, one per line.
fn printed_commands(out: &str) -> Vec<String> {
    let (_, after) = out.split_once("inspect it with:\n").expect(out);
    let lines: Vec<String> = after.lines().map(|l| l.trim().to_owned()).collect();
    assert!(lines.iter().all(|l| l.starts_with("verdict ")), "{out}");
    lines
}

/// Runs each printed command exactly as printed, through `sh`, with the built binary first on
/// PATH, in the quickstart's directory and environment (`token` as VERDICT_TOKEN, if given).
fn run_as_printed(
    env: &Env,
    commands: &[String],
    store_in_env: bool,
    token: Option<&str>,
) -> Vec<String> {
    let bin = Path::new(env!("CARGO_BIN_EXE_verdict")).parent().unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    commands
        .iter()
        .map(|line| {
            let mut cmd = Command::new("sh");
            cmd.args(["-c", line])
                .current_dir(env.dir.path())
                .env("PATH", &path)
                .env("VERDICT_HOME", env.dir.path().join("home"))
                .env_remove("VERDICT_TOKEN")
                .env_remove("VERDICT_STORE");
            if store_in_env {
                cmd.env("VERDICT_STORE", &env.store);
            }
            if let Some(t) = token {
                cmd.env("VERDICT_TOKEN", t);
            }
            let out = cmd.output().unwrap();
            assert!(
                out.status.success(),
                "{line}: {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout).unwrap()
        })
        .collect()
}

#[test]
fn quickstart_prints_follow_ups_that_work_as_printed() {
    both(|env| {
        // The store from the environment: the commands need nothing more.
        let out = env.ok(None, &["quickstart"]);
        let commands = printed_commands(&out);
        assert_eq!(commands.len(), 3, "{out}");
        assert!(commands.iter().all(|c| !c.contains("--store")), "{out}");
        // Reads need a token: the new operator's, printed once above, is named again.
        let ops = out.lines().find(|l| l.starts_with("vdt_")).unwrap();
        for c in &commands[..2] {
            assert!(c.ends_with(&format!(" --token {ops}")), "{out}");
        }
        let outputs = run_as_printed(env, &commands, true, None);
        assert!(
            outputs[0].starts_with("quickstart-1: pass applies"),
            "{outputs:?}"
        );
        assert!(outputs[1].contains("applies"), "{outputs:?}");
        // A token from VERDICT_TOKEN is not printed: the same shell still holds it.
        let out = env.ok(Some(ops), &["quickstart"]);
        let commands = printed_commands(&out);
        assert!(commands.iter().all(|c| !c.contains("vdt_")), "{out}");
        let outputs = run_as_printed(env, &commands, true, Some(ops));
        assert!(
            outputs[0].starts_with("quickstart-2: pass applies"),
            "{outputs:?}"
        );
    });
    // The store from `--store`, in a directory whose name needs quoting: the commands name it.
    let env = Env::sqlite();
    let store = format!(
        "sqlite:{}",
        env.dir.path().join("it's here/verdict.db").display()
    );
    let out = Command::new(env!("CARGO_BIN_EXE_verdict"))
        .args(["quickstart", "--store", &store])
        .current_dir(env.dir.path())
        .env_remove("VERDICT_STORE")
        .env("VERDICT_HOME", env.dir.path().join("home"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = String::from_utf8(out.stdout).unwrap();
    let commands = printed_commands(&out);
    assert!(commands.iter().all(|c| c.contains("--store '")), "{out}");
    let outputs = run_as_printed(&env, &commands, false, None);
    assert!(
        outputs[0].starts_with("quickstart-1: pass applies"),
        "{outputs:?}"
    );
    // Nothing was created at the default location: the printed commands used the named store.
    assert!(!env.dir.path().join("home").exists());
}

#[test]
fn quickstart_touches_nothing_outside_verdict_home() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_verdict"))
        .arg("quickstart")
        .current_dir(dir.path())
        .env_remove("VERDICT_STORE")
        .env_remove("VERDICT_HOME")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let entries: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(entries, vec![std::ffi::OsString::from(".verdict")]);
    assert!(Path::new(&dir.path().join(".verdict/verdict.db")).exists());
}

#[test]
fn a_change_through_the_commands_with_every_refusal_as_documented() {
    both(|env| {
        let ops = env.ok(None, &["init", "--operator", "ops"]);
        assert!(ops.starts_with("vdt_"));
        assert!(
            !env.run(None, &["init", "--operator", "ops"])
                .status
                .success(),
            "init twice"
        );
        let add = |name: &str, role: &str| {
            env.ok(Some(&ops), &["principal", "add", name, "--role", role])
        };
        let (coder, ci, rev) = (
            add("coder", "producer"),
            add("ci", "runner"),
            add("rev", "verifier"),
        );
        for (g, p, a) in [
            ("g-coder", "coder", "write"),
            ("g-ci", "ci", "write"),
            ("g-rev", "rev", "read"),
        ] {
            env.ok(
                Some(&ops),
                &[
                    "grant",
                    "add",
                    g,
                    "--principal",
                    p,
                    "--execution",
                    "ex-1",
                    "--access",
                    a,
                    "--expires",
                    "2099-01-01T00:00:00Z",
                ],
            );
        }
        let policy = json!({"schema": "verdict.policy/v1", "name": "merge", "revision": 1,
                            "required_checks": ["unit-tests"], "required_verifiers": ["reviewer"]});
        env.ok(
            Some(&ops),
            &["policy", "set", &env.file("policy.json", &policy)],
        );
        // A producer cannot add principals.
        let out = env.run(
            Some(&coder),
            &["principal", "add", "x", "--role", "operator"],
        );
        assert!(String::from_utf8_lossy(&out.stderr).contains("permission_denied"));
        let subject = json!({
            "schema": "verdict.subject/v1",
            "execution": {"id": "ex-1", "generation": 1},
            "work_items": [{"kind": "commit", "id": "repo", "version": COMMIT}],
        "producer": {"principal": "coder", "run": "run-coder"},
            "objective": {"revision": "1", "digest": DEF},
            "criteria": {"revision": "1", "items": [{"id": "tests-pass", "text": "unit tests pass"}]},
            "resources": [], "checks": [{"id": "unit-tests", "definition_digest": DEF, "criteria": ["tests-pass"]}],
            "workflow_revision": "1", "risk": {"class": "low", "revision": "1", "capabilities": []}
        });
        let sd = env.ok(
            Some(&coder),
            &["subject", "put", &env.file("subject.json", &subject)],
        );
        let ev = json!({"id": "ev-1", "kind": "check", "check": "unit-tests", "subject_digest": sd,
                        "definition_digest": DEF, "produced_by": {"principal": "ci", "role": "runner"},
                        "outcome": "pass", "content_digest": DEF, "observed_at": "2026-11-30T11:59:00Z",
                        "freshness": {"kind": "content"}});
        env.ok(
            Some(&ci),
            &["evidence", "add", &env.file("ev.json", &json!([ev]))],
        );
        let req = env.ok(Some(&coder), &["request", "create", "ex-1"]);
        let admitted = env.ok(
            Some(&ops),
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
        assert!(admitted.starts_with("admitted run-1"), "{admitted}");
        let result = json!({"id": "vr-1", "verifier": {"principal": "rev", "class": "reviewer", "run": "run-1"},
                            "subject_digest": sd, "generation": 1, "status": "completed",
                            "criteria": [{"id": "tests-pass", "status": "passed", "method": "review", "evidence_refs": ["ev-1"]}],
                            "findings": [], "dispositions": []});
        let rf = env.file("result.json", &result);
        // The producer's token cannot submit it; no token at all is refused too.
        let out = env.run(Some(&coder), &["result", "submit", &rf]);
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("self_verification_denied"));
        assert!(
            String::from_utf8_lossy(&env.run(None, &["result", "submit", &rf]).stderr)
                .contains("unauthenticated")
        );
        // A wrong token is refused too, and both attempts are on record without the token.
        let wrong = format!("vdt_{}", "ab".repeat(32));
        let out = env.run(Some(&wrong), &["result", "submit", &rf]);
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("unauthenticated"));
        let denials = unauthenticated_denials(&env.store);
        assert_eq!(denials.len(), 2, "{denials:?}");
        assert!(
            denials.iter().all(|d| !d.contains(&wrong[4..])),
            "{denials:?}"
        );
        assert_eq!(
            denials
                .iter()
                .filter(|d| d.contains("token_fingerprint"))
                .count(),
            1
        );
        env.ok(Some(&rev), &["result", "submit", &rf]);
        let decision: Value =
            serde_json::from_str(&env.ok(Some(&ci), &["gate", "run", "ex-1"])).unwrap();
        assert_eq!(decision["outcome"], "pass");
        let replay = env.ok(
            Some(&ops),
            &[
                "gate",
                "replay",
                decision["evaluation_key"].as_str().unwrap(),
            ],
        );
        assert_eq!(serde_json::from_str::<Value>(&replay).unwrap(), decision);
        assert!(
            env.ok(Some(&ops), &["status", "ex-1"])
                .starts_with("ex-1: pass applies")
        );
        // A new policy revision: the pass stays stored but no longer applies.
        let mut p2 = policy.clone();
        p2["revision"] = json!(2);
        env.ok(
            Some(&ops),
            &["policy", "set", &env.file("policy2.json", &p2)],
        );
        let out = env.run(Some(&ops), &["status", "ex-1"]);
        assert_eq!(out.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&out.stdout).contains("policy_revision_moved"));
        env.ok(None, &["audit", "verify"]);
    });
}

#[test]
fn every_lifecycle_command_shows_an_example() {
    for args in [
        &["init"][..],
        &["principal", "add"],
        &["grant", "add"],
        &["grant", "revoke"],
        &["policy", "set"],
        &["subject", "put"],
        &["evidence", "add"],
        &["request", "create"],
        &["run", "admit"],
        &["result", "submit"],
        &["decide"],
        &["status"],
        &["history"],
        &["quickstart"],
        &["gate", "run"],
        &["gate", "replay"],
    ] {
        let mut a = args.to_vec();
        a.push("--help");
        let out = Command::new(env!("CARGO_BIN_EXE_verdict"))
            .args(&a)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("Example"),
            "{args:?} --help has no example:\n{text}"
        );
    }
}

/// Tokens of a store walked up to an admitted run `run-1` of `rev` on `ex-1`, and the file of
/// the result `rev` would submit for it.
struct Walk {
    ops: String,
    rev: String,
    alice: String,
    result: String,
    /// What a human reviews: `decide --subject S --policy P`.
    reviewed: [String; 4],
}

/// `init` with `init_args`, then principals, grants, policy, subject, evidence, request and
/// admission, each command given `time` (the `--now` arguments, empty on a system clock).
fn walk(env: &Env, init_args: &[&str], time: &[&'static str]) -> Walk {
    fn with<'a>(args: &[&'a str], time: &[&'a str]) -> Vec<&'a str> {
        args.iter().chain(time).copied().collect()
    }
    let ops = env.ok(None, &[&["init", "--operator", "ops"], init_args].concat());
    let add = |name: &str, role: &str| {
        env.ok(
            Some(&ops),
            &with(&["principal", "add", name, "--role", role], time),
        )
    };
    let (coder, ci, rev, alice) = (
        add("coder", "producer"),
        add("ci", "runner"),
        add("rev", "verifier"),
        add("alice", "human"),
    );
    for (g, p, a) in [
        ("g-coder", "coder", "write"),
        ("g-ci", "ci", "write"),
        ("g-rev", "rev", "read"),
        ("g-alice", "alice", "write"),
    ] {
        env.ok(
            Some(&ops),
            &with(
                &[
                    "grant",
                    "add",
                    g,
                    "--principal",
                    p,
                    "--execution",
                    "ex-1",
                    "--access",
                    a,
                    "--expires",
                    "2099-01-01T00:00:00Z",
                ],
                time,
            ),
        );
    }
    let policy = json!({"schema": "verdict.policy/v1", "name": "merge", "revision": 1,
                        "required_checks": ["unit-tests"], "required_verifiers": ["reviewer"]});
    let pd = env.ok(
        Some(&ops),
        &with(&["policy", "set", &env.file("policy.json", &policy)], time),
    );
    let subject = json!({
        "schema": "verdict.subject/v1",
        "execution": {"id": "ex-1", "generation": 1},
        "work_items": [{"kind": "commit", "id": "repo", "version": COMMIT}],
        "producer": {"principal": "coder", "run": "run-coder"},
        "objective": {"revision": "1", "digest": DEF},
        "criteria": {"revision": "1", "items": [{"id": "tests-pass", "text": "unit tests pass"}]},
        "resources": [], "checks": [{"id": "unit-tests", "definition_digest": DEF, "criteria": ["tests-pass"]}],
        "workflow_revision": "1", "risk": {"class": "low", "revision": "1", "capabilities": []}
    });
    let sd = env.ok(
        Some(&coder),
        &with(
            &["subject", "put", &env.file("subject.json", &subject)],
            time,
        ),
    );
    let ev = json!({"id": "ev-1", "kind": "check", "check": "unit-tests", "subject_digest": sd,
                    "definition_digest": DEF, "produced_by": {"principal": "ci", "role": "runner"},
                    "outcome": "pass", "content_digest": DEF, "observed_at": "2026-11-30T11:59:00Z",
                    "freshness": {"kind": "content"}});
    env.ok(
        Some(&ci),
        &with(
            &["evidence", "add", &env.file("ev.json", &json!([ev]))],
            time,
        ),
    );
    let req = env.ok(Some(&coder), &with(&["request", "create", "ex-1"], time));
    env.ok(
        Some(&ops),
        &with(
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
            time,
        ),
    );
    let result = json!({"id": "vr-1", "verifier": {"principal": "rev", "class": "reviewer", "run": "run-1"},
                        "subject_digest": sd, "generation": 1, "status": "completed",
                        "criteria": [{"id": "tests-pass", "status": "passed", "method": "review", "evidence_refs": ["ev-1"]}],
                        "findings": [], "dispositions": []});
    Walk {
        ops,
        rev,
        alice,
        result: env.file("result.json", &result),
        reviewed: ["--subject".into(), sd, "--policy".into(), pd],
    }
}

/// The audit chain's length, read through the store's own interface.
fn chain_length(store: &str) -> u64 {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let location = verdict_store::Location::resolve(Some(store)).unwrap();
            let store = verdict_store::open(&location).await.unwrap();
            store.audit_head().await.unwrap().map_or(0, |h| h.seq)
        })
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn init_on_an_initialised_store_mints_no_operator() {
    both(|env| {
        let w = walk(env, &[], &[]);
        let before = chain_length(&env.store);
        // Under the attack, a second `init` minted an operator with no token at all.
        for name in ["mallory", "ops"] {
            let out = env.run(None, &["init", "--operator", name]);
            assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
            assert!(stderr(&out).contains("initialised"), "{}", stderr(&out));
            assert!(out.stdout.is_empty(), "no token is shown");
        }
        let out = env.run(
            None,
            &["init", "--operator", "mallory", "--clock", "manual"],
        );
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        // Nothing was written, and only an operator adds principals.
        assert_eq!(chain_length(&env.store), before);
        let out = env.run(
            Some(&w.rev),
            &["principal", "add", "mallory", "--role", "human"],
        );
        assert!(
            stderr(&out).contains("permission_denied"),
            "{}",
            stderr(&out)
        );
        env.ok(None, &["audit", "verify"]);
    });
}

#[test]
fn init_refuses_a_time_the_store_will_not_take_before_writing_anything() {
    both(|env| {
        // Under the attack, this stored the clock and the operator, then refused
        // `--now`: the token was never shown and no second `init` was allowed.
        let out = env.run(None, &["init", "--now", NOW]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("--clock manual") && stderr(&out).contains("nothing was written"),
            "{}",
            stderr(&out)
        );
        assert!(out.stdout.is_empty(), "no token is shown");
        // A time that does not read is refused before the store is touched too.
        let out = env.run(None, &["init", "--clock", "manual", "--now", "noon"]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains("--now \"noon\""), "{}", stderr(&out));
        assert_eq!(chain_length(&env.store), 0);
        // The store is still empty: a plain `init` makes its operator and shows the token.
        let ops = env.ok(None, &["init"]);
        assert!(ops.starts_with("vdt_"), "{ops}");
        let listed = env.ok(Some(&ops), &["principal", "list"]);
        assert!(listed.contains("operator"), "{listed}");
        // On a store that will keep a manual clock the same `--now` is taken, token shown.
        let manual = format!("sqlite:{}", env.dir.path().join("manual.db").display());
        let ops = env.ok(
            None,
            &[
                "init", "--clock", "manual", "--now", NOW, "--store", &manual,
            ],
        );
        assert!(ops.starts_with("vdt_"), "{ops}");
    });
}

#[test]
fn principal_add_refuses_a_name_that_could_pass_for_another() {
    both(|env| {
        // `init` names the first operator: held to the same rule, and nothing is written.
        let out = env.run(None, &["init", "--operator", "\u{43e}ps"]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains("U+043E"), "{}", stderr(&out));
        assert_eq!(chain_length(&env.store), 0);
        let ops = env.ok(None, &["init", "--operator", "ops"]);
        let before = chain_length(&env.store);
        // `оperator` with a Cyrillic `о` would read as `operator` wherever it is shown.
        let out = env.run(
            Some(&ops),
            &["principal", "add", "\u{43e}perator", "--role", "operator"],
        );
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(out.stdout.is_empty(), "no token is shown");
        for needle in ["invalid principal name", "U+043E, Cyrillic at character 1"] {
            assert!(stderr(&out).contains(needle), "{needle}: {}", stderr(&out));
        }
        assert_eq!(chain_length(&env.store), before);
        env.ok(
            Some(&ops),
            &["principal", "add", "operator", "--role", "operator"],
        );
        // `0perator` beside `operator` reads as it too (the same look-alike skeleton).
        let before = chain_length(&env.store);
        for bad in ["0perator", "OPERATOR", "0p5"] {
            let out = env.run(Some(&ops), &["principal", "add", bad, "--role", "operator"]);
            assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
            assert!(out.stdout.is_empty(), "no token is shown");
            assert!(
                stderr(&out).contains("reads like principal"),
                "{}",
                stderr(&out)
            );
        }
        assert_eq!(chain_length(&env.store), before);
        env.ok(
            Some(&ops),
            &["principal", "add", "operator-2", "--role", "operator"],
        );
        env.ok(None, &["audit", "verify"]);
    });
}

#[test]
fn a_store_on_the_system_clock_takes_no_time_from_the_caller() {
    both(|env| {
        let w = walk(env, &[], &[]);
        let before = chain_length(&env.store);
        let past = "2000-01-01T00:00:00Z";
        for (token, args) in [
            (&w.rev, vec!["result", "submit", w.result.as_str()]),
            (
                &w.alice,
                [
                    &["decide", "ex-1", "--approve", "--reason", "looks fine"][..],
                    &w.reviewed.iter().map(String::as_str).collect::<Vec<_>>(),
                ]
                .concat(),
            ),
            (&w.ops, vec!["grant", "revoke", "g-rev", "--reason", "gone"]),
            (&w.ops, vec!["gate", "run", "ex-1"]),
            (&w.ops, vec!["status", "ex-1"]),
            (&w.ops, vec!["history", "ex-1"]),
        ] {
            let out = env.run(Some(token), &[&args[..], &["--now", past]].concat());
            assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
            assert!(stderr(&out).contains("system clock"), "{}", stderr(&out));
        }
        assert_eq!(
            chain_length(&env.store),
            before,
            "a refused --now writes nothing"
        );
        env.ok(None, &["audit", "verify"]);
    });
}

#[test]
fn on_a_manual_clock_no_earlier_time_gets_past_a_revocation_or_an_expiry() {
    both(|env| {
        let at = |t: &'static str| ["--now", t];
        let w = walk(env, &["--clock", "manual"], &at(NOW));
        let later = "2026-11-30T13:00:00Z";
        let earlier = "2026-11-30T11:00:00Z";
        for g in ["g-rev", "g-alice"] {
            env.ok(
                Some(&w.ops),
                &[
                    &["grant", "revoke", g, "--reason", "rotated out"][..],
                    &at(later),
                ]
                .concat(),
            );
        }
        // The verifier acts at a time before the revocation: its result is history only.
        let out = env.run(
            Some(&w.rev),
            &[&["result", "submit", w.result.as_str()][..], &at(earlier)].concat(),
        );
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(stderr(&out).contains("not counted"), "{}", stderr(&out));
        // The human approves at an earlier time still: refused.
        let out = env.run(
            Some(&w.alice),
            &[
                &["decide", "ex-1", "--approve", "--reason", "backdated"][..],
                &w.reviewed.iter().map(String::as_str).collect::<Vec<_>>(),
                &at("2026-11-30T10:00:00Z"),
            ]
            .concat(),
        );
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("permission_denied"),
            "{}",
            stderr(&out)
        );
        // The Gate, at a time after the evidence, finds no counted review.
        let out = env.run(
            Some(&w.ops),
            &[&["gate", "run", "ex-1"][..], &at(later)].concat(),
        );
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["clock"], "manual", "{report}");
        let decision = &report["decision"];
        assert!(
            decision["reasons"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["code"] == "verifier_missing"),
            "{decision}"
        );
        // An expired grant is no grant at the store's time, whichever time the act names
        // next: a producer granted until 12:30 acts at 12:10, not at 13:00.
        let coder2 = env.ok(
            Some(&w.ops),
            &[
                &["principal", "add", "coder2", "--role", "producer"][..],
                &at(NOW),
            ]
            .concat(),
        );
        env.ok(
            Some(&w.ops),
            &[
                &[
                    "grant",
                    "add",
                    "g-coder2",
                    "--principal",
                    "coder2",
                    "--execution",
                    "ex-1",
                    "--access",
                    "write",
                    "--expires",
                    "2026-11-30T12:30:00Z",
                ][..],
                &at(NOW),
            ]
            .concat(),
        );
        let out = env.run(
            Some(&coder2),
            &[&["request", "create", "ex-1"][..], &at(later)].concat(),
        );
        assert!(
            stderr(&out).contains("permission_denied"),
            "{}",
            stderr(&out)
        );
        env.ok(
            Some(&coder2),
            &[
                &["request", "create", "ex-1"][..],
                &at("2026-11-30T12:10:00Z"),
            ]
            .concat(),
        );
        let out = env.run(
            Some(&w.ops),
            &[&["status", "ex-1"][..], &at(later)].concat(),
        );
        let status = String::from_utf8_lossy(&out.stdout);
        assert!(status.contains("store clock: manual"), "{status}");
        env.ok(None, &["audit", "verify"]);
    });
}

#[test]
fn reads_without_a_token_or_with_a_wrong_one_are_refused_and_write_only_a_denial() {
    both(|env| {
        let w = walk(env, &[], &[]);
        let out = env.run(Some(&w.ops), &["gate", "run", "ex-1"]);
        let decision: Value = serde_json::from_slice(&out.stdout).unwrap();
        let key = decision["evaluation_key"].as_str().unwrap().to_owned();
        let sha = "c".repeat(40);
        let reads: [&[&str]; 7] = [
            &["status", "ex-1"],
            &["history", "ex-1"],
            &["gate", "replay", &key],
            &["ledger"],
            &["export", "junit", "ex-1"],
            &["export", "github", "ex-1", "--head-sha", &sha],
            &["execution", "show", "ex-1"],
        ];
        for args in reads {
            for token in [None, Some("vdt_not-a-token-anyone-holds")] {
                let before = chain_length(&env.store);
                let denials = unauthenticated_denials(&env.store).len();
                let out = env.run(token, args);
                assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
                assert!(out.stdout.is_empty(), "{args:?} printed something");
                let said = stderr(&out);
                assert!(said.contains("unauthenticated"), "{args:?}: {said}");
                if token.is_none() {
                    assert!(said.contains("--token or VERDICT_TOKEN"), "{said}");
                }
                assert_eq!(chain_length(&env.store), before + 1, "{args:?}");
                assert_eq!(unauthenticated_denials(&env.store).len(), denials + 1);
            }
            // With the operator's token each reads.
            let out = env.run(Some(&w.ops), args);
            assert_ne!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        }
        env.ok(None, &["audit", "verify"]);
    });
}

#[test]
fn a_verifiers_reads_follow_its_grant_through_revocation_and_expiry() {
    both(|env| {
        let at = |t: &'static str| ["--now", t];
        let w = walk(env, &["--clock", "manual"], &at(NOW));
        let subject = json!({
            "schema": "verdict.subject/v1",
            "execution": {"id": "ex-2", "generation": 1},
            "work_items": [{"kind": "commit", "id": "repo", "version": COMMIT}],
        "producer": {"principal": "coder", "run": "run-coder"},
            "objective": {"revision": "1", "digest": DEF},
            "criteria": {"revision": "1", "items": [{"id": "tests-pass", "text": "unit tests pass"}]},
            "resources": [], "checks": [{"id": "unit-tests", "definition_digest": DEF, "criteria": ["tests-pass"]}],
            "workflow_revision": "1", "risk": {"class": "low", "revision": "1", "capabilities": []}
        });
        env.ok(
            Some(&w.ops),
            &[
                &["subject", "put", &env.file("ex2.json", &subject)][..],
                &at(NOW),
            ]
            .concat(),
        );
        // Read: no pass applies yet (exit 1). Refused: exit 2, `permission_denied`, one denial.
        let reads = |token: &str, execution: &str, now: &'static str| {
            let before = chain_length(&env.store);
            let out = env.run(
                Some(token),
                &[&["status", execution][..], &at(now)].concat(),
            );
            match out.status.code() {
                Some(1) => {
                    assert_eq!(chain_length(&env.store), before);
                    true
                }
                Some(2) => {
                    assert!(
                        stderr(&out).contains("permission_denied"),
                        "{}",
                        stderr(&out)
                    );
                    assert_eq!(chain_length(&env.store), before + 1);
                    false
                }
                other => panic!("{other:?}: {}", stderr(&out)),
            }
        };
        assert!(reads(&w.rev, "ex-1", NOW));
        assert!(!reads(&w.rev, "ex-2", NOW));
        assert!(reads(&w.ops, "ex-2", NOW));
        // A grant that expires at 12:30 reads at 12:10, not at 13:00.
        let rev2 = env.ok(
            Some(&w.ops),
            &[
                &["principal", "add", "rev2", "--role", "verifier"][..],
                &at(NOW),
            ]
            .concat(),
        );
        env.ok(
            Some(&w.ops),
            &[
                &[
                    "grant",
                    "add",
                    "g-rev2",
                    "--principal",
                    "rev2",
                    "--execution",
                    "ex-1",
                    "--access",
                    "read",
                    "--expires",
                    "2026-11-30T12:30:00Z",
                ][..],
                &at(NOW),
            ]
            .concat(),
        );
        assert!(reads(&rev2, "ex-1", "2026-11-30T12:10:00Z"));
        assert!(!reads(&rev2, "ex-1", "2026-11-30T13:00:00Z"));
        // Revoked, the verifier reads nothing, whatever earlier time it names.
        env.ok(
            Some(&w.ops),
            &[
                &["grant", "revoke", "g-rev", "--reason", "rotated out"][..],
                &at("2026-11-30T12:20:00Z"),
            ]
            .concat(),
        );
        assert!(!reads(&w.rev, "ex-1", "2026-11-30T12:20:00Z"));
        assert!(!reads(&w.rev, "ex-1", "2026-11-30T11:00:00Z"));
        env.ok(None, &["audit", "verify"]);
    });
}

/// `principal add --db-login` on PostgreSQL: the principal gets a login of its own, shown once
/// as a connection URL. Through it the producer puts its subject and moves its execution
/// (holding no operator role); with an operator's token it still cannot add a principal, and
/// as its bare login it writes nothing.
#[test]
fn a_principals_own_database_login_does_only_what_it_may() {
    let env = Env::postgres();
    let ops = env.ok(None, &["init", "--operator", "ops"]);
    let out = env.ok(
        Some(&ops),
        &[
            "principal",
            "add",
            "coder",
            "--role",
            "producer",
            "--db-login",
        ],
    );
    let mut lines = out.lines();
    let (coder, url) = (
        lines.next().unwrap().to_owned(),
        lines.next().unwrap().to_owned(),
    );
    assert!(url.starts_with("postgres") && url.contains("_p_"), "{url}");
    env.ok(
        Some(&ops),
        &[
            "grant",
            "add",
            "g-coder",
            "--principal",
            "coder",
            "--execution",
            "ex-1",
            "--access",
            "write",
            "--expires",
            "2099-01-01T00:00:00Z",
        ],
    );
    let as_coder = |token: &str, args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_verdict"))
            .args(args)
            .current_dir(env.dir.path())
            .env("VERDICT_STORE", &url)
            .env("VERDICT_HOME", env.dir.path().join("home"))
            .env("VERDICT_TOKEN", token)
            .output()
            .unwrap()
    };
    let subject = json!({
        "schema": "verdict.subject/v1",
        "execution": {"id": "ex-1", "generation": 1},
        "work_items": [{"kind": "commit", "id": "repo", "version": COMMIT}],
        "producer": {"principal": "coder", "run": "run-coder"},
        "objective": {"revision": "1", "digest": DEF},
        "criteria": {"revision": "1", "items": [{"id": "tests-pass", "text": "unit tests pass"}]},
        "resources": [], "checks": [{"id": "unit-tests", "definition_digest": DEF, "criteria": ["tests-pass"]}],
        "workflow_revision": "1", "risk": {"class": "low", "revision": "1", "capabilities": []}
    });
    let out = as_coder(
        &coder,
        &["subject", "put", &env.file("subject.json", &subject)],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let sd = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (head, author) = rt.block_on(async {
        let location = verdict_store::Location::resolve(Some(&env.store)).unwrap();
        let store = verdict_store::open(&location).await.unwrap();
        let head = store
            .pointer(verdict_store::PointerKind::Execution, "ex-1")
            .await
            .unwrap()
            .unwrap()
            .execution()
            .unwrap()
            .unwrap();
        let last = store.audit_head().await.unwrap().unwrap().seq;
        let event = store.audit_events(last - 1, 1).await.unwrap().remove(0);
        (head, (event.principal, event.role))
    });
    assert_eq!(head.subject_digest.as_str(), sd);
    assert_eq!(author, ("coder".to_owned(), "producer".to_owned()));
    // With the operator's token, through the producer's login: the database refuses.
    let length = chain_length(&env.store);
    let out = as_coder(&ops, &["principal", "add", "mallory", "--role", "operator"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("permission denied"),
        "{}",
        stderr(&out)
    );
    assert_eq!(chain_length(&env.store), length);
    // The bare login, by hand, writes nothing.
    let err = rt.block_on(async {
        use sqlx::Connection as _;
        let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
        sqlx::query(
            "SELECT * FROM verdict.put_one_subjects('ops', 'operator', 'k', 'd', '{}', NULL)",
        )
        .execute(&mut conn)
        .await
        .unwrap_err()
        .to_string()
    });
    assert!(err.contains("does not act for principal ops"), "{err}");
    assert_eq!(chain_length(&env.store), length);
    let audit = env.ok(None, &["audit", "verify"]);
    assert!(audit.contains("audit chain intact"), "{audit}");
}

/// `principal login give` and `revoke`: an operator replaces a principal's database login (the
/// URL printed once) or takes it back, and the session opened with the old one is ended; a
/// login taken back no longer connects, and given again it does. Nobody else may do either,
/// and a SQLite store says it has no logins, writing nothing.
#[test]
fn an_operator_gives_a_login_again_or_takes_it_back_and_its_old_sessions_end() {
    let env = Env::postgres();
    let ops = env.ok(None, &["init", "--operator", "ops"]);
    let out = env.ok(
        Some(&ops),
        &["principal", "add", "ci", "--role", "runner", "--db-login"],
    );
    let (ci, first) = out.split_once('\n').unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let connect = |url: &str| {
        let url = url.to_owned();
        rt.block_on(async move {
            use sqlx::Connection as _;
            sqlx::PgConnection::connect(&url).await
        })
    };
    let alive = |conn: &mut sqlx::PgConnection| {
        rt.block_on(async { sqlx::query("SELECT 1").execute(conn).await.is_ok() })
    };
    let mut leaked = connect(first).unwrap();
    assert!(alive(&mut leaked));

    let second = env.ok(Some(&ops), &["principal", "login", "give", "ci"]);
    assert!(
        second.starts_with("postgres") && second != first,
        "{second}"
    );
    assert!(
        !alive(&mut leaked),
        "a session of the old password is still open"
    );
    let mut open = connect(&second).unwrap();

    // The runner itself, and a token nobody holds: refused, the refusal recorded and nothing
    // else, the session untouched.
    for (token, code) in [
        (ci, "permission_denied"),
        ("not-a-token", "unauthenticated"),
    ] {
        for verb in ["give", "revoke"] {
            let length = chain_length(&env.store);
            let out = env.run(Some(token), &["principal", "login", verb, "ci"]);
            assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
            assert!(stderr(&out).contains(code), "{}", stderr(&out));
            assert_eq!(chain_length(&env.store), length + 1);
        }
    }
    assert!(alive(&mut open));

    let out = env.ok(Some(&ops), &["principal", "login", "revoke", "ci"]);
    assert!(out.contains("taken back"), "{out}");
    assert!(!alive(&mut open), "the session is still open");
    let refused = connect(&second).unwrap_err().to_string();
    assert!(refused.contains("not permitted to log in"), "{refused}");
    let third = env.ok(Some(&ops), &["principal", "login", "give", "ci"]);
    connect(&third).unwrap();
    let audit = env.ok(None, &["audit", "verify"]);
    assert!(audit.contains("audit chain intact"), "{audit}");

    let env = Env::sqlite();
    let ops = env.ok(None, &["init", "--operator", "ops"]);
    env.ok(Some(&ops), &["principal", "add", "ci", "--role", "runner"]);
    let length = chain_length(&env.store);
    for verb in ["give", "revoke"] {
        let out = env.run(Some(&ops), &["principal", "login", verb, "ci"]);
        assert!(!out.status.success());
        assert!(
            stderr(&out).contains("no database logins"),
            "{}",
            stderr(&out)
        );
    }
    assert_eq!(chain_length(&env.store), length);
}

/// Each principal through its own PostgreSQL login only (`principal add --db-login`): a
/// verifier admits itself and submits its result, an operator admits a verifier, and the
/// producer cancels its own execution, with no service login; the audit chain names each of
/// them, not the engine, and stays intact.
#[test]
fn own_database_logins_admit_and_submit_without_the_service_login() {
    let env = Env::postgres();
    let ops = env.ok(None, &["init", "--operator", "ops"]);
    let login = |name: &str, role: &str| {
        let out = env.ok(
            Some(&ops),
            &["principal", "add", name, "--role", role, "--db-login"],
        );
        let mut lines = out.lines();
        (
            lines.next().unwrap().to_owned(),
            lines.next().unwrap().to_owned(),
        )
    };
    let (coder, coder_url) = login("coder", "producer");
    let (ci, ci_url) = login("ci", "runner");
    let (rev, rev_url) = login("rev", "verifier");
    let (ops2, ops2_url) = login("ops2", "operator");
    for (g, p, a) in [
        ("g-coder", "coder", "write"),
        ("g-ci", "ci", "write"),
        ("g-rev", "rev", "read"),
        ("g-rev2", "rev2", "read"),
    ] {
        if p == "rev2" {
            env.ok(
                Some(&ops),
                &["principal", "add", "rev2", "--role", "verifier"],
            );
        }
        env.ok(
            Some(&ops),
            &[
                "grant",
                "add",
                g,
                "--principal",
                p,
                "--execution",
                "ex-1",
                "--access",
                a,
                "--expires",
                "2099-01-01T00:00:00Z",
            ],
        );
    }
    let policy = json!({"schema": "verdict.policy/v1", "name": "merge", "revision": 1,
                        "required_checks": ["unit-tests"], "required_verifiers": ["reviewer"]});
    env.ok(
        Some(&ops),
        &["policy", "set", &env.file("policy.json", &policy)],
    );
    let through = |url: &str, token: &str, args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_verdict"))
            .args(args)
            .current_dir(env.dir.path())
            .env("VERDICT_STORE", url)
            .env("VERDICT_HOME", env.dir.path().join("home"))
            .env("VERDICT_TOKEN", token)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    let subject = json!({
        "schema": "verdict.subject/v1",
        "execution": {"id": "ex-1", "generation": 1},
        "work_items": [{"kind": "commit", "id": "repo", "version": COMMIT}],
        "producer": {"principal": "coder", "run": "run-coder"},
        "objective": {"revision": "1", "digest": DEF},
        "criteria": {"revision": "1", "items": [{"id": "tests-pass", "text": "unit tests pass"}]},
        "resources": [], "checks": [{"id": "unit-tests", "definition_digest": DEF, "criteria": ["tests-pass"]}],
        "workflow_revision": "1", "risk": {"class": "low", "revision": "1", "capabilities": []}
    });
    let sd = through(
        &coder_url,
        &coder,
        &["subject", "put", &env.file("subject.json", &subject)],
    );
    let ev = json!({"id": "ev-1", "kind": "check", "check": "unit-tests", "subject_digest": sd,
                    "definition_digest": DEF, "produced_by": {"principal": "ci", "role": "runner"},
                    "outcome": "pass", "content_digest": DEF, "observed_at": "2026-11-30T11:59:00Z",
                    "freshness": {"kind": "content"}});
    through(
        &ci_url,
        &ci,
        &["evidence", "add", &env.file("ev.json", &json!([ev]))],
    );
    let req = through(&coder_url, &coder, &["request", "create", "ex-1"]);
    let admit = |verifier: &str, run: &str| {
        vec![
            "run".to_owned(),
            "admit".to_owned(),
            req.clone(),
            "--verifier".to_owned(),
            verifier.to_owned(),
            "--class".to_owned(),
            "reviewer".to_owned(),
            "--run".to_owned(),
            run.to_owned(),
        ]
    };
    let args = admit("rev", "run-1");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let admitted = through(&rev_url, &rev, &args);
    assert!(admitted.starts_with("admitted run-1"), "{admitted}");
    let args = admit("rev2", "run-2");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let admitted = through(&ops2_url, &ops2, &args);
    assert!(admitted.starts_with("admitted run-2"), "{admitted}");
    let result = json!({"id": "vr-1", "verifier": {"principal": "rev", "class": "reviewer", "run": "run-1"},
                        "subject_digest": sd, "generation": 1, "status": "completed",
                        "criteria": [{"id": "tests-pass", "status": "passed", "method": "review", "evidence_refs": ["ev-1"]}],
                        "findings": [], "dispositions": []});
    through(
        &rev_url,
        &rev,
        &["result", "submit", &env.file("result.json", &result)],
    );
    let writers = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let location = verdict_store::Location::resolve(Some(&env.store)).unwrap();
            let store = verdict_store::open(&location).await.unwrap();
            store
                .audit_events(0, 10_000)
                .await
                .unwrap()
                .into_iter()
                .filter(|e| e.table == "verifier_runs")
                .map(|e| (e.key, e.principal, e.role))
                .collect::<Vec<_>>()
        });
    let own = |k: &str, p: &str, r: &str| (k.to_owned(), p.to_owned(), r.to_owned());
    assert_eq!(
        writers,
        vec![
            own("run-1", "rev", "verifier"),
            own("run-2", "ops2", "operator")
        ]
    );
    // The gate writes as its own identity, so it runs through the service login.
    let decision: Value =
        serde_json::from_str(&env.ok(Some(&ci), &["gate", "run", "ex-1"])).unwrap();
    assert_eq!(decision["outcome"], "pass");
    // The producer cancels its own execution through its own login; the runs still open end
    // with it, and all are the producer's own acts on the audit chain.
    let args = admit("rev", "run-3");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    through(&rev_url, &rev, &args);
    let cancelled = through(
        &coder_url,
        &coder,
        &["execution", "cancel", "ex-1", "--reason", "withdrawn"],
    );
    assert!(cancelled.contains("withdrawn"), "{cancelled}");
    let (status, last) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let location = verdict_store::Location::resolve(Some(&env.store)).unwrap();
            let store = verdict_store::open(&location).await.unwrap();
            let status = store.run("run-3").await.unwrap().unwrap().status();
            let head = store.audit_head().await.unwrap().unwrap().seq;
            let last = store
                .audit_events(head - 3, 3)
                .await
                .unwrap()
                .into_iter()
                .map(|e| (e.table, e.principal, e.role))
                .collect::<Vec<_>>();
            (status, last)
        });
    assert_eq!(status, Some(verdict_store::RunStatus::Cancelled));
    let producer = |t: &str| (t.to_owned(), "coder".to_owned(), "producer".to_owned());
    assert_eq!(
        last,
        // The record, then the ends of the two runs still open (run-2 and run-3).
        vec![
            producer("verification_requests"),
            producer("run_events"),
            producer("run_events")
        ]
    );
    // The cancelled execution takes no new request.
    let out = Command::new(env!("CARGO_BIN_EXE_verdict"))
        .args(["request", "create", "ex-1"])
        .current_dir(env.dir.path())
        .env("VERDICT_STORE", &coder_url)
        .env("VERDICT_HOME", env.dir.path().join("home"))
        .env("VERDICT_TOKEN", &coder)
        .output()
        .unwrap();
    assert!(!out.status.success());
    // A refusal met through the producer's own login, which cannot act as the system identity,
    // is recorded all the same: one denial, naming the producer, and nothing else.
    let head = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async {
                let location = verdict_store::Location::resolve(Some(&env.store)).unwrap();
                let store = verdict_store::open(&location).await.unwrap();
                let seq = store.audit_head().await.unwrap().unwrap().seq;
                let last = store.denials(0, 10_000).await.unwrap().pop();
                (seq, last.map(|d| d.value().unwrap()))
            })
    };
    let (before, _) = head();
    let out = Command::new(env!("CARGO_BIN_EXE_verdict"))
        .args([
            "grant",
            "add",
            "g-self",
            "--principal",
            "coder",
            "--execution",
            "ex-2",
            "--access",
            "write",
            "--expires",
            "2099-01-01T00:00:00Z",
        ])
        .current_dir(env.dir.path())
        .env("VERDICT_STORE", &coder_url)
        .env("VERDICT_HOME", env.dir.path().join("home"))
        .env("VERDICT_TOKEN", &coder)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("permission_denied") && !err.contains("recording the denial failed"),
        "{err}"
    );
    let (after, last) = head();
    assert_eq!(after, before + 1);
    let last = last.unwrap();
    assert_eq!(last["principal"], "coder");
    assert_eq!(last["role"], "producer");
    let audit = env.ok(None, &["audit", "verify"]);
    assert!(audit.contains("audit chain intact"), "{audit}");
}

#[test]
fn a_manual_clock_store_names_its_clock_in_decisions_exports_and_attestations() {
    both(|env| {
        let at = ["--now", NOW];
        let w = walk(env, &["--clock", "manual"], &at);
        env.ok(
            Some(&w.rev),
            &[&["result", "submit", w.result.as_str()][..], &at].concat(),
        );
        // The gate run's JSON is its report: the clock beside the decision, never a bare
        // decision whose time was chosen by the caller.
        let report: Value = serde_json::from_str(
            &env.ok(Some(&w.ops), &[&["gate", "run", "ex-1"][..], &at].concat()),
        )
        .unwrap();
        assert_eq!(report["clock"], "manual", "{report}");
        assert_eq!(report["decision"]["outcome"], "pass", "{report}");
        assert!(report.get("outcome").is_none(), "{report}");
        let key = report["decision"]["evaluation_key"]
            .as_str()
            .unwrap()
            .to_owned();
        let text = env.ok(
            Some(&w.ops),
            &[&["gate", "run", "ex-1", "--format", "text"][..], &at].concat(),
        );
        assert!(text.starts_with("clock     manual"), "{text}");

        let xml = env.ok(
            Some(&w.ops),
            &[&["export", "junit", "ex-1"][..], &at].concat(),
        );
        assert!(
            xml.contains("<property name=\"clock\" value=\"manual\"/>"),
            "{xml}"
        );
        let gh: Value = serde_json::from_str(&env.ok(
            Some(&w.ops),
            &[&["export", "github", "ex-1", "--head-sha", COMMIT][..], &at].concat(),
        ))
        .unwrap();
        assert_eq!(gh["clock"], "manual", "{gh}");
        assert!(
            gh["check_run"]["output"]["title"]
                .as_str()
                .unwrap()
                .contains("manual clock"),
            "{gh}"
        );

        // The attestation names the clock; verify refuses it unless told a manual clock is
        // acceptable.
        let (k, p) = (
            env.dir.path().join("a.key").display().to_string(),
            env.dir.path().join("a.pub").display().to_string(),
        );
        env.ok(None, &["key", "generate", "--out", &k, "--public-out", &p]);
        let file = env.dir.path().join("a.jsonl").display().to_string();
        env.ok(
            Some(&w.ops),
            &[&["attest", &key, "--key", &k, "--out", &file][..], &at].concat(),
        );
        let out = env.run(None, &["attest", "verify", &file, "--key", &p]);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.contains("manual clock"), "{said}");
        assert!(!said.starts_with("valid"), "{said}");
        let out = env.run(
            None,
            &[
                "attest",
                "verify",
                &file,
                "--key",
                &p,
                "--allow-manual-clock",
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.starts_with("valid: PASSED (pass)"), "{said}");
        assert!(said.contains("on a manual clock"), "{said}");
    });
}

#[test]
fn a_token_file_stands_for_the_token_and_an_empty_one_is_refused() {
    both(|env| {
        let ops = env.ok(None, &["init", "--operator", "ops"]);
        let file = env.dir.path().join("token");
        std::fs::write(&file, format!("{ops}\n")).unwrap();
        let empty = env.dir.path().join("empty");
        std::fs::write(&empty, "\n").unwrap();
        let (file, empty) = (file.display().to_string(), empty.display().to_string());
        let out = env.ok(
            None,
            &[
                "principal",
                "add",
                "coder",
                "--role",
                "producer",
                "--token-file",
                &file,
            ],
        );
        assert!(out.starts_with("vdt_"), "{out}");
        let out = env.run(
            None,
            &[
                "principal",
                "add",
                "c2",
                "--role",
                "producer",
                "--token-file",
                &empty,
            ],
        );
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("holds no token"), "{err}");
        // Refused before anything is recorded: only `coder` was added.
        let list = env.ok(Some(&ops), &["principal", "list"]);
        assert!(list.contains("coder") && !list.contains("c2"), "{list}");
    });
}

/// The only operator revokes its own token: refused as a conflict naming it, nothing written,
/// and it still acts as an operator. With a second operator, the first may go, and then the
/// second is the last.
#[test]
fn the_last_operator_cannot_revoke_its_own_token() {
    both(|env| {
        let ops = env.ok(None, &["init", "--operator", "ops"]);
        let before = chain_length(&env.store);
        let out = env.run(Some(&ops), &["principal", "token", "revoke", "ops"]);
        assert!(!out.status.success(), "{}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("\"ops\" would leave no operator holding a token"),
            "{err}"
        );
        assert_eq!(chain_length(&env.store), before);
        env.ok(Some(&ops), &["principal", "list"]);
        let second = env.ok(
            Some(&ops),
            &["principal", "add", "ops2", "--role", "operator"],
        );
        env.ok(Some(&second), &["principal", "token", "revoke", "ops"]);
        let out = env.run(Some(&second), &["principal", "token", "revoke", "ops2"]);
        assert!(!out.status.success(), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("\"ops2\" would leave no operator holding a token"),
            "{}",
            stderr(&out)
        );
        env.ok(Some(&second), &["principal", "list"]);
        env.ok(None, &["audit", "verify"]);
    });
}

#[test]
fn a_revoked_token_is_refused_by_the_next_command_and_a_rotated_one_replaces_it() {
    both(|env| {
        let w = walk(env, &[], &[]);
        let status = ["principal", "show", "rev"];
        env.ok(Some(&w.rev), &status);
        // Only an operator revokes, and the refusal writes only its denial.
        let before = chain_length(&env.store);
        let out = env.run(Some(&w.alice), &["principal", "token", "revoke", "rev"]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("permission_denied"),
            "{}",
            stderr(&out)
        );
        assert_eq!(chain_length(&env.store), before + 1);
        env.ok(Some(&w.rev), &status);

        let said = env.ok(
            Some(&w.ops),
            &[
                "principal",
                "token",
                "revoke",
                "rev",
                "--reason",
                "laptop lost",
            ],
        );
        assert_eq!(said, "revoked the token of rev");
        let out = env.run(Some(&w.rev), &status);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains("unauthenticated"), "{}", stderr(&out));

        // An operator gives it a new one, shown once; the principal then replaces its own.
        let fresh = env.ok(Some(&w.ops), &["principal", "token", "rotate", "rev"]);
        assert!(fresh.starts_with("vdt_"), "{fresh}");
        env.ok(Some(&fresh), &status);
        let own = env.ok(Some(&fresh), &["principal", "token", "rotate", "rev"]);
        env.ok(Some(&own), &status);
        for old in [&w.rev, &fresh] {
            let out = env.run(Some(old), &status);
            assert!(stderr(&out).contains("unauthenticated"), "{}", stderr(&out));
        }
        env.ok(None, &["audit", "verify"]);
    });
}
