//! Webhooks: `POST /v1/webhooks` (operators) registers one, and a delivery loop posts each
//! matching lifecycle event to it, signed. The registration is the registering operator's own
//! record in the store, and the loop's records of delivered and failed events are the
//! engine's, in the system role ([`verdict_engine::webhooks`]). A webhook's secret is never
//! stored but derived from the server's webhook key (`verdict serve --webhook-key FILE`) and
//! the webhook's id, so every server over the same store with the same key signs alike, and
//! the secret is shown once, at registration.
//!
//! Delivery is at least once and in order per webhook: an event is posted until a 2xx comes
//! back or the attempts run out (exponential back-off with jitter; a redirect is an answer
//! like any other non-2xx and is not followed), and only then does the next one go. A delivery
//! that failed every attempt is recorded in the store and the loop moves on. The receiver
//! dedupes by `Verdict-Event-Id`.

use crate::AppState;
use crate::auth::Caller;
use crate::body::StrictJson;
use crate::page::{ListQuery, PageQuery, paginate};
use crate::problem::ApiError;
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::hash::BuildHasher as _;
use std::sync::Arc;
use std::time::Duration;
use utoipa::ToSchema;
use verdict_engine::events::Event;
use verdict_engine::webhooks::{
    NewWebhook, Webhook, WebhookDelivered, WebhookFailure, WebhookNote, WebhookRemoval,
    WebhookScope,
};

/// The shortest webhook key accepted, in bytes.
pub const MIN_KEY_BYTES: usize = 32;

/// Why a webhook key cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// Too short to derive secrets from.
    #[error("a webhook key must be at least {MIN_KEY_BYTES} bytes, not {0}")]
    TooShort(usize),
}

/// The key every webhook's secret is derived from.
#[derive(Clone)]
pub struct WebhookKey(Vec<u8>);

impl std::fmt::Debug for WebhookKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookKey(..)")
    }
}

impl WebhookKey {
    /// A key of at least [`MIN_KEY_BYTES`] bytes.
    pub fn new(bytes: Vec<u8>) -> Result<Self, KeyError> {
        if bytes.len() < MIN_KEY_BYTES {
            return Err(KeyError::TooShort(bytes.len()));
        }
        Ok(Self(bytes))
    }

    /// The secret of webhook `id`: `whsec_` and the hex of HMAC-SHA256 under the key of a
    /// domain-separated id.
    #[must_use]
    pub fn secret_for(&self, id: &str) -> String {
        let mac = hmac_hex(&self.0, &[b"verdict.webhook-secret/v1\n", id.as_bytes()]);
        format!("whsec_{mac}")
    }
}

/// Hex of HMAC-SHA256 under `key` over the concatenation of `parts`.
pub(crate) fn hmac_hex(key: &[u8], parts: &[&[u8]]) -> String {
    // HMAC takes a key of any length.
    let mut mac = match <Hmac<Sha256> as KeyInit>::new_from_slice(key) {
        Ok(m) => m,
        Err(_) => return String::new(),
    };
    for p in parts {
        mac.update(p);
    }
    let mut out = String::with_capacity(64);
    for b in mac.finalize().into_bytes() {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// The `Verdict-Signature` of a delivery: `sha256=` and the hex of HMAC-SHA256 under the
/// secret over `<timestamp>.<body>`.
#[must_use]
pub fn signature(secret: &str, timestamp: u64, body: &[u8]) -> String {
    let ts = timestamp.to_string();
    format!(
        "sha256={}",
        hmac_hex(secret.as_bytes(), &[ts.as_bytes(), b".", body])
    )
}

/// How deliveries are attempted.
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    /// Attempts per event, at least 1.
    pub attempts: u32,
    /// The wait after the first failed attempt; it doubles after each further one.
    pub base: Duration,
    /// The longest wait between two attempts (before jitter).
    pub max: Duration,
    /// How long one attempt may take.
    pub timeout: Duration,
    /// How often the loop looks for new events and registrations while caught up.
    pub poll: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Self {
            attempts: 6,
            base: Duration::from_secs(1),
            max: Duration::from_secs(60),
            timeout: Duration::from_secs(10),
            poll: Duration::from_secs(1),
        }
    }
}

