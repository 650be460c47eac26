//! Duty leases: one holder at a time, renewed by its holder, taken by another only once it
//! lapsed, and held only by the engine in the system role. On both backends; on PostgreSQL also
//! by hand, through a principal's login, which can neither call the routine nor touch the table.

use crate::common;

use common::*;
use std::time::Duration;
use verdict_core::contracts::Role;
use verdict_store::actor::ENGINE_PRINCIPAL;
use verdict_store::{Actor, Duty, StoreError};

const LEASE: Duration = Duration::from_secs(60);

fn engine() -> Actor {
    Actor::system(ENGINE_PRINCIPAL)
}

async fn one_holder_at_a_time_and_a_lapsed_duty_is_taken_over(t: &TestStore) {
    let q = t.store.queue();
    let duty = Duty::WebhookDelivery;
    let a = q.hold_duty(&engine(), duty, "a", LEASE).await.unwrap();
    assert!(a.held_by("a"));
    assert_eq!(a.term, 1);
    // Held: another is told who holds it, and the lease is left as it was.
    let seen = q.hold_duty(&engine(), duty, "b", LEASE).await.unwrap();
    assert_eq!(seen, a);
    assert!(!seen.held_by("b"));
    // Its holder renews it: the same term, a lease running from later.
    let renewed = q.hold_duty(&engine(), duty, "a", LEASE).await.unwrap();
    assert!(renewed.held_by("a"));
    assert_eq!(renewed.term, 1);
    assert!(renewed.lease_until.unix_nanos() >= a.lease_until.unix_nanos());
    // Renewed for a moment only, then not again: once it lapsed, another takes it.
    q.hold_duty(&engine(), duty, "a", Duration::from_millis(1))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(30)).await;
    let b = q.hold_duty(&engine(), duty, "b", LEASE).await.unwrap();
    assert!(b.held_by("b"));
    assert_eq!(b.term, 2);
    // The old holder, late, does not take it back.
    let late = q.hold_duty(&engine(), duty, "a", LEASE).await.unwrap();
    assert_eq!(late, b);
}
both!(one_holder_at_a_time_and_a_lapsed_duty_is_taken_over);

async fn only_the_engine_in_the_system_role_holds_a_duty(t: &TestStore) {
    let q = t.store.queue();
    let duty = Duty::WebhookDelivery;
    for actor in [
        Actor::new(OPERATOR, Role::Operator),
        Actor::new("ci-runner", Role::Runner),
        Actor::new(ENGINE_PRINCIPAL, Role::Operator),
        Actor::system("someone-else"),
    ] {
        let err = q.hold_duty(&actor, duty, "x", LEASE).await.unwrap_err();
        assert!(
            matches!(err, StoreError::Forbidden { .. }),
            "{actor:?}: {err}"
        );
    }
    for (holder, lease) in [
        ("", LEASE),
        ("bad\nlabel", LEASE),
        ("x", Duration::from_secs(86_401)),
    ] {
        let err = q
            .hold_duty(&engine(), duty, holder, lease)
            .await
            .unwrap_err();
        assert!(
            matches!(err, StoreError::Invalid { .. }),
            "{holder:?}: {err}"
        );
    }
    // None of them took it: the first rightful holder starts the first term.
    let first = q.hold_duty(&engine(), duty, "a", LEASE).await.unwrap();
    assert!(first.held_by("a"));
    assert_eq!(first.term, 1);
}
both!(only_the_engine_in_the_system_role_holds_a_duty);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_hand_a_principals_login_neither_holds_a_duty_nor_changes_the_leases() {
    let t = postgres().await;
    let held = t
        .store
        .queue()
        .hold_duty(&engine(), Duty::WebhookDelivery, "a", LEASE)
        .await
        .unwrap();
    let (mut ops, _) = principal_login(&t, "ops-hand", Role::Operator).await;
    let refused = [
        "SELECT * FROM verdict.duty_hold('verdict-engine', 'system', 'webhook-delivery', 'h', 60000)",
        "SELECT * FROM verdict.duty_hold('ops-hand', 'operator', 'webhook-delivery', 'h', 60000)",
        "UPDATE verdict.duty_leases SET holder = 'h'",
        "DELETE FROM verdict.duty_leases",
        "INSERT INTO verdict.duty_leases (duty, holder, term, lease_until) \
         VALUES ('webhook-delivery', 'h', 9, now())",
    ];
    for text in refused {
        let err = sql(&mut ops, text).await.unwrap_err();
        assert!(err.contains("permission denied"), "{text}: {err}");
    }
    let after = t
        .store
        .queue()
        .hold_duty(&engine(), Duty::WebhookDelivery, "b", LEASE)
        .await
        .unwrap();
    assert_eq!(after, held);
    t.cleanup().await;
}

async fn sql(conn: &mut sqlx::PgConnection, text: &str) -> Result<(), String> {
    use sqlx::Executor as _;
    conn.execute(sqlx::raw_sql(sqlx::AssertSqlSafe(text.to_owned())))
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}
