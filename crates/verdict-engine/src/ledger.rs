//! The reliability ledger: how often independent verification passes a capability's work.
//!
//! This module is pure: it counts observations it is handed (one per logical attempt, built from
//! the store by `ledger_read.rs`) and renders the result. The counting rules:
//!
//! - An attempt counts once, whatever number of runs, results and gate runs it had.
//! - Only the attempt's applicable decision counts: `pass` is a verified success, `rework` a
//!   verified failure; `human_required`, `blocked`, `unverified`, `stale` and `tampered` are
//!   never successes but stay in the denominator; a `coverage_gap` (verification was
//!   unavailable) is left out of the rates and reported as missing coverage.
//! - Cohorts: capability key, verifier classes with their model and prompt revisions, policy
//!   revision. A change of any of them starts a new cohort.
//! - Window: the attempts of the last `days` days, of which the last `attempts`; fewer than
//!   `min_sample` is `insufficient_evidence` and no rate is given. A rate with a zero
//!   denominator is `null`. Bounds are the Wilson score lower bound at 95 %.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use verdict_core::contracts::Timestamp;
use verdict_core::digest::Digest;
use verdict_store::StoreClock;

/// The two-sided 95 % normal quantile.
const Z95: f64 = 1.959_963_984_540_054;

/// What an attempt's applicable decision makes of it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum AttemptClass {
    /// An applicable `pass`: a verified success.
    Pass,
    /// An applicable `rework`: a verified failure.
    Rework,
    /// An applicable `human_required`.
    HumanRequired,
    /// An applicable `blocked` for any reason but unavailable verification.
    Blocked,
    /// No decision about the attempt's final subject (a producer's own success included).
    Unverified,
    /// The attempt's decision no longer applies (expired, policy moved while open, ...).
    Stale,
    /// The decision found tampered evidence.
    Tampered,
    /// Verification was unavailable: no result could be had, so the attempt is not rated.
    CoverageGap,
}

impl AttemptClass {
    /// Every class, in report order.
    pub const ALL: [Self; 8] = [
        Self::Pass,
        Self::Rework,
        Self::HumanRequired,
        Self::Blocked,
        Self::Unverified,
        Self::Stale,
        Self::Tampered,
        Self::CoverageGap,
    ];

    /// The wire name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Rework => "rework",
            Self::HumanRequired => "human_required",
            Self::Blocked => "blocked",
            Self::Unverified => "unverified",
            Self::Stale => "stale",
            Self::Tampered => "tampered",
            Self::CoverageGap => "coverage_gap",
        }
    }

    /// Whether the attempt is in the rates' denominator.
    #[must_use]
    pub const fn covered(self) -> bool {
        !matches!(self, Self::CoverageGap)
    }
}

/// One verifier class as a cohort sees it: the class and exactly which model and prompt.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub struct VerifierRevision {
    /// Verifier class.
    pub class: String,
    /// `provider/model@snapshot`, or `none` when the result named no runtime.
    pub model: String,
    /// The context-construction revision the run recorded, or `none`.
    pub prompt: String,
}

/// What makes attempts comparable.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub struct CohortKey {
    /// The capability: the request's, else the subject's mission and work item kinds.
    pub capability: String,
    /// The verifiers whose results the decision counted, sorted; empty when none.
    pub verifiers: Vec<VerifierRevision>,
    /// The policy applied, `name@revision`.
    pub policy: String,
}

impl CohortKey {
    /// One line naming the cohort.
    #[must_use]
    pub fn label(&self) -> String {
        let verifiers: Vec<String> = self
            .verifiers
            .iter()
            .map(|v| format!("{}={}+{}", v.class, v.model, v.prompt))
            .collect();
        let verifiers = if verifiers.is_empty() {
            "none".to_owned()
        } else {
            verifiers.join(",")
        };
        format!("{} | {} | {}", self.capability, verifiers, self.policy)
    }
}

