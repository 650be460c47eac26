//! The [`Engine`]: who is calling, what their role and grants allow, and the audit of every
//! refusal. The lifecycle steps live in their own modules as further `impl Engine` blocks.

use crate::error::{EngineError, Result, invalid};
use crate::gate_cache::{GATE_CACHE_ENTRIES, GateCache};
use crate::principal_cache::{PRINCIPAL_CACHE_ENTRIES, PrincipalCache};
use crate::token;
use serde_json::Value;
use std::sync::Arc;
use verdict_core::contracts::primitives::{name_skeleton, principal_name_refusal};
use verdict_core::contracts::{Name, Policy, Role, Subject, Timestamp};
use verdict_core::digest::{Digest, DigestKind};
use verdict_store::{
    Access, Actor, ActorRole, DbLogin, DenialRecord, DocKind, ExecutionHead, GateHead, Grant,
    GrantRecord, GrantScope, LoginTaken, PointerKind, PrincipalRecord, Revocation, ScopeKind,
    Store, StoreClock, StoreError, UNAUTHENTICATED, token_fingerprint, token_sha256,
};

/// The principal name the engine writes its own bookkeeping under, in the system role only:
/// denials and webhook delivery records. It is the system, not a person, and holds no token;
/// every other write is the acting principal's own.
pub const ENGINE_PRINCIPAL: &str = verdict_store::actor::ENGINE_PRINCIPAL;

/// The gate used when none is named.
pub const DEFAULT_GATE: &str = "default";

/// An authenticated caller. Only the engine makes one: [`Engine::authenticate`] from a token,
/// or the engine itself where it acts for a principal it already checked. Its fields are
/// private, so no other crate can name someone it did not authenticate:
///
/// ```compile_fail,E0451
/// use verdict_core::contracts::Role;
/// let forged = verdict_engine::Principal {
///     name: "mallory".parse().unwrap(),
///     role: Role::Operator,
/// };
/// ```
///
/// What another crate may do is read one:
///
/// ```
/// fn describe(p: &verdict_engine::Principal) -> String {
///     format!("{} ({})", p.name(), p.role().as_str())
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub(crate) name: Name,
    pub(crate) role: Role,
}

impl Principal {
    /// A principal the engine vouches for: the holder of a token it checked, or a principal of
    /// the store it acts for after checking the caller that asked.
    pub(crate) fn new(name: Name, role: Role) -> Self {
        Self { name, role }
    }

    /// The principal's name.
    #[must_use]
    pub fn name(&self) -> &Name {
        &self.name
    }

    /// The principal's role.
    #[must_use]
    pub fn role(&self) -> Role {
        self.role
    }

    /// The store actor of this principal, in its own role.
    #[must_use]
    pub fn actor(&self) -> Actor {
        Actor::new(self.name.as_str(), self.role)
    }
}

/// The verification lifecycle over one store and one gate.
#[derive(Clone)]
pub struct Engine {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) gate: String,
    /// Gate runs' answers while proven current, shared by every clone of this engine.
    pub(crate) gate_cache: Arc<GateCache>,
    /// Who holds each token the store named, shared by every clone of this engine
    /// (`principal_cache.rs` says why keeping it is safe).
    pub(crate) principals: Arc<PrincipalCache>,
}

/// The name of a new principal (`init`, `principal add`, over any face): a name, not reserved,
/// and only ASCII letters, digits, `.`, `_`, `-`, `@` and `+`
/// ([`principal_name_refusal`]), so that no principal can be named to pass for another
/// (`оperator` with a Cyrillic `о`). Names already stored are never held to it.
fn new_principal_name(name: &str) -> Result<Name> {
    let parsed: Name = name
        .parse()
        .map_err(|e| invalid("principal name")(format!("{e}")))?;
    if name == ENGINE_PRINCIPAL || name == UNAUTHENTICATED {
        return Err(invalid("principal name")(format!("{name:?} is reserved")));
    }
    if let Some((at, c)) = principal_name_refusal(name) {
        let script = crate::review::script(c).map_or_else(String::new, |s| format!(", {s}"));
        return Err(invalid("principal name")(format!(
            "{} holds U+{:04X}{script} at character {}; a principal's name may hold only ASCII \
             letters, digits, '.', '_', '-', '@' and '+', so that it cannot pass for another",
            verdict_core::quote::quoted(name),
            u32::from(c),
            at + 1
        )));
    }
    Ok(parsed)
}

