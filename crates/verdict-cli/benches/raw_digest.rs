//! `verdict digest --raw` against in-process SHA-256 over the same bytes already in memory.
//! Reproduce with `cargo bench -p verdict-cli --bench raw_digest`; BENCHMARKS.md has the figures.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    missing_docs
)]

// The module's own unit tests compile here too but do not run.
#[allow(unused_imports, dead_code)]
#[path = "../src/stream.rs"]
mod stream;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::io::Write;

fn bench(c: &mut Criterion) {
    const SIZE: usize = 256 << 20;
    let data: Vec<u8> = (0..SIZE).map(|i| (i % 251) as u8).collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("artifact.bin");
    std::fs::File::create(&path)
        .unwrap()
        .write_all(&data)
        .unwrap();
    let mut g = c.benchmark_group("raw_digest_256mib");
    g.throughput(Throughput::Bytes(SIZE as u64));
    g.sample_size(10);
    g.bench_function("in_process_sha256", |b| {
        b.iter(|| black_box(verdict_core::digest::raw(black_box(&data))))
    });
    g.bench_function("streaming_file", |b| {
        b.iter(|| black_box(stream::sha256(std::fs::File::open(&path).unwrap()).unwrap()))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
