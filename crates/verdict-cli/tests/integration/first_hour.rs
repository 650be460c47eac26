//! What a new user meets in the first hour, each tried as the built binary: help that names
//! only files that exist and no environment noise, a closed standard output, a gate that does
//! not exist, arguments a command would otherwise ignore, and the store's role prefix.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::root;
use std::collections::BTreeSet;
use std::process::{Command, Output, Stdio};

fn verdict_in(store: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_verdict"));
    cmd.current_dir(root())
        .env("VERDICT_STORE", store)
        .env_remove("VERDICT_TOKEN")
        .env_remove("VERDICT_PRINCIPAL");
    cmd
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `verdict ARGS --help`, with no verdict variable set.
fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_verdict"))
        .args(args)
        .arg("--help")
        .current_dir(root())
        .env_remove("VERDICT_STORE")
        .env_remove("VERDICT_TOKEN")
        .env_remove("VERDICT_PRINCIPAL")
        .env_remove("VERDICT_HOME")
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {}", text(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// The subcommands a help text lists.
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_owned)
        .collect()
}

/// Every command path, from the top: `[]`, `["gate"]`, `["gate", "evaluate"]`, ...
fn every_command() -> Vec<(Vec<String>, String)> {
    let mut done = Vec::new();
    let mut todo = vec![Vec::<String>::new()];
    while let Some(path) = todo.pop() {
        let args: Vec<&str> = path.iter().map(String::as_str).collect();
        let h = help(&args);
        for sub in subcommands(&h) {
            let mut next = path.clone();
            next.push(sub);
            todo.push(next);
        }
        done.push((path, h));
    }
    done
}

#[test]
fn help_names_only_files_that_exist_and_no_unset_variable() {
    let all = every_command();
    assert!(all.len() > 20, "found only {} commands", all.len());
    let mut named = BTreeSet::new();
    for (path, h) in &all {
        assert!(
            !h.contains("=]"),
            "{path:?} shows an unset variable's empty value:\n{h}"
        );
        for word in h.split(|c: char| c.is_whitespace() || "'\"()`,".contains(c)) {
            if let Some(at) = word.find("examples/") {
                named.insert((
                    path.clone(),
                    word[at..].trim_end_matches(['.', ':']).to_owned(),
                ));
            }
        }
    }
    assert!(
        named.iter().any(|(p, _)| p == &["check".to_owned()]),
        "verdict check --help names no example"
    );
    for (path, file) in named {
        assert!(
            root().join(&file).exists(),
            "{path:?} names {file}, which does not exist"
        );
    }
    let top = help(&[]);
    assert!(!top.contains("other crates"), "{top}");
    assert!(top.contains("Gate"), "{top}");
}

/// A reader that goes away before the output is written: the command says so on standard
/// error and exits 2; it never panics (exit 101).
fn closed_stdout(cmd: &mut Command) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    child.wait_with_output().unwrap()
}

#[test]
fn a_closed_standard_output_ends_every_command_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("verdict.db").display());
    let out = verdict_in(&store).arg("quickstart").output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    // Running the quickstart again on the store it initialised takes its operator's token.
    let ops = String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.starts_with("vdt_"))
        .unwrap()
        .to_owned();
    let commands: &[&[&str]] = &[
        &["schema", "bundle"],
        &[
            "status",
            "quickstart-1",
            "--gate",
            "quickstart",
            "--json",
            "--token",
            &ops,
        ],
        &[
            "status",
            "quickstart-1",
            "--gate",
            "quickstart",
            "--token",
            &ops,
        ],
        &[
            "history",
            "quickstart-1",
            "--gate",
            "quickstart",
            "--json",
            "--token",
            &ops,
        ],
        &[
            "history",
            "quickstart-1",
            "--gate",
            "quickstart",
            "--token",
            &ops,
        ],
        &["gate", "evaluate", "examples/rework/bundle.json"],
        &[
            "gate",
            "evaluate",
            "--format",
            "text",
            "examples/rework/bundle.json",
        ],
        &[
            "digest",
            "--kind",
            "subject",
            "examples/merge-gate/subject.json",
        ],
        &[
            "check",
            "examples/checks/web/web.yaml",
            "--print-definitions",
        ],
        &["audit", "verify"],
        &["audit", "verify", "--json"],
        &["quickstart", "--token", ops.as_str()],
        &["store", "migrate"],
        &["--help"],
    ];
    for args in commands {
        let out = closed_stdout(verdict_in(&store).args(*args));
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(!said.contains("panicked"), "{args:?}: {said}");
        assert_ne!(out.status.code(), Some(101), "{args:?}: {said}");
        if args != &["--help"] {
            assert_eq!(out.status.code(), Some(2), "{args:?}: {said}");
            assert!(said.contains("standard output"), "{args:?}: {said}");
        }
    }
}