impl Engine {
    /// An engine over `store`, deciding with the policy of gate `gate`, with a gate-run cache of
    /// [`GATE_CACHE_ENTRIES`] executions.
    pub fn new(store: Arc<dyn Store>, gate: impl Into<String>) -> Self {
        Self::with_gate_cache(store, gate, GATE_CACHE_ENTRIES)
    }

    /// [`Engine::new`] with a gate-run cache of at most `entries` executions; 0 makes every gate
    /// run evaluate. The cache answers a gate run only with a decision already stored under
    /// the evaluation key the run would compute (see `gate_cache.rs` for the proof it keeps).
    pub fn with_gate_cache(store: Arc<dyn Store>, gate: impl Into<String>, entries: usize) -> Self {
        Self {
            store,
            gate: gate.into(),
            gate_cache: Arc::new(GateCache::new(entries)),
            principals: Arc::new(PrincipalCache::new(PRINCIPAL_CACHE_ENTRIES)),
        }
    }

    /// How many gate runs this engine (and its clones) answered from the gate-run cache, and
    /// for how many executions it holds an answer: what operators and tests read to see the
    /// cache at work.
    #[must_use]
    pub fn gate_cache_stats(&self) -> (u64, usize) {
        (self.gate_cache.hits(), self.gate_cache.len())
    }

    /// How many authentications this engine (and its clones) answered without asking the
    /// store, from the principals it was told hold their tokens.
    #[must_use]
    pub fn principal_cache_hits(&self) -> u64 {
        self.principals.hits()
    }

    /// The store.
    #[must_use]
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The gate name.
    #[must_use]
    pub fn gate(&self) -> &str {
        &self.gate
    }

    /// The actor denials and webhook delivery records are written as: the engine in the system
    /// role, which no principal holds, so no caller can forge or pre-empt such a record. The
    /// engine never writes in another role (schema 19).
    pub(crate) fn recorder() -> Actor {
        Actor::system(ENGINE_PRINCIPAL)
    }

    /// The store's time: every time that decides authority is read here, from the store's
    /// clock, never from the caller.
    pub async fn now(&self) -> Result<Timestamp> {
        Ok(self.store.now().await?)
    }

    /// The clock the store keeps (chosen once, at `init`).
    pub async fn clock(&self) -> Result<StoreClock> {
        Ok(self.store.clock().await?)
    }

    /// Sets the time of a store on a manual clock (tests and simulations), for this handle; a
    /// store on the system clock refuses it.
    pub async fn set_manual_time(&self, now: &Timestamp) -> Result<()> {
        Ok(self.store.set_manual_time(now).await?)
    }

    /// Where the store is, as it describes itself (a location, never a secret).
    #[must_use]
    pub fn describe_store(&self) -> String {
        self.store.describe()
    }

    /// Initialises an empty store: chooses its clock and creates its first operator, whose
    /// token is returned (shown once). Refused on a store that has any principal: after the
    /// first operator, only an operator adds principals.
    pub async fn init(&self, operator: &str, clock: StoreClock) -> Result<String> {
        let name = new_principal_name(operator)?;
        // Both writes are the first operator's own acts: the store has no principal yet, so
        // on PostgreSQL its routines take this one record of an operator naming itself from
        // whoever may call them (schema version 14), and nothing is written as the engine.
        let first = Actor::new(operator, ActorRole::Operator);
        let token = token::generate()?;
        let record = PrincipalRecord {
            name,
            role: Role::Operator,
            token_sha256: token_sha256(&token),
        };
        // The clock is recorded only while the store has no principal, and with the first
        // operator in one transaction (checked where it is written): this is what makes
        // `init` work once, on an empty store, and never leave a store half-made.
        self.store
            .initialise(&first, clock, &record)
            .await
            .map_err(|e| match e {
                // On PostgreSQL the clock's routine refuses with a permission error once a
                // principal exists (an `init` that lost a race to another finds one there):
                // the same answer as a store initialised long ago.
                StoreError::Refused(_) | StoreError::CasFailed { .. } | StoreError::Denied(_) => {
                    EngineError::Conflict(format!(
                        "this store is initialised; only an operator adds principals ({e})"
                    ))
                }
                other => other.into(),
            })?;
        Ok(token)
    }

