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
        let pg = verdict_store::scratch::ScratchPostgres::create("cli").unwrap();
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
const DEF: &str = "sha256:ec4556a178527361344d876629bb9533c63fc8fcd216f423dd8bce76787fce86";

#[test]
fn quickstart_twice_then_status_history_and_audit() {
    both(|env| {
        let first = env.ok(None, &["quickstart"]);
        assert!(
            first.contains("gate: rework") && first.contains("\nfinal decision: pass\n"),
            "{first}"
        );
        let second = env.ok(None, &["quickstart"]);
        assert!(second.contains("quickstart-2"), "{second}");
        let status = env.ok(None, &["status", "quickstart-1", "--gate", "quickstart"]);
        assert!(status.starts_with("quickstart-1: pass applies"), "{status}");
        let history: Value = serde_json::from_str(&env.ok(
            None,
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
                None,
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
/// PATH, in the quickstart's directory and environment.
fn run_as_printed(env: &Env, commands: &[String], store_in_env: bool) -> Vec<String> {
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
        let outputs = run_as_printed(env, &commands, true);
        assert!(
            outputs[0].starts_with("quickstart-1: pass applies"),
            "{outputs:?}"
        );
        assert!(outputs[1].contains("applies"), "{outputs:?}");
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
    let outputs = run_as_printed(&env, &commands, false);
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
                    "2027-01-01T00:00:00Z",
                    "--now",
                    NOW,
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
            "work_items": [], "producer": {"principal": "coder", "run": "run-coder"},
            "objective": {"revision": "1", "digest": DEF},
            "criteria": {"revision": "1", "items": [{"id": "tests-pass", "text": "unit tests pass"}]},
            "resources": [], "checks": [{"id": "unit-tests", "definition_digest": DEF, "criteria": ["tests-pass"]}],
            "workflow_revision": "1", "risk": {"class": "low", "revision": "1", "capabilities": []}
        });
        let sd = env.ok(
            Some(&coder),
            &[
                "subject",
                "put",
                &env.file("subject.json", &subject),
                "--now",
                NOW,
            ],
        );
        let ev = json!({"id": "ev-1", "kind": "check", "check": "unit-tests", "subject_digest": sd,
                        "definition_digest": DEF, "produced_by": {"principal": "ci", "role": "runner"},
                        "outcome": "pass", "content_digest": DEF, "observed_at": "2026-11-30T11:59:00Z",
                        "freshness": {"kind": "content"}});
        env.ok(
            Some(&ci),
            &[
                "evidence",
                "add",
                &env.file("ev.json", &json!([ev])),
                "--now",
                NOW,
            ],
        );
        let req = env.ok(Some(&coder), &["request", "create", "ex-1", "--now", NOW]);
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
                "--now",
                NOW,
            ],
        );
        assert!(admitted.starts_with("admitted run-1"), "{admitted}");
        let result = json!({"id": "vr-1", "verifier": {"principal": "rev", "class": "reviewer", "run": "run-1"},
                            "subject_digest": sd, "generation": 1, "status": "completed",
                            "criteria": [{"id": "tests-pass", "status": "passed", "method": "review", "evidence_refs": ["ev-1"]}],
                            "findings": [], "dispositions": []});
        let rf = env.file("result.json", &result);
        // The producer's token cannot submit it; no token at all is refused too.
        let out = env.run(Some(&coder), &["result", "submit", &rf, "--now", NOW]);
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("self_verification_denied"));
        assert!(
            String::from_utf8_lossy(&env.run(None, &["result", "submit", &rf]).stderr)
                .contains("unauthenticated")
        );
        // A wrong token is refused too, and both attempts are on record without the token.
        let wrong = format!("vdt_{}", "ab".repeat(32));
        let out = env.run(Some(&wrong), &["result", "submit", &rf, "--now", NOW]);
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
        env.ok(Some(&rev), &["result", "submit", &rf, "--now", NOW]);
        let decision: Value =
            serde_json::from_str(&env.ok(Some(&ci), &["gate", "run", "ex-1", "--now", NOW]))
                .unwrap();
        assert_eq!(decision["outcome"], "pass");
        let replay = env.ok(
            None,
            &[
                "gate",
                "replay",
                decision["evaluation_key"].as_str().unwrap(),
            ],
        );
        assert_eq!(serde_json::from_str::<Value>(&replay).unwrap(), decision);
        assert!(
            env.ok(None, &["status", "ex-1", "--now", NOW])
                .starts_with("ex-1: pass applies")
        );
        // A new policy revision: the pass stays stored but no longer applies.
        let mut p2 = policy.clone();
        p2["revision"] = json!(2);
        env.ok(
            Some(&ops),
            &["policy", "set", &env.file("policy2.json", &p2)],
        );
        let out = env.run(None, &["status", "ex-1", "--now", NOW]);
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
