//! The connection loop of [`crate::serve`]: what a client must do to keep a connection, and
//! how many it may hold. A connection is one of at most [`ConnLimits::max_connections`]; past
//! the cap the server stops accepting, so new connections wait in the kernel's listen backlog
//! (holding no descriptor of the process) until one ends. Every connection must send a
//! request's headers within [`ConnLimits::header_timeout`] of being accepted or of its last
//! answer, else the server closes it; so a connection sending nothing, or dripping its
//! headers, holds its place for at most that long, and an idle keep-alive connection too. A
//! request's body must arrive whole within [`ConnLimits::body_timeout`] of its headers, else
//! the read fails and the connection is closed after the answer. An answer being sent (an
//! event stream) is bound by neither. One address (an IPv6 /64) holds at most
//! [`ConnLimits::max_per_address`] of the connections; one more from it is closed as soon as it
//! is accepted, so a single client cannot hold every place and keep the others waiting.

use crate::limit::peer_key;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Request};
use axum::middleware::Next;
use axum::response::Response;
use http_body::{Frame, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::{Semaphore, watch};

/// How many connections the server holds and how long a client may take to send a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnLimits {
    /// The most connections open at once; more wait to be accepted until one ends.
    pub max_connections: usize,
    /// The most connections one address (an IPv4 address, an IPv6 /64) holds at once; one
    /// more from it is closed as soon as it is accepted.
    pub max_per_address: usize,
    /// How long a connection may take to send a request's headers, counted from its accept or
    /// its last answer.
    pub header_timeout: Duration,
    /// How long a request's body may take to arrive whole, counted from its headers.
    pub body_timeout: Duration,
}

/// The connection cap when none is configured.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// The per-address cap when none is configured: a quarter of the default cap, so one address
/// alone never holds every place.
pub const DEFAULT_MAX_PER_ADDRESS: usize = 256;
/// The header timeout when none is configured.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// The body timeout when none is configured: an 8 MiB blob at about 140 KiB/s.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(60);

/// The longest header timeout applied: a longer one is this.
const LONGEST_TIMEOUT: Duration = Duration::from_secs(365 * 86_400);

impl Default for ConnLimits {
    fn default() -> Self {
        Self {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_per_address: DEFAULT_MAX_PER_ADDRESS,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
        }
    }
}

/// Serves `app` on `listener` under `limits` until `shutdown` completes; then accepts nothing
/// more, asks every connection to end after its request in flight, and waits for them.
pub(crate) async fn run(
    listener: tokio::net::TcpListener,
    app: Router,
    limits: ConnLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    // A cap of 0 would accept nothing; the command line refuses it, and a library caller gets
    // one connection at a time rather than a server that never answers. Past the semaphore's
    // own bound it would panic.
    let slots = Arc::new(Semaphore::new(
        limits.max_connections.clamp(1, Semaphore::MAX_PERMITS),
    ));
    let addresses = Arc::new(Addresses {
        max: limits.max_per_address.max(1),
        held: Mutex::new(HashMap::new()),
    });
    // hyper adds the timeout to an `Instant`, which panics past its range.
    let header_timeout = limits.header_timeout.min(LONGEST_TIMEOUT);
    // Sent once shutdown starts; every connection task holds a receiver, so the sender's
    // `closed()` completes when the last connection has ended.
    let (closing, closing_rx) = watch::channel(false);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        // A slot first, then the accept: over the cap a connection waits in the backlog,
        // costing the process nothing, rather than being accepted only to be closed.
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    drop(slot);
                    if !is_connection_error(&e) {
                        // Out of descriptors, say: accepting again at once would spin.
                        tracing::error!(error = %e, "accept failed; retrying in a second");
                        tokio::select! {
                            () = tokio::time::sleep(Duration::from_secs(1)) => {}
                            () = &mut shutdown => break,
                        }
                    }
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // Closed at once, freeing its place and descriptor: waiting for it to send something
        // would let the address hold one more place for the header timeout.
        let Some(place) = Addresses::take(&addresses, peer.ip()) else {
            tracing::debug!(peer = %peer, "connection closed: its address holds as many as one may");
            metrics::counter!("verdict_http_connections_refused_total", "why" => "per_address")
                .increment(1);
            drop(tcp);
            drop(slot);
            continue;
        };
        // Answers are small and a client waits for each one: sent at once, not held back to
        // be coalesced with a later write that never comes.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "TCP_NODELAY not set on a connection");
        }
        let app = app.clone();
        let mut closing = closing_rx.clone();
        tokio::spawn(async move {
            let _held = (slot, place);
            // The peer's address is what failed authentication is limited by.
            let service = hyper::service::service_fn(move |mut req: Request<_>| {
                req.extensions_mut().insert(ConnectInfo::<SocketAddr>(peer));
                tower_service::Service::call(&mut app.clone(), req)
            });
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder.timer(TokioTimer::new());
            builder.header_read_timeout(header_timeout);
            let conn = builder.serve_connection(TokioIo::new(tcp), service);
            let mut conn = std::pin::pin!(conn);
            let mut asked = false;
            loop {
                tokio::select! {
                    done = conn.as_mut() => {
                        if let Err(e) = done {
                            tracing::debug!(error = %e, "connection ended");
                        }
                        break;
                    }
                    changed = closing.changed(), if !asked => {
                        // Told to stop (or the loop is gone): finish the request in flight,
                        // then close.
                        let _ = changed;
                        asked = true;
                        conn.as_mut().graceful_shutdown();
                    }
                }
            }
        });
    }
    drop(listener);
    closing.send_replace(true);
    drop(closing_rx);
    closing.closed().await;
}

