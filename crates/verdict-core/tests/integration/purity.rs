//! Invariant: the core does no I/O, has no async code and reads no clock. Checked on its
//! manifest (no runtime, database, network or time crates) and on its source (no std API that
//! reaches outside the process or reads the time).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::path::{Path, PathBuf};

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn manifest_has_no_io_async_or_clock_dependencies() {
    let manifest = std::fs::read_to_string(crate_dir().join("Cargo.toml")).unwrap();
    let deps = manifest.split("[dev-dependencies]").next().unwrap();
    for banned in [
        "tokio",
        "async-std",
        "futures",
        "sqlx",
        "rusqlite",
        "postgres",
        "reqwest",
        "hyper",
        "axum",
        "chrono",
        "time =",
        "jiff",
        "rand",
        "getrandom",
    ] {
        assert!(!deps.contains(banned), "verdict-core depends on {banned}");
    }
}

#[test]
fn source_uses_no_io_or_clock() {
    let mut files = Vec::new();
    rust_files(&crate_dir().join("src"), &mut files);
    assert!(files.len() > 5);
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for banned in [
            "std::fs",
            "std::net",
            "std::process",
            "std::env",
            "SystemTime",
            "Instant::",
            "std::io::stdin",
            "println!",
            "eprintln!",
            "async fn",
            ".await",
            "thread::spawn",
            "std::thread",
        ] {
            assert!(!text.contains(banned), "{} uses {banned}", f.display());
        }
    }
}
