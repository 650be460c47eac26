//! `log` probe: count the lines of a log file or a command's output that match a regex,
//! optionally only those written since the run began.
//!
//! "Since the run began" is a position taken before anything else runs, at the start of the
//! line being written then (so a line half-written at the start is judged whole): for a file,
//! its identity (device and inode), that offset and the digest of the bytes just before it; for
//! a command, the length and digest of its whole lines then. If the file was replaced or
//! truncated, or the command's output no longer starts with what it printed then (a rotated
//! log), the position is lost: every line is counted and the facts say so. That can only
//! overcount, which proves nothing for a minimum, so a `min` the whole log meets is then an
//! `error`; a `max` is still judged on every line (it can only err on the strict side).

use super::{
    FieldError, Judged, OutputInfo, ProbeDefaults, Sample, facts, positive_cap, positive_timeout,
};
use crate::duration::Dur;
use crate::files;
use crate::output::{Captured, read_capped};
use crate::process::{self, ProcSpec};
use crate::spec::{LogProbe, Range};
use crate::text_match::compile_regex;
use regex::Regex;
use serde_json::{Value, json};
use std::os::unix::fs::MetadataExt;
use std::time::Duration;
use tokio::io::AsyncSeekExt;
use tokio::sync::Mutex;
use verdict_core::digest::Digest;

#[derive(Debug, Clone)]
enum Mark {
    /// The file did not exist when the run began: all of it is new.
    NoFile,
    /// The file's identity, size, and the digest of its last bytes before the mark (an inode
    /// number can be reused by a new file at once, so identity alone proves nothing).
    File {
        dev: u64,
        ino: u64,
        offset: u64,
        tail: Digest,
    },
    Command {
        len: usize,
        digest: Digest,
    },
}

/// Bytes of a log before the mark whose digest identifies it.
const TAIL_BYTES: u64 = 4096;

/// Digest of the (at most [`TAIL_BYTES`]) bytes of `f` just before `end`.
async fn tail_digest(f: &mut tokio::fs::File, end: u64) -> std::io::Result<Digest> {
    use tokio::io::AsyncReadExt;
    let start = end.saturating_sub(TAIL_BYTES);
    f.seek(std::io::SeekFrom::Start(start)).await?;
    let mut buf = Vec::new();
    (&mut *f).take(end - start).read_to_end(&mut buf).await?;
    Ok(verdict_core::digest::raw(&buf))
}

/// Where the line holding byte `end - 1` starts: just after the last newline before `end`, or
/// 0. A line half-written when the run began is then read whole, and judged as the line it
/// becomes, never from the middle (`status: not ` finished as `ready` is no `^ready` line).
async fn line_start(f: &mut tokio::fs::File, end: u64) -> std::io::Result<u64> {
    use tokio::io::AsyncReadExt;
    let mut stop = end;
    while stop > 0 {
        let start = stop.saturating_sub(TAIL_BYTES);
        f.seek(std::io::SeekFrom::Start(start)).await?;
        let mut buf = Vec::new();
        (&mut *f).take(stop - start).read_to_end(&mut buf).await?;
        if let Some(i) = buf.iter().rposition(|b| *b == b'\n') {
            return Ok(start + u64::try_from(i).unwrap_or(u64::MAX) + 1);
        }
        stop = start;
    }
    Ok(0)
}

/// What one reading of the log gave.
struct Read {
    captured: Captured,
    /// Whether only the part since the start was read (`None`: all of it was asked for).
    only_new: Option<bool>,
    /// Why no excerpt of the log may be kept, if so.
    withheld: Option<String>,
}

/// A compiled `log` probe.
#[derive(Debug)]
pub struct LogCheck {
    file: Option<String>,
    command: Option<Vec<String>>,
    re: Regex,
    count: Range,
    since_start: bool,
    mark: Mutex<Option<Result<Mark, String>>>,
    cap: u64,
    pub(crate) timeout: Duration,
}