#[test]
fn status_of_a_gate_that_does_not_exist_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("verdict.db").display());
    let out = verdict_in(&store).arg("quickstart").output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let ops = String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.starts_with("vdt_"))
        .unwrap()
        .to_owned();
    for cmd in ["status", "history"] {
        let out = verdict_in(&store)
            .args([cmd, "quickstart-1", "--gate", "merge", "--token", &ops])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{cmd}: {}", text(&out));
        let said = text(&out);
        assert!(
            said.contains("gate \"merge\" does not exist"),
            "{cmd}: {said}"
        );
        assert!(!said.contains("policy_revision_moved"), "{cmd}: {said}");
    }
}

#[test]
fn quickstart_refuses_the_options_it_would_ignore() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("verdict.db").display());
    for extra in [["--gate", "mine"], ["--now", "2026-11-30T12:00:00Z"]] {
        let out = verdict_in(&store)
            .arg("quickstart")
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {}", text(&out));
        assert!(text(&out).contains(extra[0]), "{extra:?}: {}", text(&out));
    }
    assert!(
        !dir.path().join("verdict.db").exists(),
        "a refused quickstart created the store"
    );
}

#[test]
fn subject_new_refuses_the_store_options_it_would_ignore_without_put() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("verdict.db").display());
    let objective = dir.path().join("objective.md");
    std::fs::write(&objective, "say hello").unwrap();
    let objective = objective.display().to_string();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "vdt_x\n").unwrap();
    let token_file = token_file.display().to_string();
    let new = [
        "subject",
        "new",
        "--execution",
        "ex-1",
        "--producer",
        "coder",
        "--producer-run",
        "r1",
        "--objective",
        &objective,
        "--criterion",
        "greets=it says hello",
    ];
    for extra in [
        ["--now", "2030-01-01T00:00:00Z"],
        ["--store", &store],
        ["--token", "vdt_x"],
        ["--token-file", &token_file],
    ] {
        let out = verdict_in(&store).args(new).args(extra).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {}", text(&out));
        assert!(out.stdout.is_empty(), "{extra:?}: {}", text(&out));
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            said.contains(&format!("{} is used only with --put", extra[0])),
            "{extra:?}: {said}"
        );
    }
    // From the environment they are left alone, since a shell sets them for every command;
    // the subject is printed and no store opened.
    let out = verdict_in(&store)
        .env("VERDICT_TOKEN", "vdt_x")
        .args(new)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let subject: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(subject["execution"]["id"], "ex-1");
    assert!(
        !dir.path().join("verdict.db").exists(),
        "a subject printed opened the store"
    );
}

