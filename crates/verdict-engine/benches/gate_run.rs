//! What the engine adds around the pure Gate: `gate run` (read the counted items from the
//! store, evaluate, store or converge on the decision) and `gate replay`, against evaluating
//! the same bundle in memory. SQLite store; one subject with 20 check evidence documents and
//! 3 reviewer results.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    missing_docs
)]

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use verdict_core::contracts::{Role, Timestamp};
use verdict_engine::Engine;
use verdict_store::{Access, Location, ScopeKind};

const DEF: &str = "sha256:ec4556a178527361344d876629bb9533c63fc8fcd216f423dd8bce76787fce86";

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn setup(
    rt: &tokio::runtime::Runtime,
    dir: &std::path::Path,
) -> (Engine, verdict_engine::Principal, Value) {
    rt.block_on(async {
        let store = verdict_store::open(&Location::Sqlite(dir.join("v.db"))).await.unwrap();
        let engine = Engine::new(store, "bench");
        let now = ts("2026-11-30T12:00:00Z");
        let ops = engine.authenticate(&engine.init("ops", verdict_store::StoreClock::Manual).await.unwrap()).await.unwrap();
        engine.store().set_manual_time(&now).await.unwrap();
        let mut p = std::collections::BTreeMap::new();
        for (name, role, access) in [("coder", Role::Producer, Access::Write), ("ci", Role::Runner, Access::Write), ("rev", Role::Verifier, Access::Read)] {
            let t = engine.add_principal(&ops, name, role).await.unwrap();
            engine.grant(&ops, &format!("g-{name}"), name, ScopeKind::Execution, "ex", access, &ts("2027-01-01T00:00:00Z")).await.unwrap();
            p.insert(name, engine.authenticate(&t).await.unwrap());
        }
        let checks: Vec<Value> = (0..20).map(|i| json!({"id": format!("c{i}"), "definition_digest": DEF, "criteria": ["ok"]})).collect();
        let ids: Vec<String> = (0..20).map(|i| format!("c{i}")).collect();
        engine.set_policy(&ops, &json!({"schema": "verdict.policy/v1", "name": "bench", "revision": 1, "required_checks": ids, "required_verifiers": ["reviewer"]})).await.unwrap();
        let subject = json!({
            "schema": "verdict.subject/v1", "execution": {"id": "ex", "generation": 1}, "work_items": [],
            "producer": {"principal": "coder", "run": "r0"}, "objective": {"revision": "1", "digest": DEF},
            "criteria": {"revision": "1", "items": [{"id": "ok", "text": "works"}]}, "resources": [],
            "checks": checks, "workflow_revision": "1", "risk": {"class": "low", "revision": "1", "capabilities": []}
        });
        let sd = engine.put_subject(&p["coder"], &subject).await.unwrap();
        let evidence: Vec<Value> = (0..20).map(|i| json!({
            "id": format!("ev-{i}"), "kind": "check", "check": format!("c{i}"), "subject_digest": sd,
            "definition_digest": DEF, "produced_by": {"principal": "ci", "role": "runner"}, "outcome": "pass",
            "content_digest": DEF, "observed_at": "2026-11-30T11:59:00Z", "freshness": {"kind": "content"}
        })).collect();
        engine.add_evidence(&p["ci"], &evidence).await.unwrap();
        let req = engine.create_request(&p["coder"], "ex", &json!({})).await.unwrap();
        for r in 0..3 {
            let run = format!("run-{r}");
            engine.admit(&ops, &req, "rev", "reviewer", &run).await.unwrap();
            let result = json!({"id": format!("vr-{r}"), "verifier": {"principal": "rev", "class": "reviewer", "run": run},
                "subject_digest": sd, "generation": 1, "status": "completed",
                "criteria": [{"id": "ok", "status": "passed", "method": "review", "evidence_refs": ["ev-0"]}],
                "findings": [], "dispositions": []});
            engine.submit_result(&p["rev"], &result).await.unwrap();
        }
        let bundle = engine.collect(&ops, "ex").await.unwrap().bundle(&now).unwrap();
        (engine, ops, bundle)
    })
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (engine, ops, bundle) = setup(&rt, dir.path());
    let key = rt
        .block_on(engine.gate_run(&ops, "ex"))
        .unwrap()
        .decision
        .evaluation_key
        .unwrap();
    let mut g = c.benchmark_group("engine");
    g.sample_size(30);
    g.bench_function("pure_evaluate", |b| {
        b.iter(|| verdict_core::gate::evaluate_value(&bundle))
    });
    g.bench_function("collect_from_store", |b| {
        b.iter(|| rt.block_on(engine.collect(&ops, "ex")).unwrap())
    });
    g.bench_function("gate_run_converging", |b| {
        b.iter(|| rt.block_on(engine.gate_run(&ops, "ex")).unwrap())
    });
    g.bench_function("gate_replay", |b| {
        b.iter(|| rt.block_on(engine.gate_replay(&ops, &key)).unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
