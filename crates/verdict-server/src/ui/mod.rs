//! The human review pages under `/ui` (docs/review-ui.md): server-rendered HTML (maud,
//! compiled into the binary), one stylesheet served from `/ui/assets/`, no script.
//!
//! Thin like the API: each handler reads its form or path, calls one engine use case as the
//! signed-in principal and renders what it returns ([`pages`]). Sessions are the principal's
//! own token in an `HttpOnly`, `SameSite=Strict` cookie, authenticated again by the engine on
//! every request, so a revoked principal is signed out at once. Only `human` and `operator`
//! principals may sign in. Every form that posts carries a CSRF token bound to the session (or,
//! for the sign-in form, to a pre-session cookie) by HMAC-SHA256 under the server's key (one
//! read from a file every server behind one address shares, `verdict serve --ui-key`, or drawn
//! at random when a lone server starts); a missing or wrong one is refused before any engine
//! call.

mod pages;

use crate::AppState;
use crate::auth::Peer;
use crate::problem::ApiError;
use crate::webhooks::hmac_hex;
use axum::Form;
use axum::Router;
use axum::extract::rejection::{FormRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use maud::Markup;
use serde::Deserialize;
use std::net::IpAddr;
use verdict_core::contracts::{HumanVerdict, Role};
use verdict_core::digest::Digest;
use verdict_engine::review::ReviewPage;
use verdict_engine::{EngineError, Principal, Reviewed};

/// The session cookie: the principal's token.
pub const SESSION_COOKIE: &str = "verdict_session";
/// The pre-session cookie the sign-in form's CSRF token is bound to.
pub const CSRF_COOKIE: &str = "verdict_csrf";

/// The stylesheet, compiled in.
const CSS: &str = include_str!("assets/ui.css");

/// The Content-Security-Policy of every page: nothing but this server's own stylesheet, no
/// script at all, no framing, forms only to this server.
pub const CSP: &str = "default-src 'self'; script-src 'none'; style-src 'self'; img-src 'self'; \
     object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The review pages' settings: the CSRF key and whether cookies are marked `Secure`.
#[derive(Clone)]
pub struct UiConfig {
    /// The HMAC key CSRF tokens are made under; `None` when the operating system gave no
    /// randomness, and then every form is refused (fail closed).
    key: Option<Vec<u8>>,
    /// Whether the server is behind TLS, so its cookies carry `Secure`.
    pub secure_cookies: bool,
}

/// The shortest CSRF key accepted, in bytes.
pub const MIN_UI_KEY_BYTES: usize = 32;

/// Why a CSRF key cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum UiKeyError {
    /// Too short to make tokens under.
    #[error("a review pages' key must be at least {MIN_UI_KEY_BYTES} bytes, not {0}")]
    TooShort(usize),
}

impl UiConfig {
    /// A fresh random key, this process's own: a form served by one server is refused by
    /// another; cookies marked `Secure` when `secure_cookies`.
    #[must_use]
    pub fn new(secure_cookies: bool) -> Self {
        Self {
            key: verdict_engine::token::generate()
                .ok()
                .map(String::into_bytes),
            secure_cookies,
        }
    }

    /// The key `key` (at least [`MIN_UI_KEY_BYTES`] bytes), which every server behind one
    /// address must share so that a form one of them served is accepted by any of them.
    pub fn with_key(key: Vec<u8>, secure_cookies: bool) -> Result<Self, UiKeyError> {
        if key.len() < MIN_UI_KEY_BYTES {
            return Err(UiKeyError::TooShort(key.len()));
        }
        Ok(Self {
            key: Some(key),
            secure_cookies,
        })
    }

    /// The CSRF token of `purpose` (`session` or `sign-in`) bound to `secret`.
    fn csrf(&self, purpose: &str, secret: &str) -> Option<String> {
        let key = self.key.as_ref()?;
        Some(hmac_hex(
            key,
            &[
                b"verdict.ui-csrf/v1\n",
                purpose.as_bytes(),
                b"\n",
                secret.as_bytes(),
            ],
        ))
    }

