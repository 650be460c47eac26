//! `verdict export junit | github`: a subject's check evidence as JUnit XML, and the decision
//! that applies now as GitHub check-run and commit-status bodies. Files only; nothing is sent
//! to GitHub. With `--server` the server renders them through the same engine use cases.

use crate::lifecycle_cmd::{Common, Ctx, runtime};
use crate::remote::segment;
use anyhow::Result;
use std::path::PathBuf;
use std::process::ExitCode;

/// Export commands.
#[derive(clap::Subcommand)]
pub enum ExportCommand {
    /// The check evidence of an execution's current subject as JUnit XML; a pinned check
    /// without evidence is an error case.
    #[command(after_help = "Example:\n  verdict export junit ex-1 --out verdict-junit.xml")]
    Junit {
        /// Execution id.
        execution: String,
        /// Where to write (default: standard output).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        #[command(flatten)]
        common: Common,
    },
    /// The execution's applicable decision as GitHub check-run and commit-status bodies
    /// (`{"check_run": ..., "commit_status": ...}`); only an applicable pass is `success`.
    #[command(
        after_help = "Example:\n  verdict export github ex-1 --head-sha \"$(git rev-parse HEAD)\" --out github.json"
    )]
    Github {
        /// Execution id.
        execution: String,
        /// The commit the check is about (40 or 64 lowercase hex digits).
        #[arg(long, value_name = "SHA")]
        head_sha: String,
        /// Where to write (default: standard output).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        #[command(flatten)]
        common: Common,
    },
}

/// Runs an export command.
pub fn run(cmd: ExportCommand) -> Result<ExitCode> {
    runtime()?.block_on(async {
        let (text, out) = match cmd {
            ExportCommand::Junit {
                execution,
                out,
                common,
            } => {
                let text = if let Some(remote) = crate::remote::client(&common)? {
                    let bytes = remote
                        .get_bytes(&format!(
                            "v1/executions/{}/export/junit",
                            segment(&execution)
                        ))
                        .await?;
                    String::from_utf8(bytes)
                        .map_err(|_| anyhow::anyhow!("the server's JUnit report is not UTF-8"))?
                } else {
                    let ctx = Ctx::open(&common).await?;
                    ctx.engine.junit(&ctx.caller().await?, &execution).await?
                };
                (text, out)
            }
            ExportCommand::Github {
                execution,
                head_sha,
                out,
                common,
            } => {
                let p: verdict_attest::github::GithubPayloads =
                    if let Some(remote) = crate::remote::client(&common)? {
                        remote
                            .get(&format!(
                                "v1/executions/{}/export/github?head_sha={}",
                                segment(&execution),
                                segment(&head_sha)
                            ))
                            .await?
                    } else {
                        let ctx = Ctx::open(&common).await?;
                        let caller = ctx.caller().await?;
                        ctx.engine
                            .github_payloads(&caller, &execution, &head_sha)
                            .await?
                    };
                let mut text = serde_json::to_string_pretty(&p)?;
                text.push('\n');
                (text, out)
            }
        };
        crate::audit_cmd::write_out(out.as_deref(), text.as_bytes())?;
        Ok(ExitCode::SUCCESS)
    })
}
