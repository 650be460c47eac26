//! `GET /v1/events`: the engine's lifecycle events ([`verdict_engine::events`]) as
//! Server-Sent Events. Each event's `id` is its audit seq, so a client that reconnects with
//! `Last-Event-ID` gets exactly the events after the last one it saw. The server polls the
//! store (no database-specific notification), sends a keep-alive comment while nothing
//! happens, and ends every stream when it shuts down. The stream's token is checked again
//! before every read and every event, so revoking or rotating it ends the stream.

use crate::AppState;
use crate::auth::{Caller, Peer, bearer_token};
use crate::page::ListQuery;
use crate::problem::ApiError;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::IpAddr;
use std::time::Duration;
use utoipa::IntoParams;
use verdict_engine::Principal;
use verdict_engine::events::{Event, MAX_EVENTS_PAGE};

/// How often a waiting stream asks the store for new events, and how often it sends a
/// keep-alive comment while there are none.
#[derive(Debug, Clone, Copy)]
pub struct EventTiming {
    /// Between two reads of the store while caught up.
    pub poll: Duration,
    /// Between two keep-alive comments on an idle stream.
    pub keep_alive: Duration,
}

impl Default for EventTiming {
    fn default() -> Self {
        Self {
            poll: Duration::from_millis(500),
            keep_alive: Duration::from_secs(15),
        }
    }
}

/// Events sent by a `wait=false` request when no `limit` is given.
pub const DEFAULT_EVENT_LIMIT: u32 = 100;

/// `?after=&limit=&wait=` of the event stream.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct EventQuery {
    /// Start after this audit seq, 0 to 2^63−1 (0, the default: from the start of the log). A
    /// `Last-Event-ID` header takes precedence.
    pub after: Option<u64>,
    /// End the response after this many events (1 to 1000; with `wait=false`, 100 by default).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    /// `true` (the default): keep the stream open and send events as they are recorded.
    /// `false`: send the events recorded so far (up to `limit`), then end the response.
    pub wait: Option<bool>,
}

/// The events the caller may read, as `text/event-stream`: `id: <seq>`, `event: <type>`,
/// `data: <the event as JSON>`.
#[utoipa::path(get, path = "/v1/events", tag = "lifecycle",
    params(
        EventQuery,
        ("Last-Event-ID" = Option<u64>, Header, description = "The id of the last event received (0 to 2^63−1); the stream resumes after it"),
    ),
    responses(
        (status = 200, description = "Server-Sent Events: each event's id is its audit seq, its event name its type (gate_decision, human_decision, run_ended, execution_cancelled, subject_moved, undecodable_record), its data the event as JSON", body = String, content_type = "text/event-stream"),
        (status = "4XX", description = "Refused", body = crate::problem::Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = crate::problem::Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn stream(
    State(state): State<AppState>,
    Caller(caller): Caller,
    Peer(peer): Peer,
    headers: HeaderMap,
    ListQuery(q): ListQuery<EventQuery>,
) -> Result<Response, ApiError> {
    // An event id is an audit seq, which the store keeps as a signed 64-bit integer: a larger
    // one names no event and is refused here, as a negative one is, not by the store.
    let event_id = |id: Option<u64>, name: &str| {
        id.filter(|id| i64::try_from(*id).is_ok()).ok_or_else(|| {
            ApiError::request(
                StatusCode::BAD_REQUEST,
                "invalid_query",
                format!(
                    "{name} must be an event id (an integer from 0 to {})",
                    i64::MAX
                ),
            )
        })
    };
    let after = match headers.get("last-event-id") {
        Some(v) => event_id(
            v.to_str().ok().and_then(|s| s.trim().parse::<u64>().ok()),
            "Last-Event-ID",
        )?,
        None => event_id(Some(q.after.unwrap_or(0)), "after")?,
    };
    let wait = q.wait.unwrap_or(true);
    let limit = match q.limit {
        Some(l) if !(1..=MAX_EVENTS_PAGE).contains(&l) => {
            return Err(ApiError::request(
                StatusCode::BAD_REQUEST,
                "invalid_query",
                format!("limit must be between 1 and {MAX_EVENTS_PAGE}, not {l}"),
            ));
        }
        Some(l) => Some(u64::from(l)),
        None if wait => None,
        None => Some(u64::from(DEFAULT_EVENT_LIMIT)),
    };
    // The first read answers for the whole request: a store that fails now is a problem
    // document, not an empty stream.
    let first = state
        .engine
        .events_after(&caller, after, MAX_EVENTS_PAGE)
        .await?;
    let reader = Reader {
        token: bearer_token(&headers).to_owned(),
        peer,
        caller,
        cursor: first.read_to,
        caught_up: first.read_to == after,
        pending: first.events.into(),
        left: limit,
        wait,
        poll: state.events.poll,
        stop: state.stop.subscribe(),
        state: state.clone(),
    };
    let events = futures_util::stream::unfold(reader, Reader::next);
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::new().interval(state.events.keep_alive))
        .into_response())
}