    /// Whether `given` is the CSRF token of `purpose` bound to `secret` (in constant time).
    fn csrf_ok(&self, purpose: &str, secret: &str, given: Option<&str>) -> bool {
        match (self.csrf(purpose, secret), given) {
            (Some(want), Some(given)) if !secret.is_empty() && want.len() == given.len() => {
                want.bytes()
                    .zip(given.bytes())
                    .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                    == 0
            }
            _ => false,
        }
    }

    fn cookie(&self, name: &str, value: &str, max_age: Option<u64>) -> String {
        let mut c = format!("{name}={value}; HttpOnly; SameSite=Strict; Path=/ui");
        if let Some(age) = max_age {
            c.push_str(&format!("; Max-Age={age}"));
        }
        if self.secure_cookies {
            c.push_str("; Secure");
        }
        c
    }
}

/// The routes of the review pages, with their security headers.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/ui", get(root))
        .route("/ui/", get(root))
        .route("/ui/sign-in", get(sign_in_page).post(sign_in))
        .route("/ui/sign-out", post(sign_out))
        .route("/ui/queue", get(queue))
        .route("/ui/board", get(board))
        .route("/ui/reliability", get(reliability))
        .route("/ui/executions/{id}", get(execution))
        .route("/ui/executions/{id}/decision", post(decision))
        .route("/ui/executions/{id}/gate-run", post(gate_run))
        .route("/ui/executions/{id}/lineage", get(lineage))
        .route("/ui/assets/ui.css", get(stylesheet))
        .route("/ui/{*rest}", get(not_found))
        .layer(axum::middleware::map_response(security_headers))
}

async fn security_headers(mut resp: Response) -> Response {
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    resp
}

/// The signed-in principal, its token and the CSRF token of its session.
pub(crate) struct Session {
    pub principal: Principal,
    pub csrf: String,
}

/// The value of cookie `name` in the request, if any.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim())
        .filter(|v| !v.is_empty())
}

/// May this role sign in to the review pages?
fn may_sign_in(role: Role) -> bool {
    matches!(role, Role::Human | Role::Operator)
}

/// Why a page could not be served: signed out (go to sign-in), or a page to show.
enum Refusal {
    SignedOut,
    Page(Response),
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        match self {
            Self::SignedOut => {
                (StatusCode::SEE_OTHER, [(header::LOCATION, "/ui/sign-in")]).into_response()
            }
            Self::Page(r) => r,
        }
    }
}

/// The session of the request's cookie, authenticated again by the engine under the same
/// limit on failed authentication as the API's bearer tokens ([`crate::auth::authenticate`]):
/// a cookie no principal holds is a denial charged to `peer`, and once `peer` (or the server)
/// has spent its allowance it is a 429 page that writes nothing.
async fn session(state: &AppState, peer: IpAddr, headers: &HeaderMap) -> Result<Session, Refusal> {
    let Some(token) = cookie(headers, SESSION_COOKIE) else {
        return Err(Refusal::SignedOut);
    };
    match crate::auth::authenticate(state, peer, token).await {
        Ok(principal) if may_sign_in(principal.role()) => {
            let csrf = state
                .ui
                .csrf("session", token)
                .ok_or_else(|| Refusal::Page(no_key()))?;
            Ok(Session { principal, csrf })
        }
        Ok(_) | Err(ApiError::Engine(EngineError::Unauthenticated)) => Err(Refusal::SignedOut),
        // Limited: the sign-in page that says when to try again, where a held token still
        // signs in.
        Err(e @ ApiError::TooManyRequests { .. }) => {
            Err(Refusal::Page(refused_sign_in(state, headers, e)))
        }
        Err(e) => Err(Refusal::Page(engine_error_page(None, e))),
    }
}