/// One logical attempt: an execution's generation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Observation {
    /// Its cohort.
    pub cohort: CohortKey,
    /// The execution.
    pub execution: String,
    /// The generation this attempt is.
    pub generation: u64,
    /// 1 for the execution's first attempt, 2 for the next, ...
    pub attempt: u32,
    /// The attempt's final subject.
    pub subject_digest: Digest,
    /// The evaluation key of the decision that classified it, if any.
    pub evaluation_key: Option<Digest>,
    /// What it counts as.
    pub class: AttemptClass,
    /// When: the Gate's `now` for its decision, else the ledger's `now`.
    pub at: Timestamp,
}

/// The window the rates are taken over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Window {
    /// At most this many of the most recent attempts.
    pub attempts: usize,
    /// Only attempts of the last this many days.
    pub days: u64,
    /// Fewer attempts than this is `insufficient_evidence`.
    pub min_sample: usize,
}

/// The window a ledger is read over when its reader names none (every face uses it).
pub const DEFAULT_WINDOW: Window = Window {
    attempts: 100,
    days: 30,
    min_sample: 10,
};

/// Whether a cohort has enough attempts to be rated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CohortStatus {
    /// At least the minimum sample.
    Rated,
    /// Fewer attempts than the minimum sample: no rate is given.
    InsufficientEvidence,
}

/// One point of a cohort's chart: the rate and its bound after the attempt at `at`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Point {
    /// The attempt's time.
    pub at: Timestamp,
    /// Pass rate so far in the window (`null` with no covered attempt yet).
    pub rate: Option<f64>,
    /// Its Wilson lower bound.
    pub lower_95: Option<f64>,
}

/// One cohort's figures over the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Cohort {
    /// The cohort.
    pub key: CohortKey,
    /// Rated or not.
    pub status: CohortStatus,
    /// Attempts in the window.
    pub attempts: u64,
    /// Attempts in the rates' denominator (all but coverage gaps).
    pub covered: u64,
    /// Verified passes.
    pub verified_passes: u64,
    /// Attempts per class.
    pub by_class: BTreeMap<AttemptClass, u64>,
    /// Verified passes over covered attempts.
    pub pass_rate: Option<f64>,
    /// Wilson lower bound of the pass rate.
    pub pass_rate_lower_95: Option<f64>,
    /// First attempts in the window that are covered.
    pub first_attempts: u64,
    /// Of those, verified passes.
    pub first_attempt_passes: u64,
    /// First-attempt passes over covered first attempts.
    pub first_attempt_pass_rate: Option<f64>,
    /// Wilson lower bound of the first-attempt pass rate.
    pub first_attempt_lower_95: Option<f64>,
    /// Covered attempts over attempts.
    pub coverage: Option<f64>,
    /// The pass rate and its bound after each attempt of the window, oldest first.
    pub series: Vec<Point>,
}

/// The ledger: every cohort.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Ledger {
    /// `verdict.ledger/v1`.
    pub schema: String,
    /// The instant it was taken at.
    pub now: Timestamp,
    /// The clock of the store it was counted from. On a `manual` clock every time was chosen
    /// by whoever ran the store (a test, a simulation), so its rates are no record of real
    /// work: every rendering says so.
    pub clock: StoreClock,
    /// The window.
    pub window: Window,
    /// Cohorts, sorted by key.
    pub cohorts: Vec<Cohort>,
}

/// The schema tag of a ledger.
pub const LEDGER_SCHEMA: &str = "verdict.ledger/v1";

/// `num / den`, or `None` when `den` is zero.
#[must_use]
pub fn ratio(num: u64, den: u64) -> Option<f64> {
    #[expect(
        clippy::cast_precision_loss,
        reason = "attempt counts are far below 2^52"
    )]
    (den > 0).then(|| num as f64 / den as f64)
}

/// The Wilson score lower bound at 95 % of `successes` out of `n`; `None` when `n` is zero.
#[must_use]
pub fn wilson_lower_95(successes: u64, n: u64) -> Option<f64> {
    let p = ratio(successes.min(n), n)?;
    #[expect(
        clippy::cast_precision_loss,
        reason = "attempt counts are far below 2^52"
    )]
    let n = n as f64;
    let z2 = Z95 * Z95;
    let centre = p + z2 / (2.0 * n);
    let spread = Z95 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    Some(((centre - spread) / (1.0 + z2 / n)).max(0.0))
}

