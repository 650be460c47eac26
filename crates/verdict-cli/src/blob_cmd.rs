//! `blob put FILE` and `blob get DIGEST`: the bytes a subject names by raw digest, kept in the
//! store. Thin over the engine's `put_blob` and `blob`, or their routes with `--server`.

use crate::audit_cmd::write_out;
use crate::lifecycle_cmd::{Common, Ctx, runtime};
use crate::remote::segment;
use anyhow::Result;
use std::path::PathBuf;
use std::process::ExitCode;

/// `blob ...`.
#[derive(clap::Subcommand)]
pub enum BlobCommand {
    /// Store a file's bytes under their raw digest (producers, operators and runners; at most
    /// 8 MiB) and print the digest. The same bytes stored again store nothing.
    #[command(
        after_help = "Example:\n  verdict blob put change.diff --media-type text/x-diff\n\nThe digest printed is the one a subject names in objective.digest or resources[].digest."
    )]
    Put {
        /// The file (`-` for standard input).
        file: String,
        /// The media type to keep with the bytes (served back by `GET /v1/blobs/{digest}`).
        #[arg(long)]
        media_type: Option<String>,
        #[command(flatten)]
        common: Common,
    },
    /// Write the bytes stored under a raw digest (an operator, the principal that put them, or
    /// one whose read grant covers a subject naming the digest).
    #[command(after_help = "Example:\n  verdict blob get sha256:... -o change.diff")]
    Get {
        /// The raw digest.
        digest: String,
        /// Write to this file instead of standard output.
        #[arg(short, long)]
        out: Option<PathBuf>,
        #[command(flatten)]
        common: Common,
    },
}

/// Runs `blob ...`.
pub fn run(cmd: BlobCommand) -> Result<ExitCode> {
    runtime()?.block_on(async {
        match cmd {
            BlobCommand::Put {
                file,
                media_type,
                common,
            } => {
                let bytes = crate::input::read_all(&file)?;
                let digest = verdict_core::digest::raw(&bytes);
                let stored = if let Some(remote) = crate::remote::client(&common)? {
                    let put: verdict_server::blobs::BlobOut = remote
                        .put_bytes(
                            &format!("v1/blobs/{}", segment(digest.as_str())),
                            bytes,
                            media_type.as_deref(),
                        )
                        .await?;
                    put.digest
                } else {
                    let ctx = Ctx::open(&common).await?;
                    let put = ctx
                        .engine
                        .put_blob(
                            &ctx.caller().await?,
                            digest.as_str(),
                            &bytes,
                            media_type.as_deref(),
                        )
                        .await?;
                    put.blob.digest
                };
                outln!("{stored}")?;
            }
            BlobCommand::Get {
                digest,
                out,
                common,
            } => {
                let bytes = if let Some(remote) = crate::remote::client(&common)? {
                    remote
                        .get_bytes(&format!("v1/blobs/{}", segment(&digest)))
                        .await?
                } else {
                    let ctx = Ctx::open(&common).await?;
                    ctx.engine.blob(&ctx.caller().await?, &digest).await?.bytes
                };
                write_out(out.as_deref(), &bytes)?;
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}