/// The sign-in page answering a failed sign-in other than an unknown token: a 429 with
/// `Retry-After` when the limit turned it away, else the error's status.
fn refused_sign_in(state: &AppState, headers: &HeaderMap, e: ApiError) -> Response {
    let retry_after = match &e {
        ApiError::TooManyRequests { retry_after, .. } => Some(*retry_after),
        _ => None,
    };
    let (status, alert) = classify(e);
    let mut resp = sign_in_response(state, headers, status, Some(&alert));
    if let Some(wait) = retry_after {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(wait));
    }
    resp
}

fn no_key() -> Response {
    html(
        StatusCode::SERVICE_UNAVAILABLE,
        pages::bare(
            "Unavailable",
            Some(&pages::Alert::plain(
                "The server has no key to protect forms with (the operating system gave no randomness), so no form is accepted.",
            )),
        ),
    )
}

fn html(status: StatusCode, markup: Markup) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        markup.into_string(),
    )
        .into_response()
}

/// The status and alert of an error, as the API would answer it.
fn classify(e: impl Into<ApiError>) -> (StatusCode, pages::Alert) {
    let api = e.into();
    let (status, code, _) = api.classify();
    let detail = verdict_core::quote::bound_message(&api.to_string());
    (status, pages::Alert::engine(code, detail))
}

fn engine_error_page(session: Option<&Session>, e: impl Into<ApiError>) -> Response {
    let (status, alert) = classify(e);
    html(status, pages::error_page(session, &alert))
}

/// Input axum could not read (a path segment that is not UTF-8, a query field given twice, a
/// form of another media type), as the API's problem would name it: a body too large or of
/// the wrong type keeps its status, anything else is `invalid_input`. Answered with a page
/// saying what is wrong, never axum's plain-text refusal.
fn unreadable(what: &str, status: StatusCode, text: &str) -> ApiError {
    let (status, code) = match status {
        StatusCode::UNSUPPORTED_MEDIA_TYPE => (status, "unsupported_media_type"),
        StatusCode::PAYLOAD_TOO_LARGE => (status, "payload_too_large"),
        _ => (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input"),
    };
    ApiError::request(status, code, format!("{what} cannot be read: {text}"))
}

/// A posted form, or why it cannot be read.
fn read_form<T>(form: Result<Form<T>, FormRejection>) -> Result<T, ApiError> {
    form.map(|Form(f)| f)
        .map_err(|e| unreadable("the form", e.status(), &e.body_text()))
}

/// The execution id of a page's path and the form posted to it, each read as [`path_execution`]
/// and [`read_form`] read them.
fn path_and_form<T>(
    path: Result<Path<String>, PathRejection>,
    form: Result<Form<T>, FormRejection>,
) -> Result<(String, T), ApiError> {
    Ok((path_execution(path)?, read_form(form)?))
}

/// The execution id of a page's path, or why it is none: checked before the store is asked, as
/// the API checks it, so every backend gives the same answer.
fn path_execution(path: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    let Path(id) = path.map_err(|e| unreadable("the path", e.status(), &e.body_text()))?;
    crate::routes::execution_id("the execution id", &id)?;
    Ok(id)
}

/// Any other path under `/ui`: a page saying so, not the API's JSON problem.
async fn not_found(
    State(state): State<AppState>,
    Peer(peer): Peer,
    headers: HeaderMap,
) -> Response {
    let s = session(&state, peer, &headers).await.ok();
    let alert = pages::Alert::engine(
        "not_found",
        "There is no review page at this address.".into(),
    );
    html(StatusCode::NOT_FOUND, pages::error_page(s.as_ref(), &alert))
}

async fn root(State(state): State<AppState>, Peer(peer): Peer, headers: HeaderMap) -> Response {
    match session(&state, peer, &headers).await {
        Ok(_) => (StatusCode::SEE_OTHER, [(header::LOCATION, "/ui/queue")]).into_response(),
        // Limited, or the store failed: the page that says so, not a redirect past it.
        Err(Refusal::Page(page)) => page,
        Err(Refusal::SignedOut) => {
            (StatusCode::SEE_OTHER, [(header::LOCATION, "/ui/sign-in")]).into_response()
        }
    }
}

async fn stylesheet() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], CSS).into_response()
}

