//! Where the store is: `--store URL`, else `VERDICT_STORE`, else `$VERDICT_HOME/verdict.db`,
//! else `./.verdict/verdict.db`.

use crate::error::{Result, StoreError};
use std::path::{Path, PathBuf};

/// Environment variable naming the store (`sqlite:PATH` or `postgres://...`).
pub const STORE_ENV: &str = "VERDICT_STORE";
/// Environment variable naming verdict's home directory (the SQLite store lives there).
pub const HOME_ENV: &str = "VERDICT_HOME";
/// File name of the embedded store.
pub const DB_FILE: &str = "verdict.db";

/// A store location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// An SQLite database file (created on first use).
    Sqlite(PathBuf),
    /// A PostgreSQL connection URL.
    Postgres(String),
}

impl Location {
    /// Parses `sqlite:PATH`, `postgres://...` or `postgresql://...`.
    pub fn parse(spec: &str) -> Result<Self> {
        if let Some(path) = spec.strip_prefix("sqlite:") {
            let path = path.strip_prefix("//").unwrap_or(path);
            if path.is_empty() {
                return Err(location_error(
                    spec,
                    "sqlite: needs a file path, as in sqlite:./verdict.db",
                ));
            }
            Ok(Self::Sqlite(PathBuf::from(path)))
        } else if spec.starts_with("postgres://") || spec.starts_with("postgresql://") {
            Ok(Self::Postgres(spec.to_owned()))
        } else {
            Err(location_error(
                spec,
                "expected sqlite:PATH, postgres://USER@HOST:PORT/DATABASE or postgresql://...",
            ))
        }
    }

    /// Resolves the location from an explicit `--store`, then `VERDICT_STORE`, then
    /// `VERDICT_HOME`, then the current directory.
    pub fn resolve(explicit: Option<&str>) -> Result<Self> {
        let store_env = std::env::var(STORE_ENV).ok();
        let home_env = std::env::var_os(HOME_ENV).map(PathBuf::from);
        Self::resolve_from(explicit, store_env.as_deref(), home_env.as_deref())
    }

    /// [`Location::resolve`] with the environment given explicitly. Empty values count as unset.
    pub fn resolve_from(
        explicit: Option<&str>,
        store_env: Option<&str>,
        home: Option<&Path>,
    ) -> Result<Self> {
        if let Some(spec) = explicit.filter(|s| !s.is_empty()) {
            return Self::parse(spec);
        }
        if let Some(spec) = store_env.filter(|s| !s.is_empty()) {
            return Self::parse(spec);
        }
        match home.filter(|h| !h.as_os_str().is_empty()) {
            Some(home) => Ok(Self::Sqlite(home.join(DB_FILE))),
            None => Ok(Self::Sqlite(Path::new(".verdict").join(DB_FILE))),
        }
    }

    /// The location for messages: a PostgreSQL password is replaced by `***`.
    #[must_use]
    pub fn redacted(&self) -> String {
        match self {
            Self::Sqlite(path) => format!("sqlite:{}", path.display()),
            Self::Postgres(url) => redact_url(url),
        }
    }
}

fn location_error(spec: &str, message: &str) -> StoreError {
    StoreError::Location {
        location: redact_url(spec),
        message: message.to_owned(),
    }
}

/// Replaces the password of `scheme://user:password@host/...` by `***`.
#[must_use]
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precedence_is_flag_then_env_then_home_then_cwd() {
        let home = Path::new("/srv/verdict");
        let pg = "postgres://u@h/db";
        assert_eq!(
            Location::resolve_from(Some("sqlite:a.db"), Some(pg), Some(home)).unwrap(),
            Location::Sqlite("a.db".into())
        );
        assert_eq!(
            Location::resolve_from(None, Some(pg), Some(home)).unwrap(),
            Location::Postgres(pg.into())
        );
        assert_eq!(
            Location::resolve_from(None, Some(""), Some(home)).unwrap(),
            Location::Sqlite(home.join("verdict.db"))
        );
        assert_eq!(
            Location::resolve_from(None, None, None).unwrap(),
            Location::Sqlite(Path::new(".verdict").join("verdict.db"))
        );
    }

    #[test]
    fn unknown_schemes_are_refused_and_passwords_never_echoed() {
        for bad in ["mysql://u:secret@h/db", "verdict.db", "sqlite:", "http://x"] {
            let err = Location::parse(bad).unwrap_err().to_string();
            assert!(!err.contains("secret"), "{err}");
        }
        let loc = Location::parse("postgresql://app:hunter2@db:5432/verdict").unwrap();
        assert_eq!(loc.redacted(), "postgresql://app:***@db:5432/verdict");
        assert_eq!(
            Location::parse("sqlite:///var/lib/v.db").unwrap(),
            Location::Sqlite("/var/lib/v.db".into())
        );
    }
}
