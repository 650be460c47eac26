//! The review pages' markup. Each function renders one engine read; nothing here decides.
//! maud escapes every value it is given, so whatever a producer or verifier wrote (criteria,
//! reasons, findings) is shown as text, never as markup. What a principal wrote comes from the
//! engine as [`Shown`], which has no `Display`: it is drawn by [`shown`] only, with its hidden
//! characters as named escapes and its look-alikes flagged. Its text as written
//! ([`Shown::written`]) goes only into links and attributes a browser does not draw (a test
//! below holds this file to that).

use super::Session;
use maud::{DOCTYPE, Markup, html};
use std::fmt::Write as _;
use verdict_core::contracts::Role;
use verdict_engine::review::{
    Board, Contents, DecisionEntry, DiffLine, FindingLineage, MatrixRow, Piece, Reliability,
    ResourceView, ReviewQueue, SHOWN_BYTES, SHOWN_LINES, Shown, SubjectReview,
};

/// What a refused action says: an optional first sentence, the reason code and the message.
pub struct Alert {
    /// A sentence before the code, when the refusal needs one.
    pub lead: Option<String>,
    /// The stable reason code.
    pub code: String,
    /// The engine's (or the page's) message, which may quote what a caller wrote.
    pub message: Shown,
}

impl Alert {
    pub fn engine(code: &str, message: String) -> Self {
        Self {
            lead: None,
            code: code.to_owned(),
            message: Shown::text(&message),
        }
    }

    pub fn plain(message: &str) -> Self {
        Self::engine("unavailable", message.to_owned())
    }
}

/// `id` as one URL path segment: every byte outside the unreserved set percent-encoded.
pub fn path_segment(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

fn alert(a: &Alert) -> Markup {
    html! {
        div role="alert" id="error" class="alert" {
            @if let Some(lead) = &a.lead { p { strong { (lead) } } }
            p { "Reason code " code { (a.code) } ": " (shown(&a.message)) }
        }
    }
}

/// Text a principal wrote, as the engine split it: text as text, each character it escaped as
/// a marked `<U+XXXX>` whose accessible name says what the character is, and each look-alike
/// flag as visible text in square brackets.
pub fn shown(text: &Shown) -> Markup {
    // Right-to-left characters are drawn in the order written, as a resource's lines are: the
    // bidirectional algorithm would move digits and punctuation next to them.
    html! {
        @if text.holds_right_to_left() {
            bdo dir="ltr" { (shown_line(text.pieces())) }
        } @else {
            (shown_line(text.pieces()))
        }
    }
}

fn shown_opt(text: Option<&Shown>) -> Markup {
    html! { @if let Some(t) = text { (shown(t)) } }
}

/// A risk class as the policy treats it, and the class the producer stated when the policy's
/// floor raised it: a reviewer must not read `high` work as `low`.
fn risk(stated: &Shown, effective: Option<&Shown>) -> Markup {
    html! {
        @match effective {
            Some(e) if e != stated => {
                strong { (shown(e)) } " (stated " (shown(stated)) ", raised by the policy's risk floor)"
            }
            _ => (shown(stated)),
        }
    }
}

/// Several texts joined by `, `.
fn shown_list(texts: &[Shown]) -> Markup {
    html! {
        @for (i, t) in texts.iter().enumerate() {
            @if i > 0 { ", " }
            (shown(t))
        }
    }
}

fn head(title: &str) -> Markup {
    html! {
        head {
            meta charset="utf-8";
            meta name="viewport" content="width=device-width, initial-scale=1";
            title { (title) " · verdict review" }
            link rel="stylesheet" href="/ui/assets/ui.css";
        }
    }
}

/// A page for a signed-in principal: header (who, sign out), navigation, one `h1`.
fn layout(s: &Session, title: &str, current: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(title))
            body {
                header class="top" {
                    p class="brand" { "verdict review" }
                    p class="who" {
                        "Signed in as "
                        strong id="principal" { (shown(&Shown::name(s.principal.name().as_str()))) }
                        " (role " span id="role" { (s.principal.role().as_str()) } ")"
                    }
                    form id="sign-out" method="post" action="/ui/sign-out" {
                        input type="hidden" name="csrf" value=(s.csrf);
                        button type="submit" { "Sign out" }
                    }
                }
                nav aria-label="Main" {
                    ul {
                        @for &(href, label) in nav_links(s.principal.role()) {
                            li {
                                @if label == current {
                                    a href=(href) aria-current="page" { (label) }
                                } @else {
                                    a href=(href) { (label) }
                                }
                            }
                        }
                    }
                }
                main id="main" {
                    h1 { (title) }
                    (body)
                }
            }
        }
    }
}

