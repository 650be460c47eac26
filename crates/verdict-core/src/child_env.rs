//! The environment of a program verdict runs for someone else.
//!
//! A check's command, a `command` model verifier and an agent command run code verdict did not
//! write (a producer's tests, a model runner reading producer content). They start from an
//! empty environment and get only the variables below from verdict's own; everything else the
//! process holds (the caller's token, the store URL with its password, provider keys) stays
//! with verdict. A configuration may add variables of its own by name, but never one verdict
//! reads its own authority from.

use std::ffi::OsString;

/// Variables passed through by exact name: what a program needs to find its tools, its home,
/// its locale, its temporary directory and its time zone.
pub const INHERITED: [&str; 8] = [
    "PATH", "HOME", "LANG", "LANGUAGE", "TMPDIR", "TZ", "USER", "LOGNAME",
];

/// Variables passed through by prefix (the locale's categories).
pub const INHERITED_PREFIXES: [&str; 1] = ["LC_"];

/// True for a name a child must never be given, whoever asks for it: verdict's own settings
/// (`VERDICT_TOKEN`, `VERDICT_STORE`, ...) and the store connection variables.
#[must_use]
pub fn is_withheld(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper.starts_with("VERDICT_") || upper == "DATABASE_URL" || upper.starts_with("PG")
}

/// True for a name of the allowlist.
#[must_use]
pub fn is_inherited(name: &str) -> bool {
    !is_withheld(name)
        && (INHERITED.contains(&name) || INHERITED_PREFIXES.iter().any(|p| name.starts_with(p)))
}

/// The allowlisted variables of `environment` (the caller passes its process's own, this crate
/// reading none), to start a child's environment from.
#[must_use]
pub fn inherited(
    environment: impl IntoIterator<Item = (OsString, OsString)>,
) -> Vec<(OsString, OsString)> {
    environment
        .into_iter()
        .filter(|(k, _)| k.to_str().is_some_and(is_inherited))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_withheld_and_the_allowlist_is_exact() {
        for name in [
            "VERDICT_TOKEN",
            "VERDICT_STORE",
            "verdict_server",
            "DATABASE_URL",
            "PGPASSWORD",
        ] {
            assert!(is_withheld(name), "{name}");
            assert!(!is_inherited(name), "{name}");
        }
        for name in ["PATH", "HOME", "LC_ALL", "TZ", "TMPDIR"] {
            assert!(is_inherited(name), "{name}");
        }
        for name in [
            "OPENAI_API_KEY",
            "AWS_SECRET_ACCESS_KEY",
            "PATHX",
            "http_proxy",
        ] {
            assert!(!is_inherited(name), "{name}");
        }
    }
}
