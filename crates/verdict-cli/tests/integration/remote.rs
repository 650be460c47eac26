//! `--server`: the lifecycle commands sent to a running `verdict serve` answer exactly as the
//! same commands on a store opened here (same standard output, same exit status), on SQLite
//! and on PostgreSQL; refusals name their reason code and HTTP status; a wrong token, an
//! unreachable server and the commands that need the store here fail clearly. Blobs, exports
//! and the ledger are among the commands compared.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};

const DEF: &str = "sha256:ec4556a178527361344d876629bb9533c63fc8fcd216f423dd8bce76787fce86";

/// A store in a directory of its own.
struct Store {
    url: String,
    dir: tempfile::TempDir,
    /// Dropped with the store, also when a test panics.
    _pg: Option<verdict_store::scratch::ScratchPostgres>,
}

impl Store {
    fn sqlite() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite:{}", dir.path().join("store/verdict.db").display());
        Self {
            url,
            dir,
            _pg: None,
        }
    }

    fn postgres() -> Self {
        let pg = verdict_store::scratch::ScratchPostgres::create_migrated("cli").unwrap();
        Self {
            url: pg.url().to_owned(),
            dir: tempfile::tempdir().unwrap(),
            _pg: Some(pg),
        }
    }

    /// `verdict init` here; the operator's token.
    fn init(&self) -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_verdict"))
            .args(["init", "--operator", "ops"])
            .current_dir(self.dir.path())
            .env("VERDICT_STORE", &self.url)
            .env_remove("VERDICT_TOKEN")
            .env_remove("VERDICT_SERVER")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }
}

/// `verdict serve` over a store, on a free loopback port; killed when dropped.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    fn start(store: &Store) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_verdict"))
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--gate",
                "merge",
                "--log-format",
                "text",
            ])
            .current_dir(store.dir.path())
            .env("VERDICT_STORE", &store.url)
            .env_remove("VERDICT_SERVER")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        stderr.read_line(&mut line).unwrap();
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .to_owned();
        // Keep reading its log, so a full pipe never stalls it.
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        Self {
            child,
            url: format!("http://{addr}"),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where a command goes: a store opened here, or a server.
enum Target<'a> {
    Local(&'a Store),
    Remote(&'a Server, &'a Store),
}

impl Target<'_> {
    fn run(&self, token: Option<&str>, args: &[&str]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_verdict"));
        cmd.args(args)
            .env_remove("VERDICT_TOKEN")
            .env_remove("VERDICT_STORE")
            .env_remove("VERDICT_SERVER");
        match self {
            Self::Local(store) => {
                cmd.current_dir(store.dir.path())
                    .env("VERDICT_STORE", &store.url)
                    .args(["--gate", "merge"]);
            }
            Self::Remote(server, store) => {
                cmd.current_dir(store.dir.path())
                    .env("VERDICT_SERVER", &server.url);
            }
        }
        if let Some(t) = token {
            cmd.env("VERDICT_TOKEN", t);
        }
        cmd.output().unwrap()
    }

    fn dir(&self) -> &std::path::Path {
        match self {
            Self::Local(s) | Self::Remote(_, s) => s.dir.path(),
        }
    }

    /// Writes `name` in the directory commands run in; the name, as commands read it.
    fn file(&self, name: &str, v: &Value) -> String {
        std::fs::write(self.dir().join(name), serde_json::to_vec(v).unwrap()).unwrap();
        name.to_owned()
    }
}

/// One step's answer, with what differs between two stores by nature (the tokens minted, the
/// store's clock, the digest of a record holding the time it was made) taken out.
#[derive(Debug, PartialEq)]
struct Step {
    args: String,
    code: Option<i32>,
    stdout: String,
}

/// Every RFC 3339 time in `text` (`YYYY-MM-DDTHH:MM:SS...Z`) as `<time>`: the two stores run on
/// their own system clocks.
fn without_times(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    let digit = |j: usize| b.get(j).is_some_and(u8::is_ascii_digit);
    while i < b.len() {
        let looks = (0..4).all(|k| digit(i + k))
            && b.get(i + 4) == Some(&b'-')
            && b.get(i + 10) == Some(&b'T')
            && b.get(i + 13) == Some(&b':');
        if looks && let Some(end) = b[i..].iter().position(|&c| c == b'Z') {
            out.push_str("<time>");
            i += end + 1;
        } else {
            out.push(char::from(b[i]));
            i += 1;
        }
    }
    out
}

