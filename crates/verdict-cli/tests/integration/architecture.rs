//! The layering of ARCHITECTURE.md, checked on the manifests: only the store knows SQL, only the
//! probes and the model verifier speak HTTP, the engine and the CLI reach databases and networks
//! only through those crates, and the core reaches nothing at all.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::path::PathBuf;

fn crates_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The `[dependencies]` table of a crate's manifest (dev-dependencies excluded), as text.
fn deps(krate: &str) -> Option<String> {
    let manifest = std::fs::read_to_string(crates_dir().join(krate).join("Cargo.toml")).ok()?;
    let start = manifest.find("[dependencies]")?;
    let rest = &manifest[start + "[dependencies]".len()..];
    let end = rest.find("\n[").unwrap_or(rest.len());
    Some(rest[..end].to_owned())
}

fn names(table: &str) -> Vec<String> {
    table
        .lines()
        .filter_map(|l| l.split(['=', '.']).next())
        .map(|n| n.trim().to_owned())
        .filter(|n| !n.is_empty() && !n.starts_with('#'))
        .collect()
}

const SQL: [&str; 5] = [
    "sqlx",
    "rusqlite",
    "postgres",
    "tokio-postgres",
    "libsqlite3-sys",
];
const HTTP: [&str; 5] = ["reqwest", "hyper", "hyper-util", "axum", "ureq"];

#[test]
fn only_the_store_knows_sql() {
    for entry in std::fs::read_dir(crates_dir()).unwrap() {
        let krate = entry.unwrap().file_name().into_string().unwrap();
        let Some(table) = deps(&krate) else { continue };
        if krate == "verdict-store" {
            continue;
        }
        for n in names(&table) {
            assert!(
                !SQL.contains(&n.as_str()),
                "{krate} depends on {n}; only verdict-store may speak SQL"
            );
        }
    }
}

#[test]
fn only_probes_judge_and_server_speak_http() {
    let allowed = ["verdict-probes", "verdict-judge", "verdict-server"];
    for entry in std::fs::read_dir(crates_dir()).unwrap() {
        let krate = entry.unwrap().file_name().into_string().unwrap();
        let Some(table) = deps(&krate) else { continue };
        if allowed.contains(&krate.as_str()) {
            continue;
        }
        for n in names(&table) {
            assert!(
                !HTTP.contains(&n.as_str()),
                "{krate} depends on {n}; HTTP belongs to probes, judge and server"
            );
        }
    }
}

#[test]
fn core_depends_on_no_other_verdict_crate_and_no_runtime() {
    let table = deps("verdict-core").unwrap();
    for n in names(&table) {
        assert!(!n.starts_with("verdict-"), "verdict-core depends on {n}");
        assert!(
            !["tokio", "async-trait", "futures"].contains(&n.as_str()),
            "verdict-core depends on {n}"
        );
    }
}

/// verdict-attest is pure: it reaches only the core, no store, runtime, clock, file or network,
/// so what it signs and checks depends on nothing but the documents and keys it is handed.
#[test]
fn attest_depends_only_on_the_core_and_does_no_io() {
    let table = deps("verdict-attest").unwrap();
    for n in names(&table) {
        assert!(
            !n.starts_with("verdict-") || n == "verdict-core",
            "verdict-attest depends on {n}"
        );
        assert!(
            !["tokio", "async-trait", "futures", "getrandom", "rand"].contains(&n.as_str()),
            "verdict-attest depends on {n}"
        );
    }
    for entry in std::fs::read_dir(crates_dir().join("verdict-attest/src")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        for needle in [
            "std::fs",
            "std::net",
            "std::process",
            "std::env",
            "SystemTime",
            "Instant",
        ] {
            assert!(
                !text.contains(needle),
                "{} uses {needle}; verdict-attest does no I/O and reads no clock",
                path.display()
            );
        }
    }
}

