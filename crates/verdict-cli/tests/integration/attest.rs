//! `verdict key`, `verdict attest`, `verdict export` and `verdict ledger` run as the built
//! binary over a store the quickstart filled, on SQLite and on PostgreSQL.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output};

struct Env {
    store: String,
    dir: tempfile::TempDir,
    _pg: Option<verdict_store::scratch::ScratchPostgres>,
}

impl Env {
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
        String::from_utf8(out.stdout).unwrap()
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }
}

fn both(body: impl Fn(&Env)) {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("store/verdict.db").display());
    body(&Env {
        store,
        dir,
        _pg: None,
    });
    let pg = verdict_store::scratch::ScratchPostgres::create_migrated("cli").unwrap();
    body(&Env {
        store: pg.url().to_owned(),
        dir: tempfile::tempdir().unwrap(),
        _pg: Some(pg),
    });
}

#[test]
fn keys_attestations_exports_and_the_ledger_through_the_binary() {
    both(|env| {
        // The quickstart initialises the empty store and shows its operator's token once; a
        // second `init` would be refused.
        let first = env.ok(None, &["quickstart"]);
        let ops = first
            .lines()
            .find(|l| l.starts_with("vdt_"))
            .unwrap()
            .trim()
            .to_owned();
        let status: Value = serde_json::from_str(&env.ok(
            Some(&ops),
            &["status", "quickstart-1", "--gate", "quickstart", "--json"],
        ))
        .unwrap();
        let key = status["applicable"]["decision"]["evaluation_key"]
            .as_str()
            .unwrap()
            .to_owned();

        // Keys: a private file only its owner can read, never overwritten; the public key
        // printed and exported the same.
        let (k1, p1) = (env.path("k1.key"), env.path("k1.pub"));
        let public = env.ok(
            None,
            &["key", "generate", "--out", &k1, "--public-out", &p1],
        );
        assert_eq!(public.trim().len(), 64);
        assert_eq!(std::fs::read_to_string(&p1).unwrap(), public);
        assert_eq!(env.ok(None, &["key", "export", "--key", &k1]), public);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&k1).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let again = env.run(None, &["key", "generate", "--out", &k1]);
        assert_eq!(again.status.code(), Some(2));
        assert_eq!(env.ok(None, &["key", "export", "--key", &k1]), public);

        // Attest, then verify without the database.
        let a = env.path("a.intoto.jsonl");
        let args = [
            "attest",
            &key,
            "--key",
            &k1,
            "--out",
            &a,
            "--gate",
            "quickstart",
        ];
        let unauth = env.run(None, &args);
        assert_eq!(unauth.status.code(), Some(2));
        assert!(!PathBuf::from(&a).exists());
        env.ok(Some(&ops), &args);
        let verified = env.ok(None, &["attest", "verify", &a, "--key", &p1]);
        assert!(verified.starts_with("valid: PASSED (pass)"), "{verified}");
        assert!(verified.contains("reproduces the decision"), "{verified}");
        assert!(verified.contains("on a system clock"), "{verified}");
        // The quickstart's probes are time-sensitive: the pass has a valid_until, printed,
        // and at or past it the same file is verified but expired (exit 1).
        let until = verified
            .split("valid_until ")
            .nth(1)
            .and_then(|rest| rest.split(';').next())
            .unwrap()
            .to_owned();
        assert!(until.ends_with('Z'), "{verified}");
        let out = env.run(
            None,
            &["attest", "verify", &a, "--key", &p1, "--at", &until],
        );
        assert_eq!(out.status.code(), Some(1));
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.contains("expired"), "{said}");
        assert!(!said.starts_with("valid"), "{said}");
        let judged: Value =
            serde_json::from_str(&env.ok(None, &["attest", "verify", &a, "--key", &p1, "--json"]))
                .unwrap();
        assert_eq!(judged["valid_until"], until.as_str());
        assert_eq!(judged["refusals"], serde_json::json!([]));
        // The file names its gate and policy, and a relying party pins them: a pass of the
        // quickstart gate is no pass for another gate, policy or subject (exit 1).
        assert_eq!(judged["gate"], "quickstart");
        let policy = judged["policy_digest"].as_str().unwrap().to_owned();
        let subject = judged["subject_digest"].as_str().unwrap().to_owned();
        assert!(verified.contains("gate \"quickstart\""), "{verified}");
        env.ok(
            None,
            &[
                "attest",
                "verify",
                &a,
                "--key",
                &p1,
                "--gate",
                "quickstart",
                "--policy",
                &policy,
                "--subject",
                &subject,
            ],
        );
        let other = format!("sha256:{}", "0".repeat(64));
        for (flag, value) in [
            ("--gate", "merge"),
            ("--policy", &other),
            ("--subject", &other),
        ] {
            let out = env.run(None, &["attest", "verify", &a, "--key", &p1, flag, value]);
            assert_eq!(out.status.code(), Some(1), "{flag}");
            let said = String::from_utf8_lossy(&out.stdout);
            assert!(said.contains("not the pinned"), "{flag}: {said}");
        }

        // A decision that is not a pass verifies, and exits 1 saying so.
        let history: Value = serde_json::from_str(&env.ok(
            Some(&ops),
            &["history", "quickstart-1", "--gate", "quickstart", "--json"],
        ))
        .unwrap();
        let rework = history["decisions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["decision"]["outcome"] != "pass")
            .unwrap()["decision"]["evaluation_key"]
            .as_str()
            .unwrap()
            .to_owned();
        let f = env.path("f.intoto.jsonl");
        env.ok(
            Some(&ops),
            &[
                "attest",
                &rework,
                "--key",
                &k1,
                "--out",
                &f,
                "--gate",
                "quickstart",
            ],
        );
        let out = env.run(None, &["attest", "verify", &f, "--key", &p1]);
        assert_eq!(out.status.code(), Some(1));
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.contains("FAILED"), "{said}");
        assert!(said.contains("not pass"), "{said}");

        // A flipped byte in the signed payload.
        let text = std::fs::read_to_string(&a).unwrap();
        let mut env0: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        let payload = env0["payload"].as_str().unwrap().to_owned();
        let flipped = if payload.starts_with('e') { "f" } else { "e" };
        env0["payload"] = format!("{flipped}{}", &payload[1..]).into();
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        lines[0] = env0.to_string();
        let bad = env.path("bad.jsonl");
        std::fs::write(&bad, lines.join("\n")).unwrap();
        let out = env.run(None, &["attest", "verify", &bad, "--key", &p1]);
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stdout).starts_with("unverifiable: "));

        // Rotation: the old file checks with the old key among the trusted ones only.
        let (k2, p2) = (env.path("k2.key"), env.path("k2.pub"));
        env.ok(
            None,
            &["key", "generate", "--out", &k2, "--public-out", &p2],
        );
        let b = env.path("b.intoto.jsonl");
        env.ok(
            Some(&ops),
            &[
                "attest",
                &key,
                "--key",
                &k2,
                "--out",
                &b,
                "--gate",
                "quickstart",
            ],
        );
        let out = env.run(None, &["attest", "verify", &a, "--key", &p2]);
        assert_eq!(out.status.code(), Some(2));
        env.ok(None, &["attest", "verify", &a, "--key", &p2, "--key", &p1]);
        env.ok(None, &["attest", "verify", &b, "--key", &p2, "--key", &p1]);

        // Exports for others' tools.
        let junit = env.path("junit.xml");
        env.ok(
            Some(&ops),
            &[
                "export",
                "junit",
                "quickstart-1",
                "--gate",
                "quickstart",
                "--out",
                &junit,
            ],
        );
        let xml = std::fs::read_to_string(&junit).unwrap();
        assert!(xml.contains("<testsuites name=\"verdict\""), "{xml}");
        assert!(xml.contains("failures=\"0\" errors=\"0\""), "{xml}");
        let gh = env.path("github.json");
        env.ok(
            Some(&ops),
            &[
                "export",
                "github",
                "quickstart-1",
                "--gate",
                "quickstart",
                "--head-sha",
                &"c".repeat(40),
                "--out",
                &gh,
            ],
        );
        // The quickstart's subject names no such commit: no success is posted on it.
        let p: Value = serde_json::from_slice(&std::fs::read(&gh).unwrap()).unwrap();
        assert_eq!(p["check_run"]["conclusion"], "failure", "{p}");
        assert_eq!(p["commit_status"]["state"], "failure", "{p}");
        // It names its change by the SHA-256 of the bytes, which a 64-digit commit name may be.
        let named = verdict_core::digest::raw(b"greet: v2 escapes the name");
        let sha = named.as_str().strip_prefix("sha256:").unwrap();
        env.ok(
            Some(&ops),
            &[
                "export",
                "github",
                "quickstart-1",
                "--gate",
                "quickstart",
                "--head-sha",
                sha,
                "--out",
                &gh,
            ],
        );
        let p: Value = serde_json::from_slice(&std::fs::read(&gh).unwrap()).unwrap();
        assert_eq!(p["check_run"]["conclusion"], "success", "{p}");
        assert_eq!(p["commit_status"]["state"], "success", "{p}");
        let out = env.run(
            Some(&ops),
            &[
                "export",
                "github",
                "quickstart-1",
                "--gate",
                "quickstart",
                "--head-sha",
                "main",
            ],
        );
        assert_eq!(out.status.code(), Some(2));

        // The ledger: one attempt, a verified pass, in every format.
        let svg = env.path("svg");
        let json: Value = serde_json::from_str(&env.ok(
            Some(&ops),
            &[
                "ledger",
                "--gate",
                "quickstart",
                "--format",
                "json",
                "--min-sample",
                "1",
                "--svg-dir",
                &svg,
            ],
        ))
        .unwrap();
        let cohorts = json["cohorts"].as_array().unwrap();
        assert_eq!(cohorts.len(), 1, "{json}");
        assert_eq!(cohorts[0]["attempts"], 1);
        assert_eq!(cohorts[0]["verified_passes"], 1);
        let chart = std::fs::read_to_string(PathBuf::from(&svg).join("cohort-001.svg")).unwrap();
        assert!(chart.starts_with("<svg"));
        let csv = env.ok(
            Some(&ops),
            &[
                "ledger",
                "--gate",
                "quickstart",
                "--format",
                "csv",
                "--min-sample",
                "5",
            ],
        );
        assert_eq!(csv.lines().count(), 2, "{csv}");
        assert!(
            csv.lines()
                .nth(1)
                .unwrap()
                .contains("insufficient_evidence")
        );
        let table = env.ok(Some(&ops), &["ledger", "--gate", "quickstart"]);
        assert!(table.contains("insufficient_evidence"), "{table}");
        // A gate no policy was ever set for does not exist; the ledger says so rather than
        // counting every attempt as unverified under it.
        let none = env.run(Some(&ops), &["ledger"]);
        assert_eq!(none.status.code(), Some(2));
        assert!(
            String::from_utf8_lossy(&none.stderr).contains("gate \"default\" does not exist"),
            "{}",
            String::from_utf8_lossy(&none.stderr)
        );
    });
}

#[test]
fn every_new_command_shows_an_example() {
    for args in [
        &["key", "generate"][..],
        &["key", "export"],
        &["attest"],
        &["export", "junit"],
        &["export", "github"],
        &["ledger"],
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