/// The whole flow on one target; every step's exit status and standard output.
fn walk(t: &Target, ops: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut step = |token: &str, args: &[&str], mask_stdout: bool| -> String {
        let out = t.run(Some(token), args);
        let stdout = String::from_utf8(out.stdout.clone()).unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        steps.push(Step {
            args: args.join(" "),
            code: out.status.code(),
            stdout: if mask_stdout {
                "<masked>".into()
            } else {
                without_times(&stdout)
            },
        });
        if !out.status.success() {
            return stderr;
        }
        stdout.trim().to_owned()
    };
    let mut tokens = Vec::new();
    for (name, role) in [
        ("coder", "producer"),
        ("ci", "runner"),
        ("rev", "verifier"),
        ("hum", "human"),
    ] {
        tokens.push(step(ops, &["principal", "add", name, "--role", role], true));
    }
    let (coder, ci, rev, hum) = (&tokens[0], &tokens[1], &tokens[2], &tokens[3]);
    for (g, p, a) in [
        ("g-coder", "coder", "write"),
        ("g-ci", "ci", "write"),
        ("g-rev", "rev", "read"),
        ("g-hum", "hum", "write"),
    ] {
        step(
            ops,
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
            false,
        );
    }
    let policy = json!({"schema": "verdict.policy/v1", "name": "merge", "revision": 1,
                        "required_checks": ["unit-tests"], "required_verifiers": ["reviewer"]});
    let pd = step(
        ops,
        &["policy", "set", &t.file("policy.json", &policy)],
        false,
    );
    // The reads of who may act, by the operator and by a principal seeing only itself.
    for args in [
        &["principal", "list"][..],
        &["principal", "list", "--json"],
        &["principal", "show", "coder"],
        &["principal", "show", "coder", "--json"],
        &["grant", "list"],
        &["grant", "list", "--json"],
        &["grant", "list", "--principal", "rev"],
        &["grant", "show", "g-rev"],
        &["grant", "show", "g-rev", "--json"],
        &["policy", "list"],
        &["policy", "list", "--json"],
        &["policy", "show"],
        &["policy", "show", "--json"],
        &["policy", "show", pd.as_str()],
    ] {
        step(ops, args, false);
    }
    for args in [
        &["principal", "list"][..],
        &["principal", "show", "coder"],
        &["grant", "list"],
        &["grant", "list", "--principal", "rev"],
        &["grant", "show", "g-rev"],
        &["policy", "list"],
    ] {
        step(coder, args, false);
    }
    let subject = json!({
        "schema": "verdict.subject/v1",
        "execution": {"id": "ex-1", "generation": 1},
        "work_items": [], "producer": {"principal": "coder", "run": "run-coder"},
        "objective": {"revision": "1", "digest": DEF},
        "criteria": {"revision": "1", "items": [{"id": "tests-pass", "text": "unit tests pass"}]},
        "resources": [], "checks": [{"id": "unit-tests", "definition_digest": DEF, "criteria": ["tests-pass"]}],
        "workflow_revision": "1", "risk": {"class": "low", "revision": "1", "capabilities": []}
    });
    let sd = step(
        coder,
        &["subject", "put", &t.file("subject.json", &subject)],
        false,
    );
    // Blobs: put by the producer (and again: the same digest), read back by their writer and
    // the operator; the reviewer's grant covers no subject naming them, so it is refused.
    std::fs::write(t.dir().join("change.diff"), b"+fn added() {}\n").unwrap();
    let blob = step(
        coder,
        &["blob", "put", "change.diff", "--media-type", "text/x-diff"],
        false,
    );
    step(coder, &["blob", "put", "change.diff"], false);
    step(rev, &["blob", "put", "change.diff"], false);
    step(coder, &["blob", "get", &blob], false);
    step(ops, &["blob", "get", &blob], false);
    step(rev, &["blob", "get", &blob], false);
    step(ops, &["blob", "get", "sha256:nothex"], false);
    // Nothing decides yet: blocked, exit 1.
    step(ci, &["gate", "run", "ex-1"], false);
    let ev = json!({"id": "ev-1", "kind": "check", "check": "unit-tests", "subject_digest": sd,
                    "definition_digest": DEF, "produced_by": {"principal": "ci", "role": "runner"},
                    "outcome": "pass", "content_digest": DEF, "observed_at": "2026-11-30T11:59:00Z",
                    "freshness": {"kind": "content"}});
    step(
        ci,
        &["evidence", "add", &t.file("ev.json", &json!([ev]))],
        false,
    );
    let req = step(coder, &["request", "create", "ex-1"], false);
    // Executions: listed and shown by readers; a producer reading an execution its grants do
    // not cover is refused.
    for args in [
        &["execution", "list"][..],
        &["execution", "list", "--json"],
        &["execution", "show", "ex-1"],
        &["execution", "show", "ex-1", "--json"],
    ] {
        step(ops, args, false);
        step(coder, args, false);
    }
    step(coder, &["execution", "show", "ex-2"], false);
    // The workers' queue: the subject's producer enqueues (twice: the same jobs), the
    // operator reads it, nobody else may.
    step(coder, &["jobs", "enqueue", &req], false);
    step(
        coder,
        &["jobs", "enqueue", &req, "--deadline-seconds", "3600"],
        false,
    );
    step(ops, &["jobs", "list"], false);
    step(
        ops,
        &["jobs", "list", "--state", "ready", "--request", &req],
        false,
    );
    step(ops, &["jobs", "list", "--state", "done"], false);
    step(coder, &["jobs", "list"], false);
    step(ci, &["jobs", "enqueue", &req], false);
    // The request created with its jobs: the same request, its jobs as they stand; a runner
    // may not, nor may a deadline be out of bounds.
    for (who, deadline, taken) in [
        (coder, "3600", true),
        (ci, "60", false),
        (coder, "0", false),
    ] {
        let out = step(
            who,
            &[
                "request",
                "create",
                "ex-1",
                "--enqueue",
                "--deadline-seconds",
                deadline,
            ],
            false,
        );
        assert_eq!(out.starts_with("sha256:"), taken, "{deadline}: {out}");
    }
    step(
        ops,
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
        false,
    );
    for args in [
        &["run", "list", "ex-1"][..],
        &["run", "list", "ex-1", "--json"],
        &["run", "show", "run-1"],
        &["run", "show", "run-1", "--json"],
    ] {
        step(ops, args, false);
        step(rev, args, false);
    }
    step(coder, &["run", "list", "ex-2"], false);
    // A forbidden cross-role write: a producer adding an operator.
    step(
        coder,
        &["principal", "add", "x", "--role", "operator"],
        false,
    );
    let result = json!({"id": "vr-1", "verifier": {"principal": "rev", "class": "reviewer", "run": "run-1"},
                        "subject_digest": sd, "generation": 1, "status": "completed",
                        "criteria": [{"id": "tests-pass", "status": "passed", "method": "review", "evidence_refs": ["ev-1"]}],
                        "findings": [], "dispositions": []});
    let rf = t.file("result.json", &result);
    step(coder, &["result", "submit", &rf], false);
    step(rev, &["result", "submit", &rf], false);
    let decision = step(ci, &["gate", "run", "ex-1"], false);
    step(ci, &["gate", "run", "ex-1", "--format", "text"], false);
    // The stored decision replays, for the operator and a reader; not for a stranger.
    let key = serde_json::from_str::<Value>(&decision).unwrap()["evaluation_key"]
        .as_str()
        .unwrap()
        .to_owned();
    step(ops, &["gate", "replay", &key], false);
    step(rev, &["gate", "replay", &key], false);
    step(
        ops,
        &["gate", "replay", &format!("sha256:{}", "0".repeat(64))],
        false,
    );
    // The exports of the decision, for the operator and a reader; not for a caller whose
    // grants do not cover the execution.
    let sha = "a".repeat(40);
    for args in [
        &["export", "junit", "ex-1"][..],
        &["export", "github", "ex-1", "--head-sha", &sha],
    ] {
        step(ops, args, false);
        step(rev, args, false);
    }
    step(coder, &["export", "junit", "ex-2"], false);
    step(
        ops,
        &["export", "github", "ex-1", "--head-sha", "nothex"],
        false,
    );
    // The ledger: the operator's, in each format; anyone else is refused.
    for args in [
        &["ledger"][..],
        &["ledger", "--format", "json"],
        &[
            "ledger",
            "--format",
            "csv",
            "--attempts",
            "5",
            "--min-sample",
            "1",
        ],
    ] {
        step(ops, args, false);
    }
    step(coder, &["ledger"], false);
    // The audit walk: the operator's (its text names the store and its head hashes the
    // store's own times, so only the exit status is compared); anyone else is refused.
    step(ops, &["audit", "verify"], true);
    step(ops, &["audit", "verify", "--json"], true);
    step(coder, &["audit", "verify"], false);
    step(ops, &["status", "ex-1"], false);
    step(ops, &["status", "ex-1", "--json"], false);
    step(
        hum,
        &[
            "decide",
            "ex-1",
            "--subject",
            &sd,
            "--policy",
            &pd,
            "--approve",
            "--reason",
            "read the change",
        ],
        // The human decision's digest covers the time it was recorded at.
        true,
    );
    step(ops, &["history", "ex-1"], false);
    step(ops, &["history", "ex-1", "--json"], false);
    step(
        ops,
        &["run", "cancel", "run-1", "--reason", "too late"],
        false,
    );
    step(
        ops,
        &["grant", "revoke", "g-rev", "--reason", "rotated"],
        false,
    );
    step(
        coder,
        &["execution", "cancel", "ex-1", "--reason", "superseded"],
        false,
    );
    step(ops, &["status", "ex-1"], false);
    // Tokens: only an operator revokes; a principal replaces its own token, after which the
    // old one is refused; a revoked token is refused by the next command. The new tokens are
    // the stores' own, so their text is masked, never their exit status.
    let show_hum = ["principal", "show", "hum"];
    step(coder, &["principal", "token", "revoke", "hum"], false);
    step(hum, &show_hum, false);
    let hum_new = step(hum, &["principal", "token", "rotate", "hum"], true);
    step(hum, &show_hum, false);
    step(&hum_new, &show_hum, false);
    step(
        ops,
        &[
            "principal",
            "token",
            "revoke",
            "hum",
            "--reason",
            "laptop lost",
        ],
        false,
    );
    step(&hum_new, &show_hum, false);
    let hum_again = step(ops, &["principal", "token", "rotate", "hum"], true);
    step(&hum_again, &show_hum, false);
    steps
}