impl Retry {
    /// The wait after failed attempt `n` (from 1): `base * 2^(n-1)`, capped, plus up to half
    /// of it again at random, so receivers that failed together are not retried together.
    fn backoff(&self, n: u32) -> Duration {
        let exp = self
            .base
            .saturating_mul(2_u32.saturating_pow(n.saturating_sub(1)))
            .min(self.max);
        let random = std::collections::hash_map::RandomState::new().hash_one(n);
        let half = u64::try_from(exp.as_millis() / 2).unwrap_or(u64::MAX);
        let jitter = if half == 0 { 0 } else { random % (half + 1) };
        exp + Duration::from_millis(jitter)
    }
}

/// What the server needs to register webhooks and deliver to them.
#[derive(Debug, Clone)]
pub struct Webhooks {
    /// The key secrets are derived from.
    pub key: WebhookKey,
    /// How deliveries are attempted.
    pub retry: Retry,
    /// How long the delivery lease runs from each renewal ([`DELIVERY_LEASE`] by default): how
    /// long deliveries pause when the server holding it stops without a word.
    pub lease: Duration,
}

/// `POST /v1/webhooks`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewWebhookBody {
    /// The webhook's id, unique in the store.
    pub id: String,
    /// `https://...`, or `http://` to a loopback address only.
    pub url: String,
    /// `{"kind": "all"}`, `{"kind": "execution", "id"}` or `{"kind": "mission", "id"}`.
    #[schema(value_type = Object)]
    pub scope: WebhookScope,
    /// Event types to deliver (`gate_decision`, `human_decision`, `run_ended`,
    /// `execution_cancelled`, `subject_moved`); absent or empty: all.
    #[serde(default)]
    pub event_types: Vec<String>,
}

/// A registered webhook, with its secret: shown this once.
#[derive(Debug, Serialize, ToSchema)]
pub struct RegisteredWebhook {
    /// The registration as stored (no secret).
    #[schema(value_type = Object)]
    pub webhook: Webhook,
    /// The secret deliveries are signed with; it is not stored and not shown again.
    pub secret: String,
}

/// Registers a webhook (operator only). The answer carries its secret, shown once.
#[utoipa::path(post, path = "/v1/webhooks", tag = "lifecycle",
    request_body = NewWebhookBody,
    responses(
        (status = 201, description = "Registered", body = RegisteredWebhook),
        (status = "4XX", description = "Refused; 409 webhooks_disabled when the server has no webhook key", body = crate::problem::Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = crate::problem::Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn register(
    State(state): State<AppState>,
    Caller(caller): Caller,
    StrictJson(body): StrictJson<NewWebhookBody>,
) -> Result<(StatusCode, Json<RegisteredWebhook>), ApiError> {
    let Some(hooks) = state.webhooks.clone() else {
        // Who may not register is told so (and recorded) before being told there is no key.
        state.engine.webhooks(&caller).await?;
        return Err(ApiError::request(
            StatusCode::CONFLICT,
            "webhooks_disabled",
            "this server was started without --webhook-key, so it can neither sign nor deliver"
                .into(),
        ));
    };
    let secret = hooks.key.secret_for(&body.id);
    let webhook = state
        .engine
        .register_webhook(
            &caller,
            NewWebhook {
                id: body.id,
                url: body.url,
                scope: body.scope,
                event_types: body.event_types,
                secret_sha256: verdict_core::digest::raw(secret.as_bytes()),
            },
        )
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(RegisteredWebhook { webhook, secret }),
    ))
}

/// A page of webhook registrations.
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookPage {
    /// The registrations, oldest first (no secret).
    #[schema(value_type = Vec<Object>)]
    pub items: Vec<Webhook>,
    /// The path and query of the next page, or null.
    pub next: Option<String>,
}