    /// The principal holding `token`. A token no principal holds (or none at all), or one
    /// retired by a change of token, is refused, and the attempt is recorded as a denial of
    /// [`UNAUTHENTICATED`] carrying at most a short fingerprint of the token, never the token
    /// or its hash. A token the store named before is answered without asking it again while
    /// no change of token can have been made since (see `principal_cache.rs`); what it may do
    /// is read by each use case, every time.
    pub async fn authenticate(&self, token: &str) -> Result<Principal> {
        let found = if token.is_empty() {
            None
        } else {
            let hash = token_sha256(token);
            // Read before the store is asked: a change of token after this moves it, so what
            // the store answers now is never kept past that change.
            let epoch = self.store.credential_epoch();
            if let Some(known) = self.principals.get(&hash, epoch) {
                return Ok(known);
            }
            self.store
                .principal_by_token_hash(&hash)
                .await?
                .map(|p| (hash, epoch, p))
        };
        match found {
            Some((hash, epoch, p)) => {
                let principal = Principal::new(p.name, p.role);
                self.principals.put(hash, &principal, epoch);
                Ok(principal)
            }
            None => {
                let fingerprint = (!token.is_empty()).then(|| token_fingerprint(token));
                Err(self
                    .record_denial(None, fingerprint, EngineError::Unauthenticated)
                    .await)
            }
        }
    }

    /// Whether some principal holds `token`, asked without recording anything: what a face
    /// asks once an address has spent its failed authentications, so that only a token nobody
    /// holds is turned away unrecorded and a holder sharing the address still gets in.
    pub async fn token_is_held(&self, token: &str) -> Result<bool> {
        if token.is_empty() {
            return Ok(false);
        }
        let hash = token_sha256(token);
        if self
            .principals
            .get(&hash, self.store.credential_epoch())
            .is_some()
        {
            return Ok(true);
        }
        Ok(self.store.principal_by_token_hash(&hash).await?.is_some())
    }

    /// Records a refusal in the store (so it is in the audit chain), then returns it.
    pub(crate) async fn deny(&self, who: &Principal, err: EngineError) -> EngineError {
        if err.is_denial() {
            self.record_denial(Some(who), None, err).await
        } else {
            err
        }
    }

    /// Appends the denial record of `err` (by `who`, or unauthenticated) and returns `err`.
    async fn record_denial(
        &self,
        who: Option<&Principal>,
        token_fingerprint: Option<String>,
        err: EngineError,
    ) -> EngineError {
        let action = match &err {
            EngineError::PermissionDenied { action, .. }
            | EngineError::SelfVerificationDenied { action, .. } => action.clone(),
            EngineError::Store(StoreError::Forbidden { target, .. }) => format!("write {target}"),
            _ => "authenticate".to_owned(),
        };
        // Each refusal is its own row, even when it repeats another word for word.
        let nonce = match token::generate() {
            Ok(n) => n.trim_start_matches(token::TOKEN_PREFIX).to_owned(),
            Err(e) => {
                return EngineError::DenialNotRecorded {
                    refusal: Box::new(err),
                    cause: e.to_string(),
                };
            }
        };
        // The refusal's time is the store's; if even that cannot be read, the refusal stands.
        let at = match self.now().await {
            Ok(at) => at,
            Err(e) => {
                return EngineError::DenialNotRecorded {
                    refusal: Box::new(err),
                    cause: e.to_string(),
                };
            }
        };
        let record = DenialRecord {
            nonce,
            principal: who.map_or(UNAUTHENTICATED, |p| p.name.as_str()).to_owned(),
            role: who.map(|p| p.role),
            code: err.code().to_owned(),
            action: bounded(&action, MAX_DENIAL_ACTION),
            message: bounded(&err.to_string(), MAX_DENIAL_MESSAGE),
            at,
            token_fingerprint,
        };
        let written = match serde_json::to_value(&record) {
            Ok(doc) => match self
                .store
                .put(&Self::recorder(), DocKind::Denial, &doc)
                .await
            {
                Ok(_) => Ok(()),
                // Past its principal's bound in time the refusal is answered as ever, with no
                // row: a principal refused without end cannot grow the chain without end.
                Err(StoreError::DenialBound(why)) => {
                    tracing::warn!(principal = %record.principal, code = %record.code, "{why}");
                    Ok(())
                }
                Err(e) => Err(e.to_string()),
            },
            Err(e) => Err(e.to_string()),
        };
        match written {
            Ok(()) => err,
            // The refusal stands either way; a failed audit write is reported with it.
            Err(cause) => EngineError::DenialNotRecorded {
                refusal: Box::new(err),
                cause,
            },
        }
    }

