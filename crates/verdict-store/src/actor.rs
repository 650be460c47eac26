//! Who writes: the actor of every write and the roles allowed to write each table.
//!
//! The same table is the application's check on both backends and, on PostgreSQL, the list of
//! roles granted EXECUTE on each write routine (see the postgres migration).

use crate::error::{Result, StoreError};
use crate::records::{PointerKind, Table};
use verdict_core::contracts::Role;
use verdict_core::contracts::primitives::is_printable_name;

/// The engine's own principal: the name its denials and webhook delivery records are written
/// under, in the system role. On PostgreSQL `<prefix>engine` acted for it in the operator role
/// until schema 19; it writes nothing since.
pub const ENGINE_PRINCIPAL: &str = "verdict-engine";

/// The role an actor writes in: the principal roles of the contracts plus the Gate itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ActorRole {
    /// Runs the system: principals, grants, policies, runs and pointers.
    Operator,
    /// Produces work: subjects, requests and its own check evidence.
    Producer,
    /// Runs deterministic checks: check evidence.
    Runner,
    /// Reviews independently: results and findings for runs it was admitted to.
    Verifier,
    /// A person: human decisions.
    Human,
    /// The Gate: gate decisions and the records of their evaluations, nothing else.
    Gate,
    /// The engine itself, recording refusals and webhook deliveries. No principal holds this
    /// role.
    System,
}

impl ActorRole {
    /// Every role.
    pub const ALL: [Self; 7] = [
        Self::Operator,
        Self::Producer,
        Self::Runner,
        Self::Verifier,
        Self::Human,
        Self::Gate,
        Self::System,
    ];

    /// The name used in audit events and database role names.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Operator => "operator",
            Self::Producer => "producer",
            Self::Runner => "runner",
            Self::Verifier => "verifier",
            Self::Human => "human",
            Self::Gate => "gate",
            Self::System => "system",
        }
    }
}

impl From<Role> for ActorRole {
    fn from(role: Role) -> Self {
        match role {
            Role::Operator => Self::Operator,
            Role::Producer => Self::Producer,
            Role::Runner => Self::Runner,
            Role::Verifier => Self::Verifier,
            Role::Human => Self::Human,
        }
    }
}

/// The principal performing a write and the role it acts in. The store records both in the
/// audit event; authenticating the principal (token to principal) is the caller's job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    /// Principal name (1-256 printable characters).
    pub principal: String,
    /// The role it acts in.
    pub role: ActorRole,
}

impl Actor {
    /// An actor in one of the contract roles (or [`ActorRole::Gate`]).
    pub fn new(principal: impl Into<String>, role: impl Into<ActorRole>) -> Self {
        Self {
            principal: principal.into(),
            role: role.into(),
        }
    }

    /// The Gate, writing decisions under the given principal name.
    pub fn gate(principal: impl Into<String>) -> Self {
        Self::new(principal, ActorRole::Gate)
    }

    /// The engine itself, recording refusals under the given principal name.
    pub fn system(principal: impl Into<String>) -> Self {
        Self::new(principal, ActorRole::System)
    }

    pub(crate) fn check_name(&self) -> Result<()> {
        if is_printable_name(&self.principal) {
            Ok(())
        } else {
            Err(StoreError::Invalid {
                what: "actor",
                message: format!(
                    "principal {:?} is not 1-256 printable characters",
                    self.principal
                ),
            })
        }
    }

    /// Fails when this actor is the engine's own principal in any role but the system role:
    /// the engine writes as the principal who acts, and its own bookkeeping (denials, webhook
    /// deliveries) in the system role (schema 19). On PostgreSQL the database refuses the
    /// engine's identity as well.
    fn check_not_engine(&self) -> Result<()> {
        if self.principal == ENGINE_PRINCIPAL && self.role != ActorRole::System {
            return Err(StoreError::Refused(format!(
                "{ENGINE_PRINCIPAL:?} writes only in the system role, not as {}",
                self.role.as_str()
            )));
        }
        Ok(())
    }

    /// Fails unless this actor's role may append to `table`.
    pub(crate) fn may_append(&self, table: Table) -> Result<()> {
        self.check_name()?;
        self.check_not_engine()?;
        if table.writers().contains(&self.role) {
            Ok(())
        } else {
            Err(self.forbidden(table.name()))
        }
    }

    /// Fails unless this actor's role may move pointers of `kind`.
    pub(crate) fn may_move(&self, kind: PointerKind) -> Result<()> {
        self.check_name()?;
        self.check_not_engine()?;
        if kind.writers().contains(&self.role) {
            Ok(())
        } else {
            Err(self.forbidden(kind.target()))
        }
    }

    pub(crate) fn forbidden(&self, target: &'static str) -> StoreError {
        StoreError::Forbidden {
            principal: self.principal.clone(),
            role: self.role.as_str(),
            target,
        }
    }
}