fn differential(local: Store, served: Store) {
    let (ops_local, ops_served) = (local.init(), served.init());
    let server = Server::start(&served);
    let here = walk(&Target::Local(&local), &ops_local);
    let there = walk(&Target::Remote(&server, &served), &ops_served);
    assert_eq!(here.len(), there.len());
    for (h, t) in here.iter().zip(&there) {
        assert_eq!(h, t, "local and --server differ");
    }
    // The flow went where it should: a pass, then a cancellation nothing applies after.
    let codes: Vec<Option<i32>> = here.iter().map(|s| s.code).collect();
    assert!(codes.contains(&Some(0)) && codes.contains(&Some(1)) && codes.contains(&Some(2)));
    assert!(
        here.iter()
            .any(|s| s.args == "status ex-1" && s.stdout.starts_with("ex-1: pass applies")),
        "{here:#?}"
    );
    // Blobs, exports and the ledger answered, each for whoever may read it.
    let answered = |prefix: &str, has: &str| {
        here.iter()
            .any(|s| s.args.starts_with(prefix) && s.code == Some(0) && s.stdout.contains(has))
    };
    assert!(answered("blob put change.diff", "sha256:"), "{here:#?}");
    assert!(answered("blob get sha256:", "+fn added() {}"), "{here:#?}");
    assert!(answered("export junit ex-1", "<testsuite"), "{here:#?}");
    assert!(
        answered("export github ex-1", "\"commit_status\""),
        "{here:#?}"
    );
    assert!(
        answered("ledger --format json", "verdict.ledger/v1"),
        "{here:#?}"
    );
    assert!(answered("ledger --format csv", ","), "{here:#?}");
    let refused = |args: &str| {
        here.iter()
            .filter(|s| s.args == args && s.code == Some(2))
            .count()
    };
    assert_eq!(refused("ledger"), 1, "{here:#?}");
    assert_eq!(refused("export junit ex-2"), 1, "{here:#?}");
    // The token steps went where they should, on both targets alike: the producer's revocation
    // and every use of a replaced or revoked token refused, each new token accepted.
    let show: Vec<Option<i32>> = here
        .iter()
        .filter(|s| s.args == "principal show hum")
        .map(|s| s.code)
        .collect();
    assert_eq!(
        show,
        [Some(0), Some(2), Some(0), Some(2), Some(0)],
        "{here:#?}"
    );
    assert_eq!(refused("principal token revoke hum"), 1, "{here:#?}");
    assert!(
        answered(
            "principal token revoke hum --reason laptop lost",
            "revoked the token of hum"
        ),
        "{here:#?}"
    );
}