/// A page without a session (sign-in, refusals before one exists).
pub fn bare(title: &str, a: Option<&Alert>) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(title))
            body {
                header class="top" { p class="brand" { "verdict review" } }
                main id="main" {
                    h1 { (title) }
                    @if let Some(a) = a { (alert(a)) }
                    p { a href="/ui/sign-in" { "Sign in" } }
                }
            }
        }
    }
}

/// An engine refusal or failure as a page.
pub fn error_page(s: Option<&Session>, a: &Alert) -> Markup {
    match s {
        Some(s) => layout(s, "Refused", "", alert(a)),
        None => bare("Refused", Some(a)),
    }
}

pub fn sign_in(csrf: &str, a: Option<&Alert>) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            (head("Sign in"))
            body {
                header class="top" { p class="brand" { "verdict review" } }
                main id="main" {
                    h1 { "Sign in" }
                    @if let Some(a) = a { (alert(a)) }
                    p { "Sign in with your principal's token. Only human and operator principals may use the review pages." }
                    form id="sign-in" method="post" action="/ui/sign-in" class="stack" {
                        input type="hidden" name="csrf" value=(csrf);
                        label for="token" { "Token" }
                        input type="password" name="token" id="token" autocomplete="current-password" required;
                        button type="submit" id="sign-in-submit" { "Sign in" }
                    }
                }
            }
        }
    }
}

/// `90061` seconds as `1d 1h 1m`.
fn waited(secs: u64) -> String {
    let (d, h, m, s) = (
        secs / 86_400,
        secs % 86_400 / 3600,
        secs % 3600 / 60,
        secs % 60,
    );
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m {s}s"),
        (0, _, _) => format!("{h}h {m}m"),
        _ => format!("{d}d {h}h {m}m"),
    }
}

fn short(digest: &str) -> &str {
    digest.get(..19).unwrap_or(digest)
}

fn outcome_badge(word: &str) -> Markup {
    html! { span class=(format!("badge o-{word}")) { (word) } }
}

pub fn queue(s: &Session, q: &ReviewQueue, limit: usize) -> Markup {
    let body = html! {
        p { "Executions whose current decision asks for a person, the longest waiting first. Store time " (q.now.as_str()) "." }
        @if q.entries.is_empty() {
            p id="queue-empty" { "Nothing is waiting for a person." }
        } @else {
            div class="scroll" tabindex="0" {
                table id="queue" {
                    caption { "Waiting for a human decision" }
                    thead { tr {
                        th scope="col" { "Execution" }
                        th scope="col" { "Subject" }
                        th scope="col" { "Risk" }
                        th scope="col" { "Reasons" }
                        th scope="col" { "Waited" }
                    } }
                    tbody {
                        @for e in &q.entries {
                            tr data-execution=(e.execution.written()) {
                                th scope="row" { a href=(format!("/ui/executions/{}", path_segment(e.execution.written()))) { (shown(&e.execution)) } }
                                td { code title=(e.subject_digest.as_str()) { (short(e.subject_digest.as_str())) "…" } " gen " (e.generation) }
                                td { (risk(&e.risk_class, e.effective_risk_class.as_ref())) }
                                td { ul class="plain" { @for r in &e.reasons {
                                    li { code { (r.code) } " " (shown(&r.detail)) }
                                } } }
                                td { time datetime=(e.decided_at.as_str()) { (waited(e.waited_seconds)) } }
                            }
                        }
                    }
                }
            }
        }
        (next_page("/ui/queue", q.next.as_deref(), limit))
    };
    layout(s, "Review queue", "Queue", body)
}

/// The link to the page after this one, when there is one (the cursor percent-encoded as a
/// path segment is, which a query value takes as well: an execution id may hold `&` or `#`).
fn next_page(path: &str, next: Option<&str>, limit: usize) -> Markup {
    html! {
        @if let Some(cursor) = next {
            nav aria-label="Pages" {
                a id="next-page" rel="next" href=(format!("{path}?after={}&limit={limit}", path_segment(cursor))) { "Next page" }
            }
        }
    }
}

fn wire<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

