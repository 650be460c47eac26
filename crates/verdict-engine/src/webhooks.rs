//! Webhook registrations: where an operator asks for lifecycle events ([`crate::events`]) to be
//! pushed. A registration (`verdict.webhook/v1`) is the registering operator's own act, stored
//! among the requests as that operator, so it is in the audit chain, and believed only when the
//! chain shows a stored operator wrote it, in the operator role, naming itself as
//! `registered_by`; a removal (`verdict.webhook-removal/v1`: no delivery after it) likewise,
//! naming its writer as `removed_by`. A registration never holds the secret: only the SHA-256
//! of it, so whoever delivers can tell that the secret it derives is still the one shown at
//! registration. Each delivered event (`verdict.webhook-delivered/v1`: where delivery resumes
//! after a restart) and each delivery that failed every attempt (`verdict.webhook-failure/v1`)
//! is the engine's bookkeeping, not authority: written by the engine in the system role, the
//! only records besides denials that role may write.
//!
//! Records the engine's own principal wrote in the operator role are believed too: every
//! webhook record was written so before schema 19, and since then the store refuses that
//! principal any write outside the system role (on PostgreSQL the database refuses the
//! engine's identity), so such a record is necessarily an older one.

use crate::engine::{ENGINE_PRINCIPAL, Engine, Principal};
use crate::error::{EngineError, Result, invalid};
use crate::events::{EventKind, EventPage};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use verdict_core::contracts::{Name, Role, Timestamp};
use verdict_core::digest::Digest;
use verdict_store::{ActorRole, Duty, DutyLease, Stored, Table};

/// Schema of a webhook registration.
pub const WEBHOOK_SCHEMA: &str = "verdict.webhook/v1";
/// Schema of the record of a delivery that failed every attempt.
pub const WEBHOOK_FAILURE_SCHEMA: &str = "verdict.webhook-failure/v1";
/// Schema of the record of an event a webhook's receiver took.
pub const WEBHOOK_DELIVERED_SCHEMA: &str = "verdict.webhook-delivered/v1";
/// Schema of a webhook's removal.
pub const WEBHOOK_REMOVAL_SCHEMA: &str = "verdict.webhook-removal/v1";

/// The record of one event a webhook's receiver answered with a 2xx
/// (`verdict.webhook-delivered/v1`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookDelivered {
    /// Always [`WEBHOOK_DELIVERED_SCHEMA`].
    pub schema: String,
    /// The webhook.
    pub webhook: Name,
    /// The event's id (its audit seq).
    pub event: u64,
    /// When (the store's time).
    pub at: Timestamp,
}

/// A webhook's removal (`verdict.webhook-removal/v1`): nothing is delivered to it after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookRemoval {
    /// Always [`WEBHOOK_REMOVAL_SCHEMA`].
    pub schema: String,
    /// The webhook.
    pub webhook: Name,
    /// The operator who removed it.
    pub removed_by: Name,
    /// When (the store's time).
    pub at: Timestamp,
}

/// One of the engine's webhook records, as the delivery loop reads them in audit order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WebhookNote {
    /// A registration.
    Registered(Webhook),
    /// An event taken by the receiver.
    Delivered(WebhookDelivered),
    /// An event given up on after every attempt.
    Failed(WebhookFailure),
    /// A removal.
    Removed(WebhookRemoval),
}

impl WebhookNote {
    /// The webhook it is about.
    #[must_use]
    pub fn webhook(&self) -> &str {
        match self {
            Self::Registered(w) => w.id.as_str(),
            Self::Delivered(d) => d.webhook.as_str(),
            Self::Failed(f) => f.webhook.as_str(),
            Self::Removed(r) => r.webhook.as_str(),
        }
    }
}

/// Which events a webhook receives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum WebhookScope {
    /// Every execution's.
    All,
    /// One execution's.
    Execution {
        /// The execution id.
        id: Name,
    },
    /// The executions of one mission.
    Mission {
        /// The mission.
        id: Name,
    },
}

/// A webhook registration (`verdict.webhook/v1`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Webhook {
    /// Always [`WEBHOOK_SCHEMA`].
    pub schema: String,
    /// The webhook's id, unique in the store.
    pub id: Name,
    /// Where events are posted: `https`, or `http` to a loopback address.
    pub url: String,
    /// Which executions' events.
    pub scope: WebhookScope,
    /// Which event types (see [`EventKind::NAMES`]); empty: all of them.
    pub event_types: Vec<String>,
    /// `sha256:` of the secret's bytes: the secret itself is never stored.
    pub secret_sha256: Digest,
    /// The operator who registered it; events are read as this principal.
    pub registered_by: Name,
    /// When.
    pub at: Timestamp,
}

