//! What installing verdict gives a user besides the binary: shell completions and manual pages
//! generated from the command definitions, and a licence that matches the manifest.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::{root, verdict};
use std::collections::BTreeSet;
use std::process::Command;

fn stdout(args: &[&str]) -> String {
    let out = verdict(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The subcommands `verdict [PATH...] --help` lists, by name.
fn subcommands(path: &[&str]) -> Vec<String> {
    let mut args = path.to_vec();
    args.push("--help");
    let help = stdout(&args);
    let Some((_, list)) = help.split_once("Commands:\n") else {
        return Vec::new();
    };
    list.lines()
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| *n != "help")
        .map(str::to_owned)
        .collect()
}

/// Every command path of the binary, `[]` being `verdict` itself.
fn command_paths() -> Vec<Vec<String>> {
    let mut all = vec![Vec::new()];
    let mut i = 0;
    while let Some(path) = all.get(i).cloned() {
        let refs: Vec<&str> = path.iter().map(String::as_str).collect();
        for sub in subcommands(&refs) {
            let mut p = path.clone();
            p.push(sub);
            all.push(p);
        }
        i += 1;
    }
    all
}

/// What bash completes after `verdict WORDS...` and a word begun as `partial`, through the
/// generated script's own function.
fn bash_completes(script: &str, words: &[String], partial: &str) -> Vec<String> {
    let quoted: Vec<String> = std::iter::once("verdict".to_owned())
        .chain(words.iter().cloned())
        .chain([partial.to_owned()])
        .map(|w| format!("'{w}'"))
        .collect();
    let prev = words.last().map_or("verdict", String::as_str);
    let driver = format!(
        "{script}\nCOMP_WORDS=({}); COMP_CWORD={}; _verdict verdict '{partial}' '{prev}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        quoted.join(" "),
        words.len() + 1
    );
    // On standard input: the script is larger than one argument may be (128 KiB on Linux).
    let mut child = Command::new("bash")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), driver.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn completions_cover_every_command_and_are_valid_shell() {
    let bash = stdout(&["completions", "bash"]);
    for path in command_paths() {
        let refs: Vec<&str> = path.iter().map(String::as_str).collect();
        let offered = bash_completes(&bash, &path, "");
        for sub in subcommands(&refs) {
            assert!(
                offered.contains(&sub),
                "after {path:?}: {offered:?} lacks {sub}"
            );
        }
        // Every command's options complete too.
        let options = bash_completes(&bash, &path, "--");
        assert!(
            options.contains(&"--help".to_owned()),
            "{path:?}: {options:?}"
        );
    }
    let after_gate_evaluate =
        bash_completes(&bash, &["gate".to_owned(), "evaluate".to_owned()], "--f");
    assert_eq!(after_gate_evaluate, ["--format"]);
    for shell in ["elvish", "fish", "powershell", "zsh"] {
        let script = stdout(&["completions", shell]);
        assert!(
            script.contains("gate") && script.contains("quickstart"),
            "{shell}"
        );
    }
    let out = verdict(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("tcsh"));
}

#[test]
fn man_writes_one_page_per_command_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("man1");
    let said = stdout(&["man", "--out", out_dir.to_str().unwrap()]);
    let pages: BTreeSet<String> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    let expected: BTreeSet<String> = command_paths()
        .iter()
        .map(|p| {
            let mut words = vec!["verdict".to_owned()];
            words.extend(p.iter().cloned());
            format!("{}.1", words.join("-"))
        })
        .collect();
    assert_eq!(pages, expected);
    assert!(
        said.starts_with(&format!("{} pages written", pages.len())),
        "{said}"
    );
    for path in command_paths() {
        let name = std::iter::once("verdict".to_owned())
            .chain(path.iter().cloned())
            .collect::<Vec<_>>()
            .join("-");
        let page = std::fs::read_to_string(out_dir.join(format!("{name}.1"))).unwrap();
        let version = env!("CARGO_PKG_VERSION");
        assert!(
            page.contains(&format!(".TH {name} 1  \"verdict {version}\"")),
            "{name}: {}",
            page.lines().take(3).collect::<Vec<_>>().join("\n")
        );
        // The page says what `--help` says: its first line of help is in the page (read back
        // from roff's escapes for a hyphen and an apostrophe).
        let refs: Vec<&str> = path.iter().map(String::as_str).chain(["--help"]).collect();
        let first = stdout(&refs).lines().next().unwrap().to_owned();
        let text = page.replace("\\-", "-").replace("\\*(Aq", "'");
        assert!(text.contains(&first), "{name}: no {first:?}");
    }
}

#[test]
fn man_refuses_a_target_that_is_not_a_directory_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("taken");
    std::fs::write(&file, b"keep").unwrap();
    let out = verdict(&["man", "--out", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("taken"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read(&file).unwrap(), b"keep");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn the_licence_is_the_one_the_manifest_names_and_no_placeholder_url_is_left() {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    assert!(manifest.contains("license = \"Apache-2.0\""));
    assert!(!manifest.contains("example.invalid"), "placeholder url");
    let licence = std::fs::read_to_string(root().join("LICENSE")).unwrap();
    assert!(licence.contains("Apache License") && licence.contains("Version 2.0, January 2004"));
    assert!(licence.contains("END OF TERMS AND CONDITIONS"));
}