pub fn board(s: &Session, b: &Board, limit: usize) -> Markup {
    let body = html! {
        p { "Every execution you may read, with its current outcome. Store time " (b.now.as_str()) "." }
        @if b.entries.is_empty() {
            p id="board-empty" { "No execution you may read has a subject yet." }
        }
        div class="scroll" tabindex="0" {
            table id="board" {
                caption { "Executions and outcomes" }
                thead { tr {
                    th scope="col" { "Execution" }
                    th scope="col" { "Outcome" }
                    th scope="col" { "Subject" }
                    th scope="col" { "Producer" }
                    th scope="col" { "Risk" }
                    th scope="col" { "Why none applies" }
                } }
                tbody {
                    @for e in &b.entries {
                        @let word = e.outcome.map_or("none", |o| o.as_str());
                        tr data-execution=(e.execution.written()) data-outcome=(word) {
                            th scope="row" { a href=(format!("/ui/executions/{}", path_segment(e.execution.written()))) { (shown(&e.execution)) } }
                            td { (outcome_badge(word)) }
                            td { code title=(e.subject_digest.as_str()) { (short(e.subject_digest.as_str())) "…" } " gen " (e.generation) }
                            td { (shown(&e.producer)) }
                            td { (risk(&e.risk_class, e.effective_risk_class.as_ref())) }
                            td { (e.not_applicable.join(", ")) }
                        }
                    }
                }
            }
        }
        (next_page("/ui/board", b.next.as_deref(), limit))
    };
    layout(s, "Board", "Board", body)
}