/// The sign-in page, with a fresh pre-session cookie when the browser has none.
fn sign_in_response(
    state: &AppState,
    headers: &HeaderMap,
    status: StatusCode,
    alert: Option<&pages::Alert>,
) -> Response {
    let (nonce, fresh) = match cookie(headers, CSRF_COOKIE) {
        Some(n) => (n.to_owned(), false),
        None => match verdict_engine::token::generate() {
            Ok(t) => (t, true),
            Err(_) => return no_key(),
        },
    };
    let Some(csrf) = state.ui.csrf("sign-in", &nonce) else {
        return no_key();
    };
    let mut resp = html(status, pages::sign_in(&csrf, alert));
    if fresh && let Ok(v) = HeaderValue::from_str(&state.ui.cookie(CSRF_COOKIE, &nonce, None)) {
        resp.headers_mut().append(header::SET_COOKIE, v);
    }
    resp
}

async fn sign_in_page(State(state): State<AppState>, headers: HeaderMap) -> Response {
    sign_in_response(&state, &headers, StatusCode::OK, None)
}

/// The sign-in form.
#[derive(Debug, Deserialize)]
pub struct SignInForm {
    #[serde(default)]
    token: String,
    #[serde(default)]
    csrf: Option<String>,
}

async fn sign_in(
    State(state): State<AppState>,
    Peer(peer): Peer,
    headers: HeaderMap,
    form: Result<Form<SignInForm>, FormRejection>,
) -> Response {
    let form = match read_form(form) {
        Ok(form) => form,
        Err(e) => {
            let (status, alert) = classify(e);
            return sign_in_response(&state, &headers, status, Some(&alert));
        }
    };
    let nonce = cookie(&headers, CSRF_COOKIE).unwrap_or("");
    if !state.ui.csrf_ok("sign-in", nonce, form.csrf.as_deref()) {
        return sign_in_response(
            &state,
            &headers,
            StatusCode::FORBIDDEN,
            Some(&pages::Alert::engine(
                "csrf_failed",
                "The form's anti-forgery token is missing or wrong (or this browser's sign-in cookie is gone). Reload the sign-in page and try again.".into(),
            )),
        );
    }
    let token = form.token.trim();
    // As on the API: only a token no principal holds is limited (looking it up writes
    // nothing), so a reviewer sharing an address with whoever exhausted it still signs in.
    match crate::auth::authenticate(&state, peer, token).await {
        Ok(p) if may_sign_in(p.role()) => {
            let mut resp =
                (StatusCode::SEE_OTHER, [(header::LOCATION, "/ui/queue")]).into_response();
            for c in [
                state.ui.cookie(SESSION_COOKIE, token, None),
                state.ui.cookie(CSRF_COOKIE, "", Some(0)),
            ] {
                if let Ok(v) = HeaderValue::from_str(&c) {
                    resp.headers_mut().append(header::SET_COOKIE, v);
                }
            }
            resp
        }
        Ok(p) => sign_in_response(
            &state,
            &headers,
            StatusCode::FORBIDDEN,
            Some(&pages::Alert::engine(
                "permission_denied",
                format!(
                    "{} is a {} principal; only human and operator principals may sign in to the review pages.",
                    p.name(),
                    p.role().as_str()
                ),
            )),
        ),
        Err(ApiError::Engine(EngineError::Unauthenticated)) => sign_in_response(
            &state,
            &headers,
            StatusCode::UNAUTHORIZED,
            Some(&pages::Alert::engine(
                "unauthenticated",
                "No principal holds this token.".into(),
            )),
        ),
        Err(e) => refused_sign_in(&state, &headers, e),
    }
}

/// A form that carries only its CSRF token.
#[derive(Debug, Deserialize)]
pub struct CsrfForm {
    #[serde(default)]
    csrf: Option<String>,
}