/// The store's write API, read from the `Store` trait itself so that a write method added later
/// is covered: every method that takes the acting `Actor`, and the one that sets the clock.
fn store_writes() -> Vec<String> {
    let text = std::fs::read_to_string(crates_dir().join("verdict-store/src/store.rs")).unwrap();
    let start = text.find("pub trait Store").unwrap();
    let body = &text[start..start + text[start..].find("\n}\n").unwrap()];
    let mut out = Vec::new();
    for piece in body.split("fn ").skip(1) {
        let name = piece.split('(').next().unwrap().trim().to_owned();
        let signature = &piece[..piece.find([';', '{']).unwrap_or(piece.len())];
        if signature.contains("&Actor") || name == "set_manual_time" {
            out.push(name);
        }
    }
    out
}

/// Rust source without its comments, spacing or line breaks.
fn code_of(source: &str) -> String {
    source
        .lines()
        .map(|l| l.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .concat()
        .split_whitespace()
        .collect()
}

/// Calls of `writes` on anything named a store in `source` (comments left out, spacing and line
/// breaks ignored), with the text of each call.
fn direct_store_writes(source: &str, writes: &[String]) -> Vec<String> {
    let code = code_of(source);
    let mut found = Vec::new();
    for w in writes {
        for receiver in ["store.", "store().", "store()?.", "store.clone()."] {
            let call = format!("{receiver}{w}(");
            if code.contains(&call) {
                found.push(call);
            }
        }
    }
    found
}

fn rust_files(dir: &std::path::Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The faces only parse, call one engine use case and render: neither the CLI's nor the
/// server's source calls the store's write API, and the CLI never reaches past the engine to
/// its store at all (a read it needs is an engine method).
#[test]
fn the_faces_never_write_to_the_store_directly() {
    let writes = store_writes();
    for expected in [
        "put",
        "put_batch",
        "admit_run_noted",
        "record_run_status",
        "cas_lease",
    ] {
        assert!(
            writes.iter().any(|w| w == expected),
            "the write API read from the trait lacks {expected}: {writes:?}"
        );
    }
    // The check sees a call however it is formatted.
    let sample = "ctx.engine\n    .store() // the store\n    .put(&actor, kind, &doc)";
    assert_eq!(direct_store_writes(sample, &writes), ["store().put("]);
    for face in ["verdict-cli", "verdict-server"] {
        let mut files = Vec::new();
        rust_files(&crates_dir().join(face).join("src"), &mut files);
        assert!(!files.is_empty(), "{face}");
        for path in files {
            let text = std::fs::read_to_string(&path).unwrap();
            let found = direct_store_writes(&text, &writes);
            assert!(
                found.is_empty(),
                "{} writes to the store directly ({found:?}); call an engine use case",
                path.display()
            );
            if face == "verdict-cli" {
                assert!(
                    !code_of(&text).contains(".store()"),
                    "{} reaches into the engine's store; call an engine use case",
                    path.display()
                );
            }
        }
    }
}

#[test]
fn every_crate_is_in_the_code_map() {
    let map = std::fs::read_to_string(crates_dir().join("../ARCHITECTURE.md")).unwrap();
    let readme = std::fs::read_to_string(crates_dir().join("../README.md")).unwrap();
    for entry in std::fs::read_dir(crates_dir()).unwrap() {
        let krate = entry.unwrap().file_name().into_string().unwrap();
        if !crates_dir().join(&krate).join("Cargo.toml").exists() {
            continue;
        }
        assert!(
            map.contains(&format!("## {krate}")),
            "ARCHITECTURE.md has no section for {krate}"
        );
        assert!(
            readme.contains(&format!("`{krate}`")),
            "README.md does not list {krate}"
        );
        let lib = crates_dir().join(&krate).join("src/lib.rs");
        if lib.exists() {
            let text = std::fs::read_to_string(&lib).unwrap();
            assert!(
                text.starts_with("//!"),
                "{krate}'s lib.rs does not open with its crate doc"
            );
        }
    }
}

/// The repository root.
fn repo() -> PathBuf {
    crates_dir().join("..")
}

/// The files git tracks, relative to the repository root; without git (a source archive),
/// every file outside `target` and hidden directories.
fn tracked_files() -> Vec<PathBuf> {
    let listed = std::process::Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(repo())
        .output()
        .ok()
        .filter(|o| o.status.success());
    if let Some(out) = listed {
        return out
            .stdout
            .split(|b| *b == 0)
            .filter(|p| !p.is_empty())
            .map(|p| PathBuf::from(String::from_utf8(p.to_vec()).unwrap()))
            .filter(|p| repo().join(p).is_file())
            .collect();
    }
    fn walk(dir: &std::path::Path, base: &std::path::Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.starts_with('.') || name == "target" {
                continue;
            }
            if path.is_dir() {
                walk(&path, base, out);
            } else {
                out.push(path.strip_prefix(base).unwrap().to_path_buf());
            }
        }
    }
    let mut out = Vec::new();
    walk(&repo(), &repo(), &mut out);
    out
}

/// The anchor a heading gets: lower case, punctuation dropped, spaces as hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// A Markdown file's text outside fenced code blocks and inline code spans, by line.
fn prose_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut kept = String::new();
        for (i, part) in line.split('`').enumerate() {
            if i % 2 == 0 {
                kept.push_str(part);
            }
        }
        out.push(kept);
    }
    out
}

