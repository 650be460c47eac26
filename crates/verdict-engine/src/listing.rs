//! Reading what the store holds about principals, grants, policies, executions and runs, as
//! the authenticated caller. An operator sees everything; anyone else sees themselves, their
//! own grants, the gates' policies, and the executions and runs their grants cover. A token's
//! hash is never shown. A refused read is recorded as a denial, like a refused write.

use crate::engine::{Engine, Principal};
use crate::error::{EngineError, Result};
use serde::Serialize;
use verdict_core::contracts::{Name, Policy, Role, Subject, Timestamp};
use verdict_core::digest::Digest;
use verdict_store::{About, Access, DocKind, Grant, GrantRecord, PointerKind, ScopeKind};

/// How many rows a listing reads from the store at a time.
const PAGE: u32 = 500;

/// A principal, without its token hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PrincipalView {
    /// Name.
    pub name: Name,
    /// Role.
    pub role: Role,
}

/// A grant with its state at `now`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GrantView {
    /// Grant id.
    pub grant_id: Name,
    /// Who holds it.
    pub principal: Name,
    /// `execution` or `mission`.
    pub scope: &'static str,
    /// The execution or mission id.
    pub scope_id: Name,
    /// `read` or `write`.
    pub access: &'static str,
    /// When it lapses.
    pub expires_at: Timestamp,
    /// When it was revoked, if it was.
    pub revoked_at: Option<Timestamp>,
    /// Why it was revoked.
    pub revoked_because: Option<String>,
    /// Whether it is in force at `now` (not expired, not revoked).
    pub in_force: bool,
}

/// A gate and its current policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GateView {
    /// Gate name.
    pub gate: String,
    /// Its current policy.
    pub policy_digest: Digest,
    /// How many times its policy was set.
    pub revision: u64,
}

/// An execution: its current subject and every subject it had.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExecutionView {
    /// Execution id.
    pub execution: String,
    /// Current subject.
    pub subject_digest: Digest,
    /// Its generation.
    pub generation: u64,
    /// Every subject put for it, oldest first (empty in a listing).
    pub subjects: Vec<SubjectEntry>,
}

/// One subject of an execution.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SubjectEntry {
    /// Its digest.
    pub subject_digest: Digest,
    /// Its generation.
    pub generation: u64,
    /// Its producer.
    pub producer: Name,
}

/// A verifier run: its admission and status history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunDetail {
    /// Run id.
    pub run_id: Name,
    /// Verifier principal.
    pub verifier: Name,
    /// Verifier class.
    pub class: String,
    /// The request it serves.
    pub request_digest: Digest,
    /// The subject it verifies.
    pub subject_digest: Digest,
    /// The generation it was admitted for.
    pub generation: u64,
    /// Its statuses in the order the store recorded them (`started`, then one terminal), with
    /// the reason of an `unavailable` one, up to its end: an event recorded after the end (which
    /// only a verifier's own login could write, before schema version 43) ends nothing and is
    /// not shown.
    pub events: Vec<RunEventView>,
}

/// One status change of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunEventView {
    /// The status.
    pub status: &'static str,
    /// Why, for `unavailable`.
    pub reason: Option<&'static str>,
}

fn grant_view(g: &Grant, now: &Timestamp) -> GrantView {
    let r: &GrantRecord = &g.record;
    GrantView {
        grant_id: r.grant_id.clone(),
        principal: r.principal.clone(),
        scope: match r.scope.kind {
            ScopeKind::Execution => "execution",
            ScopeKind::Mission => "mission",
        },
        scope_id: r.scope.id.clone(),
        access: match r.access {
            Access::Read => "read",
            Access::Write => "write",
        },
        expires_at: r.expires_at.clone(),
        revoked_at: g.revocation.as_ref().map(|v| v.revoked_at.clone()),
        revoked_because: g.revocation.as_ref().map(|v| v.reason.clone()),
        in_force: g.is_active(now),
    }
}

impl Engine {
    /// The principals `caller` may see: every one for an operator, else itself.
    pub async fn list_principals(&self, caller: &Principal) -> Result<Vec<PrincipalView>> {
        if caller.role != Role::Operator {
            return Ok(vec![PrincipalView {
                name: caller.name.clone(),
                role: caller.role,
            }]);
        }
        Ok(self
            .all_principals()
            .await?
            .into_iter()
            .map(|p| PrincipalView {
                name: p.name,
                role: p.role,
            })
            .collect())
    }

    /// Every principal's name and role, a page at a time (never its token's hash).
    pub(crate) async fn all_principals(&self) -> Result<Vec<verdict_store::PrincipalInfo>> {
        let mut out = Vec::new();
        loop {
            let after = out
                .last()
                .map_or(0, |p: &verdict_store::PrincipalInfo| p.seq);
            let page = self.store.principals(after, PAGE).await?;
            let done = page.len() < PAGE as usize;
            out.extend(page);
            if done {
                return Ok(out);
            }
        }
    }

    /// One principal and its grants: any for an operator, else only the caller itself.
    pub async fn show_principal(
        &self,
        caller: &Principal,
        name: &str,
    ) -> Result<(PrincipalView, Vec<GrantView>)> {
        let now = &self.now().await?;
        if caller.role != Role::Operator && caller.name.as_str() != name {
            return Err(self
                .deny_read(
                    caller,
                    format!("principal {name:?}"),
                    "only operators see other principals",
                )
                .await);
        }
        let p = self
            .store
            .principal(name)
            .await?
            .ok_or_else(|| EngineError::NotFound {
                what: "principal",
                key: name.to_owned(),
            })?;
        let grants = self
            .store
            .grants_for(name)
            .await?
            .iter()
            .map(|g| grant_view(g, now))
            .collect();
        Ok((
            PrincipalView {
                name: p.name,
                role: p.role,
            },
            grants,
        ))
    }