async fn sign_out(
    State(state): State<AppState>,
    headers: HeaderMap,
    form: Result<Form<CsrfForm>, FormRejection>,
) -> Response {
    let form = match read_form(form) {
        Ok(form) => form,
        Err(e) => {
            let (status, alert) = classify(e);
            return html(status, pages::bare("Refused", Some(&alert)));
        }
    };
    let token = cookie(&headers, SESSION_COOKIE).unwrap_or("");
    if !state.ui.csrf_ok("session", token, form.csrf.as_deref()) {
        return html(
            StatusCode::FORBIDDEN,
            pages::bare(
                "Refused",
                Some(&pages::Alert::engine(
                    "csrf_failed",
                    "The form's anti-forgery token is missing or wrong; you are still signed in."
                        .into(),
                )),
            ),
        );
    }
    let mut resp = (StatusCode::SEE_OTHER, [(header::LOCATION, "/ui/sign-in")]).into_response();
    if let Ok(v) = HeaderValue::from_str(&state.ui.cookie(SESSION_COOKIE, "", Some(0))) {
        resp.headers_mut().append(header::SET_COOKIE, v);
    }
    resp
}

/// `?after=<cursor>&limit=<n>` on the queue and the board: which page to show. Both are read
/// as text so that a malformed one gets an HTML page saying what is wrong, not a bare 400.
#[derive(Debug, Deserialize)]
pub struct PageParams {
    #[serde(default)]
    after: Option<String>,
    #[serde(default)]
    limit: Option<String>,
}

impl PageParams {
    /// The page a query names; a query that is not one (a field given twice, say) is refused
    /// like a malformed value.
    fn read(query: Result<Query<Self>, QueryRejection>) -> Result<ReviewPage, EngineError> {
        match query {
            Ok(Query(p)) => p.page(),
            Err(e) => Err(EngineError::Invalid {
                what: "page query",
                message: e.body_text(),
            }),
        }
    }

    fn page(&self) -> Result<ReviewPage, EngineError> {
        let limit = match self.limit.as_deref() {
            None | Some("") => ReviewPage::DEFAULT_LIMIT,
            Some(text) => text.parse().map_err(|_| EngineError::Invalid {
                what: "page limit",
                message: format!("{text:?} is not a number of entries"),
            })?,
        };
        Ok(ReviewPage {
            after: self.after.clone().filter(|a| !a.is_empty()),
            limit,
        })
    }
}

async fn queue(
    State(state): State<AppState>,
    Peer(peer): Peer,
    headers: HeaderMap,
    params: Result<Query<PageParams>, QueryRejection>,
) -> Result<Response, Refusal> {
    let s = session(&state, peer, &headers).await?;
    let page = match PageParams::read(params) {
        Ok(p) => p,
        Err(e) => return Ok(engine_error_page(Some(&s), e)),
    };
    match state.engine.review_queue(&s.principal, &page).await {
        Ok(q) => Ok(html(StatusCode::OK, pages::queue(&s, &q, page.limit))),
        Err(e) => Ok(engine_error_page(Some(&s), e)),
    }
}

async fn board(
    State(state): State<AppState>,
    Peer(peer): Peer,
    headers: HeaderMap,
    params: Result<Query<PageParams>, QueryRejection>,
) -> Result<Response, Refusal> {
    let s = session(&state, peer, &headers).await?;
    let page = match PageParams::read(params) {
        Ok(p) => p,
        Err(e) => return Ok(engine_error_page(Some(&s), e)),
    };
    match state.engine.board(&s.principal, &page).await {
        Ok(b) => Ok(html(StatusCode::OK, pages::board(&s, &b, page.limit))),
        Err(e) => Ok(engine_error_page(Some(&s), e)),
    }
}

async fn reliability(
    State(state): State<AppState>,
    Peer(peer): Peer,
    headers: HeaderMap,
) -> Result<Response, Refusal> {
    let s = session(&state, peer, &headers).await?;
    match state.engine.reliability_series(&s.principal).await {
        Ok(r) => Ok(html(StatusCode::OK, pages::reliability(&s, &r))),
        Err(e) => Ok(engine_error_page(Some(&s), e)),
    }
}