/// The anchors of a Markdown file's headings (a repeated heading gets `-1`, `-2`, ...).
fn anchors(text: &str) -> Vec<String> {
    let (mut bases, mut out) = (Vec::new(), Vec::new());
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let base = slug(line.trim_start_matches('#'));
        let n = bases.iter().filter(|b| **b == base).count();
        out.push(if n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        bases.push(base);
    }
    out
}

/// The link targets of a Markdown file: inline links `[text](target "title")` and reference
/// definitions `[name]: target`.
fn link_targets(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in prose_lines(text) {
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let end = after.find(')').unwrap_or(after.len());
            let target = after[..end].split_whitespace().next().unwrap_or("");
            out.push(target.trim_matches(['<', '>']).to_owned());
            rest = &after[end..];
        }
        let t = line.trim_start();
        if t.starts_with('[')
            && let Some((_, target)) = t.split_once("]: ")
        {
            out.push(target.split_whitespace().next().unwrap_or("").to_owned());
        }
    }
    out
}

#[test]
fn every_relative_link_in_markdown_resolves_inside_the_repository() {
    let root = repo().canonicalize().unwrap();
    let tracked: std::collections::BTreeSet<PathBuf> = tracked_files().into_iter().collect();
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in &tracked {
        if file.extension().is_none_or(|e| e != "md") {
            continue;
        }
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        for target in link_targets(&text) {
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let resolved = if path.is_empty() {
                root.join(file)
            } else if path.starts_with('/') {
                broken.push(format!("{}: {target} is an absolute path", file.display()));
                continue;
            } else {
                let dir = root.join(file).parent().unwrap().to_path_buf();
                match dir.join(path.replace("%20", " ")).canonicalize() {
                    Ok(p) => p,
                    Err(_) => {
                        broken.push(format!("{}: {target} does not exist", file.display()));
                        continue;
                    }
                }
            };
            if !resolved.starts_with(&root) {
                broken.push(format!(
                    "{}: {target} points outside the repository",
                    file.display()
                ));
                continue;
            }
            let inside = resolved.strip_prefix(&root).unwrap().to_path_buf();
            if resolved.is_file() && !tracked.contains(&inside) {
                broken.push(format!(
                    "{}: {target} is not a tracked file",
                    file.display()
                ));
                continue;
            }
            if !anchor.is_empty() && resolved.extension().is_some_and(|e| e == "md") {
                let there = std::fs::read_to_string(&resolved).unwrap();
                if !anchors(&there).iter().any(|a| a == anchor) {
                    broken.push(format!("{}: {target} names no heading", file.display()));
                }
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} relative links found; is the scan broken?"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn no_tracked_file_refers_to_the_design_input_outside_the_repository() {
    // Spelt in pieces so that this file does not name them itself.
    let names = [
        ["..", "/shared"].concat(),
        ["CONTRACTS", ".md"].concat(),
        ["CHECKS", ".md"].concat(),
    ];
    let mut found = Vec::new();
    for file in tracked_files() {
        let Ok(text) = std::fs::read_to_string(repo().join(&file)) else {
            continue; // not text
        };
        for (n, line) in text.lines().enumerate() {
            for name in &names {
                if line.contains(name.as_str()) {
                    found.push(format!("{}:{}: {name}", file.display(), n + 1));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "refer to docs/spec/ instead:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_link_checker_sees_what_it_must() {
    let text = "# Top\n## A `b` c\n## A b c\n[x](one.md#top) `[y](not-a-link.md)`\n```\n[z](in-code.md)\n```\n[w]: two.md\n";
    assert_eq!(link_targets(text), ["one.md#top", "two.md"]);
    assert_eq!(anchors(text), ["top", "a-b-c", "a-b-c-1"]);
}

/// The rows of the first table after `heading` in `docs/spec/FILE`, header and rule left out,
/// each cell trimmed and without backquotes.
fn spec_table(file: &str, heading: &str) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(repo().join("docs/spec").join(file)).unwrap();
    let start = format!("\n{text}")
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("{file} has no heading {heading:?}"));
    let rows: Vec<Vec<String>> = text[start..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().replace('`', ""))
                .collect()
        })
        .collect();
    assert!(rows.len() > 2, "{file}, {heading}: no table");
    rows[2..].to_vec()
}

/// A default as the specification writes it, as JSON: `none` is `null`, a bare word a string.
fn spec_default(cell: &str) -> serde_json::Value {
    match cell {
        "none" => serde_json::Value::Null,
        _ => serde_json::from_str(cell).unwrap_or_else(|_| serde_json::Value::from(cell)),
    }
}

/// Every row of a `field | default | ...` table with a default agrees with `defaults`, the
/// document the code reads from one that leaves those fields out.
/// `fields` are the fields the document's type has (a field left out when empty is in them,
/// though not in `defaults`).
fn defaults_agree(
    file: &str,
    heading: &str,
    defaults: &serde_json::Value,
    fields: &[String],
) -> usize {
    let mut n = 0;
    for row in spec_table(file, heading) {
        let (field, default) = (&row[0], &row[1]);
        if default.is_empty() {
            continue;
        }
        let (code, spec) = (defaults.get(field.as_str()), spec_default(default));
        // 1 and 1.0 are one default; a field the code leaves out when writing is empty.
        let same = match (
            code,
            code.and_then(serde_json::Value::as_f64),
            spec.as_f64(),
        ) {
            (_, Some(a), Some(b)) => a == b,
            (None, _, _) => {
                fields.contains(field)
                    && (spec.is_null()
                        || spec.as_array().is_some_and(Vec::is_empty)
                        || spec.as_object().is_some_and(serde_json::Map::is_empty))
            }
            (Some(code), _, _) => *code == spec,
        };
        assert!(
            same,
            "{file}, {heading}: the default of {field} is {code:?}, the specification says {spec}"
        );
        n += 1;
    }
    n
}

#[test]
fn the_specification_lists_every_reason_code_with_its_outcome() {
    use verdict_core::contracts::ReasonCode;
    let rows = spec_table("gate.md", "## Reason codes");
    let codes: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    let expected: Vec<&str> = ReasonCode::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(codes, expected);
    for (row, code) in rows.iter().zip(ReasonCode::ALL) {
        match code.fixed_outcome() {
            Some(outcome) => assert_eq!(row[1], outcome.as_str(), "{}", row[0]),
            None => assert!(
                row[1].contains("policy") || row[1].contains("rule"),
                "{}: {}",
                row[0],
                row[1]
            ),
        }
    }
}

#[test]
fn the_specification_lists_every_digest_kind() {
    let kinds: Vec<String> = spec_table("encoding.md", "## Document digests")
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    let expected: Vec<&str> = verdict_core::digest::DigestKind::ALL
        .iter()
        .map(|k| k.as_str())
        .collect();
    assert_eq!(kinds, expected);
}

#[test]
fn the_specification_gives_the_defaults_the_code_applies() {
    use verdict_core::contracts::{CheckEvidence, Criterion, Policy};
    let policy: Policy = serde_json::from_value(serde_json::json!(
        {"schema": "verdict.policy/v1", "name": "p", "revision": 1}
    ))
    .unwrap();
    let policy = serde_json::to_value(&policy).unwrap();
    let schema = verdict_core::schema::schema("policy").unwrap();
    let fields: Vec<String> = schema["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert!(fields.contains(&"rules".to_owned()), "{schema}");
    assert_eq!(
        defaults_agree(
            "policy.md",
            "# The policy: how the Gate decides",
            &policy,
            &fields
        ),
        13
    );

    let criterion: Criterion =
        serde_json::from_value(serde_json::json!({"id": "c", "text": "t"})).unwrap();
    let mut c = serde_json::to_value(&criterion).unwrap();
    c["weight"] = serde_json::json!(criterion.weight());
    assert_eq!(defaults_agree("subject.md", "## Criteria", &c, &[]), 3);

    let evidence: CheckEvidence = serde_json::from_value(serde_json::json!({
        "id": "e", "kind": "check", "check": "c",
        "subject_digest": format!("sha256:{}", "0".repeat(64)),
        "definition_digest": format!("sha256:{}", "0".repeat(64)),
        "produced_by": {"principal": "ci", "role": "runner"}, "outcome": "pass",
        "content_digest": format!("sha256:{}", "0".repeat(64)),
        "observed_at": "2026-01-01T00:00:00Z", "freshness": {"kind": "content"}
    }))
    .unwrap();
    let evidence = serde_json::to_value(&evidence).unwrap();
    assert_eq!(
        defaults_agree("evidence.md", "## Check evidence", &evidence, &[]),
        1
    );

    let budget = serde_json::to_value(verdict_judge::config::Budget::default()).unwrap();
    assert_eq!(defaults_agree("verifiers.md", "## Budget", &budget, &[]), 7);
}

#[test]
fn the_specification_lists_every_applicability_code() {
    use verdict_engine::NotApplicable::{self as N, *};
    let all = [
        SubjectMoved,
        GenerationMoved,
        PolicyRevisionMoved,
        Expired,
        EvidenceSetMoved,
        ExecutionCancelled,
        NotReproduced,
    ];
    // No wildcard: a new code fails to compile here until it is listed above.
    for code in all {
        match code {
            N::SubjectMoved
            | N::GenerationMoved
            | N::PolicyRevisionMoved
            | N::Expired
            | N::EvidenceSetMoved
            | N::ExecutionCancelled
            | N::NotReproduced => {}
        }
    }
    let codes: Vec<String> = spec_table(
        "applicability.md",
        "# Applicability: whether a decision applies now",
    )
    .into_iter()
    .map(|r| r[0].clone())
    .collect();
    let expected: Vec<&str> = all.iter().map(|c| c.as_str()).collect();
    assert_eq!(codes, expected);
}

#[test]
fn the_specification_names_every_unavailable_reason() {
    use verdict_core::contracts::UnavailableReason::{self as U, *};
    let all = [
        Timeout,
        ProviderError,
        BudgetExhausted,
        ContextIncomplete,
        GrantRevoked,
        Cancelled,
        InvalidOutput,
    ];
    for reason in all {
        match reason {
            U::Timeout
            | U::ProviderError
            | U::BudgetExhausted
            | U::ContextIncomplete
            | U::GrantRevoked
            | U::Cancelled
            | U::InvalidOutput => {}
        }
    }
    let row = spec_table("evidence.md", "## Verification result")
        .into_iter()
        .find(|r| r[0] == "unavailable_reason")
        .unwrap();
    let listed: Vec<&str> = row[1]
        .split([',', ':', ' '])
        .filter(|w| w.contains('_') || all.iter().any(|r| r.as_str() == *w))
        .collect();
    let expected: Vec<&str> = all.iter().map(|r| r.as_str()).collect();
    assert_eq!(listed, expected);
}