#[test]
fn commands_sent_to_a_server_answer_as_on_the_store_itself() {
    differential(Store::sqlite(), Store::sqlite());
    differential(Store::postgres(), Store::postgres());
}

fn refusals_over_a_server(store: Store) {
    let ops = store.init();
    let server = Server::start(&store);
    let t = Target::Remote(&server, &store);
    let out = t.run(
        Some(&ops),
        &["principal", "add", "coder", "--role", "producer"],
    );
    assert!(out.status.success(), "{out:?}");
    let coder = String::from_utf8(out.stdout).unwrap().trim().to_owned();

    // A forbidden cross-role write: exit 2, the reason code and the HTTP status named.
    let out = t.run(
        Some(&coder),
        &["principal", "add", "x", "--role", "operator"],
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("permission_denied") && err.contains("HTTP 403"),
        "{err}"
    );
    // Nothing was added: the operator still sees two principals.
    let list = Target::Local(&store).run(Some(&ops), &["principal", "list"]);
    assert_eq!(String::from_utf8_lossy(&list.stdout).lines().count(), 2);
    // Reads out of scope: the ledger (operators only) and an export of an execution no grant
    // covers; exit 2, the reason code and the HTTP status named, nothing printed.
    for args in [
        &["ledger"][..],
        &["export", "junit", "ex-1"],
        &["export", "github", "ex-1", "--head-sha", &"c".repeat(40)],
    ] {
        let out = t.run(Some(&coder), args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("permission_denied") && err.contains("HTTP 403"),
            "{args:?}: {err}"
        );
        assert!(out.stdout.is_empty(), "{args:?}: {out:?}");
    }

    // A wrong token, and none at all: 401, unauthenticated, exit 2.
    let wrong = format!("vdt_{}", "ab".repeat(32));
    for token in [Some(wrong.as_str()), None] {
        let out = t.run(token, &["status", "ex-1"]);
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("unauthenticated") && err.contains("HTTP 401"),
            "{err}"
        );
        assert!(!err.contains(&wrong[4..]), "the token echoed: {err}");
    }

    // --server with --store, or with --now, is refused before anything is sent.
    for extra in [
        ["--store", store.url.as_str()],
        ["--now", "2026-11-30T12:00:00Z"],
    ] {
        let mut args = vec!["status", "ex-1"];
        args.extend(extra);
        let out = t.run(Some(&ops), &args);
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("--server"),
            "{out:?}"
        );
    }
    // What needs the store here refuses the server, naming the command and saying why.
    for (args, command) in [
        (&["init"][..], "init"),
        (&["quickstart"][..], "quickstart"),
        (
            &["worker", "--role", "gate", "--once"][..],
            "verdict worker",
        ),
        (&["store", "migrate"][..], "verdict store migrate"),
        (&["serve"][..], "verdict serve"),
        (&["audit", "export"][..], "verdict audit export"),
        (
            &["attest", DEF, "--key", "attest.key"][..],
            "verdict attest",
        ),
        (
            &[
                "verify",
                DEF,
                "--verifiers",
                "v.json",
                "--objective",
                "o.md",
            ][..],
            "verdict verify",
        ),
    ] {
        let out = t.run(Some(&ops), args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("cannot run against a server") && err.contains(command),
            "{args:?}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
    // --checkpoint stays where the store is.
    let out = t.run(
        Some(&ops),
        &[
            "audit",
            "verify",
            "--checkpoint",
            "cp.json",
            "--public-key",
            &"ab".repeat(32),
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--checkpoint cannot be sent to a server"),
        "{out:?}"
    );
}

#[test]
fn refusals_over_a_server_name_their_code_and_status() {
    refusals_over_a_server(Store::sqlite());
    refusals_over_a_server(Store::postgres());
}

#[test]
fn an_unreachable_server_fails_clearly_without_a_panic() {
    // A port that was free a moment ago and that nothing listens on now.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    for args in [
        &["status", "ex-1"][..],
        &["gate", "run", "ex-1"],
        &["request", "create", "ex-1"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_verdict"))
            .args(args)
            .args(["--server", &url, "--token", "vdt_x"])
            .env_remove("VERDICT_STORE")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("cannot reach the server") && err.contains(&url),
            "{err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    // Not a URL at all.
    let out = Command::new(env!("CARGO_BIN_EXE_verdict"))
        .args(["status", "ex-1", "--server", "not a url"])
        .env_remove("VERDICT_STORE")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a URL"));
}

#[test]
fn a_token_is_never_sent_over_plain_http_to_another_host() {
    // A listener on every address, reached through this machine's own non-loopback address
    // when it has one: had the command connected, the listener would hold the connection.
    let listener = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    // Connecting a UDP socket sends nothing; it only picks the address a packet would leave from.
    let own = std::net::UdpSocket::bind("0.0.0.0:0")
        .and_then(|u| u.connect("192.0.2.2:9").map(|()| u))
        .and_then(|u| u.local_addr())
        .map(|a| a.ip())
        .ok()
        .filter(|ip| !ip.is_loopback() && !ip.is_unspecified());
    let host = own.map_or_else(|| "192.0.2.2".to_owned(), |ip| ip.to_string());
    let url = format!("http://{host}:{port}");
    for args in [
        &["status", "ex-1"][..],
        &["grant", "list"],
        &["request", "create", "ex-1"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_verdict"))
            .args(args)
            .args(["--server", &url, "--token", "vdt_secret"])
            .env_remove("VERDICT_STORE")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&url) && err.contains("https://") && !err.contains("cannot reach"),
            "{err}"
        );
        assert!(!err.contains("vdt_secret"), "{err}");
    }
    match listener.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("the command connected to {url}: {other:?}"),
    }
}

#[test]
fn commands_that_work_only_here_refuse_the_server_with_a_reason_naming_them() {
    // Each with the arguments it requires; none of the files exists, and none is read: the
    // refusal comes first.
    for (command, args) in [
        ("check", &["spec.yaml"][..]),
        ("gate evaluate", &["bundle.json"][..]),
        ("digest", &["--kind", "subject", "file.json"][..]),
        ("schema", &["bundle"][..]),
        ("judge render", &["request.json"][..]),
        ("store migrate", &[] as &[&str]),
        ("audit checkpoint", &["--key", "audit.key"][..]),
        ("audit keygen", &["--out", "audit.key"][..]),
        (
            "audit verify-checkpoint",
            &["cp.json", "--public-key", "ab"][..],
        ),
        ("audit export", &[]),
        ("serve", &[]),
        ("key generate", &["--out", "attest.key"][..]),
        ("key export", &["--key", "attest.key"][..]),
        ("attest verify", &["att.json", "--key", "attest.pub"][..]),
        ("completions", &["bash"][..]),
        ("man", &["--out", "man"][..]),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_verdict"))
            .args(command.split(' '))
            .args(args)
            .args(["--server", "http://127.0.0.1:9"])
            .current_dir(dir.path())
            .env_remove("VERDICT_STORE")
            .env_remove("VERDICT_SERVER")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{command}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with(&format!(
                "verdict: verdict {command} cannot run against a server (--server / VERDICT_SERVER): "
            )),
            "{command}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{command}: {err}");
        assert!(out.stdout.is_empty(), "{command}: {out:?}");
        // Nothing was made: no file, no directory.
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "{command}"
        );
    }
    // A store-bound command refuses VERDICT_SERVER from the environment too; a command that
    // reads no store leaves it alone.
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_verdict"))
            .args(args)
            .current_dir(dir.path())
            .env_remove("VERDICT_STORE")
            .env("VERDICT_SERVER", "http://127.0.0.1:9")
            .output()
            .unwrap()
    };
    let out = run(&["store", "migrate"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("verdict store migrate cannot run"));
    let out = run(&["schema", "bundle"]);
    assert!(out.status.success(), "{out:?}");
}