/// Counts `observations` into cohorts over `window` ending at `now`. If two observations name
/// the same attempt (execution and generation), the later one in the slice is kept, so an
/// attempt is never counted twice.
#[must_use]
pub fn compute(
    observations: &[Observation],
    window: Window,
    now: &Timestamp,
    clock: StoreClock,
) -> Ledger {
    let mut attempts: BTreeMap<(&str, u64), &Observation> = BTreeMap::new();
    for o in observations {
        attempts.insert((o.execution.as_str(), o.generation), o);
    }
    let horizon = now.unix_nanos() - i128::from(window.days) * 86_400 * 1_000_000_000;
    let mut cohorts: BTreeMap<&CohortKey, Vec<&Observation>> = BTreeMap::new();
    for o in attempts.into_values() {
        if o.at.unix_nanos() >= horizon && o.at.unix_nanos() <= now.unix_nanos() {
            cohorts.entry(&o.cohort).or_default().push(o);
        }
    }
    let cohorts = cohorts
        .into_iter()
        .map(|(key, mut list)| {
            list.sort_by(|a, b| {
                (a.at.unix_nanos(), &a.execution, a.generation).cmp(&(
                    b.at.unix_nanos(),
                    &b.execution,
                    b.generation,
                ))
            });
            let skip = list.len().saturating_sub(window.attempts);
            cohort(key, list.get(skip..).unwrap_or_default(), window)
        })
        .collect();
    Ledger {
        schema: LEDGER_SCHEMA.to_owned(),
        now: now.clone(),
        clock,
        window,
        cohorts,
    }
}

fn cohort(key: &CohortKey, list: &[&Observation], window: Window) -> Cohort {
    let mut by_class = BTreeMap::new();
    let (mut covered, mut passes, mut first, mut first_passes) = (0u64, 0u64, 0u64, 0u64);
    let mut series = Vec::with_capacity(list.len());
    for o in list {
        *by_class.entry(o.class).or_insert(0u64) += 1;
        if o.class.covered() {
            covered += 1;
            let pass = o.class == AttemptClass::Pass;
            passes += u64::from(pass);
            if o.attempt == 1 {
                first += 1;
                first_passes += u64::from(pass);
            }
        }
        series.push(Point {
            at: o.at.clone(),
            rate: ratio(passes, covered),
            lower_95: wilson_lower_95(passes, covered),
        });
    }
    let attempts = list.len() as u64;
    let rated = list.len() >= window.min_sample.max(1);
    let gated = |v: Option<f64>| v.filter(|_| rated);
    Cohort {
        key: key.clone(),
        status: if rated {
            CohortStatus::Rated
        } else {
            CohortStatus::InsufficientEvidence
        },
        attempts,
        covered,
        verified_passes: passes,
        by_class,
        pass_rate: gated(ratio(passes, covered)),
        pass_rate_lower_95: gated(wilson_lower_95(passes, covered)),
        first_attempts: first,
        first_attempt_passes: first_passes,
        first_attempt_pass_rate: gated(ratio(first_passes, first)),
        first_attempt_lower_95: gated(wilson_lower_95(first_passes, first)),
        coverage: gated(ratio(covered, attempts)),
        series,
    }
}

fn fixed(v: Option<f64>) -> String {
    v.map_or_else(|| "null".to_owned(), |v| format!("{v:.3}"))
}

fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_owned()
    }
}