/// The webhooks registered (operator only), oldest first; never a secret.
#[utoipa::path(get, path = "/v1/webhooks", tag = "lifecycle",
    params(PageQuery),
    responses(
        (status = 200, description = "A page of webhook registrations", body = WebhookPage),
        (status = "4XX", description = "Refused", body = crate::problem::Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = crate::problem::Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ListQuery(q): ListQuery<PageQuery>,
) -> Result<(HeaderMap, Json<WebhookPage>), ApiError> {
    let all = state.engine.webhooks(&caller).await?;
    let page = paginate(all, |w| w.id.as_str(), &q, "/v1/webhooks", &[])?;
    Ok((
        page.headers(),
        Json(WebhookPage {
            items: page.items,
            next: page.next,
        }),
    ))
}

/// Removes a webhook (operator only): nothing is delivered to it from the delivery loop's
/// next read of the store on (within one poll interval). Its id is not reused.
#[utoipa::path(delete, path = "/v1/webhooks/{id}", tag = "lifecycle",
    params(("id" = String, Path, description = "Webhook id")),
    responses(
        (status = 200, description = "The removal record", body = Object),
        (status = "4XX", description = "Refused; 404 for an unknown id, 409 when removed already", body = crate::problem::Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = crate::problem::Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn remove(
    State(state): State<AppState>,
    Caller(caller): Caller,
    crate::routes::Segment(id): crate::routes::Segment,
) -> Result<Json<WebhookRemoval>, ApiError> {
    Ok(Json(state.engine.remove_webhook(&caller, &id).await?))
}

/// The client deliveries to `url` are sent with. A plain-http URL (allowed for the loopback
/// only) never goes through a proxy the environment names, which would carry the body and its
/// signature off the machine in clear; an https delivery may tunnel through one.
///
/// # Errors
/// When no HTTP client can be built.
pub fn delivery_client(
    url: &str,
    timeout: std::time::Duration,
) -> reqwest::Result<reqwest::Client> {
    let builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(timeout);
    if url.starts_with("https://") {
        builder.build()
    } else {
        builder.no_proxy().build()
    }
}

/// How long the webhook delivery lease runs from each renewal, by default.
pub const DELIVERY_LEASE: Duration = Duration::from_secs(15);

/// A label for this server as the holder of the delivery lease: the process id, the time its
/// election began and a random number, so two servers (or two starts of one) never share one.
fn holder_label() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let random = std::collections::hash_map::RandomState::new().hash_one(nanos);
    format!("server-{}-{nanos:x}-{random:x}", std::process::id())
}

/// The delivery election: every server with a webhook key runs this, and only the one holding
/// the store's delivery lease delivers, so two servers over one store deliver each event once.
/// The lease is renewed every third of its length; a holder that cannot renew stops delivering
/// before its lease can have lapsed at the store, so that a server taking over never delivers
/// alongside it: the local deadline is counted from before the renewal was asked, and the
/// store counts its lease from its own time during that call, which is later. A server that
/// stops (or dies) stops renewing, and another takes the lease once it lapses. An event whose
/// delivery was cut short by the change of holder is delivered again by the next one (at least
/// once, as after a restart; receivers dedupe by `Verdict-Event-Id`).
pub async fn run(state: AppState, hooks: Arc<Webhooks>) {
    let holder = holder_label();
    let lease = hooks.lease.max(Duration::from_millis(30));
    let renew = lease / 3;
    let mut stop = state.stop.subscribe();
    // The delivery loop while this server holds the lease, and until when it may deliver.
    let mut delivering: Option<tokio::task::JoinHandle<()>> = None;
    let mut held_until: Option<tokio::time::Instant> = None;
    loop {
        if *stop.borrow() {
            break;
        }
        let asked = tokio::time::Instant::now();
        // The time by which delivery must stop unless this renewal succeeds: a renewal that
        // hangs (a database out of reach) is given up at that time, not waited for.
        let must_stop = held_until.map(|t| t.checked_sub(renew / 2).unwrap_or(t));
        let answer = tokio::time::timeout_at(
            must_stop.unwrap_or(asked + lease),
            state.engine.hold_webhook_delivery(&holder, lease),
        )
        .await;
        match answer {
            Ok(Ok(taken)) if taken.held_by(&holder) => {
                held_until = Some(asked + lease);
                if delivering.is_none() {
                    tracing::info!(holder = %holder, term = taken.term, "this server delivers webhooks");
                    delivering = Some(tokio::spawn(deliver_while_held(
                        state.clone(),
                        hooks.clone(),
                    )));
                }
            }
            Ok(Ok(other)) => {
                held_until = None;
                if let Some(task) = delivering.take() {
                    tracing::info!(holder = %other.holder, "another server took webhook delivery");
                    task.abort();
                }
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "renewing the webhook delivery lease failed"),
            Err(_) => tracing::warn!("renewing the webhook delivery lease took too long"),
        }
        // Unrenewed to the end of what was last held: stop before the lease can lapse.
        let deadline = held_until.map(|t| t.checked_sub(renew / 2).unwrap_or(t));
        if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
            held_until = None;
            if let Some(task) = delivering.take() {
                tracing::warn!("webhook delivery stopped: its lease could not be renewed in time");
                task.abort();
            }
        }
        let wake = deadline.map_or(asked + renew, |d| d.min(asked + renew));
        tokio::select! {
            () = tokio::time::sleep_until(wake) => {}
            _ = stop.changed() => break,
        }
    }
    if let Some(task) = delivering.take() {
        // The delivery loop watches the stop too and ends its tasks; waiting lets it.
        let _ = task.await;
    }
}

/// The delivery loop, while this server holds the delivery lease: finds registrations as they
/// are stored and runs one delivery task per webhook, until the server stops or the task is
/// aborted (the lease lost), which aborts every delivery task with it.
async fn deliver_while_held(state: AppState, hooks: Arc<Webhooks>) {
    let mut stop = state.stop.subscribe();
    let mut cursor = 0;
    let mut tasks = tokio::task::JoinSet::new();
    // The delivery task of each webhook, to stop it when the webhook is removed.
    let mut running: HashMap<String, tokio::task::AbortHandle> = HashMap::new();
    // Where each webhook's delivery stands: its registration's seq, then the last event it
    // delivered or gave up on, as the store records them.
    let mut position: HashMap<String, u64> = HashMap::new();
    let mut removed: HashSet<String> = HashSet::new();
    loop {
        if *stop.borrow() {
            break;
        }
        match state.engine.webhook_notes_after(cursor).await {
            Ok((notes, read_to)) => {
                cursor = read_to;
                let mut registered = Vec::new();
                for (seq, note) in notes {
                    let id = note.webhook().to_owned();
                    match note {
                        WebhookNote::Registered(hook) => {
                            position.entry(id).or_insert(seq);
                            registered.push(hook);
                        }
                        WebhookNote::Delivered(WebhookDelivered { event, .. })
                        | WebhookNote::Failed(WebhookFailure { event, .. }) => {
                            let at = position.entry(id).or_insert(event);
                            *at = (*at).max(event);
                        }
                        WebhookNote::Removed(_) => {
                            if let Some(task) = running.remove(&id) {
                                task.abort();
                            }
                            removed.insert(id);
                        }
                    }
                }
                // Started once every record read so far is known, so a restarted server
                // resumes after the last event delivered, and a removed webhook never starts.
                for hook in registered {
                    let id = hook.id.as_str().to_owned();
                    if removed.contains(&id) || running.contains_key(&id) {
                        continue;
                    }
                    let client = match delivery_client(&hook.url, hooks.retry.timeout) {
                        Ok(c) => c,
                        Err(e) => {
                            tracing::error!(webhook = %id, error = %e, "webhook not delivered: no HTTP client");
                            continue;
                        }
                    };
                    let from = position.get(&id).copied().unwrap_or_default();
                    let task = tasks.spawn(deliver_all(
                        state.clone(),
                        hooks.clone(),
                        client,
                        from,
                        hook,
                    ));
                    running.insert(id, task);
                }
            }
            Err(e) => tracing::warn!(error = %e, "reading webhook records failed"),
        }
        tokio::select! {
            () = tokio::time::sleep(hooks.retry.poll) => {}
            _ = stop.changed() => break,
        }
    }
    // Each task watches the stop too; one cut short mid-delivery sends that event again on
    // the next start (at least once).
    tasks.shutdown().await;
}

/// Delivers `hook`'s events after `from`, in order, until the server stops or the webhook is
/// removed. Each event taken (or given up on) is recorded in the store, which is where a
/// restarted server resumes; an event whose delivery was cut short before its record is sent
/// again (at least once).
async fn deliver_all(
    state: AppState,
    hooks: Arc<Webhooks>,
    client: reqwest::Client,
    from: u64,
    hook: Webhook,
) {
    let secret = hooks.key.secret_for(hook.id.as_str());
    if verdict_core::digest::raw(secret.as_bytes()) != hook.secret_sha256 {
        // Signing with another secret than the one shown would only teach the receiver to
        // ignore signatures.
        tracing::error!(webhook = %hook.id, "webhook not delivered: this server's key is not the one it was registered under");
        return;
    }
    let mut stop = state.stop.subscribe();
    let mut cursor = from;
    loop {
        if *stop.borrow() {
            return;
        }
        let caught_up = match state.engine.webhook_events(&hook, cursor, 500).await {
            Ok(page) => {
                for event in &page.events {
                    if !deliver(
                        &state,
                        &hooks.retry,
                        &client,
                        &hook,
                        &secret,
                        event,
                        &mut stop,
                    )
                    .await
                    {
                        return;
                    }
                }
                let caught_up = page.read_to == cursor;
                cursor = page.read_to;
                caught_up
            }
            Err(e) => {
                tracing::warn!(webhook = %hook.id, error = %e, "reading events failed");
                true
            }
        };
        if caught_up {
            tokio::select! {
                () = tokio::time::sleep(hooks.retry.poll) => {}
                _ = stop.changed() => return,
            }
        }
    }
}

/// Posts one event until it is taken or the attempts run out (then records the failure).
/// False when the server is stopping.
async fn deliver(
    state: &AppState,
    retry: &Retry,
    client: &reqwest::Client,
    hook: &Webhook,
    secret: &str,
    event: &Event,
    stop: &mut tokio::sync::watch::Receiver<bool>,
) -> bool {
    let attempts = retry.attempts.max(1);

    let body = match serde_json::to_vec(event) {
        Ok(b) => b,
        Err(e) => {
            record_failure(
                state,
                hook,
                event.seq,
                0,
                &format!("not written as JSON: {e}"),
            )
            .await;
            return true;
        }
    };
    let mut last_error = String::new();
    for n in 1..=attempts {
        let timestamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let sent = client
            .post(&hook.url)
            .header("content-type", "application/json")
            .header("verdict-event-id", event.seq.to_string())
            .header("verdict-webhook-id", hook.id.as_str())
            .header("verdict-timestamp", timestamp.to_string())
            .header("verdict-signature", signature(secret, timestamp, &body))
            .body(body.clone())
            .send()
            .await;
        match sent {
            Ok(resp) if resp.status().is_success() => {
                if let Err(e) = state.engine.record_webhook_delivered(hook, event.seq).await {
                    // Not fatal: the event is sent again after a restart, and receivers dedupe.
                    tracing::warn!(webhook = %hook.id, event = event.seq, error = %e, "recording a delivery failed");
                }
                return true;
            }
            Ok(resp) => last_error = format!("answered {}", resp.status()),
            Err(e) => last_error = format!("no answer: {e}"),
        }
        if n < attempts {
            tokio::select! {
                () = tokio::time::sleep(retry.backoff(n)) => {}
                _ = stop.changed() => return false,
            }
        }
    }
    record_failure(state, hook, event.seq, attempts, &last_error).await;
    true
}

/// Logs and records an event given up on.
async fn record_failure(state: &AppState, hook: &Webhook, seq: u64, attempts: u32, error: &str) {
    tracing::warn!(webhook = %hook.id, event = seq, error = %error, "webhook delivery failed every attempt");
    if let Err(e) = state
        .engine
        .record_webhook_failure(hook, seq, attempts, error)
        .await
    {
        tracing::error!(webhook = %hook.id, event = seq, error = %e, "recording a failed delivery failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_up_to_its_cap_with_bounded_jitter() {
        let r = Retry {
            attempts: 10,
            base: Duration::from_millis(100),
            max: Duration::from_millis(1000),
            ..Retry::default()
        };
        for (n, exp) in [(1, 100), (2, 200), (3, 400), (4, 800), (5, 1000), (9, 1000)] {
            let d = r.backoff(n).as_millis();
            assert!(d >= exp && d <= exp + exp / 2, "attempt {n}: {d} ms");
        }
    }

    #[test]
    fn a_short_key_is_refused_and_secrets_differ_per_webhook() {
        assert!(WebhookKey::new(vec![7; 31]).is_err());
        let key = WebhookKey::new(vec![7; 32]);
        assert!(key.is_ok());
        let Ok(key) = key else { return };
        assert_ne!(key.secret_for("a"), key.secret_for("b"));
        assert_eq!(key.secret_for("a"), key.secret_for("a"));
    }
}
