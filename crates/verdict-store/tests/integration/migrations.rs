//! Migrations: applied on first use and by `migrate`, idempotent, a role prefix taken by the
//! store of one database only (even when several migrate at once), and a schema newer than the
//! binary is refused.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use verdict_store::{Location, OpenOptions, SCHEMA_VERSION, StoreError};

async fn a_newer_schema_is_refused(t: &TestStore) {
    let table = t.table("schema_migrations");
    t.raw(&format!("INSERT INTO {table} (version, name, applied_at) VALUES (99, 'from the future', '2030-01-01T00:00:00Z')"))
        .await
        .unwrap();
    let options = OpenOptions {
        role_prefix: (!t.prefix.is_empty()).then(|| t.prefix.clone()),
        ..OpenOptions::default()
    };
    let err = verdict_store::open_with(&t.location, &options)
        .await
        .err()
        .expect("refused");
    assert!(
        matches!(err, StoreError::SchemaTooNew { found: 99, .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains("newer than this verdict supports"),
        "{err}"
    );
    let err = verdict_store::migrate(&t.location, options.role_prefix.as_deref())
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::SchemaTooNew { .. }), "{err}");
    // The store that was open before keeps working on what it knows, but says what it found.
    assert_eq!(t.store.schema_version().await.unwrap(), 99);
}
both!(a_newer_schema_is_refused);

async fn migrate_is_idempotent(t: &TestStore) {
    let prefix = (!t.prefix.is_empty()).then(|| t.prefix.clone());
    let report = verdict_store::migrate(&t.location, prefix.as_deref())
        .await
        .unwrap();
    assert_eq!((report.from, report.to), (SCHEMA_VERSION, SCHEMA_VERSION));
    assert_eq!(t.store.schema_version().await.unwrap(), SCHEMA_VERSION);
    let rows = t
        .count(&format!(
            "SELECT count(*) FROM {}",
            t.table("schema_migrations")
        ))
        .await;
    assert_eq!(rows, SCHEMA_VERSION);
}
both!(migrate_is_idempotent);

#[tokio::test]
async fn sqlite_is_created_on_first_use_in_wal_mode() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested").join("home").join("verdict.db");
    let location = Location::Sqlite(path.clone());
    let no_migrate = OpenOptions {
        migrate: false,
        ..OpenOptions::default()
    };
    let err = verdict_store::open_with(&location, &no_migrate)
        .await
        .err()
        .expect("refused");
    assert!(
        matches!(err, StoreError::SchemaTooOld { found: 0, .. }),
        "{err}"
    );
    let store = verdict_store::open(&location).await.unwrap();
    assert_eq!(store.schema_version().await.unwrap(), SCHEMA_VERSION);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    // Not a database at all: a clear error, not a guess.
    let junk = dir.path().join("junk.db");
    std::fs::write(&junk, b"this is not a database file, not at all, really").unwrap();
    let err = verdict_store::open(&Location::Sqlite(junk))
        .await
        .err()
        .expect("refused");
    assert!(
        err.to_string().contains("junk.db") || err.to_string().contains("not a database"),
        "{err}"
    );
}

/// The comment on a role, read as the superuser.
async fn role_comment(role: &str) -> Option<String> {
    use sqlx::Connection as _;
    let mut admin = sqlx::PgConnection::connect(&pg_admin_url()).await.unwrap();
    let comment = sqlx::query_scalar(
        "SELECT shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = $1",
    )
    .bind(role)
    .fetch_one(&mut admin)
    .await
    .unwrap();
    admin.close().await.unwrap();
    comment
}

/// Sets the comment on a role as the superuser (`None` removes it).
async fn set_role_comment(role: &str, comment: Option<&str>) {
    use sqlx::{Connection as _, Executor as _};
    let mut admin = sqlx::PgConnection::connect(&pg_admin_url()).await.unwrap();
    let sql = match comment {
        Some(c) => format!("COMMENT ON ROLE \"{role}\" IS '{}'", c.replace('\'', "''")),
        None => format!("COMMENT ON ROLE \"{role}\" IS NULL"),
    };
    admin
        .execute(sqlx::raw_sql(sqlx::AssertSqlSafe(sql)))
        .await
        .unwrap();
    admin.close().await.unwrap();
}

