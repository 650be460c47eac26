//! Running one probe process: no shell unless asked, output capped, nothing left behind.
//!
//! The process starts from an empty environment plus the allowlist of
//! [`verdict_core::child_env`] and what the spec sets: a check usually runs the producer's
//! code, which must not see the token or store login of the process that runs it.
//!
//! The process gets its own process group, and the whole group is killed however the run
//! ends: when the program exits (a test suite that backgrounds a child and exits 0 leaves
//! nothing running that could rewrite what verdict writes afterwards), and when the
//! observation is abandoned (timeout, Ctrl-C). A descendant that leaves the group with
//! `setsid` escapes that; a host that starts every child through this module can adopt such
//! orphans and kill them ([`adopt_orphans`], [`kill_orphans`]), within a bound after which
//! the caller must not vouch for the run.

use crate::output::{Captured, read_capped};
use rustix::process::{Pid, Signal};
use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::OwnedFd;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use tokio::io::AsyncWriteExt;
use tokio::io::unix::AsyncFd;

/// Pids of the children started here and not yet reaped: the children [`kill_orphans`]
/// leaves alone.
static STARTED: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

/// Whether this process adopts orphaned descendants ([`adopt_orphans`]).
static ADOPTING: AtomicBool = AtomicBool::new(false);

fn started() -> MutexGuard<'static, BTreeSet<i32>> {
    // The set stays consistent whatever panicked while holding it: every change is one call.
    STARTED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A program started in its own process group. The group is killed when the program has
/// exited and whenever this is dropped before that.
pub(crate) struct Group {
    child: tokio::process::Child,
    /// The group's id (the program's pid) until the group has been killed after the exit.
    pgid: Option<Pid>,
    pid: Option<i32>,
    /// Readable once the program has exited, before it is reaped (Linux pidfd).
    exit: Option<AsyncFd<OwnedFd>>,
}

impl Group {
    /// Starts `cmd` as the leader of a new process group.
    pub(crate) fn spawn(cmd: &mut tokio::process::Command) -> std::io::Result<Self> {
        cmd.process_group(0).kill_on_drop(true);
        // Held across the fork so that an orphan sweep never takes the new child for an orphan.
        let mut set = started();
        let child = cmd.spawn()?;
        let pid = child.id().and_then(|id| i32::try_from(id).ok());
        if let Some(p) = pid {
            set.insert(p);
        }
        drop(set);
        let pgid = pid.and_then(Pid::from_raw);
        Ok(Self {
            exit: pgid.and_then(exit_notifier),
            child,
            pgid,
            pid,
        })
    }

    /// The program's standard streams.
    pub(crate) fn child_mut(&mut self) -> &mut tokio::process::Child {
        &mut self.child
    }

    /// Kills every process of the group (the program and what it started and left behind).
    pub(crate) fn kill(&mut self) {
        if let Some(pgid) = self.pgid {
            // ESRCH: the group is empty already; there is nothing else to do about an error.
            let _ = rustix::process::kill_process_group(pgid, Signal::KILL);
        }
    }

    /// Waits for the program to exit, kills what is left of its group, and reaps it.
    pub(crate) async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        if let Some(fd) = &self.exit {
            // Until it is reaped the exited program keeps its pid, which is the group's id,
            // so the kill cannot reach a group that reused the number.
            let _ = fd.readable().await;
            self.kill();
            self.pgid = None;
            return self.child.wait().await;
        }
        // Without a pidfd the exit is only seen by reaping; the group is killed just after,
        // when its id could in principle have been reused (only if the group was empty).
        let status = self.child.wait().await;
        self.kill();
        self.pgid = None;
        status
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.kill();
        if let Some(p) = self.pid {
            started().remove(&p);
        }
    }
}

/// A descriptor that becomes readable when the process exits, where the kernel has pidfds.
fn exit_notifier(pid: Pid) -> Option<AsyncFd<OwnedFd>> {
    #[cfg(target_os = "linux")]
    {
        let fd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()?;
        #[expect(
            deprecated,
            reason = "deprecated because a registered descriptor could be closed behind the registration; this one is an OwnedFd the AsyncFd owns, and the replacement constructor is unsafe, which this crate does not use"
        )]
        let registered = AsyncFd::with_interest(fd, tokio::io::Interest::READABLE).ok();
        registered
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = pid;
        None
    }
}

/// Makes this process the reaper of its orphaned descendants (Linux), so that a process a
/// program started and detached with `setsid` before exiting becomes this process's child
/// instead of init's, where [`kill_orphans`] finds it. Only for a host that starts every
/// child process through this module (`verdict check`): any other child would be taken for
/// an orphan.
///
/// # Errors
/// The kernel's refusal; nothing is adopted then.
pub fn adopt_orphans() -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        rustix::process::set_child_subreaper(Some(rustix::process::getpid()))?;
        ADOPTING.store(true, Ordering::SeqCst);
    }
    Ok(())
}