    pub(crate) async fn require_role(
        &self,
        who: &Principal,
        allowed: &[Role],
        action: &str,
    ) -> Result<()> {
        if allowed.contains(&who.role) {
            return Ok(());
        }
        let names: Vec<&str> = allowed.iter().map(|r| r.as_str()).collect();
        let err = EngineError::PermissionDenied {
            principal: who.name.to_string(),
            role: who.role.as_str(),
            action: action.to_owned(),
            why: format!("only {} principals may", names.join(" or ")),
        };
        Err(self.deny(who, err).await)
    }

    /// Registers a principal (operator only) and returns its token (shown once). Its name is
    /// held to [`new_principal_name`].
    pub async fn add_principal(
        &self,
        caller: &Principal,
        name: &str,
        role: Role,
    ) -> Result<String> {
        self.require_role(caller, &[Role::Operator], "add principals")
            .await?;
        let name = new_principal_name(name)?;
        self.no_principal_reads_like(&name).await?;
        let token = token::generate()?;
        let record = PrincipalRecord {
            name,
            role,
            token_sha256: token_sha256(&token),
        };
        self.store.add_principal(&caller.actor(), &record).await?;
        Ok(token)
    }

    /// Refuses a new principal's `name` whose look-alike skeleton ([`name_skeleton`]) is that
    /// of a principal already stored under another name (`0perator` beside `operator`), naming
    /// that principal. The same name is left to the store, which refuses different content
    /// under a stored key. The store holds the same rule in the transaction that appends the
    /// principal (on PostgreSQL, the database's trigger), so two look-alikes added at once
    /// cannot both be stored.
    async fn no_principal_reads_like(&self, name: &Name) -> Result<()> {
        let skeleton = name_skeleton(name.as_str());
        let stored = self.all_principals().await?;
        match stored
            .iter()
            .find(|p| p.name != *name && name_skeleton(p.name.as_str()) == skeleton)
        {
            Some(other) => Err(invalid("principal name")(format!(
                "{} reads like principal {}, already stored (both read as {}); choose a name \
                 that cannot pass for another",
                verdict_core::quote::quoted(name.as_str()),
                verdict_core::quote::quoted(other.name.as_str()),
                verdict_core::quote::quoted(&skeleton)
            ))),
            None => Ok(()),
        }
    }

    /// Gives principal `name` a PostgreSQL login of its own (operator only): its database
    /// identity may log in with a fresh password, returned once with the store's connection URL
    /// for it. With that login the principal can do only what it may.
    ///
    /// Given again, the login is first taken back and its sessions ended, then given with the
    /// fresh password, so neither the old password nor a session opened with it outlives it; a
    /// session the store may not end refuses the new password and leaves the login taken back.
    pub async fn give_db_login(&self, caller: &Principal, name: &str) -> Result<DbLogin> {
        self.require_role(caller, &[Role::Operator], "give database logins")
            .await?;
        Ok(self.store.give_login(&caller.actor(), name).await?)
    }

    /// Takes principal `name`'s PostgreSQL login back (operator only): its identity no longer
    /// logs in and its open sessions are ended, as [`Engine::give_db_login`] ends them. The
    /// principal keeps its token, grants and acts; giving the login again restores it.
    pub async fn take_db_login(&self, caller: &Principal, name: &str) -> Result<LoginTaken> {
        self.require_role(caller, &[Role::Operator], "take database logins back")
            .await?;
        Ok(self.store.take_login(&caller.actor(), name).await?)
    }