/// Roles belong to the whole cluster, so a role prefix serves the store of one database
/// (schema 32). Of four databases migrated at once with one prefix, one takes it (the comment
/// on its owner role names that database) and the other three are refused, each naming the
/// prefix, the database holding it, its own database and --role-prefix, with no schema built;
/// each migrates with a prefix of its own. The holder migrates again as before. A holder whose
/// owner role carries no mark (migrated before marks) gets it back on its next migration, and
/// `audit verify` reports it missing until then; a mark naming another database of the
/// cluster is reported and refuses the holder's migration, saying that store keeps its prefix;
/// a comment that is no mark is refused; a mark naming a database since dropped is taken over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_prefix_serves_the_store_of_one_database_only() {
    let prefix = unique("vshared");
    let owner = format!("{prefix}owner");
    let mut dbs = Vec::new();
    for _ in 0..4 {
        dbs.push(create_pg_db().await);
    }
    let mut tasks = Vec::new();
    for (_, url) in &dbs {
        let location = Location::Postgres(url.clone());
        let prefix = prefix.clone();
        tasks.push(tokio::spawn(async move {
            verdict_store::migrate(&location, Some(&prefix)).await
        }));
    }
    let (mut holder, mut refused) = (None, Vec::new());
    for ((db, url), task) in dbs.iter().zip(tasks) {
        match task.await.unwrap() {
            Ok(report) => {
                assert!(holder.is_none(), "a second database took {prefix}");
                assert_eq!((report.from, report.to), (0, SCHEMA_VERSION));
                holder = Some((db.clone(), Location::Postgres(url.clone())));
            }
            Err(err) => refused.push((db.clone(), Location::Postgres(url.clone()), err)),
        }
    }
    let (holder, location) = holder.expect("one database takes the prefix");
    assert_eq!(refused.len(), 3);
    let mark = format!("verdict store of database {holder}");
    assert_eq!(role_comment(&owner).await.as_deref(), Some(mark.as_str()));
    let no_migrate = OpenOptions {
        migrate: false,
        ..OpenOptions::default()
    };
    for (db, at, err) in &refused {
        assert!(matches!(err, StoreError::Refused(_)), "{err}");
        let message = err.to_string();
        for part in [&prefix, &holder, db, "--role-prefix"] {
            assert!(message.contains(part), "{message} names {part}");
        }
        let err = verdict_store::open_with(at, &no_migrate)
            .await
            .err()
            .expect("no store there");
        assert!(
            matches!(err, StoreError::SchemaTooOld { found: 0, .. }),
            "{err}"
        );
        let own = unique("vown");
        let report = verdict_store::migrate(at, Some(&own)).await.unwrap();
        assert_eq!((report.from, report.to), (0, SCHEMA_VERSION));
        assert_eq!(
            role_comment(&format!("{own}owner")).await,
            Some(format!("verdict store of database {db}"))
        );
        drop_pg(db, &own).await;
    }
    assert_eq!(role_comment(&owner).await.as_deref(), Some(mark.as_str()));

    // The holder migrates and works as before.
    let report = verdict_store::migrate(&location, Some(&prefix))
        .await
        .unwrap();
    assert_eq!((report.from, report.to), (SCHEMA_VERSION, SCHEMA_VERSION));
    let store = verdict_store::open(&location).await.unwrap();
    populate(store.as_ref()).await;
    assert!(store.verify_audit(None).await.unwrap().is_intact());
    let reported = |report: verdict_store::AuditReport, says: &str| {
        assert!(
            report
                .problems
                .iter()
                .any(|p| format!("{p:?}").contains(says)),
            "{says}: {:#?}",
            report.problems
        );
    };

    // Migrated before marks: no mark, reported, and given on the next migration.
    set_role_comment(&owner, None).await;
    reported(store.verify_audit(None).await.unwrap(), "carries no mark");
    verdict_store::migrate(&location, Some(&prefix))
        .await
        .unwrap();
    assert_eq!(role_comment(&owner).await.as_deref(), Some(mark.as_str()));
    assert!(store.verify_audit(None).await.unwrap().is_intact());

    // Marked as another existing database's store: two stores share the prefix.
    let (other, _) = create_pg_db().await;
    set_role_comment(&owner, Some(&format!("verdict store of database {other}"))).await;
    reported(
        store.verify_audit(None).await.unwrap(),
        &format!("is marked as the store of database \\\"{other}\\\""),
    );
    let err = verdict_store::migrate(&location, Some(&prefix))
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, StoreError::Refused(_)), "{err}");
    for part in [&prefix, &other, &holder, "migrated with it too"] {
        assert!(message.contains(part), "{message} names {part}");
    }

    // A comment that is no mark.
    set_role_comment(&owner, Some("kept by another team")).await;
    let err = verdict_store::migrate(&location, Some(&prefix))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::Refused(m) if m.contains("kept by another team")),
        "{err}"
    );
    assert_eq!(
        role_comment(&owner).await.as_deref(),
        Some("kept by another team")
    );

    // A mark naming a database since dropped is taken over.
    set_role_comment(&owner, Some(&format!("verdict store of database {other}"))).await;
    drop_pg(&other, "").await;
    verdict_store::migrate(&location, Some(&prefix))
        .await
        .unwrap();
    assert_eq!(role_comment(&owner).await.as_deref(), Some(mark.as_str()));
    assert!(store.verify_audit(None).await.unwrap().is_intact());
    drop(store);

    let bad = OpenOptions {
        role_prefix: Some("Bad-Prefix".into()),
        ..OpenOptions::default()
    };
    let (db, url) = create_pg_db().await;
    let err = verdict_store::open_with(&Location::Postgres(url), &bad)
        .await
        .err()
        .expect("refused");
    assert!(
        matches!(
            err,
            StoreError::Invalid {
                what: "role prefix",
                ..
            }
        ),
        "{err}"
    );
    drop_pg(&db, "").await;
    drop_pg(&holder, &prefix).await;
}

