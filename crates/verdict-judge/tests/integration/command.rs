//! The `command` provider with real scripts: good output, garbage, a hang, a crash, and the
//! environment it is given.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use verdict_core::contracts::{UnavailableReason, VerificationStatus};
use verdict_judge::config::{Budget, ProviderConfig, Sampling};
use verdict_judge::provider::CommandProvider;
use verdict_judge::{Judge, JudgeRun};

/// Prints a valid reply for the standard request, echoing the nonce it finds on stdin, but
/// only if the data blocks arrived.
const GOOD: &str = r#"#!/bin/sh
input=$(cat)
case "$input" in *VERDICT-DATA*) ;; *) echo "no data on stdin"; exit 0 ;; esac
nonce=$(printf '%s' "$input" | grep -o 'Rules for this request (nonce [0-9a-f]*' | head -n 1 | sed 's/.* //')
printf '{"nonce": "%s", "criteria": [
 {"id": "tests-pass", "status": "passed", "evidence_refs": ["ev-unit"], "rationale": "log shows 12 passed"},
 {"id": "no-regression", "status": "passed", "evidence_refs": ["diff"], "rationale": "signature kept"},
 {"id": "docs-updated", "status": "not_tested", "evidence_refs": [], "rationale": "no docs in the change"}],
 "findings": [], "dispositions": []}\n' "$nonce"
"#;

const GARBAGE: &str = "#!/bin/sh\ncat >/dev/null\necho 'Looks good to me! All criteria pass.'\n";

const CRASH: &str = "#!/bin/sh\ncat >/dev/null\necho 'model runtime exploded' >&2\nexit 3\n";

/// Starts a grandchild, records both pids, then hangs.
const HANG: &str = "#!/bin/sh\nsleep 600 &\necho \"$$ $!\" > \"$1\"\nsleep 600\n";

/// Succeeds only when the variable named in $1 is not visible.
const ENV: &str = r#"#!/bin/sh
input=$(cat)
eval "v=\${$1:-}"
if [ -n "$v" ]; then echo "saw $1"; exit 0; fi
nonce=$(printf '%s' "$input" | grep -o 'Rules for this request (nonce [0-9a-f]*' | head -n 1 | sed 's/.* //')
printf '{"nonce": "%s", "criteria": [
 {"id": "tests-pass", "status": "inconclusive", "evidence_refs": [], "rationale": "x"},
 {"id": "no-regression", "status": "inconclusive", "evidence_refs": [], "rationale": "x"},
 {"id": "docs-updated", "status": "not_tested", "evidence_refs": [], "rationale": "x"}],
 "findings": [], "dispositions": []}\n' "$nonce"
"#;

fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

async fn run(argv: Vec<String>, pass_env: Vec<String>, timeout_s: f64) -> JudgeRun {
    let cfg = ProviderConfig::Command {
        argv: argv.clone(),
        model: "agent-cli".into(),
        snapshot: Some("agent-cli 1.2.3".into()),
        pass_env: pass_env.clone(),
    };
    let provider = Arc::new(
        CommandProvider::new(argv, "agent-cli", Some("agent-cli 1.2.3".into()), pass_env).unwrap(),
    );
    let b = Budget {
        timeout_s,
        ..budget()
    };
    Judge::new(class_with(cfg, b, Sampling::default()), provider)
        .unwrap()
        .run(&request())
        .await
        .unwrap()
}

#[tokio::test]
async fn good_output_completes_with_estimated_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let good = script(dir.path(), "good.sh", GOOD);
    let run = run(vec![good.display().to_string()], vec![], 20.0).await;
    assert_eq!(
        run.result.status,
        VerificationStatus::Completed,
        "{:?}",
        run.detail
    );
    assert_eq!(run.result.criteria.len(), 3);
    let rt = run.result.verifier.runtime.unwrap();
    assert_eq!(
        (
            rt.provider.as_str(),
            rt.model.as_str(),
            rt.snapshot.as_str()
        ),
        ("command", "agent-cli", "agent-cli 1.2.3")
    );
    let rc = &run.receipts[0];
    assert!(rc.tokens_estimated);
    assert!(rc.tokens_in.unwrap() >= run.manifest.construction.estimated_tokens);
    assert!(rc.tokens_out.unwrap() > 0);
}

