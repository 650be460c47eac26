//! `execution cancel` and `run cancel`: end an execution or a verifier run, with a reason.

use crate::lifecycle_cmd::{Common, Ctx, runtime};
use crate::remote::segment;
use anyhow::Result;
use std::process::ExitCode;
use verdict_engine::{Cancellation, Cancelled};

/// `execution ...`.
#[derive(clap::Subcommand)]
pub enum ExecutionCommand {
    /// Cancel an execution (an operator, or the producer of its current subject): no decision
    /// of it applies again, and it takes no new subject, request, run, gate run or human
    /// decision; its open runs are cancelled.
    #[command(
        after_help = "Example:\n  verdict execution cancel ex-1 --reason \"superseded by ex-2\"\n\nA retry after a cancellation is a new execution."
    )]
    Cancel {
        /// Execution id.
        execution: String,
        /// Why (required; recorded and shown by `status` and `history`).
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        common: Common,
    },
    #[command(flatten)]
    Browse(crate::browse_cmd::ExecutionBrowse),
}

/// `run cancel RUN --reason TEXT`.
#[derive(clap::Args)]
#[command(
    after_help = "Example:\n  verdict run cancel run-1 --reason \"the verifier's provider is down\"\n\nOperators only. A verifier gives up on its own run by submitting an unavailable result\nwith reason cancelled. A result the run submits after it is cancelled is history only."
)]
pub struct RunCancelArgs {
    /// Run id.
    run: String,
    /// Why (required; recorded and shown by `history`).
    #[arg(long)]
    reason: String,
    #[command(flatten)]
    common: Common,
}

/// Runs `execution ...`.
pub fn run(cmd: ExecutionCommand) -> Result<ExitCode> {
    let (execution, reason, common) = match cmd {
        ExecutionCommand::Cancel {
            execution,
            reason,
            common,
        } => (execution, reason, common),
        ExecutionCommand::Browse(cmd) => {
            return runtime()?.block_on(crate::browse_cmd::execution(cmd));
        }
    };
    runtime()?.block_on(async {
        let c: Cancellation = if let Some(remote) = crate::remote::client(&common)? {
            remote
                .post(
                    &format!("v1/executions/{}/cancel", segment(&execution)),
                    &verdict_server::routes::NewCancellation { reason },
                )
                .await?
        } else {
            let ctx = Ctx::open(&common).await?;
            ctx.engine
                .cancel_execution(&ctx.caller().await?, &execution, &reason)
                .await?
        };
        outln!("{}", describe(&c))?;
        Ok(ExitCode::SUCCESS)
    })
}

/// Runs `run cancel`.
pub(crate) async fn run_cancel(args: RunCancelArgs) -> Result<ExitCode> {
    let c: Cancellation = if let Some(remote) = crate::remote::client(&args.common)? {
        remote
            .post(
                &format!("v1/runs/{}/cancel", segment(&args.run)),
                &verdict_server::admin::Reason {
                    reason: args.reason,
                },
            )
            .await?
    } else {
        let ctx = Ctx::open(&args.common).await?;
        ctx.engine
            .cancel_run(&ctx.caller().await?, &args.run, &args.reason)
            .await?
    };
    outln!("{}", describe(&c))?;
    Ok(ExitCode::SUCCESS)
}

/// One line: what was cancelled, by whom, why.
pub(crate) fn describe(c: &Cancellation) -> String {
    let what = match &c.cancelled {
        Cancelled::Execution { id } => format!("execution {}", id.as_str()),
        Cancelled::Run { id } => format!("run {}", id.as_str()),
    };
    format!(
        "{what} cancelled by {} ({}): {}",
        c.by.principal.as_str(),
        c.by.role.as_str(),
        c.reason
    )
}