impl Ledger {
    /// One line per cohort, for people.
    #[must_use]
    pub fn to_table(&self) -> String {
        let mut out = format!(
            "window: last {} attempts, last {} days, minimum sample {}; at {} ({} clock)\n",
            self.window.attempts,
            self.window.days,
            self.window.min_sample,
            self.now.as_str(),
            self.clock.as_str()
        );
        if self.clock == StoreClock::Manual {
            out.push_str(
                "manual clock: every time in this store was chosen by whoever ran it; these rates are no record of real work\n",
            );
        }
        if self.cohorts.is_empty() {
            out.push_str("no attempts in the window\n");
        }
        for c in &self.cohorts {
            let _ = writeln!(
                out,
                "{}\n  status {}  attempts {}  covered {}  passes {}  pass rate {} (lower 95% {})  first-attempt {} (lower 95% {})  coverage {}",
                c.key.label(),
                match c.status {
                    CohortStatus::Rated => "rated",
                    CohortStatus::InsufficientEvidence => "insufficient_evidence",
                },
                c.attempts,
                c.covered,
                c.verified_passes,
                fixed(c.pass_rate),
                fixed(c.pass_rate_lower_95),
                fixed(c.first_attempt_pass_rate),
                fixed(c.first_attempt_lower_95),
                fixed(c.coverage),
            );
            let classes: Vec<String> = c
                .by_class
                .iter()
                .map(|(k, v)| format!("{} {v}", k.as_str()))
                .collect();
            let _ = writeln!(out, "  {}", classes.join(", "));
        }
        out
    }

    /// One CSV row per cohort, with a header; `null` rates are empty fields.
    #[must_use]
    pub fn to_csv(&self) -> String {
        let mut out = String::from(
            "clock,capability,verifiers,policy,status,attempts,covered,verified_passes,pass_rate,pass_rate_lower_95,first_attempts,first_attempt_passes,first_attempt_pass_rate,first_attempt_lower_95,coverage",
        );
        for class in AttemptClass::ALL {
            out.push(',');
            out.push_str(class.as_str());
        }
        out.push('\n');
        let num = |v: Option<f64>| v.map_or_else(String::new, |v| format!("{v}"));
        for c in &self.cohorts {
            let verifiers: Vec<String> = c
                .key
                .verifiers
                .iter()
                .map(|v| format!("{}={}+{}", v.class, v.model, v.prompt))
                .collect();
            let status = match c.status {
                CohortStatus::Rated => "rated",
                CohortStatus::InsufficientEvidence => "insufficient_evidence",
            };
            let _ = write!(
                out,
                "{},{},{},{},{status},{},{},{},{},{},{},{},{},{},{}",
                self.clock.as_str(),
                csv_field(&c.key.capability),
                csv_field(&verifiers.join(";")),
                csv_field(&c.key.policy),
                c.attempts,
                c.covered,
                c.verified_passes,
                num(c.pass_rate),
                num(c.pass_rate_lower_95),
                c.first_attempts,
                c.first_attempt_passes,
                num(c.first_attempt_pass_rate),
                num(c.first_attempt_lower_95),
                num(c.coverage),
            );
            for class in AttemptClass::ALL {
                let _ = write!(out, ",{}", c.by_class.get(&class).copied().unwrap_or(0));
            }
            out.push('\n');
        }
        out
    }
}