/// How long [`kill_orphans`] keeps killing: each round hands it one more generation of a
/// chain of detached processes, so it goes on until none is left, but a process that forks
/// faster than it is killed, or that cannot die (uninterruptible sleep), must not hold
/// verdict forever.
pub const ORPHAN_BOUND: std::time::Duration = std::time::Duration::from_secs(5);

/// Pause between rounds while killed processes are still dying.
#[cfg(target_os = "linux")]
const ORPHAN_POLL: std::time::Duration = std::time::Duration::from_millis(2);

/// Orphans still there when [`kill_orphans`] gave up: what the run observed cannot be
/// vouched for, since they can still act on the system and on what verdict writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "{count} processes that the checks' programs detached were still running {}s after verdict began killing them",
    ORPHAN_BOUND.as_secs()
)]
pub struct Leftover {
    /// How many were left.
    pub count: usize,
}

/// Kills and reaps every child of this process that was not started through this module
/// (orphans adopted from programs that ended) and, generation by generation, their
/// descendants, until none is left or [`ORPHAN_BOUND`] has passed. Does nothing unless
/// [`adopt_orphans`] succeeded. Blocks while the killed processes die.
///
/// # Errors
/// [`Leftover`] when orphans remain after the bound.
pub fn kill_orphans() -> Result<(), Leftover> {
    if !ADOPTING.load(Ordering::SeqCst) {
        return Ok(());
    }
    kill_orphans_within(ORPHAN_BOUND)
}

#[cfg(target_os = "linux")]
fn kill_orphans_within(bound: std::time::Duration) -> Result<(), Leftover> {
    let until = std::time::Instant::now() + bound;
    let me = rustix::process::getpid().as_raw_nonzero().get();
    loop {
        let orphans = {
            let set = started();
            let orphans: Vec<i32> = children_of(me)
                .into_iter()
                .filter(|p| !set.contains(p))
                .collect();
            // Killed again each round while they die: SIGKILL to a dying process is harmless.
            for p in &orphans {
                let _ = kill_child(me, *p);
            }
            orphans
        };
        if orphans.is_empty() {
            return Ok(());
        }
        if std::time::Instant::now() >= until {
            return Err(Leftover {
                count: orphans.len(),
            });
        }
        // Never a blocking wait: a process stuck in the kernel would hold it forever. Reaping
        // hands the orphan's children to this process for the next round.
        let dying = orphans
            .iter()
            .filter_map(|&p| Pid::from_raw(p))
            .filter(|&pid| {
                matches!(
                    rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::NOHANG),
                    Ok(None)
                )
            })
            .count();
        if dying > 0 {
            std::thread::sleep(ORPHAN_POLL);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn kill_orphans_within(_: std::time::Duration) -> Result<(), Leftover> {
    Ok(())
}

/// The pids whose parent is `me`, from `/proc`.
#[cfg(target_os = "linux")]
fn children_of(me: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|p| parent_of(*p) == Some(me))
        .collect()
}

/// The parent of `pid`: the field after the state, which follows the last `)` of
/// `/proc/PID/stat` (the command name before it may hold spaces and parentheses).
#[cfg(target_os = "linux")]
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Kills child `pid` of `me`. The pidfd pins the process: once it is open and the process is
/// still `me`'s child, the signal cannot reach another process that reused the number.
#[cfg(target_os = "linux")]
fn kill_child(me: i32, pid: i32) -> Option<Pid> {
    let p = Pid::from_raw(pid)?;
    match rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()) {
        Ok(fd) => {
            if parent_of(pid) != Some(me) {
                return None;
            }
            rustix::process::pidfd_send_signal(&fd, Signal::KILL).ok()?;
        }
        // No pidfds: an unreaped child keeps its number, so the plain kill is as safe.
        Err(_) => rustix::process::kill_process(p, Signal::KILL).ok()?,
    }
    Some(p)
}

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

/// Runs the process to its end.
pub async fn run(spec: ProcSpec<'_>) -> Result<ProcOutput, String> {
    let (program, args) = spec.argv.split_first().ok_or("empty command")?;
    // A name holding `=` would set another variable (`DATABASE_URL=x` set to `y` is
    // `DATABASE_URL` set to `x=y`), past the check below.
    if let Some(name) = spec.env.and_then(|env| {
        env.keys()
            .find(|k| k.is_empty() || k.contains('=') || k.contains('\0'))
    }) {
        return Err(format!(
            "the probe's env name {name:?} is empty or holds '=' or NUL, which no variable's name may"
        ));
    }
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
        .stderr(Stdio::piped());
    if let Some(env) = spec.env {
        cmd.envs(env);
    }
    if let Some(dir) = spec.cwd {
        cmd.current_dir(dir);
    }
    let mut group = Group::spawn(&mut cmd).map_err(|e| format!("cannot start {program:?}: {e}"))?;
    let child = group.child_mut();
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
    // The group dies when the program exits, so a child it left holding a pipe cannot keep
    // the reads waiting.
    let (_, out, err, status) = tokio::join!(
        feed,
        read_capped(stdout, spec.cap),
        read_capped(stderr, spec.cap),
        group.wait()
    );
    let status = status.map_err(|e| format!("cannot wait for {program:?}: {e}"))?;
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
