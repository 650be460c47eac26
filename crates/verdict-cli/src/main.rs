//! The `verdict` binary: one face over the crates of the workspace.
//!
//! Each command lives in its own module with a `clap::Args` struct and a `run` function that
//! returns the process exit code; this file only dispatches. Standard output goes through
//! [`out`], never `print!`.

#![deny(clippy::print_stdout)]

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::process::ExitCode;

#[macro_use]
mod out;

mod attest_cmd;
mod audit_cmd;
mod blob_cmd;
mod browse_cmd;
mod cancel_cmd;
mod check_cmd;
mod completions_cmd;
mod digest_cmd;
mod export_cmd;
mod gate_cmd;
mod input;
mod judge_cmd;
mod key_cmd;
mod ledger_cmd;
mod lifecycle_cmd;
mod man_cmd;
mod quickstart;
mod remote;
mod scaffold_cmd;
mod schema_cmd;
mod serve_cmd;
mod store_cmd;
mod stream;
mod verify_cmd;
mod worker_cmd;

/// verdict: independent verification with a deterministic Gate.
#[derive(Parser)]
#[command(
    name = "verdict",
    version,
    about,
    long_about = None,
    after_help = "Examples:\n  verdict gate evaluate examples/merge-gate/bundle.json\n  verdict digest --kind subject subject.json\n  verdict schema bundle"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a check spec against a live system; optionally write check evidence.
    Check(Box<check_cmd::Args>),
    /// Evaluate gate bundles.
    #[command(
        subcommand,
        after_help = "Example:\n  verdict gate evaluate examples/merge-gate/bundle.json"
    )]
    Gate(gate_cmd::GateCommand),
    /// Print the digest of a JSON document or a raw file.
    Digest(digest_cmd::Args),
    /// Print the JSON Schema of a contract document.
    Schema(schema_cmd::Args),
    /// Inspect the model verifier: render what a model would be shown for a request.
    #[command(
        subcommand,
        after_help = "Example:\n  verdict judge render request.json"
    )]
    Judge(judge_cmd::JudgeCommand),
    /// Manage the evidence store (SQLite or PostgreSQL).
    #[command(
        subcommand,
        after_help = "Example:\n  verdict store migrate --store sqlite:verdict.db"
    )]
    Store(store_cmd::StoreCommand),
    /// Check the store's audit chain; sign and check checkpoints of it.
    #[command(subcommand, after_help = "Example:\n  verdict audit verify --json")]
    Audit(audit_cmd::AuditCommand),
    /// The verification lifecycle: init, principal, grant, policy, subject, evidence, request,
    /// run, result, decide, status, history, quickstart.
    #[command(flatten)]
    Lifecycle(lifecycle_cmd::LifecycleCommand),
    /// List and show executions; cancel one, with a reason (an operator, or its producer).
    #[command(
        subcommand,
        after_help = "Examples:\n  verdict execution show ex-1\n  verdict execution cancel ex-1 --reason \"superseded by ex-2\""
    )]
    Execution(cancel_cmd::ExecutionCommand),
    /// Store the bytes a subject names by raw digest, and read them back.
    #[command(
        subcommand,
        after_help = "Examples:\n  verdict blob put change.diff --media-type text/x-diff\n  verdict blob get sha256:... -o change.diff"
    )]
    Blob(blob_cmd::BlobCommand),
    /// Run the model verifiers a stored request asks for, as the verifier whose token is given.
    Verify(Box<verify_cmd::Args>),
    /// Work jobs of one role from the store's queue until stopped (runner, verifier, gate).
    Worker(Box<worker_cmd::Args>),
    /// Enqueue a request's jobs for the workers; list the queue.
    #[command(subcommand, after_help = "Example:\n  verdict jobs enqueue sha256:...")]
    Jobs(worker_cmd::JobsCommand),
    /// Serve the HTTP API over a store (routes: docs/server.md, GET /openapi.json).
    Serve(Box<serve_cmd::Args>),
    /// Create and export the ed25519 keys attestations are signed with.
    #[command(
        subcommand,
        after_help = "Example:\n  verdict key generate --out attest.key --public-out attest.pub"
    )]
    Key(key_cmd::KeyCommand),
    /// Sign a stored decision as in-toto statements in DSSE envelopes, or verify such a file.
    Attest(Box<attest_cmd::Args>),
    /// Write a subject's check evidence as JUnit, or a decision as GitHub check payloads.
    #[command(
        subcommand,
        after_help = "Example:\n  verdict export junit ex-1 --out verdict-junit.xml"
    )]
    Export(export_cmd::ExportCommand),
    /// The reliability ledger: verified pass rates per capability cohort.
    Ledger(Box<ledger_cmd::Args>),
    /// Print a shell completion script (bash, elvish, fish, powershell, zsh).
    Completions(completions_cmd::Args),
    /// Write the manual pages of every command into a directory.
    Man(man_cmd::Args),
}

fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    // A command that works only here refuses --server before it starts.
    if let Some(refusal) = remote::refusal(&matches) {
        eprintln!("verdict: {refusal}");
        return ExitCode::from(2);
    }
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    // Commands that run someone else's program (a producer's check, a model runner) close this
    // process to it first: its environment and command line may hold the caller's token.
    if matches!(
        cli.command,
        Command::Check(_) | Command::Verify(_) | Command::Worker(_) | Command::Judge(_)
    ) && let Err(e) = verdict_probes::inspection::deny()
    {
        eprintln!("verdict: cannot keep this process from the programs it runs: {e}");
        return ExitCode::from(2);
    }
    let result = match cli.command {
        Command::Check(args) => check_cmd::run(&args),
        Command::Gate(cmd) => gate_cmd::run(cmd),
        Command::Digest(args) => digest_cmd::run(&args),
        Command::Schema(args) => schema_cmd::run(&args),
        Command::Judge(cmd) => judge_cmd::run(cmd),
        Command::Store(cmd) => store_cmd::run(cmd),
        Command::Audit(cmd) => audit_cmd::run(cmd),
        Command::Lifecycle(cmd) => lifecycle_cmd::run(cmd),
        Command::Execution(cmd) => cancel_cmd::run(cmd),
        Command::Blob(cmd) => blob_cmd::run(cmd),
        Command::Verify(args) => verify_cmd::run(&args),
        Command::Worker(args) => worker_cmd::run(&args),
        Command::Jobs(cmd) => worker_cmd::run_jobs(cmd),
        Command::Serve(args) => serve_cmd::run(&args),
        Command::Key(cmd) => key_cmd::run(cmd),
        Command::Attest(args) => attest_cmd::run(&args),
        Command::Export(cmd) => export_cmd::run(cmd),
        Command::Ledger(args) => ledger_cmd::run(&args),
        Command::Completions(args) => completions_cmd::run(&args, Cli::command()),
        Command::Man(args) => man_cmd::run(&args, Cli::command()),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            // Errors quote the values they refuse; one given megabytes long is shown cut.
            eprintln!(
                "verdict: {}",
                verdict_core::quote::bound_message(&format!("{e:#}"))
            );
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The commands that work through a server (`--server` / `VERDICT_SERVER`), printing what
    /// they print on a store opened here.
    const REMOTE: &[&str] = &[
        "principal add",
        "principal list",
        "principal show",
        "principal token revoke",
        "principal token rotate",
        "grant add",
        "grant revoke",
        "grant list",
        "grant show",
        "policy set",
        "policy list",
        "policy show",
        "subject put",
        "evidence add",
        "request create",
        "run admit",
        "run list",
        "run show",
        "run cancel",
        "result submit",
        "decide",
        "status",
        "history",
        "execution cancel",
        "execution list",
        "execution show",
        "gate run",
        "gate replay",
        "jobs enqueue",
        "jobs list",
        "audit verify",
        "blob put",
        "blob get",
        "export junit",
        "export github",
        "ledger",
    ];

    /// The commands that take the store's options and refuse `--server`, naming themselves,
    /// where they would open the store.
    const REFUSED_WHERE_THE_STORE_OPENS: &[&str] = &[
        "init",
        "quickstart",
        "worker",
        "verify",
        "attest",
        "subject new",
        "result template",
        "principal login give",
        "principal login revoke",
    ];

    /// Every command that runs (not a group that only holds subcommands), by path.
    fn runnable(cmd: &clap::Command, prefix: &str, out: &mut Vec<(String, clap::Command)>) {
        for sub in cmd.get_subcommands() {
            let path = if prefix.is_empty() {
                sub.get_name().to_owned()
            } else {
                format!("{prefix} {}", sub.get_name())
            };
            if sub.get_subcommands().next().is_none() || !sub.is_subcommand_required_set() {
                out.push((path.clone(), sub.clone()));
            }
            runnable(sub, &path, out);
        }
    }

    #[test]
    fn every_command_either_works_through_a_server_or_refuses_it_with_a_reason() {
        let mut all = Vec::new();
        runnable(&Cli::command(), "", &mut all);
        let paths: Vec<&str> = all.iter().map(|(p, _)| p.as_str()).collect();
        for (path, cmd) in &all {
            if path == "help" || path.ends_with(" help") {
                continue;
            }
            let server = cmd
                .get_arguments()
                .find(|a| a.get_long() == Some("server"))
                .unwrap_or_else(|| panic!("`verdict {path}` takes no --server"));
            if server.get_id() == remote::LOCAL_SERVER {
                assert!(
                    remote::LOCAL_ONLY.iter().any(|(p, _)| *p == path.as_str()),
                    "`verdict {path}` refuses --server without a reason of its own"
                );
            } else {
                assert!(
                    REMOTE.contains(&path.as_str())
                        || REFUSED_WHERE_THE_STORE_OPENS.contains(&path.as_str()),
                    "`verdict {path}` takes the store's options but is listed nowhere"
                );
            }
        }
        // Every listed command exists, once.
        let listed = REMOTE
            .iter()
            .chain(REFUSED_WHERE_THE_STORE_OPENS)
            .copied()
            .chain(remote::LOCAL_ONLY.iter().map(|(p, _)| *p));
        let mut seen = std::collections::BTreeSet::new();
        for p in listed {
            assert!(
                paths.contains(&p),
                "`verdict {p}` is listed but is no command"
            );
            assert!(seen.insert(p), "`verdict {p}` is listed twice");
        }
    }

    #[test]
    fn a_command_that_works_only_here_refuses_the_server_naming_itself() {
        let matches = Cli::command()
            .try_get_matches_from(["verdict", "key", "export", "--key", "k", "--server", "u"])
            .unwrap_or_else(|e| panic!("{e}"));
        let refusal = remote::refusal(&matches).unwrap_or_default();
        assert!(
            refusal.starts_with("verdict key export cannot run against a server"),
            "{refusal}"
        );
        assert!(refusal.contains("never sent to a server"), "{refusal}");
        // Without --server it runs.
        let matches = Cli::command()
            .try_get_matches_from(["verdict", "key", "export", "--key", "k"])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(remote::refusal(&matches), None);
    }
}