/// What a caller asks to register.
#[derive(Debug, Clone)]
pub struct NewWebhook {
    /// The webhook's id.
    pub id: String,
    /// Where to post.
    pub url: String,
    /// Which executions' events.
    pub scope: WebhookScope,
    /// Which event types; empty: all.
    pub event_types: Vec<String>,
    /// `sha256:` of the secret the deliverer will sign with.
    pub secret_sha256: Digest,
}

/// The record of one event whose delivery failed every attempt (`verdict.webhook-failure/v1`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookFailure {
    /// Always [`WEBHOOK_FAILURE_SCHEMA`].
    pub schema: String,
    /// The webhook.
    pub webhook: Name,
    /// The event's id (its audit seq).
    pub event: u64,
    /// How many attempts were made.
    pub attempts: u32,
    /// What the last attempt ended with.
    pub error: String,
    /// When it was given up (the store's time).
    pub at: Timestamp,
}

/// Whether `url` is one events may be posted to: `https`, or plain `http` only to a loopback
/// address (`localhost`, 127.0.0.0/8, `::1`), where no network sees the body. No credentials
/// in the URL; no spaces or control characters.
pub fn check_url(url: &str) -> std::result::Result<(), String> {
    if url.len() > 2048 || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(
            "the URL is over 2048 characters or holds whitespace or control characters".into(),
        );
    }
    let (https, rest) = if let Some(rest) = url.strip_prefix("https://") {
        (true, rest)
    } else if let Some(rest) = url.strip_prefix("http://") {
        (false, rest)
    } else {
        return Err(format!("{url:?} is neither https:// nor http://"));
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return Err("the URL carries credentials; use the signature instead".into());
    }
    let host = if let Some(bracketed) = authority.strip_prefix('[') {
        bracketed.split(']').next().unwrap_or_default()
    } else {
        authority.split(':').next().unwrap_or_default()
    };
    if host.is_empty() {
        return Err(format!("{url:?} names no host"));
    }
    if https {
        return Ok(());
    }
    if verdict_core::loopback::is_loopback_host(host) {
        Ok(())
    } else {
        Err(format!(
            "plain http is accepted only to a loopback address, not {host:?}; use https"
        ))
    }
}

impl Engine {
    /// Registers a webhook (operator only; anyone else is refused and the refusal recorded).
    /// The URL must pass [`check_url`], every event type must be known and the id unused.
    pub async fn register_webhook(&self, caller: &Principal, new: NewWebhook) -> Result<Webhook> {
        self.require_role(caller, &[Role::Operator], "register webhooks")
            .await?;
        let id: Name = new
            .id
            .parse()
            .map_err(|e| invalid("webhook id")(format!("{e}")))?;
        check_url(&new.url).map_err(invalid("webhook url"))?;
        if let Some(unknown) = new
            .event_types
            .iter()
            .find(|t| !EventKind::NAMES.contains(&t.as_str()))
        {
            return Err(invalid("webhook event types")(format!(
                "{unknown:?} is not one of {}",
                EventKind::NAMES.join(", ")
            )));
        }
        let (existing, _) = self.webhook_registrations_after(0).await?;
        if existing.iter().any(|(_, w)| w.id == id) {
            return Err(EngineError::Conflict(format!(
                "webhook {:?} is registered already",
                id.as_str()
            )));
        }
        let hook = Webhook {
            schema: WEBHOOK_SCHEMA.to_owned(),
            id,
            url: new.url,
            scope: new.scope,
            event_types: new.event_types,
            secret_sha256: new.secret_sha256,
            registered_by: caller.name.clone(),
            at: self.now().await?,
        };
        self.put_note_as(&caller.actor(), &hook).await?;
        Ok(hook)
    }

    /// Every webhook registered and not removed (operator only).
    pub async fn webhooks(&self, caller: &Principal) -> Result<Vec<Webhook>> {
        self.require_role(caller, &[Role::Operator], "list webhooks")
            .await?;
        let (notes, _) = self.webhook_notes_after(0).await?;
        let removed: Vec<String> = notes
            .iter()
            .filter(|(_, n)| matches!(n, WebhookNote::Removed(_)))
            .map(|(_, n)| n.webhook().to_owned())
            .collect();
        Ok(notes
            .into_iter()
            .filter_map(|(_, n)| match n {
                WebhookNote::Registered(w) if !removed.iter().any(|r| r == w.id.as_str()) => {
                    Some(w)
                }
                _ => None,
            })
            .collect())
    }

