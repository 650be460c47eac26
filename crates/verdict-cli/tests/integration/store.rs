//! `verdict store migrate`, run as a user would.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use sqlx::Connection as _;
use std::process::{Command, Output};
use verdict_store::migrations::SCHEMA_VERSION;

fn verdict(args: &[&str], home: Option<&std::path::Path>, cwd: &std::path::Path) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_verdict"));
    cmd.args(args)
        .current_dir(cwd)
        .env_remove("VERDICT_STORE")
        .env_remove("VERDICT_HOME");
    if let Some(home) = home {
        cmd.env("VERDICT_HOME", home);
    }
    cmd.output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn migrate_creates_the_store_where_the_defaults_say_and_is_idempotent() {
    let home = tempfile::tempdir().unwrap();
    let out = verdict(&["store", "migrate"], Some(home.path()), home.path());
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains(&format!("migrated schema version 0 -> {SCHEMA_VERSION}")),
        "{}",
        text(&out.stdout)
    );
    assert!(home.path().join("verdict.db").exists());
    let again = verdict(&["store", "migrate"], Some(home.path()), home.path());
    assert!(again.status.success());
    assert!(
        text(&again.stdout).contains(&format!("schema version {SCHEMA_VERSION} is current")),
        "{}",
        text(&again.stdout)
    );

    // Without VERDICT_HOME or VERDICT_STORE: ./.verdict/verdict.db.
    let cwd = tempfile::tempdir().unwrap();
    let out = verdict(&["store", "migrate"], None, cwd.path());
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(cwd.path().join(".verdict").join("verdict.db").exists());

    // VERDICT_STORE wins over VERDICT_HOME; --store wins over both.
    let elsewhere = cwd.path().join("elsewhere.db");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_verdict"));
    let out = cmd
        .args(["store", "migrate"])
        .env("VERDICT_HOME", home.path())
        .env("VERDICT_STORE", format!("sqlite:{}", elsewhere.display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(elsewhere.exists());
    let flagged = cwd.path().join("flagged.db");
    let out = verdict(
        &[
            "store",
            "migrate",
            "--store",
            &format!("sqlite:{}", flagged.display()),
        ],
        Some(home.path()),
        cwd.path(),
    );
    assert!(out.status.success());
    assert!(flagged.exists());
}

#[test]
fn migrate_refuses_a_newer_schema_and_bad_locations() {
    let home = tempfile::tempdir().unwrap();
    assert!(
        verdict(&["store", "migrate"], Some(home.path()), home.path())
            .status
            .success()
    );
    let conn = rusqlite::Connection::open(home.path().join("verdict.db")).unwrap();
    // One version past the newest this binary knows.
    let later = verdict_store::SCHEMA_VERSION + 1;
    conn.execute(
        "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?1, 'later', '2030-01-01T00:00:00Z')",
        [later],
    )
    .unwrap();
    let out = verdict(&["store", "migrate"], Some(home.path()), home.path());
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!("schema version {later} is newer")),
        "{err}"
    );

    let out = verdict(
        &[
            "store",
            "migrate",
            "--store",
            "mysql://app:hunter2@db/verdict",
        ],
        None,
        home.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("sqlite:PATH") && !err.contains("hunter2"),
        "{err}"
    );
}

#[test]
fn help_shows_an_example() {
    let dir = tempfile::tempdir().unwrap();
    let out = verdict(&["store", "migrate", "--help"], None, dir.path());
    assert!(out.status.success());
    assert!(
        text(&out.stdout).contains("verdict store migrate --store"),
        "{}",
        text(&out.stdout)
    );
}

fn pg_admin() -> String {
    std::env::var("VERDICT_TEST_PG")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

#[tokio::test]
async fn migrate_on_postgres_creates_the_roles_once() {
    // Dropped with its roles when the test ends, whether it passes or not.
    let scratch = verdict_store::scratch::ScratchPostgres::create("clistore").unwrap();
    let (url, prefix) = (scratch.url().to_owned(), scratch.role_prefix());
    let mut conn = sqlx::PgConnection::connect(&pg_admin()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    for expected in [
        format!("migrated schema version 0 -> {SCHEMA_VERSION}"),
        format!("schema version {SCHEMA_VERSION} is current"),
    ] {
        let out = verdict(
            &[
                "store",
                "migrate",
                "--store",
                &url,
                "--role-prefix",
                &prefix,
            ],
            None,
            dir.path(),
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(
            text(&out.stdout).contains(&expected),
            "{}",
            text(&out.stdout)
        );
    }
    let roles: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT count(*) FROM pg_roles WHERE rolname LIKE '{prefix}%' AND NOT rolcanlogin"
    )))
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(
        roles, 10,
        "owner, six principal roles, the system role, the service role and the engine's role, \
         none able to log in"
    );
    // Another prefix for the same database is refused rather than half-applied.
    let out = verdict(
        &[
            "store",
            "migrate",
            "--store",
            &url,
            "--role-prefix",
            "other_",
        ],
        None,
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains(&prefix), "{}", text(&out.stderr));
}