#[test]
fn decide_without_a_verdict_names_both_flags() {
    let out = Command::new(env!("CARGO_BIN_EXE_verdict"))
        .args(["decide", "ex-1", "--reason", "looked at it"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let said = text(&out);
    assert!(
        said.contains("--approve") && said.contains("--reject"),
        "{said}"
    );
    let both = Command::new(env!("CARGO_BIN_EXE_verdict"))
        .args(["decide", "ex-1", "--approve", "--reject", "--reason", "x"])
        .output()
        .unwrap();
    assert_eq!(both.status.code(), Some(2), "{}", text(&both));
}

/// `init` on PostgreSQL names the role prefix it used; `store migrate` with that prefix works,
/// and with another one explains that a database keeps its prefix.
#[test]
fn the_role_prefix_is_said_and_a_later_migrate_explains_it() {
    let pg = verdict_store::scratch::ScratchPostgres::create("firsthour").unwrap();
    let prefix = pg.role_prefix();
    let out = verdict_in(pg.url())
        .args(["store", "migrate", "--role-prefix", &prefix])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains(&prefix), "{}", text(&out));
    let out = verdict_in(pg.url()).arg("init").output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("role prefix {prefix:?}")),
        "{}",
        text(&out)
    );
    let again = verdict_in(pg.url())
        .args(["store", "migrate", "--role-prefix", &prefix])
        .output()
        .unwrap();
    assert!(again.status.success(), "{}", text(&again));
    let other = verdict_in(pg.url())
        .args(["store", "migrate", "--role-prefix", "elsewhere_"])
        .output()
        .unwrap();
    assert_eq!(other.status.code(), Some(2));
    let said = text(&other);
    assert!(
        said.contains(&format!("role prefix {prefix:?}")) && said.contains("keeps"),
        "{said}"
    );
}

/// One shell command per entry: continuation lines joined, comments and extra spaces dropped.
fn commands(script: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in script.lines() {
        let line = match line.find(" #") {
            Some(at) if !line[..at].contains('\'') => &line[..at],
            _ => line,
        };
        let (body, more) = match line.trim_end().strip_suffix('\\') {
            Some(b) => (b, true),
            None => (line, false),
        };
        current.push(' ');
        current.push_str(body);
        if !more {
            let c = current.split_whitespace().collect::<Vec<_>>().join(" ");
            if !c.is_empty() {
                out.push(c);
            }
            current.clear();
        }
    }
    out
}

/// The guide's flow runs as written: `examples/first-gate/run.sh` goes from `rework` to
/// `pass` against a temporary store, and every `verdict` command in the guide's shell blocks
/// is one the script runs (the script may add `--token`).
#[test]
fn the_first_gate_guide_runs_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new("sh")
        .arg(root().join("examples/first-gate/run.sh"))
        .env("VERDICT", env!("CARGO_BIN_EXE_verdict"))
        .env("WORK", dir.path())
        .env_remove("VERDICT_STORE")
        .env_remove("VERDICT_TOKEN")
        .output()
        .unwrap();
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    let rework = said.find("outcome   rework").expect("no rework decision");
    let pass = said.find("outcome   pass").expect("no pass decision");
    assert!(rework < pass, "{said}");
    assert!(said.contains("ex-1: pass applies"), "{said}");
    assert!(said.contains("audit chain intact"), "{said}");

    let guide = std::fs::read_to_string(root().join("docs/guide.md")).unwrap();
    let script = std::fs::read_to_string(root().join("examples/first-gate/run.sh")).unwrap();
    // The script runs each attempt through one function; its `$1` is the attempt number.
    let ran: Vec<String> = commands(&script)
        .into_iter()
        .map(|c| c.replace("\"$verdict\"", "verdict"))
        .flat_map(|c| [c.replace("$1", "1"), c.replace("$1", "2")])
        .collect();
    let mut checked = 0;
    let mut in_sh = false;
    let mut block = String::new();
    for line in guide.lines() {
        if line.trim_start().starts_with("```") {
            if in_sh {
                for c in commands(&block) {
                    let c = c.trim_start_matches("$(").to_owned();
                    let at = c.find("verdict ");
                    let Some(at) = at else { continue };
                    let shown = c[at..].trim_end_matches(')');
                    assert!(
                        ran.iter().any(|r| r.contains(shown)),
                        "the guide shows `{shown}`, which examples/first-gate/run.sh does not run"
                    );
                    checked += 1;
                }
                block.clear();
            }
            in_sh = !in_sh && line.trim_start() == "```sh";
            continue;
        }
        if in_sh {
            block.push_str(line);
            block.push('\n');
        }
    }
    assert!(checked >= 15, "only {checked} guide commands checked");
}