    /// Removes a webhook (operator only; anyone else is refused and the refusal recorded):
    /// nothing is delivered to it from then on. Its id is not reused. An unknown id is
    /// `not_found`, one removed already a conflict.
    pub async fn remove_webhook(&self, caller: &Principal, id: &str) -> Result<WebhookRemoval> {
        self.require_role(caller, &[Role::Operator], "remove webhooks")
            .await?;
        let (notes, _) = self.webhook_notes_after(0).await?;
        let mine = || notes.iter().filter(|(_, n)| n.webhook() == id);
        let Some(webhook) = mine().find_map(|(_, n)| match n {
            WebhookNote::Registered(w) => Some(w.id.clone()),
            _ => None,
        }) else {
            return Err(EngineError::NotFound {
                what: "webhook",
                key: id.to_owned(),
            });
        };
        if mine().any(|(_, n)| matches!(n, WebhookNote::Removed(_))) {
            return Err(EngineError::Conflict(format!(
                "webhook {id:?} is removed already"
            )));
        }
        let removal = WebhookRemoval {
            schema: WEBHOOK_REMOVAL_SCHEMA.to_owned(),
            webhook,
            removed_by: caller.name.clone(),
            at: self.now().await?,
        };
        self.put_note_as(&caller.actor(), &removal).await?;
        Ok(removal)
    }

    /// Records that `hook`'s receiver took event `event`: delivery resumes after it.
    pub async fn record_webhook_delivered(
        &self,
        hook: &Webhook,
        event: u64,
    ) -> Result<WebhookDelivered> {
        let record = WebhookDelivered {
            schema: WEBHOOK_DELIVERED_SCHEMA.to_owned(),
            webhook: hook.id.clone(),
            event,
            at: self.now().await?,
        };
        self.put_note_as(&Self::recorder(), &record).await?;
        Ok(record)
    }

    /// The registrations stored after audit seq `after`, each with its seq, and the seq read
    /// to.
    pub async fn webhook_registrations_after(
        &self,
        after: u64,
    ) -> Result<(Vec<(u64, Webhook)>, u64)> {
        let (notes, read_to) = self.webhook_notes_after(after).await?;
        Ok((
            notes
                .into_iter()
                .filter_map(|(seq, n)| match n {
                    WebhookNote::Registered(w) => Some((seq, w)),
                    _ => None,
                })
                .collect(),
            read_to,
        ))
    }

    /// The webhook records stored after audit seq `after` (registrations, deliveries,
    /// failures, removals), each with its seq, in audit order, and the seq read to; each is
    /// believed only when the audit chain names a writer who may write it (see
    /// `webhook_note_rightful`). The delivery loop's own read, for no caller (as
    /// `verify_store` is): no record holds a secret, and the events a webhook receives are read
    /// as its registering operator.
    pub async fn webhook_notes_after(&self, after: u64) -> Result<(Vec<(u64, WebhookNote)>, u64)> {
        const PAGE: u32 = 500;
        let mut out = Vec::new();
        let mut cursor = after;
        loop {
            let rows = self
                .store
                .rows(Table::VerificationRequests, cursor, PAGE)
                .await?;
            let Some(last) = rows.last() else {
                return Ok((out, cursor));
            };
            cursor = last.seq;
            let full = rows.len() == PAGE as usize;
            for row in rows {
                let value = row.value()?;
                let schema = value.get("schema").and_then(serde_json::Value::as_str);
                let known = [
                    WEBHOOK_SCHEMA,
                    WEBHOOK_DELIVERED_SCHEMA,
                    WEBHOOK_FAILURE_SCHEMA,
                    WEBHOOK_REMOVAL_SCHEMA,
                ];
                if !schema.is_some_and(|s| known.contains(&s)) {
                    continue;
                }
                use verdict_core::contracts::decode_plain;
                let note = match schema {
                    Some(WEBHOOK_SCHEMA) => decode_plain(&value).ok().map(WebhookNote::Registered),
                    Some(WEBHOOK_DELIVERED_SCHEMA) => {
                        decode_plain(&value).ok().map(WebhookNote::Delivered)
                    }
                    Some(WEBHOOK_FAILURE_SCHEMA) => {
                        decode_plain(&value).ok().map(WebhookNote::Failed)
                    }
                    _ => decode_plain(&value).ok().map(WebhookNote::Removed),
                };
                if let Some(note) = note
                    && self.webhook_note_rightful(&row, &note).await?
                {
                    out.push((row.seq, note));
                }
            }
            if !full {
                return Ok((out, cursor));
            }
        }
    }

