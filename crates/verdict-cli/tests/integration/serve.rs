//! `verdict serve` as the built binary, on SQLite and on PostgreSQL: it prints the address it
//! bound, answers over HTTP with the store's principals, logs each request as one JSON line
//! with its request id, and ends cleanly on SIGTERM; its flags set the failed-authentication
//! limits.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One HTTP/1.1 request with `Connection: close`; the status and the body.
fn http(addr: &str, method: &str, path: &str, token: Option<&str>) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text[9..12].parse().unwrap();
    let body = text.split_once("\r\n\r\n").unwrap().1.to_owned();
    (status, body)
}

fn serve_on(store: &str) {
    let dir = tempfile::tempdir().unwrap();
    let verdict = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_verdict"))
            .args(args)
            .current_dir(dir.path())
            .env("VERDICT_STORE", store)
            .env_remove("VERDICT_TOKEN")
            .output()
            .unwrap()
    };
    let out = verdict(&["init", "--operator", "ops"]);
    assert!(out.status.success(), "{out:?}");
    let ops = String::from_utf8(out.stdout).unwrap().trim().to_owned();

    let mut child = Command::new(env!("CARGO_BIN_EXE_verdict"))
        .args(["serve", "--listen", "127.0.0.1:0", "--gate", "merge"])
        .current_dir(dir.path())
        .env("VERDICT_STORE", store)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    stderr.read_line(&mut line).unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_owned();

    let (status, body) = http(&addr, "GET", "/readyz", None);
    assert_eq!(status, 200, "{body}");
    let (status, body) = http(&addr, "GET", "/v1/executions/ex-1/status", None);
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("\"unauthenticated\""), "{body}");
    // The operator the CLI created is the operator the server knows.
    let (status, body) = http(&addr, "POST", "/v1/executions/ex-1/gate-runs", Some(&ops));
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("\"not_found\""), "{body}");

    let term = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let exit = loop {
        if let Some(exit) = child.try_wait().unwrap() {
            break exit;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("verdict serve did not stop on SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(exit.success(), "{exit:?}");
    // Every request was logged as one JSON object carrying its id, route and status.
    let mut logs = String::new();
    stderr.read_to_string(&mut logs).unwrap();
    let lines: Vec<serde_json::Value> = logs
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    assert_eq!(lines.len(), 3, "{logs}");
    assert_eq!(lines[1]["route"], "/v1/executions/{id}/status", "{logs}");
    assert_eq!(lines[1]["status"], 401, "{logs}");
    assert_eq!(lines[1]["code"], "unauthenticated", "{logs}");
    assert!(
        lines
            .iter()
            .all(|l| l["request_id"].as_str().is_some_and(|id| !id.is_empty())),
        "{logs}"
    );
}

#[test]
fn serve_answers_over_http_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    serve_on(&format!(
        "sqlite:{}",
        dir.path().join("store/verdict.db").display()
    ));
    let pg = verdict_store::scratch::ScratchPostgres::create_migrated("cli").unwrap();
    serve_on(pg.url());
}

#[test]
fn serve_makes_its_key_files_owner_only_and_refuses_a_short_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("verdict.db").display());
    let serve = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_verdict"))
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(extra)
            .current_dir(dir.path())
            .env("VERDICT_STORE", &store)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };

    // Missing files are created, with fresh bytes, readable by their owner only; the server
    // then serves.
    let mut child = serve(&["--ui-key", "ui.key", "--webhook-key", "hooks.key"]);
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("serving http://"), "{line}");
    child.kill().unwrap();
    child.wait().unwrap();
    let ui = std::fs::read(dir.path().join("ui.key")).unwrap();
    let hooks = std::fs::read(dir.path().join("hooks.key")).unwrap();
    assert!(ui.len() >= 32, "{}", ui.len());
    assert_ne!(ui, hooks, "two keys drawn alike");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(dir.path().join("ui.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }

    // An existing key is used as it is, never replaced.
    let mut child = serve(&["--ui-key", "ui.key"]);
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("serving http://"), "{line}");
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(std::fs::read(dir.path().join("ui.key")).unwrap(), ui);

    // A key too short to make tokens under stops the server before it listens.
    std::fs::write(dir.path().join("short.key"), b"0123456789").unwrap();
    let out = serve(&["--ui-key", "short.key"])
        .wait_with_output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("short.key"), "{err}");
    assert!(err.contains("at least 32 bytes, not 10"), "{err}");
}

#[test]
fn serve_sets_the_limit_every_address_shares_from_its_flags() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("verdict.db").display());
    let out = Command::new(env!("CARGO_BIN_EXE_verdict"))
        .args(["init", "--operator", "ops"])
        .env("VERDICT_STORE", &store)
        .env_remove("VERDICT_TOKEN")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let ops = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    // The address's own allowance is larger than the server's, so a 429 after two failures
    // can only come from the shared bucket, and a wait near a minute from its own rate.
    let mut child = Command::new(env!("CARGO_BIN_EXE_verdict"))
        .args(["serve", "--listen", "127.0.0.1:0", "--auth-burst", "5"])
        .args(["--auth-server-burst", "2", "--auth-server-per-minute", "1"])
        .current_dir(dir.path())
        .env("VERDICT_STORE", &store)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_owned();
    for _ in 0..2 {
        let (status, body) = http(&addr, "GET", "/metrics", Some("vdt_guess"));
        assert_eq!(status, 401, "{body}");
    }
    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer vdt_guess\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (status, body) = (&text[9..12], text.split_once("\r\n\r\n").unwrap().1);
    assert_eq!(status, "429", "{text}");
    assert!(body.contains("every address"), "{text}");
    let wait: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("retry-after: "))
        .unwrap_or_else(|| panic!("no Retry-After in {text}"))
        .trim()
        .parse()
        .unwrap();
    assert!((30..=60).contains(&wait), "{wait}");
    // The operator's token still reads the metrics, which counted the refusal.
    let (status, body) = http(&addr, "GET", "/metrics", Some(&ops));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("code=\"rate_limited\""), "{body}");
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn serve_refuses_a_limit_of_zero_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("verdict.db").display());
    for flag in [
        "--auth-burst",
        "--auth-per-minute",
        "--auth-server-burst",
        "--auth-server-per-minute",
        "--body-limit",
        "--max-connections",
        "--max-connections-per-address",
        "--header-timeout-secs",
        "--body-timeout-secs",
    ] {
        // Refused while the arguments are read: nothing listens, nothing is created.
        let out = Command::new(env!("CARGO_BIN_EXE_verdict"))
            .args(["serve", "--listen", "127.0.0.1:0", flag, "0"])
            .current_dir(dir.path())
            .env("VERDICT_STORE", &store)
            .env_remove("VERDICT_TOKEN")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}: {out:?}");
        assert!(out.stdout.is_empty(), "{flag}: {out:?}");
        assert!(err.contains(&format!("'0' for '{flag} ")), "{flag}: {err}");
        assert!(err.contains("0 is not in 1.."), "{flag}: {err}");
        assert!(!err.contains("serving"), "{flag}: {err}");
    }
    assert!(!dir.path().join("verdict.db").exists());
    // 1, the least each takes, is a limit that serves:
    // `serve_sets_the_limit_every_address_shares_from_its_flags`.
}
