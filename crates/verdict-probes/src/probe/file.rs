//! `file` probe: existence, type, permissions, ownership, size, SHA-256 and content of a path.

use super::{
    FieldError, Judged, OutputInfo, ProbeDefaults, Sample, positive_cap, positive_timeout,
};
use crate::output::{Captured, read_capped};
use crate::spec::{FileKind, FileProbe, Range};
use crate::text_match::TextMatcher;
use serde_json::{Map, Value};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::Duration;

/// A compiled `file` probe.
#[derive(Debug)]
pub struct FileCheck {
    path: String,
    exists: bool,
    kind: Option<FileKind>,
    mode: Option<u32>,
    owner: Option<String>,
    group: Option<String>,
    size: Option<Range>,
    sha256: Option<String>,
    content: Option<TextMatcher>,
    cap: u64,
    pub(crate) timeout: Duration,
}

/// Looks a name up in a `name:x:id:...` database file (`/etc/passwd`, `/etc/group`).
fn id_of(db: &str, name: &str) -> Option<u32> {
    let text = std::fs::read_to_string(db).ok()?;
    text.lines().find_map(|line| {
        let mut parts = line.split(':');
        let n = parts.next()?;
        let _ = parts.next()?;
        let id = parts.next()?;
        (n == name).then(|| id.parse().ok()).flatten()
    })
}

fn kind_name(m: &std::fs::Metadata) -> &'static str {
    let t = m.file_type();
    if t.is_symlink() {
        "symlink"
    } else if t.is_dir() {
        "dir"
    } else if t.is_file() {
        "file"
    } else {
        "other"
    }
}

