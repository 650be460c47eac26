//! Findings read on their own: the findings filed about an execution's subjects, and every
//! version of one finding. A finding is stored as its verifier wrote it (inside a result or
//! alone); reading one says nothing about whether it counts, which is the Gate's business
//! (`status`, `history`).

use crate::engine::{Engine, Principal};
use crate::error::{EngineError, Result, invalid};
use schemars::JsonSchema;
use serde::Serialize;
use verdict_core::contracts::{Finding, Id, Role};
use verdict_core::digest::Digest;
use verdict_store::{About, DocKind, Stored};

/// One stored version of a finding.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct FindingView {
    /// The digest of this version (`digest("finding", finding)`).
    #[schemars(with = "String")]
    pub digest: Digest,
    /// The finding, as stored.
    pub finding: Finding,
}

fn view(row: &Stored) -> Result<FindingView> {
    Ok(FindingView {
        digest: row.digest.clone(),
        finding: row.decode()?,
    })
}

impl Engine {
    /// The findings filed about any subject of `execution`, in the order they were stored;
    /// read like the execution itself (an operator, or a grant in force on it or its mission).
    pub async fn execution_findings(
        &self,
        caller: &Principal,
        execution: &str,
    ) -> Result<Vec<FindingView>> {
        self.require_read(caller, execution, "the findings").await?;
        self.existing_execution_head(execution).await?;
        self.store
            .list(DocKind::Finding, &About::Execution(execution.to_owned()))
            .await?
            .iter()
            .map(view)
            .collect()
    }

    /// Every version of finding `id`, oldest first, for a caller that may read the subject
    /// of each: an operator, or a grant in force on its execution or mission. A caller that
    /// may read none of them is refused (and the refusal recorded); no version stored is
    /// `not_found`.
    pub async fn finding_versions(&self, caller: &Principal, id: &str) -> Result<Vec<FindingView>> {
        let parsed: Id = id
            .parse()
            .map_err(|e| invalid("finding id")(format!("{id:?}: {e}")))?;
        let rows = self.store.finding_versions(&parsed).await?;
        if rows.is_empty() {
            if caller.role() != Role::Operator {
                // Refused in the same words as a finding out of scope.
                return Err(self.deny_unseen(caller, format!("finding {id:?}")).await);
            }
            return Err(EngineError::NotFound {
                what: "finding",
                key: id.to_owned(),
            });
        }
        let mut out = Vec::new();
        for row in &rows {
            let v = view(row)?;
            let subject = self.subject(&v.finding.subject_digest).await?;
            if self.may_read(caller, &subject).await? {
                out.push(v);
            }
        }
        if out.is_empty() {
            return Err(self.deny_unseen(caller, format!("finding {id:?}")).await);
        }
        Ok(out)
    }
}