#[tokio::test]
async fn garbage_is_invalid_output() {
    let dir = tempfile::tempdir().unwrap();
    let s = script(dir.path(), "garbage.sh", GARBAGE);
    let run = run(vec![s.display().to_string()], vec![], 20.0).await;
    assert_eq!(
        run.result.unavailable_reason,
        Some(UnavailableReason::InvalidOutput),
        "{:?}",
        run.detail
    );
    assert!(run.detail.unwrap().contains("not strict JSON"));
    assert!(run.result.criteria.is_empty());
}

#[tokio::test]
async fn a_crash_is_a_provider_error_with_its_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let s = script(dir.path(), "crash.sh", CRASH);
    let run = run(vec![s.display().to_string()], vec![], 20.0).await;
    assert_eq!(
        run.result.unavailable_reason,
        Some(UnavailableReason::ProviderError)
    );
    let d = run.detail.unwrap();
    assert!(
        d.contains("exit status: 3") && d.contains("model runtime exploded"),
        "{d}"
    );
    assert_eq!(run.receipts[0].outcome, "command_failed");
    // A program that cannot be started is a provider error too.
    let run = self::run(
        vec![dir.path().join("missing").display().to_string()],
        vec![],
        20.0,
    )
    .await;
    assert_eq!(
        run.result.unavailable_reason,
        Some(UnavailableReason::ProviderError)
    );
    assert!(run.detail.unwrap().contains("cannot start"));
}

/// Writes 200 KiB to standard error in one write (far past what a pipe holds), then does what
/// the rest of the script says. A shell killed by SIGPIPE on that write never gets there.
const CHATTY: &str = "#!/bin/sh\ninput=$(cat)\nbig=$(head -c 204800 /dev/zero | tr '\\0' e)\nprintf 'first words %s' \"$big\" >&2\n";

#[tokio::test]
async fn a_program_may_write_any_amount_to_stderr() {
    let dir = tempfile::tempdir().unwrap();
    // Then a valid reply: the run completes.
    let body = GOOD.replacen("input=$(cat)\n", &CHATTY["#!/bin/sh\n".len()..], 1);
    let s = script(dir.path(), "chatty.sh", &body);
    let run = run(vec![s.display().to_string()], vec![], 20.0).await;
    assert_eq!(
        run.result.status,
        VerificationStatus::Completed,
        "{:?}",
        run.detail
    );
    // Then a failure: its own exit status is reported, with the start of what it wrote.
    let s = script(dir.path(), "chatty-fails.sh", &format!("{CHATTY}exit 3\n"));
    let run = self::run(vec![s.display().to_string()], vec![], 20.0).await;
    let d = run.detail.unwrap();
    assert!(
        d.contains("exit status: 3") && d.contains("stderr: first words eee"),
        "{d}"
    );
}

#[tokio::test]
async fn a_program_printing_past_the_output_limit_is_stopped_and_told_so() {
    let dir = tempfile::tempdir().unwrap();
    // 9 MiB, then it would wait ten minutes: only stopping it ends the run before its time
    // budget does.
    let s = script(
        dir.path(),
        "flood.sh",
        "#!/bin/sh\ncat >/dev/null\nhead -c 9437184 /dev/zero | tr '\\0' x\nsleep 600\n",
    );
    let started = std::time::Instant::now();
    let run = run(vec![s.display().to_string()], vec![], 30.0).await;
    assert_eq!(
        run.result.unavailable_reason,
        Some(UnavailableReason::ProviderError),
        "{:?}",
        run.detail
    );
    let d = run.detail.unwrap();
    assert!(
        d.contains("printed more than 8388608 bytes on standard output and was stopped"),
        "{d}"
    );
    assert_eq!(run.receipts[0].outcome, "protocol_error");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "waited for the time budget"
    );
}