    /// The grants `caller` may see, optionally only those of one principal: every grant for
    /// an operator, else the caller's own.
    pub async fn list_grants(
        &self,
        caller: &Principal,
        principal: Option<&str>,
    ) -> Result<Vec<GrantView>> {
        let now = &self.now().await?;
        let names: Vec<String> = match (caller.role, principal) {
            (Role::Operator, Some(p)) => vec![p.to_owned()],
            (Role::Operator, None) => self
                .all_principals()
                .await?
                .iter()
                .map(|p| p.name.to_string())
                .collect(),
            (_, Some(p)) if p != caller.name.as_str() => {
                return Err(self
                    .deny_read(
                        caller,
                        format!("the grants of {p:?}"),
                        "only operators see other principals' grants",
                    )
                    .await);
            }
            (_, _) => vec![caller.name.to_string()],
        };
        let mut out = Vec::new();
        for name in names {
            out.extend(
                self.store
                    .grants_for(&name)
                    .await?
                    .iter()
                    .map(|g| grant_view(g, now)),
            );
        }
        Ok(out)
    }

    /// One grant, if `caller` may see it (see [`Engine::list_grants`]).
    pub async fn show_grant(&self, caller: &Principal, grant_id: &str) -> Result<GrantView> {
        self.list_grants(caller, None)
            .await?
            .into_iter()
            .find(|g| g.grant_id.as_str() == grant_id)
            .ok_or_else(|| EngineError::NotFound {
                what: "grant",
                key: grant_id.to_owned(),
            })
    }

    /// Every gate and its current policy. Policies are what work is held to, so every
    /// authenticated principal may read them.
    pub async fn list_gates(&self, _caller: &Principal) -> Result<Vec<GateView>> {
        let mut out = Vec::new();
        for p in self.store.pointers(PointerKind::Gate).await? {
            if let Some(head) = p.gate()? {
                out.push(GateView {
                    gate: p.name,
                    policy_digest: head.policy_digest,
                    revision: head.revision,
                });
            }
        }
        Ok(out)
    }

    /// A stored policy by digest, or this engine's gate's current one.
    pub async fn show_policy(
        &self,
        _caller: &Principal,
        digest: Option<&Digest>,
    ) -> Result<(Digest, Policy)> {
        let digest = match digest {
            Some(d) => d.clone(),
            None => {
                self.gate_head()
                    .await?
                    .ok_or_else(|| EngineError::NoSuchGate(self.gate.clone()))?
                    .policy_digest
            }
        };
        let policy = self.policy(&digest).await?;
        Ok((digest, policy))
    }

    /// The executions `caller` may read, each with its current subject.
    pub async fn list_executions(&self, caller: &Principal) -> Result<Vec<ExecutionView>> {
        let mut out = Vec::new();
        for p in self.store.pointers(PointerKind::Execution).await? {
            let Some(head) = p.execution()? else { continue };
            let subject = self.subject(&head.subject_digest).await?;
            if self.may_read(caller, &subject).await? {
                out.push(ExecutionView {
                    execution: p.name,
                    subject_digest: head.subject_digest,
                    generation: head.generation,
                    subjects: Vec::new(),
                });
            }
        }
        Ok(out)
    }

    /// One execution with every subject it had; needs a read grant on it.
    pub async fn show_execution(
        &self,
        caller: &Principal,
        execution: &str,
    ) -> Result<ExecutionView> {
        // Scope first, so an execution that does not exist is news only to whom may read it.
        self.require_read(caller, execution, "the subjects").await?;
        let head = self.existing_execution_head(execution).await?;
        let mut subjects = Vec::new();
        for row in self
            .store
            .list(DocKind::Subject, &About::Execution(execution.to_owned()))
            .await?
        {
            let s: Subject = row.decode()?;
            subjects.push(SubjectEntry {
                subject_digest: row.digest,
                generation: s.execution.generation,
                producer: s.producer.principal,
            });
        }
        Ok(ExecutionView {
            execution: execution.to_owned(),
            subject_digest: head.subject_digest,
            generation: head.generation,
            subjects,
        })
    }

    /// One run: its verifier may read it, and so may anyone who may read its subject.
    pub async fn show_run(&self, caller: &Principal, run_id: &str) -> Result<RunDetail> {
        let named = || format!("run {run_id:?}");
        let run = self.stored_run(caller, run_id, named()).await?;
        let a = &run.admission;
        let subject = self.subject(&a.subject_digest).await?;
        if a.verifier != caller.name && !self.may_read(caller, &subject).await? {
            return Err(self.deny_unseen(caller, named()).await);
        }
        Ok(RunDetail {
            run_id: a.run_id.clone(),
            verifier: a.verifier.clone(),
            class: a.class.to_string(),
            request_digest: a.request_digest.clone(),
            subject_digest: a.subject_digest.clone(),
            generation: a.admitted_generation,
            events: run
                .up_to_end()
                .iter()
                .map(|e| RunEventView {
                    status: e.status.as_str(),
                    reason: e.reason.map(|r| r.as_str()),
                })
                .collect(),
        })
    }

    /// The runs of an execution (every subject of it), in admission order; needs a read grant
    /// on it.
    pub async fn list_runs(&self, caller: &Principal, execution: &str) -> Result<Vec<RunDetail>> {
        // The read check is the execution's.
        self.show_execution(caller, execution).await?;
        let mut out = Vec::new();
        for note in self.admission_notes_unscoped(execution).await? {
            out.push(self.show_run(caller, note.run_id.as_str()).await?);
        }
        Ok(out)
    }
}
