//! The API benchmark (`benches/api/`) with the smoke counts, so it cannot rot: every
//! measurement runs on SQLite and PostgreSQL, every flow it times reaches what it must (201s,
//! passing decisions, an intact audit chain; the bench fails otherwise), and the report has
//! the rows, ratios and targets the docs read. Nothing here is timed.

use crate::api_bench::{Options, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_bench_runs_every_measurement_on_both_backends() {
    let options = Options {
        postgres: Some(verdict_store::scratch::ScratchPostgres::admin_url()),
        smoke: true,
        workers: vec![1, 2],
        ..Options::default()
    };
    let report = run(options).await.unwrap();
    assert!(report.smoke);
    for backend in ["sqlite", "postgres"] {
        let rows: Vec<_> = report
            .rows
            .iter()
            .filter(|r| r.backend == backend)
            .collect();
        // Four evidence rows, three gate-run rows, two rows per worker count.
        assert_eq!(rows.len(), 4 + 3 + 2 * 2, "{backend}: {rows:#?}");
        for what in [
            "store: `Store::put`",
            "engine: `Engine::add_evidence`",
            "engine: `Engine::authenticate` + `Engine::add_evidence`",
            "API: one evidence document per `POST /v1/evidence`",
            "engine: `Engine::authenticate` + `Engine::gate_run`, typical execution, 4 concurrent tasks",
            "API: `POST /v1/executions/{id}/gate-runs`, typical execution, 4 concurrent clients",
            "4 concurrent clients, while 1 client appends evidence to another execution",
            "end to end, in process",
            "end to end, API + workers: 1 worker loop(s) per role",
            "end to end, API + workers: 2 worker loop(s) per role",
        ] {
            let row = rows
                .iter()
                .find(|r| r.measurement.contains(what))
                .unwrap_or_else(|| panic!("{backend}: no row {what:?}: {rows:#?}"));
            assert!(row.operations > 0 && row.per_second > 0.0, "{row:?}");
        }
        // What one evidence append costs in exchanges with the database, each way: counted,
        // so held exactly. The write itself holds the runner's grant (PostgreSQL's routine,
        // SQLite's append under its write lock), so the engine reads nothing before it.
        // Authenticating adds nothing: the engine asked the store who holds the runner's token
        // before the timed appends, and a principal's record never changes.
        for what in [
            "store: `Store::put`",
            "engine: `Engine::add_evidence`",
            "engine: `Engine::authenticate` + `Engine::add_evidence`",
            "API: one evidence document per `POST /v1/evidence`",
        ] {
            let row = rows
                .iter()
                .find(|r| r.measurement.starts_with(what))
                .unwrap();
            assert_eq!(row.round_trips, Some(1.0), "{backend}: {row:?}");
        }
        let gate = rows
            .iter()
            .find(|r| r.measurement.contains("gate-runs"))
            .unwrap();
        assert_eq!(gate.operations, 4 * 2);
        assert!(
            gate.p50_ms.is_some() && gate.p99_ms >= gate.p50_ms,
            "{gate:?}"
        );
        // Each API row is set against its baseline, and says whether its target was met.
        for row in rows.iter().filter(|r| {
            r.measurement.starts_with("API: one evidence")
                || r.measurement.contains("API + workers")
        }) {
            assert!(row.ratio.is_some_and(|r| r > 0.0), "{row:?}");
            assert!(
                row.target.as_deref().is_some_and(|t| t.contains("≥ 0.5")),
                "{row:?}"
            );
            assert!(row.met.is_some(), "{row:?}");
        }
        assert_eq!(gate.met.is_some(), backend == "postgres", "{gate:?}");
        let busy = rows
            .iter()
            .find(|r| r.measurement.contains("while 1 client appends evidence"))
            .unwrap();
        assert_eq!(busy.operations, 4 * 2);
        assert!(
            busy.p50_ms.is_some() && busy.p99_ms >= busy.p50_ms,
            "{busy:?}"
        );
    }
    // The worker loops' claims are counted for each backend and worker count: each execution
    // needs its three jobs claimed (checks, verify, gate), and the claims that found nothing
    // are counted among the claims, with how each idle loop's wait ended.
    assert_eq!(report.claims.len(), 2 * 2, "{:#?}", report.claims);
    for c in &report.claims {
        assert_eq!(c.idle, "wake-ups", "{c:?}");
        assert!(c.executions > 0, "{c:?}");
        assert!(c.idle_claims <= c.claims, "{c:?}");
        assert!(c.claims - c.idle_claims >= 3 * c.executions, "{c:?}");
        assert!(
            c.signalled + c.resumed + c.timed_out <= c.idle_claims,
            "a wait follows each claim that found nothing: {c:?}"
        );
    }
    assert_eq!(
        report.claims_table().lines().count(),
        2 + report.claims.len()
    );
    // The table has a line per row; the JSON names every field the docs read.
    assert_eq!(report.table().lines().count(), 2 + report.rows.len());
    let json = serde_json::to_value(&report).unwrap();
    for key in [
        "backend",
        "measurement",
        "operations",
        "seconds",
        "per_second",
        "p50_ms",
        "p99_ms",
        "round_trips",
        "ratio",
        "target",
        "met",
    ] {
        assert!(json["rows"][0].get(key).is_some(), "{key}: {json}");
    }
}