impl Cohort {
    /// An SVG chart of the pass rate (solid) and its Wilson lower bound (dashed) after each
    /// attempt of the window, on a 0–1 scale.
    #[must_use]
    pub fn to_svg(&self) -> String {
        const W: f64 = 640.0;
        const H: f64 = 240.0;
        const PAD: f64 = 40.0;
        let n = self.series.len();
        #[expect(
            clippy::cast_precision_loss,
            reason = "a window holds far fewer than 2^52 attempts"
        )]
        let x = |i: usize| {
            if n <= 1 {
                PAD + (W - 2.0 * PAD) / 2.0
            } else {
                PAD + (W - 2.0 * PAD) * i as f64 / (n - 1) as f64
            }
        };
        let y = |v: f64| H - PAD - (H - 2.0 * PAD) * v.clamp(0.0, 1.0);
        let line = |pick: fn(&Point) -> Option<f64>| {
            self.series
                .iter()
                .enumerate()
                .filter_map(|(i, p)| pick(p).map(|v| format!("{:.1},{:.1}", x(i), y(v))))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let title = crate::ledger::xml_escape(&self.key.label());
        let status = match self.status {
            CohortStatus::Rated => format!("pass rate {}", fixed(self.pass_rate)),
            CohortStatus::InsufficientEvidence => "insufficient evidence".to_owned(),
        };
        let mut out = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\" font-family=\"sans-serif\" font-size=\"11\">\n<title>{title}</title>\n"
        );
        let _ = writeln!(
            out,
            "<text x=\"{PAD}\" y=\"16\">{title}</text>\n<text x=\"{PAD}\" y=\"30\">{} attempts; {}</text>",
            self.attempts,
            crate::ledger::xml_escape(&status)
        );
        for v in [0.0, 0.5, 1.0] {
            let _ = writeln!(
                out,
                "<line x1=\"{PAD}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#ccc\"/><text x=\"4\" y=\"{:.1}\">{v:.1}</text>",
                W - PAD,
                y(v),
                y(v),
                y(v) + 4.0
            );
        }
        let _ = writeln!(
            out,
            "<polyline fill=\"none\" stroke=\"#1f6feb\" stroke-width=\"2\" points=\"{}\"/>\n<polyline fill=\"none\" stroke=\"#888\" stroke-dasharray=\"4 3\" points=\"{}\"/>",
            line(|p| p.rate),
            line(|p| p.lower_95)
        );
        out.push_str("</svg>\n");
        out
    }
}