impl LogCheck {
    /// Compiles and normalises.
    pub fn compile(mut p: LogProbe, d: &ProbeDefaults) -> Result<(LogProbe, Self), FieldError> {
        match (&p.file, &p.command) {
            (Some(f), None) if !f.is_empty() => {}
            (None, Some(c)) if c.first().is_some_and(|s| !s.is_empty()) => {}
            (Some(_), Some(_)) | (None, None) => {
                return Err(FieldError::new(
                    "",
                    "a log probe needs exactly one of file, command",
                ));
            }
            (Some(_), None) => return Err(FieldError::new("/file", "file path is empty")),
            (None, Some(_)) => {
                return Err(FieldError::new("/command", "command must name a program"));
            }
        }
        let re = compile_regex(&p.matches).map_err(|m| FieldError::new("/matches", m))?;
        let count = p.count.unwrap_or(Range {
            min: Some(1),
            max: None,
        });
        if count.min.is_none() && count.max.is_none() {
            return Err(FieldError::new("/count", "count needs min, max or both"));
        }
        if let (Some(a), Some(b)) = (count.min, count.max)
            && a > b
        {
            return Err(FieldError::new(
                "/count",
                format!("count min {a} is above max {b}"),
            ));
        }
        p.count = Some(count);
        let since_start = p.since_start.unwrap_or(false);
        p.since_start = Some(since_start);
        let timeout = positive_timeout(p.timeout, d)?;
        p.timeout = Some(timeout);
        let cap = positive_cap(p.max_output, d)?;
        p.max_output = Some(cap);
        Ok((
            p.clone(),
            Self {
                file: p.file,
                command: p.command,
                re,
                count,
                since_start,
                mark: Mutex::new(None),
                cap,
                timeout: timeout.std(),
            },
        ))
    }

    async fn run_command(&self, argv: &[String]) -> Result<Captured, String> {
        let out = process::run(ProcSpec {
            argv,
            env: None,
            cwd: None,
            stdin: None,
            cap: self.cap,
        })
        .await?;
        if out.code != Some(0) {
            return Err(format!("log command ended with {}", out.status_text()));
        }
        Ok(out.stdout)
    }

    /// Records where "since the run began" starts (a no-op unless `since_start`), within
    /// `limit`: a log that cannot be read in time leaves its criterion an error.
    pub async fn mark_start(&self, limit: Duration) {
        if !self.since_start {
            return;
        }
        let mark = match tokio::time::timeout(limit, self.take_mark()).await {
            Ok(m) => m,
            Err(_) => Err(format!(
                "timed out after {} when the run began",
                Dur::from_millis(u64::try_from(limit.as_millis()).unwrap_or(u64::MAX))
            )),
        };
        *self.mark.lock().await = Some(mark);
    }

