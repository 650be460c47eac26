//! `verdict key generate | export`: the ed25519 keys attestations are signed with. The engine
//! records a public key the first time it signs with it (`verdict attest`).

use anyhow::{Context, Result};
use std::path::PathBuf;
use std::process::ExitCode;
use verdict_attest::keys::{hex, key_id};
use verdict_store::checkpoint;

/// Key commands.
#[derive(clap::Subcommand)]
pub enum KeyCommand {
    /// Create a signing key file (mode 0600, never overwritten) and print its public key.
    #[command(
        after_help = "Example:\n  verdict key generate --out attest.key --public-out attest.pub"
    )]
    Generate {
        /// The private key file to create.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// Also write the public key to this file.
        #[arg(long, value_name = "FILE")]
        public_out: Option<PathBuf>,
        #[command(flatten)]
        local: crate::remote::NoServer,
    },
    /// Print (or write) the public key of a signing key file.
    #[command(after_help = "Example:\n  verdict key export --key attest.key --out attest.pub")]
    Export {
        /// The private key file.
        #[arg(long, value_name = "FILE")]
        key: PathBuf,
        /// Write the public key here instead of standard output.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        #[command(flatten)]
        local: crate::remote::NoServer,
    },
}

/// Runs a key command.
pub fn run(cmd: KeyCommand) -> Result<ExitCode> {
    let (key, out) = match cmd {
        KeyCommand::Generate {
            out, public_out, ..
        } => {
            let key = checkpoint::generate_key()?;
            checkpoint::write_key_file(&out, &key)?;
            (key, public_out)
        }
        KeyCommand::Export { key, out, .. } => (
            checkpoint::read_key_file(&key).with_context(|| format!("{}", key.display()))?,
            out,
        ),
    };
    let public = key.verifying_key();
    let line = format!("{}\n", hex(public.as_bytes()));
    if let Some(path) = &out {
        crate::audit_cmd::write_out(Some(path), line.as_bytes())?;
    }
    crate::out::write_all(line.as_bytes())?;
    eprintln!("key id {}", key_id(&public));
    Ok(ExitCode::SUCCESS)
}

/// Reads a public key file (64 hex digits, as `key generate --public-out` writes it).
pub(crate) fn read_public(path: &std::path::Path) -> Result<ed25519_dalek::VerifyingKey> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
    verdict_attest::keys::parse_public_key(&text).with_context(|| format!("{}", path.display()))
}
