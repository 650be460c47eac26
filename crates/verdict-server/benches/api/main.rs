//! `cargo bench -p verdict-server --bench api -- [--postgres ADMIN_URL] [--json] [--smoke]
//! [--scale F] [--clients N] [--workers 1,2,4] [--poll-ms MS] [--worker-wait-ms MS]
//! [--idle-sleep] [--sqlite-dir DIR] [--executions N]`
//!
//! The API benchmarks of docs/benchmarks/verdict-api.md: evidence appends over HTTP against the
//! store's own, gate runs from concurrent clients, and subjects to decisions through the API
//! and workers against the engine called directly. SQLite always; PostgreSQL in a scratch
//! database (dropped afterwards) when `--postgres` names an admin URL. Prints a Markdown table,
//! or the report as JSON with `--json`.

mod run;

use std::process::ExitCode;
use std::time::Duration;

const USAGE: &str = "usage: api [--postgres ADMIN_URL] [--json] [--smoke] [--scale F] \
[--clients N] [--workers 1,2,4] [--poll-ms MS] [--worker-wait-ms MS] [--idle-sleep] \
[--sqlite-dir DIR] [--executions N]";

fn value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

fn number<T: std::str::FromStr>(args: &[String], flag: &str, default: T) -> Result<T, String> {
    value(args, flag).map_or(Ok(default), |v| {
        v.parse()
            .map_err(|_| format!("{flag} {v:?} is not a number\n{USAGE}"))
    })
}

fn options(args: &[String]) -> Result<run::Options, String> {
    let defaults = run::Options::default();
    let workers = match value(args, "--workers") {
        None => defaults.workers.clone(),
        Some(list) => list
            .split(',')
            .map(|w| match w.trim().parse::<usize>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(format!(
                    "--workers {list:?}: counts above 0, by commas\n{USAGE}"
                )),
            })
            .collect::<Result<_, _>>()?,
    };
    Ok(run::Options {
        postgres: value(args, "--postgres").map(str::to_owned),
        sqlite_dir: value(args, "--sqlite-dir").map(Into::into),
        smoke: args.iter().any(|a| a == "--smoke"),
        scale: number(args, "--scale", defaults.scale)?,
        clients: number(args, "--clients", defaults.clients)?,
        workers,
        poll: Duration::from_millis(number(args, "--poll-ms", 5)?),
        worker_wait: Duration::from_millis(number(
            args,
            "--worker-wait-ms",
            u64::try_from(defaults.worker_wait.as_millis()).unwrap_or(1000),
        )?),
        idle_sleep: args.iter().any(|a| a == "--idle-sleep"),
        executions: match value(args, "--executions") {
            None => None,
            Some(n) => match n.parse::<u64>() {
                Ok(n) if n > 0 => Some(n),
                _ => return Err(format!("--executions {n:?}: a count above 0\n{USAGE}")),
            },
        },
    })
}

fn main() -> ExitCode {
    // `cargo bench` adds `--bench`; nothing else is passed unasked.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let result = options(&args).and_then(|options| {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?
            .block_on(run::run(options))
    });
    match result {
        Ok(report) if args.iter().any(|a| a == "--json") => {
            match serde_json::to_string_pretty(&report) {
                Ok(text) => {
                    println!("{text}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("api bench: {e}");
                    ExitCode::from(2)
                }
            }
        }
        Ok(report) => {
            if let Some(load) = &report.load_average {
                println!("Load average at the end: {load}.\n");
            }
            print!("{}", report.table());
            print!("\nWorker loops' claims:\n\n{}", report.claims_table());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("api bench: {e}");
            ExitCode::from(2)
        }
    }
}
