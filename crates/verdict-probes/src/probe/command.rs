//! `command` probe: run a process, judge its exit code, output and JSON output.

use super::{
    FieldError, Judged, OutputInfo, ProbeDefaults, Sample, facts, positive_cap, positive_timeout,
    snapshot_of,
};
use crate::cel_expect::Expect;
use crate::process::{self, ProcSpec};
use crate::spec::CommandProbe;
use crate::text_match::TextMatcher;
use serde_json::{Value, json};
use std::time::Duration;

/// A compiled `command` probe.
#[derive(Debug)]
pub struct CommandCheck {
    argv: Vec<String>,
    def: CommandProbe,
    exit_code: i32,
    stdout: Option<TextMatcher>,
    stderr: Option<TextMatcher>,
    expect: Option<Expect>,
    cap: u64,
    pub(crate) timeout: Duration,
}

impl CommandCheck {
    /// Compiles and normalises.
    pub fn compile(
        mut p: CommandProbe,
        d: &ProbeDefaults,
    ) -> Result<(CommandProbe, Self), FieldError> {
        let argv = match (&p.argv, &p.shell) {
            (Some(a), None) if !a.is_empty() && a.first().is_some_and(|s| !s.is_empty()) => {
                a.clone()
            }
            (Some(_), None) => return Err(FieldError::new("/argv", "argv must name a program")),
            (None, Some(s)) if !s.trim().is_empty() => vec!["sh".into(), "-c".into(), s.clone()],
            (None, Some(_)) => return Err(FieldError::new("/shell", "shell script is empty")),
            (Some(_), Some(_)) => return Err(FieldError::new("", "give argv or shell, not both")),
            (None, None) => {
                return Err(FieldError::new("", "a command probe needs argv (or shell)"));
            }
        };
        let stdout = p
            .stdout
            .as_ref()
            .map(TextMatcher::compile)
            .transpose()
            .map_err(|m| FieldError::new("/stdout", m))?;
        let stderr = p
            .stderr
            .as_ref()
            .map(TextMatcher::compile)
            .transpose()
            .map_err(|m| FieldError::new("/stderr", m))?;
        let expect = p
            .expect
            .as_deref()
            .map(Expect::compile)
            .transpose()
            .map_err(|m| FieldError::new("/expect", m))?;
        p.exit_code = Some(p.exit_code.unwrap_or(0));
        let timeout = positive_timeout(p.timeout, d)?;
        p.timeout = Some(timeout);
        let cap = positive_cap(p.max_output, d)?;
        p.max_output = Some(cap);
        let exit_code = p.exit_code.unwrap_or(0);
        Ok((
            p.clone(),
            Self {
                argv,
                def: p,
                exit_code,
                stdout,
                stderr,
                expect,
                cap,
                timeout: timeout.std(),
            },
        ))
    }

    pub(crate) async fn observe(&self, judge: bool) -> Sample {
        let out = match process::run(ProcSpec {
            argv: &self.argv,
            env: self.def.env.as_ref(),
            cwd: self.def.cwd.as_deref(),
            stdin: self.def.stdin.as_deref(),
            cap: self.cap,
        })
        .await
        {
            Ok(o) => o,
            Err(e) => return Sample::error(e),
        };
        let stderr_excerpt = out.stderr.excerpt().0;
        let f = facts([
            ("exit_code", out.code.map_or(Value::Null, Value::from)),
            ("signal", out.signal.map_or(Value::Null, Value::from)),
            ("stderr", Value::String(stderr_excerpt)),
        ]);
        let mut sample = Sample::observed(f, Some(OutputInfo::of(&out.stdout)));
        if !judge {
            if out.stdout.overflow {
                return sample.judged(Err(Judged::Error(format!(
                    "output exceeds {} bytes",
                    self.cap
                ))));
            }
            let stdout = match snapshot_of(&out.stdout.bytes, "stdout") {
                Ok(v) => v,
                Err(j) => return sample.judged(Err(j)),
            };
            sample.snapshot = Some(json!({"exit_code": out.code, "stdout": stdout}));
            return sample.judged(Ok("observed".into()));
        }
        let verdict = match (self.judge(&out), &self.expect) {
            (Ok(why), Some(e)) => super::expect_json(e, &out.stdout.bytes, "stdout")
                .await
                .map(|()| why),
            (verdict, _) => verdict,
        };
        sample.judged(verdict)
    }

    fn judge(&self, out: &process::ProcOutput) -> Result<String, Judged> {
        if out.stdout.overflow || out.stderr.overflow {
            return Err(Judged::Error(format!("output exceeds {} bytes", self.cap)));
        }
        if out.code != Some(self.exit_code) {
            return Err(Judged::Fail(format!(
                "{} (expected exit code {})",
                out.status_text(),
                self.exit_code
            )));
        }
        if let Some(m) = &self.stdout {
            let text =
                (out.stdout.strict_text()).map_err(|e| Judged::Error(format!("stdout {e}")))?;
            m.check("stdout", text).map_err(Judged::Fail)?;
        }
        if let Some(m) = &self.stderr {
            let text =
                (out.stderr.strict_text()).map_err(|e| Judged::Error(format!("stderr {e}")))?;
            m.check("stderr", text).map_err(Judged::Fail)?;
        }
        // `expect` is judged last, by the caller.
        Ok(format!("{} as expected", out.status_text()))
    }
}
