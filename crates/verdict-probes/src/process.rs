//! Running one probe process: no shell unless asked, output capped, nothing left behind.
//!
//! The process starts from an empty environment plus the allowlist of
//! [`verdict_core::child_env`] and what the spec sets: a check usually runs the producer's
//! code, which must not see the token or store login of the process that runs it.
//!
//! The process gets its own process group. If the observation is abandoned (timeout, Ctrl-C)
//! the whole group is killed, so a probe's grandchildren cannot outlive it and keep a pipe
//! open.

use crate::output::{Captured, read_capped};
use std::collections::BTreeMap;
use std::process::Stdio;
use tokio::io::AsyncWriteExt;

/// What to run.
#[derive(Debug, Clone, Copy)]
pub struct ProcSpec<'a> {
    /// Program and arguments.
    pub argv: &'a [String],
    /// Extra environment.
    pub env: Option<&'a BTreeMap<String, String>>,
    /// Working directory.
    pub cwd: Option<&'a str>,
    /// Standard input.
    pub stdin: Option<&'a str>,
    /// Output cap per stream.
    pub cap: u64,
}

/// How it ended and what it printed.
#[derive(Debug, Clone)]
pub struct ProcOutput {
    /// Exit code, when it exited.
    pub code: Option<i32>,
    /// Signal number, when a signal ended it.
    pub signal: Option<i32>,
    /// Standard output.
    pub stdout: Captured,
    /// Standard error.
    pub stderr: Captured,
}

impl ProcOutput {
    /// "exit code 3" or "killed by signal 9".
    #[must_use]
    pub fn status_text(&self) -> String {
        match (self.code, self.signal) {
            (Some(c), _) => format!("exit code {c}"),
            (None, Some(s)) => format!("killed by signal {s}"),
            (None, None) => "no exit status".into(),
        }
    }
}

/// Kills the process group when dropped before being disarmed.
struct GroupGuard(Option<rustix::process::Pid>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pid) = self.0.take() {
            // The group may already be gone; there is nothing to do about an error here.
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}

/// Runs the process to its end.
pub async fn run(spec: ProcSpec<'_>) -> Result<ProcOutput, String> {
    let (program, args) = spec.argv.split_first().ok_or("empty command")?;
    if let Some(name) = spec
        .env
        .and_then(|env| env.keys().find(|k| verdict_core::child_env::is_withheld(k)))
    {
        return Err(format!(
            "the probe's env sets {name:?}; verdict's own settings and store logins are never given to a probe"
        ));
    }
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .env_clear()
        .envs(verdict_core::child_env::inherited(std::env::vars_os()))
        .stdin(if spec.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(env) = spec.env {
        cmd.envs(env);
    }
    if let Some(dir) = spec.cwd {
        cmd.current_dir(dir);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {program:?}: {e}"))?;
    let mut guard = GroupGuard(
        child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .and_then(rustix::process::Pid::from_raw),
    );
    let stdin = child.stdin.take();
    let stdout = child.stdout.take().ok_or("no stdout pipe")?;
    let stderr = child.stderr.take().ok_or("no stderr pipe")?;
    let input = spec.stdin.unwrap_or_default().as_bytes().to_vec();
    let feed = async move {
        if let Some(mut w) = stdin {
            // A process that does not read its input closes the pipe; that is not our error.
            let _ = w.write_all(&input).await;
            let _ = w.shutdown().await;
        }
    };
    let (_, out, err) = tokio::join!(
        feed,
        read_capped(stdout, spec.cap),
        read_capped(stderr, spec.cap)
    );
    let status = child
        .wait()
        .await
        .map_err(|e| format!("cannot wait for {program:?}: {e}"))?;
    guard.0 = None;
    use std::os::unix::process::ExitStatusExt;
    Ok(ProcOutput {
        code: status.code(),
        signal: status.signal(),
        stdout: out.map_err(|e| format!("cannot read the output of {program:?}: {e}"))?,
        stderr: err.map_err(|e| format!("cannot read the errors of {program:?}: {e}"))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn argv(parts: &[&str]) -> Vec<String> {
        parts.iter().map(|s| (*s).to_owned()).collect()
    }

    #[tokio::test]
    async fn captures_both_streams_and_the_exit_code() {
        let a = argv(&["sh", "-c", "read x; echo out $x; echo err >&2; exit 3"]);
        let o = run(ProcSpec {
            argv: &a,
            env: None,
            cwd: None,
            stdin: Some("in\n"),
            cap: 1024,
        })
        .await
        .unwrap();
        assert_eq!(o.code, Some(3));
        assert_eq!(o.stdout.text(), "out in\n");
        assert_eq!(o.stderr.text(), "err\n");
    }

    #[tokio::test]
    async fn an_abandoned_run_kills_its_grandchildren() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("alive");
        let script = format!("(sleep 1; touch {}) & sleep 30", marker.display());
        let a = argv(&["sh", "-c", &script]);
        let spec = ProcSpec {
            argv: &a,
            env: None,
            cwd: None,
            stdin: None,
            cap: 1024,
        };
        assert!(
            tokio::time::timeout(Duration::from_millis(200), run(spec))
                .await
                .is_err()
        );
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(
            !marker.exists(),
            "a grandchild outlived the abandoned probe"
        );
    }

    #[tokio::test]
    async fn a_missing_program_is_an_error() {
        let a = argv(&["/nonexistent/program"]);
        let e = run(ProcSpec {
            argv: &a,
            env: None,
            cwd: None,
            stdin: None,
            cap: 10,
        })
        .await
        .unwrap_err();
        assert!(e.contains("cannot start"), "{e}");
    }
}