    /// Grants `principal` access to an execution or mission until `expires_at` (operator only).
    #[expect(
        clippy::too_many_arguments,
        reason = "a grant has this many parts; a struct would only rename them"
    )]
    pub async fn grant(
        &self,
        caller: &Principal,
        grant_id: &str,
        principal: &str,
        scope: ScopeKind,
        scope_id: &str,
        access: Access,
        expires_at: &Timestamp,
    ) -> Result<()> {
        self.require_role(caller, &[Role::Operator], "grant access")
            .await?;
        // A grant that has lapsed already would give nothing; storing it would only mislead.
        let now = &self.now().await?;
        if *expires_at <= *now {
            return Err(invalid("grant")(format!(
                "it expires at {expires_at}, which is not after now ({now}); give an expiry in the future"
            )));
        }
        if self.store.principal(principal).await?.is_none() {
            return Err(EngineError::NotFound {
                what: "principal",
                key: principal.to_owned(),
            });
        }
        let parse = |s: &str, what: &'static str| {
            s.parse::<Name>().map_err(|e| invalid(what)(format!("{e}")))
        };
        let record = GrantRecord {
            grant_id: parse(grant_id, "grant id")?,
            principal: parse(principal, "principal name")?,
            scope: GrantScope {
                kind: scope,
                id: parse(scope_id, "grant scope")?,
            },
            access,
            expires_at: expires_at.clone(),
        };
        self.store.add_grant(&caller.actor(), &record).await?;
        Ok(())
    }

    /// Revokes a grant with immediate effect (operator only).
    pub async fn revoke(&self, caller: &Principal, grant_id: &str, reason: &str) -> Result<()> {
        let now = &self.now().await?;
        self.require_role(caller, &[Role::Operator], "revoke grants")
            .await?;
        let revocation = Revocation {
            grant_id: grant_id
                .parse()
                .map_err(|e| invalid("grant id")(format!("{e}")))?,
            revoked_at: now.clone(),
            reason: reason.to_owned(),
        };
        self.store
            .revoke_grant(&caller.actor(), &revocation)
            .await?;
        Ok(())
    }

    /// Revokes principal `name`'s token (operator only): from this append on, the token it
    /// holds authenticates nobody, on this engine at once and on every other within the bound
    /// `principal_cache.rs` states. Its grants stay as they are; an operator's
    /// [`Engine::rotate_token`] gives it a token again.
    pub async fn revoke_token(&self, caller: &Principal, name: &str, reason: &str) -> Result<()> {
        self.change_token(caller, name, false, reason).await?;
        Ok(())
    }

    /// Replaces principal `name`'s token with a fresh one, returned once (stored only as its
    /// SHA-256); the token it held is retired in the same append. An operator replaces anyone's
    /// token (a revoked principal's included); any other principal only its own.
    pub async fn rotate_token(
        &self,
        caller: &Principal,
        name: &str,
        reason: &str,
    ) -> Result<String> {
        self.change_token(caller, name, true, reason)
            .await?
            .ok_or_else(|| EngineError::Conflict("no token was made for the rotation".into()))
    }

    /// A change of `name`'s token: a fresh one when `replace`, else none. Refused, with its
    /// denial and nothing else written, unless the caller is an operator or replaces its own.
    async fn change_token(
        &self,
        caller: &Principal,
        name: &str,
        replace: bool,
        reason: &str,
    ) -> Result<Option<String>> {
        let now = self.now().await?;
        let own = caller.name.as_str() == name;
        if caller.role != Role::Operator && !(replace && own) {
            let err = EngineError::PermissionDenied {
                principal: caller.name.to_string(),
                role: caller.role.as_str(),
                action: if replace {
                    format!("rotate the token of {name:?}")
                } else {
                    format!("revoke the token of {name:?}")
                },
                why: if replace {
                    "only an operator, or the principal itself, may".to_owned()
                } else {
                    "only operator principals may".to_owned()
                },
            };
            return Err(self.deny(caller, err).await);
        }
        name.parse::<Name>()
            .map_err(|e| invalid("principal name")(format!("{e}")))?;
        if self.store.principal(name).await?.is_none() {
            return Err(EngineError::NotFound {
                what: "principal",
                key: name.to_owned(),
            });
        }
        let token = replace.then(token::generate).transpose()?;
        let hash = token.as_deref().map(token_sha256);
        let changed = self
            .store
            .change_token(&caller.actor(), name, hash.as_ref(), &now, reason)
            .await;
        // Forgotten whatever the answer: a change that committed before an error still counts.
        self.principals.clear();
        changed?;
        Ok(token)
    }

    /// Whether `who` holds a grant in force at `now` covering the subject's execution or mission
    /// (with write access when `write`).
    pub(crate) async fn has_grant(
        &self,
        who: &str,
        subject: &Subject,
        write: bool,
        now: &Timestamp,
    ) -> Result<bool> {
        let grants = self.store.grants_for(who).await?;
        Ok(grants.iter().any(|g| {
            g.covers(subject) && g.is_active(now) && (!write || g.record.access == Access::Write)
        }))
    }

    pub(crate) async fn require_grant(
        &self,
        who: &Principal,
        subject: &Subject,
        write: bool,
        action: &str,
        now: &Timestamp,
    ) -> Result<()> {
        if who.role == Role::Operator
            || self
                .has_grant(who.name.as_str(), subject, write, now)
                .await?
        {
            return Ok(());
        }
        Err(self.deny_grant(who, subject, write, action).await)
    }

    /// [`Engine::require_grant`] over `grants`, the caller's grants as just read.
    pub(crate) async fn require_grant_in(
        &self,
        who: &Principal,
        subject: &Subject,
        grants: &[Grant],
        write: bool,
        action: &str,
        now: &Timestamp,
    ) -> Result<()> {
        if who.role == Role::Operator
            || grants.iter().any(|g| {
                g.covers(subject)
                    && g.is_active(now)
                    && (!write || g.record.access == Access::Write)
            })
        {
            return Ok(());
        }
        Err(self.deny_grant(who, subject, write, action).await)
    }

    /// Records and returns the refusal of `action` to `who` for want of a grant on `subject`.
    async fn deny_grant(
        &self,
        who: &Principal,
        subject: &Subject,
        write: bool,
        action: &str,
    ) -> EngineError {
        let err = EngineError::PermissionDenied {
            principal: who.name.to_string(),
            role: who.role.as_str(),
            action: action.to_owned(),
            why: format!(
                "no {} grant in force on execution {:?}",
                if write { "write" } else { "read" },
                subject.execution.id.as_str()
            ),
        };
        self.deny(who, err).await
    }

    /// Refuses a read of something `caller` may not see, and records the refusal as a denial,
    /// exactly as a refused write is recorded.
    pub(crate) async fn deny_read(
        &self,
        caller: &Principal,
        what: String,
        why: &str,
    ) -> EngineError {
        let err = EngineError::PermissionDenied {
            principal: caller.name.to_string(),
            role: caller.role.as_str(),
            action: format!("read {what}"),
            why: why.to_owned(),
        };
        self.deny(caller, err).await
    }

    /// Whether `caller` may read what is about `subject`: an operator always; anyone else
    /// while it holds a grant (read or write) in force at the store's time on the subject's
    /// execution or mission. Being the producer gives no read of its own: a producer acts
    /// under a grant like everyone else, and a revoked grant must end its reads too.
    pub(crate) async fn may_read(&self, caller: &Principal, subject: &Subject) -> Result<bool> {
        if caller.role == Role::Operator {
            return Ok(true);
        }
        let now = &self.now().await?;
        self.has_grant(caller.name.as_str(), subject, false, now)
            .await
    }

    /// Refuses (and records) a read of `what` (the record as the caller named it) about
    /// `subject` unless [`Engine::may_read`]. The refusal names only what the caller named,
    /// never the subject's execution, which a caller without a grant need not know.
    pub(crate) async fn require_read_subject(
        &self,
        caller: &Principal,
        subject: &Subject,
        what: String,
    ) -> Result<()> {
        if self.may_read(caller, subject).await? {
            return Ok(());
        }
        Err(self.deny_unseen(caller, what).await)
    }

    /// Refuses (and records) a read of `what`, a record the caller named by id, to a caller
    /// no grant in force lets read it: worded the same whether the record exists or not, so
    /// the refusal does not tell anyone which ids are in use (an operator, who reads
    /// everything, is told `not_found` instead).
    pub(crate) async fn deny_unseen(&self, caller: &Principal, what: String) -> EngineError {
        self.deny_out_of_scope(caller, format!("read {what}")).await
    }

    /// Refuses (and records) `action`, which names by id a record the caller may not see, in
    /// the words [`Self::deny_unseen`] uses for a read: the same whether the record exists or
    /// not, so a write tells no more than a read which ids are in use. `action` holds only
    /// what the caller named.
    pub(crate) async fn deny_out_of_scope(
        &self,
        caller: &Principal,
        action: String,
    ) -> EngineError {
        let err = EngineError::PermissionDenied {
            principal: caller.name.to_string(),
            role: caller.role.as_str(),
            action,
            why: NO_GRANT_COVERS.to_owned(),
        };
        self.deny(caller, err).await
    }

    /// The stored run `run_id`. One that is not stored is `not_found` to an operator and, to
    /// anyone else, refused as `what` in the words of a run out of scope ([`Self::deny_unseen`]).
    pub(crate) async fn stored_run(
        &self,
        caller: &Principal,
        run_id: &str,
        what: String,
    ) -> Result<verdict_store::Run> {
        match self.store.run(run_id).await? {
            Some(run) => Ok(run),
            None if caller.role == Role::Operator => Err(EngineError::NotFound {
                what: "run",
                key: run_id.to_owned(),
            }),
            None => Err(self.deny_unseen(caller, what).await),
        }
    }

    /// Refuses (and records) a read of `what` about `execution` unless the caller is an
    /// operator or holds a grant in force on it: on its current subject's execution or
    /// mission, or, for an execution that has no subject yet, on the execution by name. A
    /// caller in scope learns that an execution is unknown; anyone else is refused in the same
    /// words for an execution that exists and one that does not.
    pub(crate) async fn require_read(
        &self,
        caller: &Principal,
        execution: &str,
        what: &str,
    ) -> Result<()> {
        self.require_in_scope(
            caller,
            execution,
            format!("read {what} of execution {execution:?}"),
        )
        .await
    }

    /// Refuses (and records) `action`, which names `execution` by id, unless the caller may
    /// see the execution as [`Self::require_read`] says: checked before anything else about
    /// the execution, so that a write out of the caller's scope is refused in the same words
    /// ([`Self::deny_out_of_scope`]) for an execution that exists and one that does not, and
    /// only a caller who may see an execution is told it is missing or what state it is in.
    /// Whether the caller may also do the write is the use case's next check.
    pub(crate) async fn require_in_scope(
        &self,
        caller: &Principal,
        execution: &str,
        action: String,
    ) -> Result<()> {
        if caller.role == Role::Operator {
            return Ok(());
        }
        if let Some(head) = self.execution_head_unscoped(execution).await? {
            let subject = self.subject(&head.subject_digest).await?;
            if self.may_read(caller, &subject).await? {
                return Ok(());
            }
            return Err(self.deny_out_of_scope(caller, action).await);
        }
        let now = &self.now().await?;
        let granted = self
            .store
            .grants_for(caller.name.as_str())
            .await?
            .iter()
            .any(|g| {
                g.is_active(now)
                    && g.record.scope.kind == ScopeKind::Execution
                    && g.record.scope.id.as_str() == execution
            });
        if granted {
            return Ok(());
        }
        Err(self.deny_out_of_scope(caller, action).await)
    }

    /// Stores a policy and makes it the gate's current one by compare-and-set (operator only).
    /// Returns the policy digest.
    pub async fn set_policy(&self, caller: &Principal, policy: &Value) -> Result<Digest> {
        self.set_policy_if(caller, policy, None).await
    }

    /// [`Engine::set_policy`], only while the gate is at the version `expected` names
    /// (`If-Match`): compared with the head the compare-and-set then moves from, so of two
    /// writers naming the same version one moves the gate and the other gets
    /// [`EngineError::PreconditionFailed`]. Found before the write, a mismatch writes nothing;
    /// lost in the compare-and-set, the policy is stored but does not become current.
    pub async fn set_policy_if(
        &self,
        caller: &Principal,
        policy: &Value,
        expected_version: Option<&crate::Precondition>,
    ) -> Result<Digest> {
        self.require_role(caller, &[Role::Operator], "set the gate policy")
            .await?;
        let (read, digest) = verdict_core::contracts::decode::<Policy>(DigestKind::Policy, policy)
            .map_err(|e| invalid("policy")(e.to_string()))?;
        // The Gate's own reading: a policy it would refuse would make every later gate run
        // fail, so it never becomes current.
        let problems = verdict_core::gate::policy_problems(&read);
        if !problems.is_empty() {
            return Err(invalid("policy")(problems.join("; ")));
        }
        let what = format!("gate {:?}", self.gate);
        let expected = self.gate_head().await?;
        if let Some(p) = expected_version {
            let current = expected.as_ref().map(crate::precondition::gate_version);
            if !p.matches(current.as_deref()) {
                return Err(p.refusal(&what, current.as_deref()));
            }
        }
        self.store
            .put(&caller.actor(), DocKind::Policy, policy)
            .await?;
        self.store
            .set_gate_policy(&caller.actor(), &self.gate, expected.as_ref(), &digest)
            .await
            .map_err(|e| crate::subjects::lost_race(e, expected_version, &what))?;
        Ok(digest)
    }

    /// The gate's current policy and revision, if set, for any authenticated caller: the
    /// policy every decision is made under is no secret from those it decides about.
    pub async fn gate_policy_head(&self, _caller: &Principal) -> Result<Option<GateHead>> {
        self.gate_head().await
    }

    /// The gate's current policy, if set.
    pub(crate) async fn gate_head(&self) -> Result<Option<GateHead>> {
        Ok(
            match self.store.pointer(PointerKind::Gate, &self.gate).await? {
                Some(p) => p.gate()?,
                None => None,
            },
        )
    }

    /// The execution's head, or `not_found` when no subject was ever put for it.
    pub(crate) async fn existing_execution_head(&self, execution: &str) -> Result<ExecutionHead> {
        self.execution_head_unscoped(execution)
            .await?
            .ok_or_else(|| EngineError::NotFound {
                what: "execution",
                key: execution.to_owned(),
            })
    }

    /// An execution's current subject and generation, if any. Read by an operator, or by a
    /// principal holding a grant in force on the execution or its mission.
    pub async fn execution_head(
        &self,
        caller: &Principal,
        execution: &str,
    ) -> Result<Option<ExecutionHead>> {
        self.require_read(caller, execution, "the head").await?;
        self.execution_head_unscoped(execution).await
    }

    /// [`Engine::execution_head`] for the engine's own use, for no caller.
    pub(crate) async fn execution_head_unscoped(
        &self,
        execution: &str,
    ) -> Result<Option<ExecutionHead>> {
        Ok(
            match self
                .store
                .pointer(PointerKind::Execution, execution)
                .await?
            {
                Some(p) => p.execution()?,
                None => None,
            },
        )
    }

    pub(crate) async fn subject(&self, digest: &Digest) -> Result<Subject> {
        self.store
            .get(DocKind::Subject, digest)
            .await?
            .ok_or_else(|| EngineError::NotFound {
                what: "subject",
                key: digest.to_string(),
            })?
            .decode()
            .map_err(EngineError::from)
    }

    pub(crate) async fn policy(&self, digest: &Digest) -> Result<Policy> {
        self.store
            .get(DocKind::Policy, digest)
            .await?
            .ok_or_else(|| EngineError::NotFound {
                what: "policy",
                key: digest.to_string(),
            })?
            .decode()
            .map_err(EngineError::from)
    }
}