fn matrix(rows: &[MatrixRow]) -> Markup {
    // Columns: every distinct source label (check id or verifier class), in first-seen order.
    let mut columns: Vec<(String, Shown)> = Vec::new();
    for r in rows {
        for c in &r.sources {
            let col = (wire(&c.kind), c.label.clone());
            if !columns.contains(&col) {
                columns.push(col);
            }
        }
    }
    html! {
        @if rows.is_empty() {
            p { "No decision about this subject yet, so no criterion has a status." }
        } @else {
            div class="scroll" tabindex="0" {
                table id="matrix-table" {
                    caption { "Each criterion and what each source said of it" }
                    thead { tr {
                        th scope="col" { "Criterion" }
                        th scope="col" { "Required" }
                        th scope="col" { "Status" }
                        @for (kind, label) in &columns {
                            th scope="col" { (shown(label)) " " span class="muted" { "(" (kind) ")" } }
                        }
                    } }
                    tbody {
                        @for r in rows {
                            tr data-criterion=(r.criterion.written()) {
                                th scope="row" { code { (shown(&r.criterion)) } br; span class="muted" { (shown(&r.text)) } }
                                td { @if r.required { "yes" } @else { "no" } }
                                td { span class=(format!("badge s-{}", wire(&r.status))) { (wire(&r.status)) } }
                                @for (kind, label) in &columns {
                                    td {
                                        @for c in r.sources.iter().filter(|c| &wire(&c.kind) == kind && &c.label == label) {
                                            span class=(format!("badge s-{}", wire(&c.status))) { (wire(&c.status)) }
                                            " " code class="muted" { (shown(&c.reference)) }
                                            br;
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// One line of a resource as the engine split it: text as text, and each character it escaped as
/// a marked `<U+XXXX>` whose accessible name says what the character is.
fn shown_line(pieces: &[Piece]) -> Markup {
    html! {
        @for p in pieces {
            @match p {
                Piece::Text(t) => (t),
                Piece::Escape(e) => span class="esc" role="img" aria-label=(format!("{} {}", e.code_point, e.name)) title=(e.name) { "<" (e.code_point) ">" },
                Piece::Flag(why) => { " " span class="flag" { "[" (why) "]" } },
            }
        }
    }
}

fn resource(i: usize, res: &ResourceView) -> Markup {
    let heading = format!("resource-{i}");
    html! {
        article class="resource" data-resource=(res.name.written()) aria-labelledby=(heading) {
            h3 id=(heading) { (shown(&res.name)) " " span class="muted" { "(" (shown(&res.kind)) ")" } }
            @match &res.contents {
                Contents::NotStored => p { "Its bytes are not stored; only the digest " code { (res.digest.as_str()) } " is known." },
                Contents::Binary { size } => p { "Binary content, " (size) " bytes; not shown." },
                Contents::Text { lines, truncated } => {
                    div class="scroll" tabindex="0" { table class="code" {
                        caption class="visually-hidden" { "Text of " (shown(&res.name)) ", numbered by line" }
                        thead class="visually-hidden" { tr { th scope="col" { "Line" } th scope="col" { "Text" } } }
                        tbody { @for (n, l) in lines.iter().enumerate() {
                            tr { th scope="row" class="ln" { (n + 1) } td { pre { (shown_line(l)) } } }
                        } }
                    } }
                    @if *truncated { p class="truncated" { "truncated: only the first " (SHOWN_LINES) " lines or " (SHOWN_BYTES / 1024) " KiB are shown" } }
                },
                Contents::Diff { lines, truncated } => {
                    div class="scroll" tabindex="0" { table class="code diff" {
                        caption class="visually-hidden" { "Diff of " (shown(&res.name)) ", line by line" }
                        thead class="visually-hidden" { tr { th scope="col" { "Change" } th scope="col" { "Line" } } }
                        tbody { @for (what, l) in lines {
                            @let (class, label) = match what {
                                DiffLine::Added => ("d-add", "added"),
                                DiffLine::Removed => ("d-del", "removed"),
                                DiffLine::Header => ("d-head", "header"),
                                DiffLine::Context => ("d-ctx", "context"),
                                DiffLine::Other => ("d-other", "no change"),
                            };
                            tr class=(class) { th scope="row" class="ln" { span class="visually-hidden" { (label) } } td { pre { (shown_line(l)) } } }
                        } }
                    } }
                    @if *truncated { p class="truncated" { "truncated: only the first " (SHOWN_LINES) " lines or " (SHOWN_BYTES / 1024) " KiB are shown" } }
                },
            }
        }
    }
}

fn history(entries: &[DecisionEntry]) -> Markup {
    html! {
        @if entries.is_empty() {
            p { "The gate has not decided on this execution yet." }
        } @else {
            div class="scroll" tabindex="0" {
                table {
                    caption { "Every decision, oldest first" }
                    thead { tr {
                        th scope="col" { "Seq" }
                        th scope="col" { "Outcome" }
                        th scope="col" { "Generation" }
                        th scope="col" { "Subject" }
                        th scope="col" { "Policy" }
                        th scope="col" { "Applies" }
                        th scope="col" { "Reasons" }
                    } }
                    tbody {
                        @for d in entries {
                            tr {
                                th scope="row" { (d.seq) }
                                td { (outcome_badge(d.outcome.as_str())) }
                                td { (d.generation) }
                                td { @if let Some(sd) = &d.subject_digest { code title=(sd.as_str()) { (short(sd.as_str())) "…" } } }
                                td { @if let Some(pd) = &d.policy_digest { code title=(pd.as_str()) { (short(pd.as_str())) "…" } } }
                                td { @if d.not_applicable.is_empty() { "applies" } @else { "no: " (d.not_applicable.join(", ")) } }
                                td { (d.reasons.iter().map(|r| r.code.as_str()).collect::<Vec<_>>().join(", ")) }
                            }
                        }
                    }
                }
            }
        }
    }
}

pub fn execution(s: &Session, r: &SubjectReview, a: Option<&Alert>, notice: bool) -> Markup {
    let subject = &r.subject;
    let decision = r.applicable.as_ref();
    let id_path = path_segment(r.execution.written());
    let body = html! {
        @if let Some(a) = a { (alert(a)) }
        @if notice {
            p role="status" id="notice" class="notice" { "Your decision was recorded and the gate ran again: the outcome is now " strong { (r.outcome) } "." }
        }
        p class="lead" { "Current outcome: " span id="outcome" class=(format!("badge o-{}", r.outcome)) { (r.outcome) } }
        p { a href=(format!("/ui/executions/{id_path}/lineage")) id="lineage-link" { "Finding lineage across this execution's subjects" } }

        section id="subject" aria-labelledby="subject-h" {
            h2 id="subject-h" { "Subject" }
            dl class="facts" {
                dt { "Subject digest" } dd { code id="subject-digest" { (r.subject_digest.as_str()) } }
                dt { "Execution / generation" } dd { (shown(&subject.execution)) " / " (subject.generation) }
                @if let Some(m) = &subject.mission { dt { "Mission" } dd { (shown(m)) } }
                dt { "Producer" } dd { (shown(&subject.producer)) " (run " (shown(&subject.producer_run)) ")" }
                dt { "Objective" } dd { "revision " (shown(&subject.objective_revision)) ", " code { (subject.objective_digest.as_str()) } }
                dt { "Work items" } dd { @for w in &subject.work_items { (shown(w)) " " } }
                dt { "Risk" } dd { (risk(&subject.risk_class, subject.effective_risk_class.as_ref())) " (revision " (shown(&subject.risk_revision)) ")" }
                dt { "Workflow revision" } dd { (shown(&subject.workflow_revision)) }
                dt { "Gate policy digest" } dd { @match &r.policy_digest { Some(p) => code id="policy-digest" { (p.as_str()) }, None => "no policy is set for this gate" } }
                dt { "Criteria revision" } dd { (shown(&subject.criteria_revision)) }
            }
            h3 { "Criteria" }
            ul {
                @for c in &subject.criteria {
                    li data-criterion=(c.id.written()) { code { (shown(&c.id)) } @if !c.required { " (optional)" } ": " (shown(&c.text)) }
                }
            }
        }

        section id="resources" aria-labelledby="resources-h" {
            h2 id="resources-h" { "Resources" }
            div class="scroll" tabindex="0" {
                table {
                    caption { "Resources the subject names" }
                    thead { tr { th scope="col" { "Name" } th scope="col" { "Kind" } th scope="col" { "Digest" } th scope="col" { "Size" } th scope="col" { "Where" } } }
                    tbody { @for res in &r.resources {
                        tr { th scope="row" { (shown(&res.name)) } td { (shown(&res.kind)) } td { code { (res.digest.as_str()) } } td { @match res.size { Some(n) => { (n) " bytes" }, None => "not stored" } } td { (shown_opt(res.uri.as_ref())) } }
                    } }
                }
            }
            @for (i, res) in r.resources.iter().enumerate() {
                (resource(i, res))
            }
        }

        section id="matrix" aria-labelledby="matrix-h" {
            h2 id="matrix-h" { "Criterion matrix" }
            (matrix(&r.matrix))
        }

        section id="reasons" aria-labelledby="reasons-h" {
            h2 id="reasons-h" { "Reasons" }
            @match decision {
                Some(d) if !d.reasons.is_empty() => {
                    ul { @for reason in &d.reasons {
                        li { code { (reason.code) } " (" (reason.outcome.as_str()) ") " (shown(&reason.detail)) }
                    } }
                }
                Some(_) => p { "The applicable decision has no reasons." },
                None => p { "No decision applies now." },
            }
        }

        section id="findings" aria-labelledby="findings-h" {
            h2 id="findings-h" { "Findings" }
            @if r.findings.is_empty() {
                p { "No counted result reports a finding on this subject." }
            } @else {
                div class="scroll" tabindex="0" { table {
                    caption { "Findings of counted results on this subject" }
                    thead { tr { th scope="col" { "Finding" } th scope="col" { "Severity" } th scope="col" { "Scope" } th scope="col" { "Criterion" } th scope="col" { "Kind" } th scope="col" { "Where" } th scope="col" { "Remediation" } th scope="col" { "Reported by" } } }
                    tbody { @for f in &r.findings {
                        tr { th scope="row" { code { (shown(&f.id)) "@" (f.version) } } td { (wire(&f.severity)) } td { (wire(&f.scope)) } td { code { (shown(&f.criterion)) } } td { (shown(&f.kind)) } td { (shown_opt(f.location.as_ref())) } td { (shown_opt(f.remediation.as_ref())) } td { (shown(&f.result)) " (" (shown(&f.verifier_class)) ")" } }
                    } }
                } }
            }
        }

        section id="rework" aria-labelledby="rework-h" {
            h2 id="rework-h" { "Rework" }
            @match decision.map(|d| &d.rework) {
                Some(list) if !list.is_empty() => ul { @for f in list { li { code { (shown(f)) } } } },
                _ => p { "Nothing to rework in the applicable decision." },
            }
        }

        section id="follow-ups" aria-labelledby="follow-ups-h" {
            h2 id="follow-ups-h" { "Follow-ups" }
            @match decision.map(|d| &d.follow_ups) {
                Some(list) if !list.is_empty() => ul { @for f in list { li { code { (shown(f)) } } } },
                _ => p { "No follow-ups in the applicable decision." },
            }
        }

        section id="evidence" aria-labelledby="evidence-h" {
            h2 id="evidence-h" { "Evidence" }
            @if r.evidence.is_empty() && r.results.is_empty() {
                p { "No evidence about this subject." }
            }
            @if !r.evidence.is_empty() {
                div class="scroll" tabindex="0" { table {
                    caption { "Check evidence" }
                    thead { tr { th scope="col" { "Check" } th scope="col" { "Outcome" } th scope="col" { "Evidence id" } th scope="col" { "Digest" } th scope="col" { "Observed at" } th scope="col" { "By" } } }
                    tbody { @for e in &r.evidence {
                        tr { th scope="row" { (shown(&e.check)) } td { (e.outcome) } td { code { (shown(&e.id)) } } td { code { (e.digest.as_str()) } } td { time datetime=(e.observed_at.as_str()) { (e.observed_at.as_str()) } } td { (shown(&e.produced_by)) } }
                    } }
                } }
            }
            @if !r.results.is_empty() {
                div class="scroll" tabindex="0" { table {
                    caption { "Counted verification results" }
                    thead { tr { th scope="col" { "Result" } th scope="col" { "Class" } th scope="col" { "Verifier" } th scope="col" { "Status" } th scope="col" { "Runtime" } th scope="col" { "Digest" } } }
                    tbody { @for v in &r.results {
                        tr { th scope="row" { code { (shown(&v.id)) } } td { (shown(&v.class)) } td { (shown(&v.verifier)) " (run " (shown(&v.run)) ")" } td { (v.status) } td { @if let Some(rt) = &v.runtime { (shown(rt)) } @else { "none named" } } td { code { (v.digest.as_str()) } } }
                    } }
                } }
            }
        }

        section id="receipts" aria-labelledby="receipts-h" {
            h2 id="receipts-h" { "Model receipts" }
            @if r.runs.iter().all(|run| run.receipts.is_empty()) {
                p { "No verifier run of this execution recorded a model call." }
            }
            @if !r.runs.is_empty() {
                div class="scroll" tabindex="0" { table {
                    caption { "Verifier runs and their model calls" }
                    thead { tr { th scope="col" { "Run" } th scope="col" { "Class" } th scope="col" { "Status" } th scope="col" { "Model calls" } } }
                    tbody { @for run in &r.runs {
                        tr {
                            th scope="row" { code { (shown(&run.run_id)) } br; span class="muted" { (shown(&run.verifier)) } }
                            td { (shown(&run.class)) }
                            td { (shown(&run.status)) }
                            td {
                                @if run.receipts.is_empty() { "none" }
                                ul class="plain" { @for rc in &run.receipts {
                                    li { (shown(&rc.provider)) "/" (shown(&rc.model)) @if let Some(sn) = &rc.snapshot { "@" (shown(sn)) } ": " (shown(&rc.outcome)) ", " (rc.latency_ms) " ms"
                                        @if let (Some(i), Some(o)) = (rc.tokens_in, rc.tokens_out) { ", " (i) "+" (o) " tokens" @if rc.tokens_estimated { " (estimated)" } }
                                        @if let Some(c) = rc.cost_estimate { ", cost ≈ " (format!("{c:.4}")) }
                                        @if let Some(d) = &rc.detail { " — " (shown(d)) }
                                    }
                                } }
                            }
                        }
                    } }
                } }
            }
        }

        section id="history" aria-labelledby="history-h" {
            h2 id="history-h" { "Decision history" }
            (history(&r.history))
        }

        @if r.may_decide {
            @if let Some(policy) = &r.policy_digest {
                section id="decide-section" aria-labelledby="decide-h" {
                    h2 id="decide-h" { "Your decision" }
                    @if let Some(key) = &r.evaluation_key {
                    p { "You decide on subject " code { (r.subject_digest.as_str()) } " under policy " code { (policy.as_str()) } ", as the decision above shows them. If either moves, or what the Gate would decide changes, before you submit, nothing is recorded." }
                    form id="decide" method="post" action=(format!("/ui/executions/{id_path}/decision")) class="stack" {
                        input type="hidden" name="csrf" value=(s.csrf);
                        input type="hidden" name="subject_digest" value=(r.subject_digest.as_str());
                        input type="hidden" name="policy_digest" value=(policy.as_str());
                        input type="hidden" name="reviewed_decision" value=(key.as_str());
                        fieldset {
                            legend { "Verdict" }
                            div { input type="radio" name="verdict" value="approve" id="verdict-approve" required; " " label for="verdict-approve" { "Approve" } }
                            div { input type="radio" name="verdict" value="reject" id="verdict-reject"; " " label for="verdict-reject" { "Reject" } }
                        }
                        label for="reason" { "Reason (recorded with your decision)" }
                        textarea name="reason" id="reason" rows="4" required {}
                        button type="submit" id="decide-submit" { "Record decision" }
                    }
                    } @else {
                    p id="decide-unavailable" { "No decision of the Gate applies to what is stored now, so there is nothing on this page to approve or reject: something was recorded after the Gate last ran, or it has not run. Run the Gate on what is stored now, review what it decides, then decide." }
                    form id="gate-run" method="post" action=(format!("/ui/executions/{id_path}/gate-run")) {
                        input type="hidden" name="csrf" value=(s.csrf);
                        button type="submit" id="gate-run-submit" { "Run the Gate now" }
                    }
                    }
                }
            }
        }
    };
    layout(s, &format!("Execution {}", r.execution.plain()), "", body)
}

pub fn lineage(s: &Session, l: &FindingLineage) -> Markup {
    let body = html! {
        p { a href=(format!("/ui/executions/{}", path_segment(l.execution.written()))) { "Back to execution " (shown(&l.execution)) } }
        section id="lineage" aria-labelledby="lineage-h" {
            h2 id="lineage-h" { "Findings across " (l.subjects.len()) " subject(s)" }
            @if l.findings.is_empty() {
                p id="lineage-empty" { "No result on any subject of this execution reported a finding." }
            }
            @for f in &l.findings {
                article class="finding" data-finding=(f.id.written()) aria-labelledby=(format!("f-{}", path_segment(f.id.written()))) {
                    h3 id=(format!("f-{}", path_segment(f.id.written()))) { "Finding " code { (shown(&f.id)) } }
                    div class="scroll" tabindex="0" { table {
                        caption { "Versions reported" }
                        thead { tr { th scope="col" { "Version" } th scope="col" { "Generation" } th scope="col" { "Subject" } th scope="col" { "Severity" } th scope="col" { "Scope" } th scope="col" { "Criterion" } th scope="col" { "Result" } } }
                        tbody { @for v in &f.versions {
                            tr { th scope="row" { (v.version) } td { (v.generation) } td { code title=(v.subject_digest.as_str()) { (short(v.subject_digest.as_str())) "…" } } td { (wire(&v.severity)) } td { (wire(&v.scope)) } td { code { (shown(&v.criterion)) } } td { (shown(&v.result)) @if !v.counted { " (not counted)" } } }
                        } }
                    } }
                    @if f.dispositions.is_empty() {
                        p { "No later result disposed of it." }
                    } @else {
                        div class="scroll" tabindex="0" { table {
                            caption { "Dispositions, and the evidence that fixed it" }
                            thead { tr { th scope="col" { "Version" } th scope="col" { "Disposition" } th scope="col" { "Generation" } th scope="col" { "By result" } th scope="col" { "Evidence" } th scope="col" { "Reason" } } }
                            tbody { @for d in &f.dispositions {
                                tr { th scope="row" { (d.version) } td { (wire(&d.disposition)) } td { (d.generation) } td { (shown(&d.result)) @if !d.counted { " (not counted)" } } td { (shown_list(&d.evidence_refs)) } td { (shown_opt(d.reason.as_ref())) } }
                            } }
                        } }
                    }
                }
            }
        }
    };
    layout(
        s,
        &format!("Finding lineage of {}", l.execution.plain()),
        "",
        body,
    )
}

/// The chart of one series: the pass rate as a line and the band down to its 95 % lower bound.
fn chart(idx: usize, title: &str, points: &[(Option<f64>, Option<f64>)]) -> Markup {
    const W: f64 = 600.0;
    const H: f64 = 200.0;
    const PAD: f64 = 30.0;
    #[expect(
        clippy::cast_precision_loss,
        reason = "a window holds at most a few hundred points"
    )]
    let x = |i: usize| {
        if points.len() <= 1 {
            W / 2.0
        } else {
            PAD + (W - 2.0 * PAD) * i as f64 / (points.len() - 1) as f64
        }
    };
    let y = |v: f64| H - PAD - (H - 2.0 * PAD) * v.clamp(0.0, 1.0);
    let mut line = String::new();
    let mut upper = Vec::new();
    let mut lower = Vec::new();
    for (i, (rate, low)) in points.iter().enumerate() {
        if let Some(r) = rate {
            let _ = write!(line, "{:.1},{:.1} ", x(i), y(*r));
            upper.push(format!("{:.1},{:.1}", x(i), y(*r)));
            lower.push(format!("{:.1},{:.1}", x(i), y(low.unwrap_or(0.0))));
        }
    }
    lower.reverse();
    let band = [upper, lower].concat().join(" ");
    let title_id = format!("chart-{idx}-title");
    html! {
        svg role="img" aria-labelledby=(title_id) viewBox=(format!("0 0 {W} {H}")) class="chart" xmlns="http://www.w3.org/2000/svg" {
            title id=(title_id) { (title) }
            line x1=(PAD) y1=(y(0.0)) x2=(W - PAD) y2=(y(0.0)) stroke="#444" {}
            line x1=(PAD) y1=(y(1.0)) x2=(W - PAD) y2=(y(1.0)) stroke="#bbb" stroke-dasharray="4 4" {}
            text x="2" y=(y(1.0) + 4.0) font-size="11" fill="#222" { "100%" }
            text x="2" y=(y(0.0) + 4.0) font-size="11" fill="#222" { "0%" }
            @if !band.is_empty() {
                polygon points=(band) fill="#9ec5fe" fill-opacity="0.6" stroke="none" {}
            }
            @if !line.is_empty() {
                polyline points=(line.trim_end()) fill="none" stroke="#0b4a8b" stroke-width="2.5" {}
            }
        }
    }
}

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".to_owned(), |v| format!("{:.1}%", v * 100.0))
}

/// The main navigation: the reliability page only for an operator, whose alone it is.
fn nav_links(role: Role) -> &'static [(&'static str, &'static str)] {
    const REVIEW: &[(&str, &str)] = &[("/ui/queue", "Queue"), ("/ui/board", "Board")];
    const OPERATOR: &[(&str, &str)] = &[
        ("/ui/queue", "Queue"),
        ("/ui/board", "Board"),
        ("/ui/reliability", "Reliability"),
    ];
    if role == Role::Operator {
        OPERATOR
    } else {
        REVIEW
    }
}

pub fn reliability(s: &Session, r: &Reliability) -> Markup {
    let body = html! {
        p {
            "Verified pass rate per capability cohort over the last " (r.window.days) " days (at most "
            (r.window.attempts) " attempts; fewer than " (r.window.min_sample) " is not rated), with the Wilson 95 % lower bound as a band. "
            "Every execution in the store."
        }
        @if r.clock == verdict_store::StoreClock::Manual {
            p id="reliability-manual-clock" { "This store keeps a manual clock: every time in it was chosen by whoever ran it, so these rates are no record of real work." }
        }
        @if r.series.is_empty() {
            p id="reliability-empty" { "No attempt has a decision in the window yet, so there is nothing to chart." }
        }
        @for (i, c) in r.series.iter().enumerate() {
            section class="series" data-capability=(c.capability.written()) aria-labelledby=(format!("series-{i}")) {
                h2 id=(format!("series-{i}")) { (shown(&c.capability)) }
                p class="muted" { (shown(&c.cohort)) }
                p { (c.attempts) " attempts; pass rate " (pct(c.pass_rate)) ", lower bound " (pct(c.pass_rate_lower_95))
                    @if !c.rated { " (not rated: insufficient evidence)" } }
                (chart(i, &format!("Pass rate of {} after each attempt, with its 95 % lower bound", c.capability.plain()), &c.points.iter().map(|p| (p.rate, p.lower_95)).collect::<Vec<_>>()))
                div class="scroll" tabindex="0" { table {
                    caption { "Pass rate of " (shown(&c.capability)) " after each attempt" }
                    thead { tr { th scope="col" { "Attempt" } th scope="col" { "At" } th scope="col" { "Pass rate" } th scope="col" { "Lower bound (95 %)" } } }
                    tbody { @for (n, p) in c.points.iter().enumerate() {
                        tr { th scope="row" { (n + 1) } td { time datetime=(p.at.as_str()) { (p.at.as_str()) } } td { (pct(p.rate)) } td { (pct(p.lower_95)) } }
                    } }
                } }
            }
        }
    };
    layout(s, "Reliability", "Reliability", body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_text_is_drawn_escaped_and_flagged() {
        let html = shown(&Shown::text("ok \u{202e}\u{43e}k")).into_string();
        assert_eq!(
            html,
            "ok <span class=\"esc\" role=\"img\" aria-label=\"U+202E right-to-left override\" \
             title=\"right-to-left override\">&lt;U+202E&gt;</span>\u{43e}k \
             <span class=\"flag\">[mixes scripts Cyrillic, Latin: U+043E Cyrillic]</span>"
        );
        let html = shown(&Shown::name("\u{43e}perator")).into_string();
        assert_eq!(
            html,
            "\u{43e}perator <span class=\"flag\">[not ASCII: U+043E Cyrillic]</span>"
        );
        let html = shown(&Shown::text("<b>&")).into_string();
        assert_eq!(html, "&lt;b&gt;&amp;");
        // Right-to-left text is drawn in the order written, and said to be.
        let html = shown(&Shown::text("10 \u{5d0}")).into_string();
        assert_eq!(
            html,
            "<bdo dir=\"ltr\">10 \u{5d0} <span class=\"flag\">[right-to-left, drawn left to \
             right in the order written: U+05D0 Hebrew]</span></bdo>"
        );
    }

    /// Text as written goes only where a browser does not draw it: a `data-` attribute or a
    /// link's path segment. Anything else must go through [`shown`].
    #[test]
    fn text_as_written_reaches_only_links_and_data_attributes() {
        let source = include_str!("pages.rs");
        let markup = source
            .split(concat!("#[cfg(", "test)]"))
            .next()
            .unwrap_or_default();
        let needle = concat!(".written", "()");
        let mut uses = 0;
        for (at, _) in markup.match_indices(needle) {
            let before = &markup[..at];
            let open = before.rfind('(').unwrap_or(0);
            let expression = &before[open + 1..];
            let head = &before[..open];
            let line_start = head.rfind('\n').map_or(0, |n| n + 1);
            let call = &head[line_start..];
            let word = call
                .rsplit(|c: char| c.is_whitespace() || c == '(')
                .next()
                .unwrap_or_default();
            assert!(
                expression
                    .chars()
                    .all(|c| c.is_alphanumeric() || c == '.' || c == '_')
                    && (word == "path_segment"
                        || (word.starts_with("data-") && word.ends_with('='))),
                "text as written is drawn: `{word}({expression}{needle}` in pages.rs"
            );
            uses += 1;
        }
        assert!(uses > 0);
    }
}
