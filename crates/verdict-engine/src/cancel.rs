//! Cancellation (docs/spec/applicability.md, "the execution is live"): an operator, or the producer for its
//! own execution, cancels an execution; an operator cancels a verifier run. Each is recorded
//! with its reason ([`Cancellation`]) and audited; a refused cancellation writes only its denial.

use crate::engine::{Engine, Principal};
use crate::error::{EngineError, Result, invalid};
use crate::notes::{CANCELLATION_SCHEMA, Cancellation, Cancelled, Requester};
use verdict_core::contracts::Role;
use verdict_store::{About, RunStatus};

impl Engine {
    /// Cancels an execution: no decision of it applies from now on (`execution_cancelled`),
    /// it takes no new subject, request, run, gate run or human decision, and each of its runs
    /// still open is cancelled, so a result they submit later is history only. An operator may
    /// cancel any execution; a producer only one whose current subject it produced, under a
    /// write grant in force.
    pub async fn cancel_execution(
        &self,
        caller: &Principal,
        execution: &str,
        reason: &str,
    ) -> Result<Cancellation> {
        let now = &self.now().await?;
        self.require_role(
            caller,
            &[Role::Operator, Role::Producer],
            "cancel executions",
        )
        .await?;
        // Scope first: a producer no grant lets see the execution is refused alike whether it
        // exists or not, and learns neither its producer nor whether it was cancelled.
        self.require_in_scope(caller, execution, format!("cancel execution {execution:?}"))
            .await?;
        let head = self.existing_execution_head(execution).await?;
        let subject = self.subject(&head.subject_digest).await?;
        if caller.role == Role::Producer && subject.producer.principal != caller.name {
            let err = EngineError::PermissionDenied {
                principal: caller.name.to_string(),
                role: caller.role.as_str(),
                action: format!("cancel execution {execution:?}"),
                why: format!(
                    "a producer cancels only its own execution; its subject names producer {:?}",
                    subject.producer.principal.as_str()
                ),
            };
            return Err(self.deny(caller, err).await);
        }
        self.require_grant(caller, &subject, true, "cancel an execution", now)
            .await?;
        let reason = required_reason(reason)?;
        if let Some(done) = self.execution_cancellation_unscoped(execution).await? {
            return Err(already_cancelled(execution, &done));
        }
        let record = Cancellation {
            schema: CANCELLATION_SCHEMA.to_owned(),
            cancelled: Cancelled::Execution {
                id: subject
                    .execution
                    .id
                    .as_str()
                    .parse()
                    .map_err(|e| invalid("execution id")(format!("{e}")))?,
            },
            subject_digest: head.subject_digest.clone(),
            by: requester(caller),
            reason,
            at: now.clone(),
        };
        // The record first: from here on the execution is cancelled whatever happens to the
        // runs below, and a run left open by a crash is fenced at submission. The record and
        // the runs' ends are the canceller's own acts, written as the caller.
        let writer = caller.actor();
        self.put_note_as(&writer, &record).await?;
        for note in self.admission_notes_unscoped(execution).await? {
            let run_id = note.run_id.as_str();
            if let Some(run) = self.store.run(run_id).await?
                && !run.status().is_some_and(RunStatus::is_terminal)
            {
                self.store
                    .record_run_status(&writer, run_id, RunStatus::Cancelled, None)
                    .await?;
            }
        }
        Ok(record)
    }

    /// Cancels a verifier run that has not ended (operator only). A result the run's verifier
    /// submits afterwards is kept as history and never counted. A verifier does not cancel its
    /// own run: it gives up by submitting an `unavailable` result with reason `cancelled`,
    /// which is then its run's recorded outcome.
    pub async fn cancel_run(
        &self,
        caller: &Principal,
        run_id: &str,
        reason: &str,
    ) -> Result<Cancellation> {
        let now = &self.now().await?;
        self.require_role(caller, &[Role::Operator], "cancel verifier runs")
            .await?;
        let run = self
            .store
            .run(run_id)
            .await?
            .ok_or_else(|| EngineError::NotFound {
                what: "run",
                key: run_id.to_owned(),
            })?;
        let reason = required_reason(reason)?;
        if let Some(last) = run.status().filter(|s| s.is_terminal()) {
            return Err(EngineError::Conflict(format!(
                "run {run_id:?} already ended {}; nothing to cancel",
                last.as_str()
            )));
        }
        let record = Cancellation {
            schema: CANCELLATION_SCHEMA.to_owned(),
            cancelled: Cancelled::Run {
                id: run.admission.run_id.clone(),
            },
            subject_digest: run.admission.subject_digest.clone(),
            by: requester(caller),
            reason,
            at: now.clone(),
        };
        // The record, then the run event: the event is what fences the run; a record whose
        // event never landed names a run that is still open, and history shows it as such.
        self.put_note_as(&caller.actor(), &record).await?;
        // The run's end is the operator's own act, written in its own role.
        self.store
            .record_run_status(&caller.actor(), run_id, RunStatus::Cancelled, None)
            .await?;
        Ok(record)
    }

    /// The cancellation of an execution, if it was cancelled. Read by an operator, or by a
    /// principal holding a grant in force on the execution or its mission.
    pub async fn execution_cancellation(
        &self,
        caller: &Principal,
        execution: &str,
    ) -> Result<Option<Cancellation>> {
        self.require_read(caller, execution, "the cancellation")
            .await?;
        self.execution_cancellation_unscoped(execution).await
    }

    /// [`Engine::execution_cancellation`] for the engine's own use, for no caller.
    pub(crate) async fn execution_cancellation_unscoped(
        &self,
        execution: &str,
    ) -> Result<Option<Cancellation>> {
        let notes: Vec<Cancellation> = self
            .notes(&About::Execution(execution.to_owned()), CANCELLATION_SCHEMA)
            .await?;
        Ok(notes.into_iter().find(
            |c| matches!(&c.cancelled, Cancelled::Execution { id } if id.as_str() == execution),
        ))
    }

    /// Refuses an action on a cancelled execution (a conflict: nothing is written).
    pub(crate) async fn require_live(&self, execution: &str, action: &str) -> Result<()> {
        match self.execution_cancellation_unscoped(execution).await? {
            Some(c) => Err(EngineError::Conflict(format!(
                "execution {execution:?} was cancelled by {} ({}): {}; it cannot {action}",
                c.by.principal.as_str(),
                c.by.role.as_str(),
                c.reason
            ))),
            None => Ok(()),
        }
    }
}

fn requester(caller: &Principal) -> Requester {
    Requester {
        principal: caller.name.clone(),
        role: caller.role,
    }
}

fn required_reason(reason: &str) -> Result<String> {
    if reason.trim().is_empty() {
        return Err(invalid("cancellation")("a reason is required".into()));
    }
    Ok(reason.to_owned())
}

fn already_cancelled(execution: &str, done: &Cancellation) -> EngineError {
    EngineError::Conflict(format!(
        "execution {execution:?} was already cancelled by {} at {}",
        done.by.principal.as_str(),
        done.at.as_str()
    ))
}
