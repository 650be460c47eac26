//! `verdict serve`: the HTTP API of `verdict-server` over one store, until interrupted.

use anyhow::Context as _;
use std::process::ExitCode;
use std::time::Duration;
use verdict_engine::{DEFAULT_GATE, Engine};
use verdict_server::limit::AuthLimit;
use verdict_server::listen::{
    ConnLimits, DEFAULT_BODY_TIMEOUT, DEFAULT_HEADER_TIMEOUT, DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_PER_ADDRESS,
};
use verdict_server::webhooks::{Retry, WebhookKey, Webhooks};
use verdict_server::{AppState, DEFAULT_BODY_LIMIT};
use verdict_store::Location;

/// Arguments of `verdict serve`.
#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
    verdict serve --listen 127.0.0.1:8080\n  \
    verdict serve --listen 127.0.0.1:0 --store postgres://verdict@db:5432/verdict\n\n\
    Prints the address it listens on to standard error, then serves until interrupted \
    (Ctrl-C or SIGTERM), letting requests in flight finish. Routes: docs/server.md, and \
    GET /openapi.json.")]
pub struct Args {
    /// Address and port to listen on (port 0: any free port, printed on start).
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:8080")]
    listen: String,
    /// Store: sqlite:PATH or postgres://USER@HOST:PORT/DB [default: $VERDICT_STORE, else
    /// $VERDICT_HOME/verdict.db, else ./.verdict/verdict.db].
    #[arg(long, value_name = "URL")]
    store: Option<String>,
    /// The gate whose policy decides.
    #[arg(long, value_name = "NAME", default_value = DEFAULT_GATE)]
    gate: String,
    /// The largest request body accepted, in bytes (at least 1: a limit of 0 would refuse
    /// every write).
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_BODY_LIMIT,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    body_limit: usize,
    /// How each request is logged to standard error: one JSON object per line, or text.
    #[arg(long, value_enum, default_value_t = LogFormat::Json)]
    log_format: LogFormat,
    /// Failed authentications one address (an IPv6 /64) may make back to back before it gets
    /// 429.
    #[arg(long, value_name = "N", default_value_t = AuthLimit::default().burst, value_parser = at_least_one())]
    auth_burst: u32,
    /// Failed authentications an address earns back per minute.
    #[arg(long, value_name = "N", default_value_t = AuthLimit::default().per_minute, value_parser = at_least_one())]
    auth_per_minute: u32,
    /// Failed authentications every address together may make back to back before each gets
    /// 429 (a request with a valid token is never limited).
    #[arg(long, value_name = "N", default_value_t = AuthLimit::default().server_burst, value_parser = at_least_one())]
    auth_server_burst: u32,
    /// Failed authentications the whole server earns back per minute.
    #[arg(long, value_name = "N", default_value_t = AuthLimit::default().server_per_minute, value_parser = at_least_one())]
    auth_server_per_minute: u32,
    /// The most connections held open at once; more wait to be accepted until one closes (1
    /// to 1,000,000).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CONNECTIONS,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000))]
    max_connections: usize,
    /// The most connections one address (an IPv4 address, an IPv6 /64) holds at once; one more
    /// from it is closed as soon as it is accepted. Behind a proxy every connection is the
    /// proxy's: give it the proxy's pool (1 to 1,000,000).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_PER_ADDRESS,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000))]
    max_connections_per_address: usize,
    /// Seconds a connection has to send a request's headers, from its accept or its last
    /// answer; a connection that takes longer (idle, or dripping them) is closed (1 to
    /// 86400).
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_HEADER_TIMEOUT.as_secs(),
        value_parser = clap::builder::RangedU64ValueParser::<u64>::new().range(1..=86_400))]
    header_timeout_secs: u64,
    /// Seconds a request's body has to arrive whole, from its headers; a slower one is
    /// answered 408 and its connection closed (1 to 86400).
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_BODY_TIMEOUT.as_secs(),
        value_parser = clap::builder::RangedU64ValueParser::<u64>::new().range(1..=86_400))]
    body_timeout_secs: u64,
    /// The key webhook secrets are derived from (at least 32 bytes; created with fresh
    /// randomness, readable by its owner only, when the file does not exist). Without it, no
    /// webhook is registered or delivered.
    #[arg(long, value_name = "FILE")]
    webhook_key: Option<std::path::PathBuf>,
    /// The key the review pages' anti-forgery tokens are made under (at least 32 bytes;
    /// created with fresh randomness, readable by its owner only, when the file does not
    /// exist). Give every server behind one address the same file, so a form one served is
    /// accepted by another; without it each server draws its own at start.
    #[arg(long, value_name = "FILE")]
    ui_key: Option<std::path::PathBuf>,
    /// Mark the review pages' cookies `Secure`: set it when clients reach the server over
    /// TLS (a proxy in front of it); without TLS a browser would drop such cookies.
    #[arg(long)]
    ui_secure_cookies: bool,
    #[command(flatten)]
    local: crate::remote::StoreHere,
}