/// `?decided=DIGEST` after a decision: the digest of the human decision just stored.
#[derive(Debug, Deserialize)]
pub struct Decided {
    #[serde(default)]
    decided: Option<String>,
}

async fn execution(
    State(state): State<AppState>,
    Peer(peer): Peer,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<Decided>, QueryRejection>,
) -> Result<Response, Refusal> {
    let s = session(&state, peer, &headers).await?;
    let id = match path_execution(path) {
        Ok(id) => id,
        Err(e) => return Ok(engine_error_page(Some(&s), e)),
    };
    let q = match query {
        Ok(Query(q)) => q,
        Err(e) => {
            let e = unreadable("the query", e.status(), &e.body_text());
            return Ok(engine_error_page(Some(&s), e));
        }
    };
    // Anyone can send a link with `?decided=`: the notice is shown only when the store holds
    // that human decision, made by this principal about this execution's current subject.
    let notice = match q.decided.as_deref().map(str::parse::<Digest>) {
        Some(Ok(digest)) => state
            .engine
            .recorded_human_decision(&s.principal, &id, &digest)
            .await
            .unwrap_or(false),
        _ => false,
    };
    Ok(execution_page(&state, &s, &id, StatusCode::OK, None, notice).await)
}

/// The execution page at `status`, with `alert` when a decision was refused.
async fn execution_page(
    state: &AppState,
    s: &Session,
    id: &str,
    status: StatusCode,
    alert: Option<&pages::Alert>,
    notice: bool,
) -> Response {
    match state.engine.subject_review(&s.principal, id).await {
        Ok(r) => html(status, pages::execution(s, &r, alert, notice)),
        Err(e) => engine_error_page(Some(s), e),
    }
}

/// The decision form.
#[derive(Debug, Deserialize)]
pub struct DecisionForm {
    #[serde(default)]
    csrf: Option<String>,
    #[serde(default)]
    subject_digest: String,
    #[serde(default)]
    policy_digest: String,
    /// The evaluation key of what the page showed; absent from a form that did not carry one.
    #[serde(default)]
    reviewed_decision: Option<String>,
    #[serde(default)]
    verdict: Option<String>,
    #[serde(default)]
    reason: String,
}