/// Text safe inside SVG (XML) character data and attribute values.
#[must_use]
pub fn xml_escape(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '&' => "&amp;".to_owned(),
            '<' => "&lt;".to_owned(),
            '>' => "&gt;".to_owned(),
            '"' => "&quot;".to_owned(),
            '\'' => "&apos;".to_owned(),
            c if u32::from(c) < 0x20 => "\u{FFFD}".to_owned(),
            c => c.to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn key(model: &str) -> CohortKey {
        CohortKey {
            capability: "m:code".into(),
            verifiers: vec![VerifierRevision {
                class: "reviewer".into(),
                model: model.into(),
                prompt: "p1".into(),
            }],
            policy: "merge@1".into(),
        }
    }

    fn obs(exec: &str, generation: u64, attempt: u32, class: AttemptClass, t: &str) -> Observation {
        Observation {
            cohort: key("openai/m@1"),
            execution: exec.into(),
            generation,
            attempt,
            subject_digest: verdict_core::digest::raw(exec.as_bytes()),
            evaluation_key: None,
            class,
            at: at(t),
        }
    }

    const WIDE: Window = Window {
        attempts: 1000,
        days: 365,
        min_sample: 1,
    };

    #[test]
    fn wilson_lower_bounds_match_known_values() {
        let round = |v: Option<f64>| (v.unwrap() * 1000.0).round() / 1000.0;
        assert_eq!(round(wilson_lower_95(20, 20)), 0.839);
        assert_eq!(round(wilson_lower_95(50, 50)), 0.929);
        // Textbook values for a proportion that is not all successes.
        assert_eq!(round(wilson_lower_95(8, 10)), 0.490);
        assert_eq!(round(wilson_lower_95(0, 10)), 0.0);
        assert_eq!(wilson_lower_95(0, 0), None);
        assert_eq!(ratio(1, 0), None);
    }

    #[test]
    fn only_passes_are_successes_and_gaps_are_not_rated() {
        let t = "2026-11-30T10:00:00Z";
        let list = [
            obs("a", 0, 1, AttemptClass::Pass, t),
            obs("b", 0, 1, AttemptClass::HumanRequired, t),
            obs("c", 0, 1, AttemptClass::Blocked, t),
            obs("d", 0, 1, AttemptClass::Unverified, t),
            obs("e", 0, 1, AttemptClass::Stale, t),
            obs("f", 0, 1, AttemptClass::Tampered, t),
            obs("g", 0, 1, AttemptClass::CoverageGap, t),
            obs("h", 0, 1, AttemptClass::Rework, t),
        ];
        let l = compute(&list, WIDE, &at("2026-11-30T12:00:00Z"), StoreClock::System);
        let c = &l.cohorts[0];
        assert_eq!((c.attempts, c.covered, c.verified_passes), (8, 7, 1));
        assert_eq!(c.pass_rate, Some(1.0 / 7.0));
        assert_eq!(c.coverage, Some(7.0 / 8.0));
        assert_eq!(c.first_attempts, 7);
    }

    #[test]
    fn one_attempt_is_counted_once() {
        let t = "2026-11-30T10:00:00Z";
        let list = [
            obs("a", 0, 1, AttemptClass::Pass, t),
            obs("a", 0, 1, AttemptClass::Rework, t),
        ];
        let l = compute(&list, WIDE, &at("2026-11-30T12:00:00Z"), StoreClock::System);
        assert_eq!(l.cohorts[0].attempts, 1);
        assert_eq!(l.cohorts[0].verified_passes, 0);
    }

    #[test]
    fn the_window_and_minimum_sample_hold() {
        let list: Vec<Observation> = (0..10)
            .map(|i| {
                obs(
                    &format!("e{i}"),
                    0,
                    1,
                    if i < 5 {
                        AttemptClass::Rework
                    } else {
                        AttemptClass::Pass
                    },
                    &format!("2026-11-{:02}T10:00:00Z", 20 + i),
                )
            })
            .collect();
        let now = at("2026-11-30T12:00:00Z");
        let last5 = compute(
            &list,
            Window {
                attempts: 5,
                days: 365,
                min_sample: 5,
            },
            &now,
            StoreClock::System,
        );
        assert_eq!(last5.cohorts[0].attempts, 5);
        assert_eq!(last5.cohorts[0].pass_rate, Some(1.0));
        // The last three days (from 11-27 12:00) hold the attempts of 11-28 and 11-29: below a
        // minimum sample of five.
        let recent = compute(
            &list,
            Window {
                attempts: 100,
                days: 3,
                min_sample: 5,
            },
            &now,
            StoreClock::System,
        );
        let c = &recent.cohorts[0];
        assert_eq!(c.attempts, 2);
        assert_eq!(c.status, CohortStatus::InsufficientEvidence);
        assert_eq!(
            (c.pass_rate, c.pass_rate_lower_95, c.coverage),
            (None, None, None)
        );
    }

    #[test]
    fn renderings_carry_every_cohort() {
        let mut other = obs("z", 0, 1, AttemptClass::Pass, "2026-11-30T10:00:00Z");
        other.cohort = key("openai/m@2");
        let list = [
            obs("a", 0, 1, AttemptClass::Pass, "2026-11-30T09:00:00Z"),
            obs("b", 0, 1, AttemptClass::Rework, "2026-11-30T10:00:00Z"),
            other,
        ];
        let l = compute(&list, WIDE, &at("2026-11-30T12:00:00Z"), StoreClock::System);
        assert_eq!(l.cohorts.len(), 2);
        let csv = l.to_csv();
        assert_eq!(csv.lines().count(), 3);
        assert!(csv.lines().nth(1).unwrap().contains(",0.5,"));
        let svg = l.cohorts[0].to_svg();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(l.to_table().contains("openai/m@2"));
    }

    /// A ledger read from a server (`verdict ledger --server`) must show the figures the store's
    /// own handle computes, to the last bit: every rate and bound survives its JSON text.
    #[test]
    fn rates_and_bounds_survive_their_json_text_exactly() {
        let points: Vec<Point> = (1..=300u64)
            .flat_map(|n| (0..=n).map(move |s| (s, n)))
            .map(|(s, n)| Point {
                at: at("2026-01-01T00:00:00Z"),
                rate: ratio(s, n),
                lower_95: wilson_lower_95(s, n),
            })
            .collect();
        let text = serde_json::to_string(&points).unwrap();
        let back: Vec<Point> = serde_json::from_str(&text).unwrap();
        let differ = points.iter().zip(&back).filter(|(a, b)| a != b).count();
        assert_eq!(
            differ,
            0,
            "{differ} of {} points read back otherwise",
            points.len()
        );
    }
}
