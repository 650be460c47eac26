//! Gate and canonical-form benchmarks, in thread CPU time. Reproduce with
//! `cargo bench -p verdict-core --bench gate`; BENCHMARKS.md records the figures.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    missing_docs
)]

mod bundles;
mod cpu_time;

use bundles::bundle;
use cpu_time::CpuTime;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};
use std::hint::black_box;
use verdict_core::{canonical, gate, json as strict};

const CONTENT: &str = "sha256:3333333333333333333333333333333333333333333333333333333333333333";

fn bench_gate(c: &mut Criterion<CpuTime>) {
    let mut g = c.benchmark_group("gate");
    for (name, n, e, r) in [("typical", 20, 10, 3), ("large", 500, 200, 10)] {
        let b = bundle(n, e, r);
        let bytes = serde_json::to_vec(&b).unwrap();
        let prepared = gate::Prepared::new(&b).unwrap_or_else(|d| panic!("{d:?}"));
        assert_eq!(
            prepared.decide().outcome,
            verdict_core::contracts::Outcome::Pass
        );
        g.bench_with_input(BenchmarkId::new("decide", name), &prepared, |bch, p| {
            bch.iter(|| black_box(p.decide()))
        });
        g.bench_with_input(BenchmarkId::new("evaluate", name), &bytes, |bch, x| {
            bch.iter(|| black_box(gate::evaluate(black_box(x)).canonical_bytes().unwrap()))
        });
        // The same bundle indented, so no document is canonical as written and every digest
        // is taken over canonical bytes written out first.
        let pretty = serde_json::to_vec_pretty(&b).unwrap();
        g.bench_with_input(
            BenchmarkId::new("evaluate_pretty", name),
            &pretty,
            |bch, x| {
                bch.iter(|| black_box(gate::evaluate(black_box(x)).canonical_bytes().unwrap()))
            },
        );
    }
    g.finish();
}

/// A context manifest of about 1 MiB: many entries with refs, digests, numbers and text.
fn manifest() -> Vec<u8> {
    let entries: Vec<Value> = (0..4200)
        .map(|i| {
            let kind = ["diff", "log", "artifact"][i % 3];
            json!({
                "ref": format!("resource-{i}"), "kind": kind, "digest": CONTENT,
                "bytes_included": i * 37, "truncated": i % 7 == 0, "score": (i as f64) / 7.0,
                "note": format!("line {i}: naïve café \u{1f600} \"quoted\" \\ tab\t")
            })
        })
        .collect();
    serde_json::to_vec(
        &json!({"schema": "verdict.context/v1", "entries": entries, "policy_revision": 3}),
    )
    .unwrap()
}

fn bench_canonical(c: &mut Criterion<CpuTime>) {
    let doc = manifest();
    let mut g = c.benchmark_group("canonical_1mib");
    g.throughput(Throughput::Bytes(doc.len() as u64));
    g.bench_function("serde_json_parse_serialise", |b| {
        b.iter(|| {
            black_box(
                serde_json::to_vec(&serde_json::from_slice::<Value>(black_box(&doc)).unwrap())
                    .unwrap(),
            )
        })
    });
    g.bench_function("verdict_strict_parse_canonical", |b| {
        b.iter(|| black_box(canonical::to_vec(&strict::parse(black_box(&doc)).unwrap())))
    });
    g.bench_function("serde_json_canonicalizer", |b| {
        b.iter(|| {
            black_box(
                serde_json_canonicalizer::to_vec(
                    &serde_json::from_slice::<Value>(black_box(&doc)).unwrap(),
                )
                .unwrap(),
            )
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(CpuTime);
    targets = bench_gate, bench_canonical
}
criterion_main!(benches);