async fn decision(
    State(state): State<AppState>,
    Peer(peer): Peer,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    form: Result<Form<DecisionForm>, FormRejection>,
) -> Result<Response, Refusal> {
    let s = session(&state, peer, &headers).await?;
    // Nothing in a form that does not read is trusted, its CSRF token included: the page says
    // so and nothing is recorded.
    let (id, form) = match path_and_form(path, form) {
        Ok(read) => read,
        Err(e) => return Ok(engine_error_page(Some(&s), e)),
    };
    let token = cookie(&headers, SESSION_COOKIE).unwrap_or("");
    let refuse = |status: StatusCode, alert: pages::Alert| {
        let state = state.clone();
        let id = id.clone();
        let s = &s;
        async move { execution_page(&state, s, &id, status, Some(&alert), false).await }
    };
    if !state.ui.csrf_ok("session", token, form.csrf.as_deref()) {
        return Ok(refuse(
            StatusCode::FORBIDDEN,
            pages::Alert::engine(
                "csrf_failed",
                "The form's anti-forgery token is missing or wrong; nothing was recorded. Reload the page and decide again.".into(),
            ),
        )
        .await);
    }
    let verdict = match form.verdict.as_deref() {
        Some("approve") => HumanVerdict::Approve,
        Some("reject") => HumanVerdict::Reject,
        _ => {
            return Ok(refuse(
                StatusCode::UNPROCESSABLE_ENTITY,
                pages::Alert::engine(
                    "invalid_input",
                    "Choose approve or reject; nothing was recorded.".into(),
                ),
            )
            .await);
        }
    };
    let digests = (form.subject_digest.parse(), form.policy_digest.parse());
    let (Ok(subject_digest), Ok(policy_digest)) = digests else {
        return Ok(refuse(
            StatusCode::UNPROCESSABLE_ENTITY,
            pages::Alert::engine(
                "invalid_input",
                "The form does not name the subject and policy digests it was shown; nothing was recorded. Reload the page and decide again.".into(),
            ),
        )
        .await);
    };
    // The page offers the form only bound to the decision it shows; a form naming none is
    // refused by the page's use case (after whether the caller may decide at all), since
    // recording it would clear whatever the Gate evaluates now, which nobody was shown.
    let decision_key = match form.reviewed_decision.as_deref().map(str::parse) {
        None => None,
        Some(Ok(key)) => Some(key),
        Some(Err(_)) => {
            return Ok(refuse(
                StatusCode::UNPROCESSABLE_ENTITY,
                pages::Alert::engine(
                    "invalid_input",
                    "The form does not name the evaluation it was shown; nothing was recorded. Reload the page and decide again.".into(),
                ),
            )
            .await);
        }
    };
    let reviewed = Reviewed {
        subject_digest,
        policy_digest,
        decision_key,
    };
    match state
        .engine
        .review_decide(&s.principal, &id, verdict, &form.reason, &reviewed)
        .await
    {
        Ok(done) => Ok((
            StatusCode::SEE_OTHER,
            [(
                header::LOCATION,
                format!(
                    "/ui/executions/{}?decided={}",
                    pages::path_segment(&id),
                    pages::path_segment(done.human_decision.as_str())
                ),
            )],
        )
            .into_response()),
        Err(e) => {
            let conflict = matches!(e, EngineError::Conflict(_));
            let (status, mut alert) = classify(e);
            if conflict {
                alert.lead = Some(
                    "The subject moved while this page was open, or what the Gate would decide on it changed, so nothing was recorded. Review what is current below and decide again."
                        .into(),
                );
            }
            Ok(refuse(status, alert).await)
        }
    }
}

/// The form of a page on which no decision applies: runs the Gate on what is stored now, as the
/// signed-in principal (who may read the execution), and shows the page again with what it
/// decided.
async fn gate_run(
    State(state): State<AppState>,
    Peer(peer): Peer,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    form: Result<Form<CsrfForm>, FormRejection>,
) -> Result<Response, Refusal> {
    let s = session(&state, peer, &headers).await?;
    let (id, form) = match path_and_form(path, form) {
        Ok(read) => read,
        Err(e) => return Ok(engine_error_page(Some(&s), e)),
    };
    let token = cookie(&headers, SESSION_COOKIE).unwrap_or("");
    if !state.ui.csrf_ok("session", token, form.csrf.as_deref()) {
        let alert = pages::Alert::engine(
            "csrf_failed",
            "The form's anti-forgery token is missing or wrong; the Gate did not run. Reload the page and try again.".into(),
        );
        return Ok(
            execution_page(&state, &s, &id, StatusCode::FORBIDDEN, Some(&alert), false).await,
        );
    }
    match state.engine.gate_run(&s.principal, &id).await {
        Ok(_) => Ok((
            StatusCode::SEE_OTHER,
            [(
                header::LOCATION,
                format!("/ui/executions/{}", pages::path_segment(&id)),
            )],
        )
            .into_response()),
        Err(e) => {
            let (status, alert) = classify(e);
            Ok(execution_page(&state, &s, &id, status, Some(&alert), false).await)
        }
    }
}

async fn lineage(
    State(state): State<AppState>,
    Peer(peer): Peer,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, Refusal> {
    let s = session(&state, peer, &headers).await?;
    let id = match path_execution(path) {
        Ok(id) => id,
        Err(e) => return Ok(engine_error_page(Some(&s), e)),
    };
    match state.engine.finding_lineage(&s.principal, &id).await {
        Ok(l) => Ok(html(StatusCode::OK, pages::lineage(&s, &l))),
        Err(e) => Ok(engine_error_page(Some(&s), e)),
    }
}