impl FileCheck {
    /// Compiles and normalises.
    pub fn compile(mut p: FileProbe, d: &ProbeDefaults) -> Result<(FileProbe, Self), FieldError> {
        if p.path.is_empty() {
            return Err(FieldError::new("/path", "path is empty"));
        }
        let exists = p.exists.unwrap_or(true);
        p.exists = Some(exists);
        let any_property = p.file_type.is_some()
            || p.mode.is_some()
            || p.owner.is_some()
            || p.group.is_some()
            || p.size.is_some()
            || p.sha256.is_some()
            || p.content.is_some();
        if !exists && any_property {
            return Err(FieldError::new(
                "/exists",
                "exists: false cannot be combined with other expectations",
            ));
        }
        let mode = match &p.mode {
            Some(m) => {
                let digits = m.strip_prefix("0o").unwrap_or(m);
                let v = u32::from_str_radix(digits, 8)
                    .ok()
                    .filter(|v| *v <= 0o7777 && !digits.is_empty())
                    .ok_or_else(|| {
                        FieldError::new(
                            "/mode",
                            format!("mode {m:?} is not octal permission bits such as \"0644\""),
                        )
                    })?;
                p.mode = Some(format!("{v:04o}"));
                Some(v)
            }
            None => None,
        };
        let sha256 = match &p.sha256 {
            Some(s) => {
                let hex = s.strip_prefix("sha256:").unwrap_or(s).to_owned();
                if hex.len() != 64 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
                    return Err(FieldError::new(
                        "/sha256",
                        "sha256 must be 64 lowercase hex digits",
                    ));
                }
                p.sha256 = Some(hex.clone());
                Some(hex)
            }
            None => None,
        };
        if let Some(Range {
            min: Some(a),
            max: Some(b),
        }) = p.size
            && a > b
        {
            return Err(FieldError::new(
                "/size",
                format!("size min {a} is above max {b}"),
            ));
        }
        for (field, v) in [("owner", &p.owner), ("group", &p.group)] {
            if v.as_deref().is_some_and(str::is_empty) {
                return Err(FieldError::new(
                    format!("/{field}"),
                    format!("{field} is empty"),
                ));
            }
        }
        let content = p
            .content
            .as_ref()
            .map(TextMatcher::compile)
            .transpose()
            .map_err(|m| FieldError::new("/content", m))?;
        let timeout = positive_timeout(p.timeout, d)?;
        p.timeout = Some(timeout);
        let cap = positive_cap(p.max_output, d)?;
        p.max_output = Some(cap);
        Ok((
            p.clone(),
            Self {
                path: p.path,
                exists,
                kind: p.file_type,
                mode,
                owner: p.owner,
                group: p.group,
                size: p.size,
                sha256,
                content,
                cap,
                timeout: timeout.std(),
            },
        ))
    }

    /// Whether this probe states the exact content and asserts nothing else (an immutable
    /// fact, not a live observation). Size and content expectations follow from the pinned
    /// bytes; type, mode, owner and group can change while the bytes stay, so a probe that
    /// asserts any of them observes a live system and its evidence ages.
    #[must_use]
    pub fn pins_content(&self) -> bool {
        self.exists
            && self.sha256.is_some()
            && self.kind.is_none()
            && self.mode.is_none()
            && self.owner.is_none()
            && self.group.is_none()
    }

    /// The content, and why no excerpt of it may be kept if so.
    async fn read(&self) -> Result<(Captured, Option<String>), String> {
        let opened = crate::files::open_regular(&self.path).await?;
        let c = read_capped(opened.file, self.cap)
            .await
            .map_err(|e| format!("cannot read {:?}: {e}", self.path))?;
        Ok((c, opened.withheld))
    }

    pub(crate) async fn observe(&self, judge: bool) -> Sample {
        let lmeta = match tokio::fs::symlink_metadata(&self.path).await {
            Ok(m) => Some(m),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Sample::error(format!("cannot inspect {:?}: {e}", self.path)),
        };
        let Some(lmeta) = lmeta else {
            let mut s = Sample::observed(super::facts([("exists", Value::Bool(false))]), None);
            s.snapshot = Some(serde_json::json!({"exists": false}));
            return s.judged(if !judge || !self.exists {
                Ok(format!("{} does not exist", self.path))
            } else {
                Err(Judged::Fail(format!("{} does not exist", self.path)))
            });
        };
        // Every property but the type is read through a symlink, as the path's users see it.
        let meta = if self.kind == Some(FileKind::Symlink) {
            lmeta.clone()
        } else {
            match tokio::fs::metadata(&self.path).await {
                Ok(m) => m,
                Err(e) => return Sample::error(format!("cannot follow {:?}: {e}", self.path)),
            }
        };
        let mut f = Map::new();
        f.insert("exists".into(), Value::Bool(true));
        f.insert("type".into(), Value::String(kind_name(&meta).into()));
        f.insert(
            "mode".into(),
            Value::String(format!("{:04o}", meta.permissions().mode() & 0o7777)),
        );
        f.insert("uid".into(), Value::from(meta.uid()));
        f.insert("gid".into(), Value::from(meta.gid()));
        f.insert("size".into(), Value::from(meta.size()));
        let wants_content =
            meta.is_file() && (self.sha256.is_some() || self.content.is_some() || !judge);
        let (captured, withheld) = if wants_content {
            match self.read().await {
                Ok((c, w)) => (Some(c), w),
                Err(e) => return Sample::error(e),
            }
        } else {
            (None, None)
        };
        if let Some(c) = &captured {
            f.insert(
                "sha256".into(),
                Value::String(c.digest.as_str().trim_start_matches("sha256:").to_owned()),
            );
        }
        let output = captured
            .as_ref()
            .map(|c| OutputInfo::of_unless(c, withheld.as_deref()));
        let mut sample = Sample::observed(f.clone(), output);
        if !judge {
            sample.snapshot = Some(Value::Object(f));
            return sample.judged(Ok("observed".into()));
        }
        let verdict = self.judge(&lmeta, &meta, captured.as_ref(), withheld.is_none());
        sample.judged(verdict)
    }

    fn judge(
        &self,
        lmeta: &std::fs::Metadata,
        meta: &std::fs::Metadata,
        content: Option<&Captured>,
        shown: bool,
    ) -> Result<String, Judged> {
        let p = &self.path;
        if !self.exists {
            return Err(Judged::Fail(format!("{p} exists")));
        }
        if let Some(k) = self.kind {
            let actual = kind_name(if k == FileKind::Symlink { lmeta } else { meta });
            let want = match k {
                FileKind::File => "file",
                FileKind::Dir => "dir",
                FileKind::Symlink => "symlink",
            };
            if actual != want {
                return Err(Judged::Fail(format!(
                    "{p} is a {actual}, expected a {want}"
                )));
            }
        }
        if let Some(m) = self.mode {
            let actual = meta.permissions().mode() & 0o7777;
            if actual != m {
                return Err(Judged::Fail(format!(
                    "{p} has mode {actual:04o}, expected {m:04o}"
                )));
            }
        }
        for (what, want, actual, db) in [
            ("owner", &self.owner, meta.uid(), "/etc/passwd"),
            ("group", &self.group, meta.gid(), "/etc/group"),
        ] {
            if let Some(w) = want {
                let id = match w.parse::<u32>() {
                    Ok(n) => n,
                    Err(_) => id_of(db, w)
                        .ok_or_else(|| Judged::Error(format!("unknown {what} {w:?}")))?,
                };
                if id != actual {
                    return Err(Judged::Fail(format!(
                        "{p} has {what} id {actual}, expected {w}"
                    )));
                }
            }
        }
        if let Some(r) = &self.size
            && !r.contains(meta.size())
        {
            return Err(Judged::Fail(format!(
                "{p} has {} bytes, expected {r}",
                meta.size()
            )));
        }
        if self.sha256.is_some() || self.content.is_some() {
            let c = content.ok_or_else(|| Judged::Fail(format!("{p} is not a regular file")))?;
            if c.overflow {
                return Err(Judged::Error(format!(
                    "{p} is larger than {} bytes",
                    self.cap
                )));
            }
            if let Some(want) = &self.sha256 {
                let got = c.digest.as_str().trim_start_matches("sha256:");
                if got != want {
                    return Err(Judged::Fail(format!(
                        "{p} has sha256 {got}, expected {want}"
                    )));
                }
            }
            if let Some(m) = &self.content {
                let what = format!("content of {p}");
                let text = (c.strict_text()).map_err(|e| Judged::Error(format!("{what} {e}")))?;
                let checked = if shown {
                    m.check(&what, text)
                } else {
                    m.check_unquoted(&what, text)
                };
                checked.map_err(Judged::Fail)?;
            }
        }
        Ok(format!("{p} is as expected"))
    }
}