/// An error from the database server is its message and SQLSTATE, without the line of the
/// server's own source that sqlx appends.
#[test]
fn database_errors_carry_no_source_line() {
    let url = "postgres://postgres@127.0.0.1:5432/verdict_no_such_database";
    for args in [&["status", "ex-1"][..], &["store", "migrate"][..]] {
        let out = verdict_in(url).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        let said = text(&out);
        assert!(said.contains("does not exist"), "{args:?}: {said}");
        assert!(said.contains("SQLSTATE 3D000"), "{args:?}: {said}");
        assert!(!said.contains(" at line "), "{args:?}: {said}");
    }
}

/// A refusal from the store is said once, not once per link of the error chain.
#[test]
fn an_evidence_refusal_is_said_once() {
    let dir = tempfile::tempdir().unwrap();
    let pg = verdict_store::scratch::ScratchPostgres::create("refusal").unwrap();
    let sqlite = format!("sqlite:{}", dir.path().join("verdict.db").display());
    let postgres = pg.url().to_owned();
    for store in [sqlite, postgres] {
        let run = |token: Option<&str>, args: &[&str]| {
            let mut cmd = verdict_in(&store);
            cmd.current_dir(dir.path()).args(args);
            if store.starts_with("postgres") && args.first() == Some(&"store") {
                cmd.args(["--role-prefix", &pg.role_prefix()]);
            }
            if let Some(t) = token {
                cmd.env("VERDICT_TOKEN", t);
            }
            cmd.output().unwrap()
        };
        let ok = |token: Option<&str>, args: &[&str]| {
            let out = run(token, args);
            assert!(out.status.success(), "{args:?}: {}", text(&out));
            String::from_utf8(out.stdout).unwrap().trim().to_owned()
        };
        ok(None, &["store", "migrate"]);
        let ops = ok(None, &["init"]);
        let coder = ok(
            Some(&ops),
            &["principal", "add", "coder", "--role", "producer"],
        );
        let ci = ok(Some(&ops), &["principal", "add", "ci", "--role", "runner"]);
        for (g, p) in [("g-coder", "coder"), ("g-ci", "ci")] {
            ok(
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
                    "write",
                    "--expires",
                    "2099-01-01T00:00:00Z",
                ],
            );
        }
        // A grant that has lapsed already is refused, clearly.
        let late = run(
            Some(&ops),
            &[
                "grant",
                "add",
                "g-late",
                "--principal",
                "ci",
                "--execution",
                "ex-1",
                "--access",
                "read",
                "--expires",
                "2020-01-01T00:00:00Z",
            ],
        );
        assert_eq!(late.status.code(), Some(2));
        assert!(text(&late).contains("not after now"), "{}", text(&late));

        let objective = dir.path().join("objective.md");
        std::fs::write(&objective, "say hello").unwrap();
        let subject = ok(
            None,
            &[
                "subject",
                "new",
                "--execution",
                "ex-1",
                "--producer",
                "coder",
                "--producer-run",
                "r1",
                "--objective",
                &objective.display().to_string(),
                "--criterion",
                "greets=it says hello",
            ],
        );
        let file = dir.path().join("subject.json");
        std::fs::write(&file, &subject).unwrap();
        let put = ok(
            Some(&coder),
            &["subject", "put", &file.display().to_string()],
        );
        let digest = ok(
            None,
            &["digest", "--kind", "subject", &file.display().to_string()],
        );
        assert_eq!(put, digest);
        // --put stores what it builds; the same inputs are the same subject.
        let again = ok(
            Some(&coder),
            &[
                "subject",
                "new",
                "--execution",
                "ex-1",
                "--producer",
                "coder",
                "--producer-run",
                "r1",
                "--objective",
                &objective.display().to_string(),
                "--criterion",
                "greets=it says hello",
                "--put",
            ],
        );
        assert_eq!(again, put);

        // The result template of an admitted run: one not_tested row per criterion.
        let rev = ok(
            Some(&ops),
            &["principal", "add", "rev", "--role", "verifier"],
        );
        ok(
            Some(&ops),
            &[
                "grant",
                "add",
                "g-rev",
                "--principal",
                "rev",
                "--execution",
                "ex-1",
                "--access",
                "read",
                "--expires",
                "2099-01-01T00:00:00Z",
            ],
        );
        let policy = dir.path().join("policy.json");
        std::fs::write(
            &policy,
            r#"{"schema": "verdict.policy/v1", "name": "p", "revision": 1, "required_checks": [], "required_verifiers": ["reviewer"]}"#,
        )
        .unwrap();
        ok(
            Some(&ops),
            &["policy", "set", &policy.display().to_string()],
        );
        let request = ok(Some(&coder), &["request", "create", "ex-1"]);
        ok(
            Some(&ops),
            &[
                "run",
                "admit",
                &request,
                "--verifier",
                "rev",
                "--class",
                "reviewer",
                "--run",
                "run-1",
            ],
        );
        let template: serde_json::Value = serde_json::from_str(&ok(
            Some(&rev),
            &["result", "template", &request, "--run", "run-1"],
        ))
        .unwrap();
        assert_eq!(
            template["criteria"],
            serde_json::json!([{"id": "greets", "status": "not_tested", "method": "", "evidence_refs": []}])
        );
        assert_eq!(template["verifier"]["run"], "run-1");
        let refused = run(
            Some(&coder),
            &["result", "template", &request, "--run", "run-1"],
        );
        assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));

        // Listings never show a token or its hash.
        let listed = ok(Some(&ops), &["principal", "list", "--json"]);
        assert!(
            listed.contains("\"rev\"") && !listed.contains("sha256"),
            "{listed}"
        );
        assert!(!listed.contains(&rev) && !listed.contains(&ops), "{listed}");
        let shown = ok(Some(&rev), &["run", "show", "run-1"]);
        assert!(shown.starts_with("run-1"), "{shown}");

        let evidence = serde_json::json!({
            "id": "ev-1", "kind": "check", "check": "greets", "subject_digest": put,
            "definition_digest": digest, "produced_by": {"principal": "coder", "role": "runner"},
            "outcome": "pass", "content_digest": digest, "observed_at": "2026-11-30T11:59:00Z",
            "freshness": {"kind": "content"}
        });
        let ev = dir.path().join("ev.json");
        std::fs::write(&ev, evidence.to_string()).unwrap();
        let out = run(Some(&ci), &["evidence", "add", &ev.display().to_string()]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        let said = String::from_utf8_lossy(&out.stderr).into_owned();
        let why = "says it was produced by \"coder\"";
        assert_eq!(said.matches(why).count(), 1, "{said}");
        let _ = std::fs::remove_file(dir.path().join("verdict.db"));
    }
}

#[test]
fn a_value_far_too_long_is_named_cut_and_escaped_in_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("verdict.db");
    // A name that would clear the terminal if it were printed raw, and 100 kB long.
    let name = format!("\u{1b}[2J{}", "x".repeat(100_000));
    let out = verdict_in(&format!("sqlite:{}", store.display()))
        .args(["init", "--operator", &name])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.len() < 2048, "{} bytes on standard error", err.len());
    assert!(err.contains("printable characters"), "{err}");
    assert!(err.contains("\\u{1b}[2J"), "{err}");
    assert!(!err.contains('\u{1b}'), "{err}");
    assert!(err.contains("(100004 bytes in all, cut)"), "{err}");
}