/// The state of one stream.
struct Reader {
    state: AppState,
    /// The token the stream was opened with, and by whom: checked again before every read and
    /// every event sent, so a token revoked or rotated ends the stream.
    token: String,
    peer: IpAddr,
    caller: Principal,
    /// The last audit seq read.
    cursor: u64,
    /// Whether the last read found nothing new.
    caught_up: bool,
    pending: VecDeque<Event>,
    /// Events still to send, when limited.
    left: Option<u64>,
    wait: bool,
    poll: Duration,
    stop: tokio::sync::watch::Receiver<bool>,
}

impl Reader {
    async fn next(mut self) -> Option<(Result<SseEvent, Infallible>, Self)> {
        loop {
            if *self.stop.borrow() || self.left == Some(0) {
                return None;
            }
            if !self.still_authenticated().await {
                return None;
            }
            if let Some(event) = self.pending.pop_front() {
                if let Some(left) = &mut self.left {
                    *left -= 1;
                }
                let Some(rendered) = render(&event) else {
                    tracing::error!(
                        seq = event.seq,
                        "event stream ended: an event cannot be written as JSON"
                    );
                    return None;
                };
                return Some((Ok(rendered), self));
            }
            if self.caught_up {
                if !self.wait {
                    return None;
                }
                tokio::select! {
                    () = tokio::time::sleep(self.poll) => {}
                    _ = self.stop.changed() => return None,
                }
                // Read again, once the token has been checked again.
                self.caught_up = false;
                continue;
            }
            match self
                .state
                .engine
                .events_after(&self.caller, self.cursor, MAX_EVENTS_PAGE)
                .await
            {
                Ok(page) => {
                    self.caught_up = page.read_to == self.cursor;
                    self.cursor = page.read_to;
                    self.pending = page.events.into();
                }
                Err(e) => {
                    // The stream ends; the client reconnects with the last id it received and
                    // loses nothing.
                    tracing::warn!(error = %e, "event stream ended: the store failed");
                    return None;
                }
            }
        }
    }

    /// Whether the stream's token still names its caller, resolved as any presented token is
    /// (cached by the engine until a change of token, so usually no read of the store). A
    /// token revoked or replaced since the stream opened ends it: its refusal is recorded and
    /// charged to the peer like any failed authentication, once, since the stream then ends.
    async fn still_authenticated(&self) -> bool {
        match crate::auth::authenticate(&self.state, self.peer, &self.token).await {
            Ok(p) if p.name() == self.caller.name() => true,
            Ok(_) => false,
            Err(e) => {
                tracing::info!(error = %e, "event stream ended: its token no longer authenticates");
                false
            }
        }
    }
}

/// One event in the stream's framing; none if it cannot be written (it is then not sent as
/// anything else).
fn render(event: &Event) -> Option<SseEvent> {
    let data = serde_json::to_string(event).ok()?;
    Some(
        SseEvent::default()
            .id(event.seq.to_string())
            .event(event.kind.name())
            .data(data),
    )
}