    async fn take_mark(&self) -> Result<Mark, String> {
        if let Some(path) = &self.file {
            // Through links: a log's "current" link to a file not created yet is no file yet.
            match tokio::fs::metadata(path).await {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Mark::NoFile),
                Err(e) => return Err(format!("cannot inspect {path:?} when the run began: {e}")),
                Ok(_) => {}
            }
            let mut f = files::open_regular(path)
                .await
                .map_err(|e| format!("{e} when the run began"))?
                .file;
            let m = f
                .metadata()
                .await
                .map_err(|e| format!("cannot inspect {path:?} when the run began: {e}"))?;
            let read_err =
                |e: std::io::Error| format!("cannot read {path:?} when the run began: {e}");
            let offset = line_start(&mut f, m.size()).await.map_err(read_err)?;
            let tail = tail_digest(&mut f, offset).await.map_err(read_err)?;
            return Ok(Mark::File {
                dev: m.dev(),
                ino: m.ino(),
                offset,
                tail,
            });
        }
        let argv = self.command.as_deref().ok_or("log probe has no source")?;
        match self.run_command(argv).await {
            Ok(c) if !c.overflow => {
                // Up to the end of the last whole line, as for a file.
                let len = c
                    .bytes
                    .iter()
                    .rposition(|b| *b == b'\n')
                    .map_or(0, |i| i + 1);
                Ok(Mark::Command {
                    len,
                    digest: verdict_core::digest::raw(c.bytes.get(..len).unwrap_or_default()),
                })
            }
            Ok(_) => Err(format!(
                "log output exceeded {} bytes when the run began",
                self.cap
            )),
            Err(e) => Err(format!("{e} when the run began")),
        }
    }

    /// The new part of the log and whether it is only the part since the start.
    async fn read(&self) -> Result<Read, String> {
        let mark = if self.since_start {
            match self.mark.lock().await.clone() {
                Some(Ok(m)) => Some(m),
                Some(Err(e)) => return Err(e),
                None => return Err("the start of the run was not recorded".into()),
            }
        } else {
            None
        };
        if let Some(path) = &self.file {
            let files::Opened { mut file, withheld } = files::open_regular(path).await?;
            let m = file
                .metadata()
                .await
                .map_err(|e| format!("cannot inspect {path:?}: {e}"))?;
            let only_new = match mark {
                Some(Mark::File {
                    dev,
                    ino,
                    offset,
                    tail,
                }) if dev == m.dev()
                    && ino == m.ino()
                    && m.size() >= offset
                    && tail_digest(&mut file, offset)
                        .await
                        .is_ok_and(|t| t == tail) =>
                {
                    file.seek(std::io::SeekFrom::Start(offset))
                        .await
                        .map_err(|e| format!("cannot seek in {path:?}: {e}"))?;
                    Some(true)
                }
                Some(Mark::NoFile) => {
                    file.rewind()
                        .await
                        .map_err(|e| format!("cannot seek in {path:?}: {e}"))?;
                    Some(true)
                }
                Some(_) => {
                    // The tail comparison may have moved the position.
                    file.rewind()
                        .await
                        .map_err(|e| format!("cannot seek in {path:?}: {e}"))?;
                    Some(false)
                }
                None => None,
            };
            let captured = read_capped(file, self.cap)
                .await
                .map_err(|e| format!("cannot read {path:?}: {e}"))?;
            return Ok(Read {
                captured,
                only_new,
                withheld,
            });
        }
        let argv = self.command.as_deref().ok_or("log probe has no source")?;
        let c = self.run_command(argv).await?;
        let (captured, only_new) = match mark {
            Some(Mark::Command { len, digest }) => {
                let prefix = c.bytes.get(..len);
                if prefix.is_some_and(|p| verdict_core::digest::raw(p) == digest) {
                    let rest = c.bytes.get(len..).unwrap_or_default();
                    (Captured::from_bytes(rest, self.cap), Some(true))
                } else {
                    (c, Some(false))
                }
            }
            _ => (c, None),
        };
        Ok(Read {
            captured,
            only_new,
            withheld: None,
        })
    }

    pub(crate) async fn observe(&self, judge: bool) -> Sample {
        let Read {
            captured: c,
            only_new,
            withheld,
        } = match self.read().await {
            Ok(x) => x,
            Err(e) => return Sample::error(e),
        };
        if c.overflow {
            return Sample::error(format!("log exceeds {} bytes", self.cap));
        }
        // Lines are counted only in text: UTF-16 `error` holds no `error` as UTF-8.
        let text = match c.strict_text() {
            Ok(t) => t,
            Err(e) => return Sample::error(format!("the log {e}")),
        };
        let n = text.lines().filter(|l| self.re.is_match(l)).count() as u64;
        let shown: Vec<Value> = match &withheld {
            Some(_) => Vec::new(),
            None => text
                .lines()
                .filter(|l| self.re.is_match(l))
                .take(5)
                .map(|l| Value::String(l.chars().take(200).collect()))
                .collect(),
        };
        let mut f = facts([
            ("matches", Value::from(n)),
            ("first_matches", Value::Array(shown)),
        ]);
        if let Some(new) = only_new {
            f.insert("since_start".into(), Value::Bool(new));
        }
        let mut sample = Sample::observed(f, Some(OutputInfo::of_unless(&c, withheld.as_deref())));
        if !judge {
            sample.snapshot = Some(json!({"matches": n}));
            return sample.judged(Ok("observed".into()));
        }
        let lost = only_new == Some(false);
        let scope = match only_new {
            Some(true) => " since the run began",
            Some(false) => " (the log was replaced since the run began; all lines counted)",
            None => "",
        };
        let verdict = match self.count.min {
            // Every line counted can only overcount the new ones: a minimum they meet is not
            // proven (one they miss is, and a maximum they exceed fails on the strict side).
            Some(min) if lost && min > 0 && self.count.contains(n) => Err(Judged::Error(format!(
                "{n} lines match /{}/ in the whole log, but it was replaced since the run began: the lines written since cannot be told from older ones, so at least {min} cannot be proven",
                self.re.as_str()
            ))),
            _ if self.count.contains(n) => {
                Ok(format!("{n} lines match /{}/{scope}", self.re.as_str()))
            }
            _ => Err(Judged::Fail(format!(
                "{n} lines match /{}/{scope}, expected {}",
                self.re.as_str(),
                self.count
            ))),
        };
        sample.judged(verdict)
    }
}
