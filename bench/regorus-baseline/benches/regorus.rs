//! The Gate decision in Rego, run by regorus over input converted beforehand, on the same two
//! bundles as verdict-core's Gate benchmark, in thread CPU time. `verdict_decide` is verdict's
//! own `gate::Prepared::decide` on the same bundles in the same process, so the ratio is
//! measured side by side.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    missing_docs
)]

#[path = "../../../crates/verdict-core/benches/cpu_time.rs"]
mod cpu_time;

use cpu_time::CpuTime;
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use regorus_baseline::{bundle, decide, engine, outcome, rego_input, statuses};
use std::hint::black_box;
use verdict_core::contracts::Outcome;
use verdict_core::gate;

fn bench_gate(c: &mut Criterion<CpuTime>) {
    let mut g = c.benchmark_group("gate");
    // The policy is parsed once; every bench below only sets its input once.
    let loaded = engine().unwrap();
    for (name, n, e, r) in [("typical", 20, 10, 3), ("large", 500, 200, 10)] {
        let b = bundle(n, e, r);

        let mut rego = loaded.clone();
        rego.set_input(rego_input(&b).unwrap());
        let d = decide(&mut rego).unwrap();
        assert_eq!(outcome(&d), Some("pass"), "{name}: {d}");
        let s = statuses(&d);
        assert_eq!(s.len(), n, "{name}");
        assert!(s.iter().all(|x| x == "passed"), "{name}: {s:?}");
        g.bench_function(BenchmarkId::new("regorus_eval_rule", name), |bch| {
            bch.iter(|| black_box(decide(&mut rego).unwrap()))
        });

        let prepared = gate::Prepared::new(&b).unwrap_or_else(|d| panic!("{d:?}"));
        assert_eq!(prepared.decide().outcome, Outcome::Pass);
        g.bench_with_input(
            BenchmarkId::new("verdict_decide", name),
            &prepared,
            |bch, p| bch.iter(|| black_box(p.decide())),
        );
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(CpuTime);
    targets = bench_gate
}
criterion_main!(benches);
