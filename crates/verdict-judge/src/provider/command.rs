//! The `command` provider: an external program (a coding agent's command line, a local model
//! runner, a script) that reads the rendered request on standard input and prints one result
//! document on standard output.
//!
//! The program runs without a shell, with a cleared environment (only the allowlist of
//! [`verdict_core::child_env`] and the variables the configuration lists pass through, never
//! one of verdict's own), in its own process group so that a
//! timeout kills it and everything it started. Output is bounded. A non-zero exit is a failure
//! of the program, never a result. Token counts are the deterministic estimate.

use super::{CallFailure, CallFuture, CallInput, CallReply, Output, Provider};
use crate::secret::{Secret, redact_all, redact_then_cut};
use crate::tokens;
use serde_json::{Value, json};
use std::process::Stdio;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The most standard output read from the program; a program that prints more is stopped.
const MAX_STDOUT: u64 = 8 * 1024 * 1024;
/// How much standard error is kept (and redacted whole) before the excerpt is cut from it; the
/// rest is read and dropped, so a chatty program never blocks on, or dies of, a full pipe.
const STDERR_KEPT: u64 = 64 * 1024;
/// The most standard error kept for a failure's detail.
const STDERR_EXCERPT: usize = 512;

/// An external program.
#[derive(Debug)]
pub struct CommandProvider {
    argv: Vec<String>,
    model: String,
    snapshot: Option<String>,
    pass_env: Vec<String>,
    /// The values of the passed variables: a program is often given its own API key this way,
    /// and may print it, so they are redacted like a provider's key.
    secrets: Vec<Secret>,
}

impl CommandProvider {
    /// A provider running `argv` (program and arguments). `model` and `snapshot` are recorded as
    /// given, since a program cannot be asked reliably.
    pub fn new(
        argv: Vec<String>,
        model: &str,
        snapshot: Option<String>,
        pass_env: Vec<String>,
    ) -> Result<Self, String> {
        if argv.first().is_none_or(String::is_empty) {
            return Err("the command is empty".into());
        }
        let secrets = pass_env
            .iter()
            .filter_map(|v| Secret::from_env(v))
            .filter(|s| s.expose().len() >= 8)
            .collect();
        Ok(Self {
            argv,
            model: model.to_owned(),
            snapshot,
            pass_env,
            secrets,
        })
    }

    async fn run(&self, input: CallInput<'_>) -> Result<CallReply, CallFailure> {
        let (program, args) = self
            .argv
            .split_first()
            .ok_or_else(|| CallFailure::Command("the command is empty".into()))?;
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(args)
            .env_clear()
            .envs(verdict_core::child_env::inherited(std::env::vars_os()))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        // The configuration is checked to name none of verdict's own variables; this is the
        // second fence, for a provider built some other way.
        for var in self
            .pass_env
            .iter()
            .filter(|v| !verdict_core::child_env::is_withheld(v))
        {
            if let Some(v) = std::env::var_os(var) {
                cmd.env(var, v);
            }
        }
        #[cfg(unix)]
        cmd.process_group(0);
        let mut child = cmd
            .spawn()
            .map_err(|e| CallFailure::Command(format!("cannot start {program:?}: {e}")))?;
        let group = GroupGuard(child.id());
        let request = format!("{}\n\n{}", input.system, input.user);
        let (mut stdin, stdout, mut stderr) =
            match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
                (Some(i), Some(o), Some(e)) => (i, o, e),
                _ => return Err(CallFailure::Command("no pipes to the program".into())),
            };
        let write = async move {
            // A program that exits without reading its input is judged by its exit status and
            // output; a broken pipe here is not itself the failure.
            let _ = stdin.write_all(request.as_bytes()).await;
            let _ = stdin.shutdown().await;
        };
        let read_out = async {
            let mut buf = Vec::new();
            let r = stdout.take(MAX_STDOUT + 1).read_to_end(&mut buf).await;
            // Past the limit the program is stopped at once: left running, it would block on
            // the full pipe (or die of the closed one) and be reported by what that did to it.
            if u64::try_from(buf.len()).unwrap_or(u64::MAX) > MAX_STDOUT {
                group.kill();
            }
            r.map(|_| buf)
        };
        let read_err = async move {
            let mut buf = Vec::new();
            let _ = (&mut stderr).take(STDERR_KEPT).read_to_end(&mut buf).await;
            let _ = tokio::io::copy(&mut stderr, &mut tokio::io::sink()).await;
            buf
        };
        let ((), out, err) = tokio::join!(write, read_out, read_err);
        let status = child
            .wait()
            .await
            .map_err(|e| CallFailure::Command(format!("cannot wait for {program:?}: {e}")))?;
        let out = out.map_err(|e| {
            CallFailure::Command(format!("cannot read the output of {program:?}: {e}"))
        })?;
        // Checked before the exit status: a program stopped for printing too much was killed,
        // and the limit, not the signal, is why.
        if u64::try_from(out.len()).unwrap_or(u64::MAX) > MAX_STDOUT {
            return Err(CallFailure::Protocol(format!(
                "{program:?} printed more than {MAX_STDOUT} bytes on standard output and was stopped"
            )));
        }
        if !status.success() {
            let err = String::from_utf8_lossy(&err);
            return Err(CallFailure::Command(format!(
                "{program:?} exited with {status}; stderr: {}",
                redact_then_cut(err.trim(), &self.secrets, STDERR_EXCERPT)
            )));
        }
        let stdin_len = input.system.len() + input.user.len() + 2;
        let out_len = out.len();
        let output = match String::from_utf8(out) {
            Ok(text) if text.trim().is_empty() => {
                Output::Missing(format!("{program:?} printed nothing"))
            }
            Ok(text) => Output::Document(text),
            Err(_) => Output::Missing(format!("{program:?} printed bytes that are not utf-8")),
        };
        Ok(CallReply {
            output,
            snapshot: self.snapshot.clone(),
            tokens_in: Some(tokens::estimate(stdin_len)),
            tokens_out: Some(tokens::estimate(out_len)),
            tokens_estimated: true,
            reply_bytes: out_len,
            body_bytes: 0,
        })
    }
}

/// Kills the program's whole process group when the call ends, however it ends: on a timeout
/// the call's future is dropped, and anything the program started must not outlive it.
struct GroupGuard(Option<u32>);

impl GroupGuard {
    /// Kills the group now.
    fn kill(&self) {
        #[cfg(unix)]
        if let Some(pid) = self
            .0
            .and_then(|p| i32::try_from(p).ok())
            .and_then(rustix::process::Pid::from_raw)
        {
            // The group may already be gone; nothing to do then.
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

impl Provider for CommandProvider {
    fn name(&self) -> &str {
        "command"
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn identity(&self) -> Value {
        json!({"provider": self.name(), "argv": self.argv, "model": self.model, "snapshot": self.snapshot})
    }

    fn call<'a>(&'a self, input: CallInput<'a>) -> CallFuture<'a> {
        Box::pin(self.run(input))
    }

    fn redact(&self, text: &str) -> String {
        redact_all(text, &self.secrets)
    }
}