/// Why a read of a record named by id is refused to a caller out of scope, whether or not the
/// record exists.
const NO_GRANT_COVERS: &str = "no grant in force on its execution or mission covers it";

/// The longest `action` a denial record holds (the store refuses a longer one).
const MAX_DENIAL_ACTION: usize = 1024;
/// The longest `message` a denial record holds (the store refuses a longer one).
const MAX_DENIAL_MESSAGE: usize = 4096;

/// `text` fit for a denial record at most `max` characters long. Parts of a refusal come from
/// the caller (an execution id in a path, a name), and a denial the store refuses is a refusal
/// nobody can audit: so the text is cut, visibly, rather than the record lost, and U+0000,
/// which no backend stores, is shown as U+FFFD.
fn bounded(text: &str, max: usize) -> String {
    const CUT: &str = " [truncated]";
    let text = text.replace('\0', "\u{fffd}");
    if text.chars().count() <= max {
        return text;
    }
    let mut out: String = text.chars().take(max - CUT.len()).collect();
    out.push_str(CUT);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denial_text_is_cut_visibly_and_never_holds_u0000() {
        let long = "a".repeat(5000);
        let cut = bounded(&long, MAX_DENIAL_ACTION);
        assert_eq!(cut.chars().count(), MAX_DENIAL_ACTION);
        assert!(cut.ends_with(" [truncated]"));
        assert_eq!(bounded("read x", MAX_DENIAL_ACTION), "read x");
        assert_eq!(bounded("a\0b", MAX_DENIAL_ACTION), "a\u{fffd}b");
        let wide = "é".repeat(MAX_DENIAL_MESSAGE + 1);
        assert_eq!(
            bounded(&wide, MAX_DENIAL_MESSAGE).chars().count(),
            MAX_DENIAL_MESSAGE
        );
    }
}