/// The admin URL, connecting as another user to another database.
fn url_as(user: &str, db: &str) -> String {
    let admin = pg_admin_url();
    let (scheme, rest) = admin.split_once("://").expect("scheme in VERDICT_TEST_PG");
    let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
    let (host, _) = host.split_once('/').expect("database in VERDICT_TEST_PG");
    format!("{scheme}://{user}@{host}/{db}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_owner_with_createrole_migrates_without_superuser() {
    use sqlx::{Connection as _, Executor as _};
    let prefix = unique("vmig");
    let (login, plain) = (format!("{prefix}login"), format!("{prefix}plain"));
    let db = unique("verdict_t");
    let mut admin = sqlx::PgConnection::connect(&pg_admin_url()).await.unwrap();
    for sql in [
        format!("CREATE ROLE \"{login}\" LOGIN CREATEROLE"),
        format!("CREATE ROLE \"{plain}\" LOGIN"),
        format!("CREATE DATABASE \"{db}\" OWNER \"{login}\""),
    ] {
        admin
            .execute(sqlx::raw_sql(sqlx::AssertSqlSafe(sql)))
            .await
            .unwrap();
    }
    // A login role that may not create roles is refused with what migrating needs, and leaves
    // neither roles nor a schema behind.
    let err = verdict_store::migrate(&Location::Postgres(url_as(&plain, &db)), Some(&prefix))
        .await
        .expect_err("refused");
    assert!(
        matches!(&err, StoreError::Denied(m) if m.contains("CREATEROLE")),
        "{err}"
    );
    let made: i64 =
        sqlx::query_scalar("SELECT count(*) FROM pg_roles WHERE starts_with(rolname, $1)")
            .bind(&prefix)
            .fetch_one(&mut admin)
            .await
            .unwrap();
    assert_eq!(made, 2, "only the two login roles the test made");

    // The database's owner with CREATEROLE, no superuser, migrates and writes.
    let location = Location::Postgres(url_as(&login, &db));
    let report = verdict_store::migrate(&location, Some(&prefix))
        .await
        .unwrap();
    assert_eq!((report.from, report.to), (0, SCHEMA_VERSION));
    let options = OpenOptions {
        role_prefix: Some(prefix.clone()),
        ..OpenOptions::default()
    };
    let store = verdict_store::open_with(&location, &options).await.unwrap();
    // Without a superuser every write acts as a stored principal's identity (schema version
    // 7): the first operator adds itself (schema 14; the engine's own identity writes nothing
    // since schema 19), then the others.
    let first_op = verdict_store::Actor::new(OPERATOR, verdict_core::contracts::Role::Operator);
    let first = verdict_store::PrincipalRecord {
        name: OPERATOR.parse().unwrap(),
        role: verdict_core::contracts::Role::Operator,
        token_sha256: verdict_store::token_sha256("token-of-engine"),
    };
    store.add_principal(&first_op, &first).await.unwrap();
    for (name, role) in [
        (PRODUCER, verdict_core::contracts::Role::Producer),
        (RUNNER, verdict_core::contracts::Role::Runner),
        (HUMAN, verdict_core::contracts::Role::Human),
    ] {
        register(store.as_ref(), name, role).await;
        grant_write(store.as_ref(), &format!("g-{name}"), name, "ex-1").await;
    }
    // populate's subject names mission m-17 (schema 31).
    grant_mission_write(store.as_ref(), "g-producer-m17", PRODUCER, "m-17").await;
    populate(store.as_ref()).await;
    assert!(store.verify_audit(None).await.unwrap().is_intact());
    drop(store);

    // Every table belongs to the owner role, not to the login role that migrated.
    let admin_db = format!(
        "{}/{db}",
        pg_admin_url().rsplit_once('/').expect("database").0
    );
    let mut conn = sqlx::PgConnection::connect(&admin_db).await.unwrap();
    let owners: Vec<String> = sqlx::query_scalar(
        "SELECT DISTINCT tableowner::text FROM pg_tables WHERE schemaname = 'verdict'",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert_eq!(owners, vec![format!("{prefix}owner")]);
    let superuser: bool = sqlx::query_scalar("SELECT rolsuper FROM pg_roles WHERE rolname = $1")
        .bind(&login)
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert!(!superuser);
    drop(conn);
    drop_pg(&db, &prefix).await;
}

/// Schema version 5 splices its checks into each write routine at the one line that parses the
/// body. A routine that does not have exactly one such line (edited by hand, say) must stop the
/// migration: nothing of version 5 is applied, no routine is left half-changed, and once the
/// routine is put back the same migration goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_5_refuses_a_routine_it_cannot_splice_and_changes_nothing() {
    use sqlx::{Connection as _, Executor as _};
    let (db, url) = create_pg_db().await;
    let prefix = unique("vmig");
    create_pg_roles(&prefix).await;
    let owner = format!("\"{prefix}owner\"");
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    for m in verdict_store::migrations::POSTGRES
        .iter()
        .filter(|m| m.version <= 4)
    {
        let sql = pg_migration_sql(m.sql, &prefix);
        conn.execute(sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "BEGIN; {sql}; INSERT INTO verdict.schema_migrations (version, name) VALUES ({}, '{}'); COMMIT;",
            m.version, m.name
        ))))
        .await
        .unwrap();
    }
    let single = "v_doc := p_body::jsonb;";
    let rewrite = |from: &str, to: &str| {
        format!(
            "SET ROLE {owner}; DO $$ BEGIN EXECUTE replace(pg_get_functiondef(\
             'verdict.put_one_findings(text, text, text, text, text, text)'::regprocedure), \
             '{from}', '{to}'); END $$; RESET ROLE;"
        )
    };
    let twice = format!("{single} {single}");
    conn.execute(sqlx::raw_sql(sqlx::AssertSqlSafe(rewrite(single, &twice))))
        .await
        .unwrap();
    let definition = |name: &str| {
        format!(
            "SELECT pg_get_functiondef('verdict.{name}(text, text, text, text, text, text)'::regprocedure)"
        )
    };
    let spliced = async |conn: &mut sqlx::PgConnection| -> bool {
        let def: String =
            sqlx::query_scalar(sqlx::AssertSqlSafe(definition("put_one_check_evidence")))
                .fetch_one(conn)
                .await
                .unwrap();
        def.contains("says it was produced by")
    };

    let location = Location::Postgres(url.clone());
    let err = verdict_store::migrate(&location, Some(&prefix))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains(
            "verdict.put_one_findings(text, text, text, text, text, text): the body is parsed 2 times, not once"
        ),
        "{err}"
    );
    let version: i32 = sqlx::query_scalar("SELECT max(version) FROM verdict.schema_migrations")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(version, 4);
    // The routines the migration had already spliced before it met this one are as they were.
    assert!(!spliced(&mut conn).await);

    conn.execute(sqlx::raw_sql(sqlx::AssertSqlSafe(rewrite(&twice, single))))
        .await
        .unwrap();
    let report = verdict_store::migrate(&location, Some(&prefix))
        .await
        .unwrap();
    assert_eq!((report.from, report.to), (4, SCHEMA_VERSION));
    assert!(spliced(&mut conn).await);
    drop(conn);
    drop_pg(&db, &prefix).await;
}

/// A new SQLite store's file, and the WAL and shared-memory files SQLite keeps beside it, are
/// readable by their owner alone: every piece of evidence and the principals' token hashes are
/// in them.
#[cfg(unix)]
#[tokio::test]
async fn a_new_sqlite_store_is_readable_by_its_owner_alone() {
    use std::os::unix::fs::PermissionsExt as _;
    let t = sqlite().await;
    let verdict_store::Location::Sqlite(path) = &t.location else {
        panic!("not a SQLite store");
    };
    for suffix in ["", "-wal", "-shm"] {
        let file = std::path::PathBuf::from(format!("{}{suffix}", path.display()));
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", file.display());
    }
}