#[tokio::test]
async fn control_characters_on_stderr_are_shown_escaped_in_the_detail() {
    let dir = tempfile::tempdir().unwrap();
    let s = script(
        dir.path(),
        "escapes.sh",
        "#!/bin/sh\ncat >/dev/null\nprintf '\\033[2J\\033]0;pwned\\007\\rPASS\\n' >&2\nexit 3\n",
    );
    let run = run(vec![s.display().to_string()], vec![], 20.0).await;
    let d = run.detail.clone().unwrap();
    assert!(
        d.contains("[U+001B][2J[U+001B]]0;pwned[U+0007][U+000D]PASS"),
        "{d}"
    );
    for text in std::iter::once(&d).chain(run.receipts.iter().filter_map(|r| r.detail.as_ref())) {
        assert!(!text.chars().any(char::is_control), "{text:?}");
    }
}

fn alive(pid: &str) -> bool {
    // Gone, or a zombie waiting to be reaped, both count as dead.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            !s.split(')')
                .nth(1)
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
        .unwrap_or(false)
}

#[tokio::test]
async fn a_hang_times_out_and_the_whole_process_group_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let s = script(dir.path(), "hang.sh", HANG);
    let pids = dir.path().join("pids");
    let run = run(
        vec![s.display().to_string(), pids.display().to_string()],
        vec![],
        0.5,
    )
    .await;
    assert_eq!(
        run.result.unavailable_reason,
        Some(UnavailableReason::Timeout),
        "{:?}",
        run.detail
    );
    assert_eq!(run.receipts[0].outcome, "timeout");
    let text = std::fs::read_to_string(&pids).unwrap();
    let mut still = Vec::new();
    for _ in 0..100 {
        still = text
            .split_whitespace()
            .filter(|p| alive(p))
            .map(str::to_owned)
            .collect();
        if still.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(still.is_empty(), "still running: {still:?}");
}

#[tokio::test]
async fn the_program_sees_only_the_environment_it_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let s = script(dir.path(), "env.sh", ENV);
    // Cargo sets CARGO_MANIFEST_DIR for the test process; the program must not inherit it.
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
    let argv = vec![s.display().to_string(), "CARGO_MANIFEST_DIR".to_owned()];
    let run1 = run(argv.clone(), vec![], 20.0).await;
    assert_eq!(
        run1.result.status,
        VerificationStatus::Completed,
        "{:?}",
        run1.detail
    );
    let run2 = run(argv, vec!["CARGO_MANIFEST_DIR".into()], 20.0).await;
    assert_eq!(
        run2.result.unavailable_reason,
        Some(UnavailableReason::InvalidOutput),
        "passed through when listed"
    );
}

#[test]
fn a_verifiers_file_cannot_pass_verdicts_own_settings_to_the_program() {
    for var in [
        "VERDICT_TOKEN",
        "VERDICT_STORE",
        "DATABASE_URL",
        "PGPASSWORD",
    ] {
        let yaml = format!(
            "version: 1\nclasses:\n  reviewer:\n    provider:\n      kind: command\n      argv: [agent]\n      model: agent\n      pass_env: [{var}]\n"
        );
        let err = verdict_judge::config::VerifiersFile::parse(yaml.as_bytes(), "verifiers.yaml")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(var) && err.contains("never given"),
            "{var}: {err}"
        );
    }
}

#[tokio::test]
async fn the_program_never_sees_the_token_of_the_process_that_runs_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = script(dir.path(), "env.sh", ENV);
    // The provider is built without the configuration's check: the spawn itself withholds it.
    let name = "VERDICT_TOKEN_COMMAND_PROVIDER_TEST";
    #[expect(
        unsafe_code,
        reason = "setting a variable of this process, which no other test reads"
    )]
    // SAFETY: no other test of this binary reads or writes this name.
    unsafe {
        std::env::set_var(name, "vdt_secret_value_of_the_runner");
    }
    let argv = vec![s.display().to_string(), name.to_owned()];
    let run = run(argv, vec![name.to_owned()], 20.0).await;
    assert_eq!(
        run.result.status,
        VerificationStatus::Completed,
        "{:?}",
        run.detail
    );
}