/// How many connections each address holds.
struct Addresses {
    max: usize,
    held: Mutex<HashMap<IpAddr, usize>>,
}

/// One connection's place among its address's; given back when dropped.
struct Place {
    addresses: Arc<Addresses>,
    key: IpAddr,
}

impl Addresses {
    /// A place for a connection from `peer`, unless its address holds all it may. Addresses
    /// are keyed as the failed-authentication limit keys them ([`peer_key`]).
    fn take(this: &Arc<Self>, peer: IpAddr) -> Option<Place> {
        let key = peer_key(peer);
        let mut held = this.held.lock().unwrap_or_else(PoisonError::into_inner);
        let n = held.entry(key).or_insert(0);
        if *n >= this.max {
            return None;
        }
        *n += 1;
        Some(Place {
            addresses: Arc::clone(this),
            key,
        })
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut held = self
            .addresses
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // An address that holds nothing leaves the table, which so never outgrows the
        // connections open.
        if let Some(n) = held.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                held.remove(&self.key);
            }
        }
    }
}

/// Errors of one connection that the listener survives (a client that reset before its
/// accept); anything else is the listener's own trouble.
fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    )
}

/// The body of a request that did not arrive whole within the body timeout.
#[derive(Debug, thiserror::Error)]
#[error("the body did not arrive within {} s of the request's headers", .0.as_secs_f64())]
pub struct BodyTimedOut(pub Duration);

/// Middleware: the request's body must arrive whole within `timeout` of this call. One
/// deadline for the whole body, not one per chunk, so a body dripped a byte at a time is cut
/// like one that stalls.
pub(crate) async fn body_deadline(timeout: Duration, req: Request, next: Next) -> Response {
    let req = req.map(|body| {
        Body::new(Deadline {
            body,
            timeout,
            sleep: Box::pin(tokio::time::sleep(timeout.min(LONGEST_TIMEOUT))),
        })
    });
    next.run(req).await
}

/// A body that fails once its deadline passes.
struct Deadline {
    body: Body,
    timeout: Duration,
    sleep: Pin<Box<tokio::time::Sleep>>,
}

impl http_body::Body for Deadline {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.body).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        match this.sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(axum::Error::new(BodyTimedOut(this.timeout))))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// Whether `e`, or an error it was caused by, is a [`BodyTimedOut`].
pub(crate) fn timed_out<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a BodyTimedOut> {
    let mut at = Some(e);
    while let Some(e) = at {
        if let Some(t) = e.downcast_ref::<BodyTimedOut>() {
            return Some(t);
        }
        at = e.source();
    }
    None
}
