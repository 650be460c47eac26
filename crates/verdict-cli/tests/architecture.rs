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
