//! Live progress on stderr: bars on a terminal, one plain line per finished criterion
//! otherwise. Colour only on a terminal and only without `NO_COLOR`.

use crate::check::Plan;
use crate::report::table::{secs, status, terminal_text};
use crate::runner::{Event, Observer};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::sync::Mutex;

/// Whether colour is wanted on a stream that is (or is not) a terminal.
#[must_use]
pub fn color_wanted(is_terminal: bool) -> bool {
    is_terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// A progress display for a run of `total` criteria.
pub struct Progress {
    bars: Option<(MultiProgress, ProgressBar)>,
    running: Mutex<HashMap<String, (ProgressBar, u64)>>,
    color: bool,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress")
            .field("live", &self.bars.is_some())
            .finish()
    }
}

impl Progress {
    /// Bars when stderr is a terminal (and `live`), plain lines otherwise.
    #[must_use]
    pub fn new(total: usize, live: bool) -> Self {
        let tty = std::io::stderr().is_terminal();
        let bars = (live && tty).then(|| {
            let mp = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
            let overall = mp.add(ProgressBar::new(total as u64));
            overall.set_style(
                ProgressStyle::with_template("{bar:30} {pos}/{len} criteria done {elapsed}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            (mp, overall)
        });
        Self {
            bars,
            running: Mutex::new(HashMap::new()),
            color: color_wanted(tty),
        }
    }

    fn line(&self, text: &str) {
        match &self.bars {
            Some((mp, _)) => {
                let _ = mp.println(text);
            }
            None => {
                let mut err = std::io::stderr().lock();
                let _ = writeln!(err, "{text}");
            }
        }
    }

    /// Removes the bars (call before printing the final report).
    pub fn finish(&self) {
        if let Some((mp, overall)) = &self.bars {
            overall.finish_and_clear();
            let _ = mp.clear();
        }
    }
}

impl Observer for Progress {
    fn event(&self, event: &Event<'_>) {
        match event {
            Event::Started { check } => {
                if let Some((mp, _)) = &self.bars {
                    let planned = match check.plan {
                        Plan::Hold {
                            window, interval, ..
                        } => window.as_millis() / interval.as_millis().max(1) + 1,
                        _ => 0,
                    };
                    let pb = mp.add(ProgressBar::new_spinner());
                    pb.set_style(
                        ProgressStyle::with_template("  {spinner} {msg}")
                            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                    );
                    pb.set_message(format!("{} ({})", check.id, check.mode().as_str()));
                    pb.enable_steady_tick(std::time::Duration::from_millis(120));
                    if let Ok(mut r) = self.running.lock() {
                        r.insert(check.id.to_string(), (pb, planned));
                    }
                }
            }
            Event::Sample {
                check,
                index,
                outcome,
                ..
            } => {
                if let Ok(r) = self.running.lock()
                    && let Some((pb, planned)) = r.get(check.id.as_str())
                {
                    let of = if *planned > 0 {
                        format!("/{planned}")
                    } else {
                        String::new()
                    };
                    pb.set_message(format!(
                        "{} ({}): sample {}{of} {}",
                        check.id,
                        check.mode().as_str(),
                        index + 1,
                        outcome.as_str()
                    ));
                }
            }
            Event::Finished { result } => {
                if let Ok(mut r) = self.running.lock()
                    && let Some((pb, _)) = r.remove(result.id.as_str())
                {
                    pb.finish_and_clear();
                }
                if let Some((_, overall)) = &self.bars {
                    overall.inc(1);
                }
                self.line(&format!(
                    "{} {} ({}): {}",
                    status(result.outcome, self.color),
                    terminal_text(result.id.as_str()),
                    secs(result.duration_ms),
                    terminal_text(&result.reason)
                ));
            }
            Event::AgentStarted { argv } => self.line(&format!(
                "agent started: {}",
                terminal_text(&argv.join(" "))
            )),
            Event::AgentEnded { run } => self.line(&format!(
                "agent ended: {}",
                terminal_text(&run.exit_code.map_or_else(
                    || run.note.clone().unwrap_or_default(),
                    |c| format!("exit code {c}")
                ))
            )),
        }
    }
}