    /// Whether the audit chain names a writer who may write `note` (decoded from `row`): for a
    /// registration or a removal, a stored operator in the operator role that the record names
    /// as `registered_by` or `removed_by`; for a delivery or a failure, the engine in the
    /// system role. The engine in the operator role for any of them: records written before
    /// schema 19, after which the store refuses it (and the database its identity), so such a
    /// record is necessarily older. Anyone else's record of that shape is ignored.
    async fn webhook_note_rightful(&self, row: &Stored, note: &WebhookNote) -> Result<bool> {
        let Some((principal, role)) = self.writer_of(row).await? else {
            return Ok(false);
        };
        if principal == ENGINE_PRINCIPAL {
            return Ok(role == ActorRole::Operator.as_str()
                || (role == ActorRole::System.as_str()
                    && matches!(note, WebhookNote::Delivered(_) | WebhookNote::Failed(_))));
        }
        let named = match note {
            WebhookNote::Registered(w) => &w.registered_by,
            WebhookNote::Removed(r) => &r.removed_by,
            WebhookNote::Delivered(_) | WebhookNote::Failed(_) => return Ok(false),
        };
        if role != ActorRole::Operator.as_str() || named.as_str() != principal {
            return Ok(false);
        }
        self.stored_operator(&principal).await
    }

    /// The events `hook` receives after audit seq `after` (reading at most `limit` audit
    /// events): those its registering operator may read, within its scope and types. A
    /// registrant that is no longer an operator receives nothing.
    pub async fn webhook_events(
        &self,
        hook: &Webhook,
        after: u64,
        limit: u32,
    ) -> Result<EventPage> {
        let registrant = match self.store.principal(hook.registered_by.as_str()).await? {
            Some(p) if p.role == Role::Operator => Principal::new(p.name, p.role),
            _ => {
                return Ok(EventPage {
                    events: Vec::new(),
                    read_to: after,
                });
            }
        };
        let mut page = self.events_after(&registrant, after, limit).await?;
        page.events.retain(|e| {
            let in_scope = match &hook.scope {
                WebhookScope::All => true,
                WebhookScope::Execution { id } => e.execution.as_deref() == Some(id.as_str()),
                WebhookScope::Mission { id } => e.mission.as_deref() == Some(id.as_str()),
            };
            in_scope
                && (hook.event_types.is_empty()
                    || hook.event_types.iter().any(|t| t == e.kind.name()))
        });
        Ok(page)
    }

    /// Takes or renews the webhook delivery duty for `holder` (a label unique to one running
    /// server) for `lease` from the store's time, and returns the lease as it stands: `holder`
    /// delivers only while the answer names it. One server at a time holds it, and another
    /// takes it once its holder stops renewing and the lease lapses. Written by the engine in
    /// the system role, outside the audit chain (operational state, as the job queue is).
    pub async fn hold_webhook_delivery(
        &self,
        holder: &str,
        lease: std::time::Duration,
    ) -> Result<DutyLease> {
        Ok(self
            .store
            .queue()
            .hold_duty(&Self::recorder(), Duty::WebhookDelivery, holder, lease)
            .await?)
    }

    /// Records that event `event` was not delivered to `hook` after `attempts` attempts.
    pub async fn record_webhook_failure(
        &self,
        hook: &Webhook,
        event: u64,
        attempts: u32,
        error: &str,
    ) -> Result<WebhookFailure> {
        let record = WebhookFailure {
            schema: WEBHOOK_FAILURE_SCHEMA.to_owned(),
            webhook: hook.id.clone(),
            event,
            attempts,
            error: error.chars().take(1000).collect(),
            at: self.now().await?,
        };
        self.put_note_as(&Self::recorder(), &record).await?;
        Ok(record)
    }
}

#[cfg(test)]
mod tests {
    use super::check_url;

    #[test]
    fn only_https_or_loopback_http_is_accepted() {
        for ok in [
            "https://hooks.example.com/verdict",
            "http://127.0.0.1:8080/x",
            "http://localhost/x",
            "http://[::1]:9000/",
        ] {
            assert!(check_url(ok).is_ok(), "{ok}");
        }
        for bad in [
            "http://hooks.example.com/x",
            "http://10.0.0.1/x",
            "http://127.0.0.1.example.com/x",
            "ftp://127.0.0.1/",
            "https://user:pw@example.com/",
            "https://",
            "https://example.com/a b",
        ] {
            assert!(check_url(bad).is_err(), "{bad}");
        }
    }
}
