//! Benchmark: many hold-mode HTTP criteria against a loopback server.
//!
//! Runs N hold criteria (default 1,000) sampling every second for a window (default 30 s)
//! against a loopback HTTP server in a child process, so the server's work is not counted.
//! Measures the runner process's CPU time (user + system, from /proc), its peak resident memory
//! (VmHWM) and the lateness of every sample against its schedule, and compares them with the
//! targets: under 10 % of one core, under 100 MiB, p99 lateness under 20 ms.
//!
//! `cargo bench -p verdict-probes --bench hold_http [-- --criteria N --seconds S --multi-thread 1]`
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use verdict_probes::runner::{self, Event, Observer, RunOptions, Stopper};

const SERVE_ENV: &str = "VERDICT_HOLD_BENCH_SERVE";

fn serve() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let app = axum::Router::new().route("/healthz", axum::routing::get(|| async { "ok" }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        println!("{}", listener.local_addr().unwrap().port());
        axum::serve(listener, app).await.unwrap();
    });
}

/// (user + system CPU seconds, peak RSS in bytes) of this process.
fn usage() -> (f64, u64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    let cpu = ticks as f64 / rustix::param::clock_ticks_per_second() as f64;
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let hwm_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .map(|v| v.trim().trim_end_matches("kB").trim().parse().unwrap())
        .unwrap();
    (cpu, hwm_kib * 1024)
}

struct Lateness(Mutex<Vec<Duration>>);

impl Observer for Lateness {
    fn event(&self, e: &Event<'_>) {
        if let Event::Sample {
            scheduled, started, ..
        } = e
        {
            self.0
                .lock()
                .unwrap()
                .push(started.saturating_duration_since(*scheduled));
        }
    }
}

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |v| v.parse().unwrap())
}

fn main() {
    if std::env::var_os(SERVE_ENV).is_some() {
        serve();
        return;
    }
    let n = arg("--criteria", 1000);
    let secs = arg("--seconds", 30);
    let mut server = Command::new(std::env::current_exe().unwrap())
        .env(SERVE_ENV, "1")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port: u16 = line.trim().parse().unwrap();

    let mut spec = String::from("version: 1\ncriteria:\n");
    for i in 0..n {
        spec.push_str(&format!(
            "  - id: up-{i}\n    role: safety\n    mode: hold\n    window: {secs}s\n    interval: 1s\n    probe: {{kind: http, url: 'http://127.0.0.1:{port}/healthz', status: 200, body: {{equals: ok}}}}\n"
        ));
    }
    let spec = verdict_probes::load::load_bytes(
        spec.as_bytes(),
        verdict_probes::load::Format::Yaml,
        &Default::default(),
    )
    .unwrap();
    // The runtime `verdict check` uses (current thread); `--multi-thread 1` measures tokio's
    // work-stealing runtime instead.
    let multi = arg("--multi-thread", 0) == 1;
    let rt = if multi {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    };
    let late = Arc::new(Lateness(Mutex::new(Vec::new())));
    let (cpu0, _) = usage();
    let t0 = Instant::now();
    let report = rt.block_on(runner::run(
        &spec,
        RunOptions::default(),
        late.clone(),
        &Stopper::new(),
    ));
    let wall = t0.elapsed().as_secs_f64();
    let (cpu1, peak) = usage();
    let _ = server.kill();
    let _ = server.wait();

    let mut l = late.0.lock().unwrap().clone();
    l.sort();
    let pct = |p: f64| l[((l.len() as f64 * p).ceil() as usize).clamp(1, l.len()) - 1];
    let cpu = cpu1 - cpu0;
    let core_share = cpu / wall;
    let mib = peak as f64 / (1024.0 * 1024.0);
    let p99 = pct(0.99);
    let flavour = if multi {
        "multi-thread"
    } else {
        "current-thread"
    };
    println!(
        "hold_http: {n} hold criteria, 1 s interval, {secs} s window, loopback HTTP, {flavour} runtime"
    );
    println!(
        "  samples         {} (expected {})",
        l.len(),
        n * (secs + 1)
    );
    println!("  passed          {} of {n}", report.rollup.counts.pass);
    println!("  wall            {wall:.1} s");
    println!(
        "  cpu (runner)    {cpu:.2} s = {:.1} % of one core   target < 10 %   {}",
        core_share * 100.0,
        ok(core_share < 0.10)
    );
    println!(
        "  peak rss        {mib:.1} MiB                    target < 100 MiB {}",
        ok(mib < 100.0)
    );
    println!(
        "  lateness        p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms   target p99 < 20 ms {}",
        ms(pct(0.50)),
        ms(p99),
        ms(*l.last().unwrap()),
        ok(p99 < Duration::from_millis(20))
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn ok(b: bool) -> &'static str {
    if b { "ok" } else { "MISSED" }
}
