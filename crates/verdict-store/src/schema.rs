//! JSON Schemas (draft 2020-12) of the store's own records: the rows of the tables the store
//! keeps beside the contract documents (principals, grants, runs, pointer changes, denials,
//! evaluations, blobs, token changes) and the audit events that chain every row. Each is named
//! by its table's digest domain (`store.principal`, `store.grant`, ...), so a row's name is the
//! one its digest was taken under; `verdict schema` prints them.
//!
//! A schema says what shape a row has. The store's own checks say more (bounds on text, a
//! denial's nonce, a blob's media type) and are the ones that refuse a row.

use crate::audit::AuditEvent;
use crate::records::{
    BlobRecord, CredentialChange, DenialRecord, EvaluationRecord, GrantRecord, PointerChange,
    PrincipalRecord, Revocation, RunAdmission, RunEvent, Table,
};
use schemars::{JsonSchema, schema_for};
use serde_json::Value;

/// The name of an audit event's schema.
pub const AUDIT_EVENT: &str = "store.audit-event";

/// Every table whose rows are the store's own records, in the order `verdict schema` lists
/// them; each row's schema is named by [`Table::domain`].
pub const RECORD_TABLES: [Table; 11] = [
    Table::Principals,
    Table::CredentialChanges,
    Table::Grants,
    Table::GrantRevocations,
    Table::VerifierRuns,
    Table::RunEvents,
    Table::PointerChanges,
    Table::GateEvaluations,
    Table::Denials,
    Table::Blobs,
    Table::BlobHolders,
];

/// The names of every schema [`record_schema`] knows: each table's of [`RECORD_TABLES`], then
/// [`AUDIT_EVENT`].
#[must_use]
pub fn record_names() -> Vec<&'static str> {
    RECORD_TABLES
        .iter()
        .map(|t| t.domain())
        .chain([AUDIT_EVENT])
        .collect()
}

fn of<T: JsonSchema>() -> Value {
    schema_for!(T).to_value()
}

/// The JSON Schema of the store record named `name` ([`record_names`]), or `None` for any
/// other name.
#[must_use]
pub fn record_schema(name: &str) -> Option<Value> {
    if name == AUDIT_EVENT {
        return Some(of::<AuditEvent>());
    }
    let table = RECORD_TABLES.iter().find(|t| t.domain() == name)?;
    Some(match table {
        Table::Principals => of::<PrincipalRecord>(),
        Table::CredentialChanges => of::<CredentialChange>(),
        Table::Grants => of::<GrantRecord>(),
        Table::GrantRevocations => of::<Revocation>(),
        Table::VerifierRuns => of::<RunAdmission>(),
        Table::RunEvents => of::<RunEvent>(),
        Table::PointerChanges => of::<PointerChange>(),
        Table::GateEvaluations => of::<EvaluationRecord>(),
        Table::Denials => of::<DenialRecord>(),
        // A holder's row is a blob's record naming the holder as its writer.
        Table::Blobs | Table::BlobHolders => of::<BlobRecord>(),
        Table::Subjects
        | Table::Policies
        | Table::CheckEvidence
        | Table::VerificationRequests
        | Table::VerificationResults
        | Table::Findings
        | Table::HumanDecisions
        | Table::GateDecisions => return None,
    })
}