/// The parser of each failed-authentication limit's flag: at least 1. A bucket of 0, or one that
/// never refills, turns away every failed authentication before the engine sees it, so none
/// is ever recorded as a denial; the flags refuse such a value rather than serve that way.
fn at_least_one() -> clap::builder::RangedI64ValueParser<u32> {
    clap::builder::RangedI64ValueParser::new().range(1..)
}

/// The log line format.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum LogFormat {
    /// One JSON object per line, for a log collector.
    Json,
    /// Human-readable lines.
    Text,
}

/// Runs `verdict serve`.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    install_logs(args.log_format)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(serve(args))?;
    Ok(ExitCode::SUCCESS)
}

/// Logs to standard error, so standard output stays free: the server's request lines at
/// `info`, everything else (the store's drivers) only from `warn` up.
fn install_logs(format: LogFormat) -> anyhow::Result<()> {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let filter = tracing_subscriber::filter::Targets::new()
        .with_target("verdict_server", tracing::Level::INFO)
        .with_default(tracing::Level::WARN);
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_target(false);
    let registry = tracing_subscriber::registry().with(filter);
    let installed = match format {
        LogFormat::Json => registry
            .with(layer.json().flatten_event(true).with_current_span(false))
            .try_init(),
        LogFormat::Text => registry.with(layer.with_ansi(false)).try_init(),
    };
    installed.map_err(|e| anyhow::anyhow!("installing the logger: {e}"))
}

async fn serve(args: &Args) -> anyhow::Result<()> {
    let location = Location::resolve(args.store.as_deref())?;
    if let Location::Sqlite(path) = &location
        && let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
    {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let store = verdict_store::open(&location)
        .await
        .with_context(|| format!("opening {}", location.redacted()))?;
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let addr = listener.local_addr().context("reading the bound address")?;
    let webhooks = match &args.webhook_key {
        Some(path) => Some(std::sync::Arc::new(Webhooks {
            key: webhook_key(path)?,
            retry: Retry::default(),
            lease: verdict_server::webhooks::DELIVERY_LEASE,
        })),
        None => None,
    };
    let state = AppState {
        body_limit: args.body_limit,
        connections: ConnLimits {
            max_connections: args.max_connections,
            max_per_address: args.max_connections_per_address,
            header_timeout: Duration::from_secs(args.header_timeout_secs),
            body_timeout: Duration::from_secs(args.body_timeout_secs),
        },
        webhooks,
        ui: std::sync::Arc::new(match &args.ui_key {
            Some(path) => verdict_server::ui::UiConfig::with_key(
                key_file(path, "review pages' key")?,
                args.ui_secure_cookies,
            )
            .with_context(|| format!("the review pages' key {}", path.display()))?,
            None => verdict_server::ui::UiConfig::new(args.ui_secure_cookies),
        }),
        ..AppState::new(Engine::new(store, args.gate.clone()))
    }
    .with_auth_limit(AuthLimit {
        burst: args.auth_burst,
        per_minute: args.auth_per_minute,
        server_burst: args.auth_server_burst,
        server_per_minute: args.auth_server_per_minute,
    });
    eprintln!(
        "verdict: serving http://{addr} over {}",
        location.redacted()
    );
    verdict_server::serve(listener, state, interrupted())
        .await
        .context("serving")?;
    Ok(())
}

/// The webhook key in `path`, created first if the file does not exist.
fn webhook_key(path: &std::path::Path) -> anyhow::Result<WebhookKey> {
    WebhookKey::new(key_file(path, "webhook key")?)
        .with_context(|| format!("the webhook key {}", path.display()))
}

/// The bytes of the key file `path` (`what` names it in errors), created first with fresh
/// randomness, readable by its owner only, if it does not exist. Created with `create_new`, so
/// servers starting together over one shared file never overwrite each other's key.
fn key_file(path: &std::path::Path, what: &str) -> anyhow::Result<Vec<u8>> {
    if !path.exists() {
        let fresh = verdict_engine::token::generate()?;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        match options.open(path) {
            Ok(mut file) => std::io::Write::write_all(&mut file, fresh.as_bytes())
                .with_context(|| format!("cannot write the {what} {}", path.display()))?,
            // Another server created it first: use theirs.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("cannot create the {what} {}", path.display()));
            }
        }
    }
    std::fs::read(path).with_context(|| format!("cannot read the {what} {}", path.display()))
}

/// Completes on Ctrl-C or, on Unix, SIGTERM. If a handler cannot be installed the server
/// still serves; it is then stopped by other means.
async fn interrupted() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}
