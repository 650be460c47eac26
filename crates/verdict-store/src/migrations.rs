//! The schema migrations of each backend, embedded in the binary.

/// One schema migration.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// Version it brings the schema to.
    pub version: i64,
    /// Short name.
    pub name: &'static str,
    /// The SQL.
    pub sql: &'static str,
}

/// The newest schema version this binary knows (both backends share version numbers).
pub const SCHEMA_VERSION: i64 = 44;

/// SQLite migrations, in order.
pub const SQLITE: &[Migration] = &[
    Migration {
        version: 1,
        name: "init",
        sql: include_str!("../migrations/sqlite/0001_init.sql"),
    },
    Migration {
        version: 2,
        name: "denials_and_gate_evaluations",
        sql: include_str!("../migrations/sqlite/0002_denials_and_gate_evaluations.sql"),
    },
    Migration {
        version: 3,
        name: "lean_write_routines",
        sql: include_str!("../migrations/sqlite/0003_lean_write_routines.sql"),
    },
    Migration {
        version: 4,
        name: "fewer_steps_per_append",
        sql: include_str!("../migrations/sqlite/0004_fewer_steps_per_append.sql"),
    },
    Migration {
        version: 5,
        name: "claims_match_the_writer",
        sql: include_str!("../migrations/sqlite/0005_claims_match_the_writer.sql"),
    },
    Migration {
        version: 6,
        name: "authority_at_the_store",
        sql: include_str!("../migrations/sqlite/0006_authority_at_the_store.sql"),
    },
    Migration {
        version: 7,
        name: "per_principal_identity",
        sql: include_str!("../migrations/sqlite/0007_per_principal_identity.sql"),
    },
    Migration {
        version: 8,
        name: "bodies_checked_by_the_database",
        sql: include_str!("../migrations/sqlite/0008_bodies_checked_by_the_database.sql"),
    },
    Migration {
        version: 9,
        name: "jobs",
        sql: include_str!("../migrations/sqlite/0009_jobs.sql"),
    },
    Migration {
        version: 10,
        name: "private_principals_and_leases",
        sql: include_str!("../migrations/sqlite/0010_private_principals_and_leases.sql"),
    },
    Migration {
        version: 11,
        name: "callers_write_their_own_acts",
        sql: include_str!("../migrations/sqlite/0011_callers_write_their_own_acts.sql"),
    },
    Migration {
        version: 12,
        name: "blobs",
        sql: include_str!("../migrations/sqlite/0012_blobs.sql"),
    },
    Migration {
        version: 13,
        name: "authority_held_by_the_routines",
        sql: include_str!("../migrations/sqlite/0013_authority_held_by_the_routines.sql"),
    },
    Migration {
        version: 14,
        name: "no_write_as_the_engine_for_a_caller",
        sql: include_str!("../migrations/sqlite/0014_no_write_as_the_engine_for_a_caller.sql"),
    },
    Migration {
        version: 15,
        name: "job_writes_under_the_claim",
        sql: include_str!("../migrations/sqlite/0015_job_writes_under_the_claim.sql"),
    },
    Migration {
        version: 16,
        name: "per_batch_work_once_per_batch",
        sql: include_str!("../migrations/sqlite/0016_per_batch_work_once_per_batch.sql"),
    },
    Migration {
        version: 17,
        name: "claims_lapse_at_the_stores_time",
        sql: include_str!("../migrations/sqlite/0017_claims_lapse_at_the_stores_time.sql"),
    },
    Migration {
        version: 18,
        name: "canonical_form_read_not_rebuilt",
        sql: include_str!("../migrations/sqlite/0018_canonical_form_read_not_rebuilt.sql"),
    },
    Migration {
        version: 19,
        name: "the_engine_identity_writes_nothing",
        sql: include_str!("../migrations/sqlite/0019_the_engine_identity_writes_nothing.sql"),
    },
    Migration {
        version: 20,
        name: "the_queue_takes_only_what_its_callers_may_queue",
        sql: include_str!(
            "../migrations/sqlite/0020_the_queue_takes_only_what_its_callers_may_queue.sql"
        ),
    },
    Migration {
        version: 21,
        name: "executions_keep_their_mission_and_move_forward",
        sql: include_str!(
            "../migrations/sqlite/0021_executions_keep_their_mission_and_move_forward.sql"
        ),
    },
    Migration {
        version: 22,
        name: "own_denials",
        sql: include_str!("../migrations/sqlite/0022_own_denials.sql"),
    },
    Migration {
        version: 23,
        name: "reads_scoped_per_principal",
        sql: include_str!("../migrations/sqlite/0023_reads_scoped_per_principal.sql"),
    },
    Migration {
        version: 24,
        name: "bodies_conform_to_their_schemas",
        sql: include_str!("../migrations/sqlite/0024_bodies_conform_to_their_schemas.sql"),
    },
    Migration {
        version: 25,
        name: "trigger_functions_planned_once_per_connection",
        sql: include_str!(
            "../migrations/sqlite/0025_trigger_functions_planned_once_per_connection.sql"
        ),
    },
    Migration {
        version: 26,
        name: "one_webhook_deliverer",
        sql: include_str!("../migrations/sqlite/0026_one_webhook_deliverer.sql"),
    },
    Migration {
        version: 27,
        name: "subjects_name_only_readable_blobs",
        sql: include_str!("../migrations/sqlite/0027_subjects_name_only_readable_blobs.sql"),
    },
    Migration {
        version: 28,
        name: "chain_lock_only_the_routines_take",
        sql: include_str!("../migrations/sqlite/0028_chain_lock_only_the_routines_take.sql"),
    },
    Migration {
        version: 29,
        name: "patterns_matched_without_counted_repeats",
        sql: include_str!("../migrations/sqlite/0029_patterns_matched_without_counted_repeats.sql"),
    },
    Migration {
        version: 30,
        name: "tokens_revoked_and_replaced",
        sql: include_str!("../migrations/sqlite/0030_tokens_revoked_and_replaced.sql"),
    },
    Migration {
        version: 31,
        name: "a_mission_is_named_only_under_its_grant",
        sql: include_str!("../migrations/sqlite/0031_a_mission_is_named_only_under_its_grant.sql"),
    },
    Migration {
        version: 32,
        name: "reads_only_by_this_stores_identities",
        sql: include_str!("../migrations/sqlite/0032_reads_only_by_this_stores_identities.sql"),
    },
    Migration {
        version: 33,
        name: "policies_pin_risk_criteria_and_checks",
        sql: include_str!("../migrations/sqlite/0033_policies_pin_risk_criteria_and_checks.sql"),
    },
    Migration {
        version: 34,
        name: "an_approval_names_what_it_clears",
        sql: include_str!("../migrations/sqlite/0034_an_approval_names_what_it_clears.sql"),
    },
    Migration {
        version: 35,
        name: "names_operators_and_clocks_held_by_the_store",
        sql: include_str!(
            "../migrations/sqlite/0035_names_operators_and_clocks_held_by_the_store.sql"
        ),
    },
    Migration {
        version: 36,
        name: "denials_bounded_per_principal",
        sql: include_str!("../migrations/sqlite/0036_denials_bounded_per_principal.sql"),
    },
    Migration {
        version: 37,
        name: "an_approval_names_the_rule_it_clears",
        sql: include_str!("../migrations/sqlite/0037_an_approval_names_the_rule_it_clears.sql"),
    },
    Migration {
        version: 38,
        name: "a_job_attempt_is_admitted_under_its_claim",
        sql: include_str!(
            "../migrations/sqlite/0038_a_job_attempt_is_admitted_under_its_claim.sql"
        ),
    },
    Migration {
        version: 39,
        name: "cancellations_found_by_index",
        sql: include_str!("../migrations/sqlite/0039_cancellations_found_by_index.sql"),
    },
    Migration {
        version: 40,
        name: "a_claim_checks_the_grant_of_the_job_it_takes",
        sql: include_str!(
            "../migrations/sqlite/0040_a_claim_checks_the_grant_of_the_job_it_takes.sql"
        ),
    },
    Migration {
        version: 41,
        name: "a_write_is_one_statement",
        sql: include_str!("../migrations/sqlite/0041_a_write_is_one_statement.sql"),
    },
    Migration {
        version: 42,
        name: "logins_given_again_and_taken_back",
        sql: include_str!("../migrations/sqlite/0042_logins_given_again_and_taken_back.sql"),
    },
    Migration {
        version: 43,
        name: "runs_end_once_and_keys_read_nothing",
        sql: include_str!("../migrations/sqlite/0043_runs_end_once_and_keys_read_nothing.sql"),
    },
    Migration {
        version: 44,
        name: "records_the_reader_can_read",
        sql: include_str!("../migrations/sqlite/0044_records_the_reader_can_read.sql"),
    },
];

/// PostgreSQL migrations, in order. Role names are placeholders filled in from the role prefix.
pub const POSTGRES: &[Migration] = &[
    Migration {
        version: 1,
        name: "init",
        sql: include_str!("../migrations/postgres/0001_init.sql"),
    },
    Migration {
        version: 2,
        name: "denials_and_gate_evaluations",
        sql: include_str!("../migrations/postgres/0002_denials_and_gate_evaluations.sql"),
    },
    Migration {
        version: 3,
        name: "lean_write_routines",
        sql: include_str!("../migrations/postgres/0003_lean_write_routines.sql"),
    },
    Migration {
        version: 4,
        name: "fewer_steps_per_append",
        sql: include_str!("../migrations/postgres/0004_fewer_steps_per_append.sql"),
    },
    Migration {
        version: 5,
        name: "claims_match_the_writer",
        sql: include_str!("../migrations/postgres/0005_claims_match_the_writer.sql"),
    },
    Migration {
        version: 6,
        name: "authority_at_the_store",
        sql: include_str!("../migrations/postgres/0006_authority_at_the_store.sql"),
    },
    Migration {
        version: 7,
        name: "per_principal_identity",
        sql: include_str!("../migrations/postgres/0007_per_principal_identity.sql"),
    },
    Migration {
        version: 8,
        name: "bodies_checked_by_the_database",
        sql: include_str!("../migrations/postgres/0008_bodies_checked_by_the_database.sql"),
    },
    Migration {
        version: 9,
        name: "jobs",
        sql: include_str!("../migrations/postgres/0009_jobs.sql"),
    },
    Migration {
        version: 10,
        name: "private_principals_and_leases",
        sql: include_str!("../migrations/postgres/0010_private_principals_and_leases.sql"),
    },
    Migration {
        version: 11,
        name: "callers_write_their_own_acts",
        sql: include_str!("../migrations/postgres/0011_callers_write_their_own_acts.sql"),
    },
    Migration {
        version: 12,
        name: "blobs",
        sql: include_str!("../migrations/postgres/0012_blobs.sql"),
    },
    Migration {
        version: 13,
        name: "authority_held_by_the_routines",
        sql: include_str!("../migrations/postgres/0013_authority_held_by_the_routines.sql"),
    },
    Migration {
        version: 14,
        name: "no_write_as_the_engine_for_a_caller",
        sql: include_str!("../migrations/postgres/0014_no_write_as_the_engine_for_a_caller.sql"),
    },
    Migration {
        version: 15,
        name: "job_writes_under_the_claim",
        sql: include_str!("../migrations/postgres/0015_job_writes_under_the_claim.sql"),
    },
    Migration {
        version: 16,
        name: "per_batch_work_once_per_batch",
        sql: include_str!("../migrations/postgres/0016_per_batch_work_once_per_batch.sql"),
    },
    Migration {
        version: 17,
        name: "claims_lapse_at_the_stores_time",
        sql: include_str!("../migrations/postgres/0017_claims_lapse_at_the_stores_time.sql"),
    },
    Migration {
        version: 18,
        name: "canonical_form_read_not_rebuilt",
        sql: include_str!("../migrations/postgres/0018_canonical_form_read_not_rebuilt.sql"),
    },
    Migration {
        version: 19,
        name: "the_engine_identity_writes_nothing",
        sql: include_str!("../migrations/postgres/0019_the_engine_identity_writes_nothing.sql"),
    },
    Migration {
        version: 20,
        name: "the_queue_takes_only_what_its_callers_may_queue",
        sql: include_str!(
            "../migrations/postgres/0020_the_queue_takes_only_what_its_callers_may_queue.sql"
        ),
    },
    Migration {
        version: 21,
        name: "executions_keep_their_mission_and_move_forward",
        sql: include_str!(
            "../migrations/postgres/0021_executions_keep_their_mission_and_move_forward.sql"
        ),
    },
    Migration {
        version: 22,
        name: "own_denials",
        sql: include_str!("../migrations/postgres/0022_own_denials.sql"),
    },
    Migration {
        version: 23,
        name: "reads_scoped_per_principal",
        sql: include_str!("../migrations/postgres/0023_reads_scoped_per_principal.sql"),
    },
    Migration {
        version: 24,
        name: "bodies_conform_to_their_schemas",
        sql: include_str!("../migrations/postgres/0024_bodies_conform_to_their_schemas.sql"),
    },
    Migration {
        version: 25,
        name: "trigger_functions_planned_once_per_connection",
        sql: include_str!(
            "../migrations/postgres/0025_trigger_functions_planned_once_per_connection.sql"
        ),
    },
    Migration {
        version: 26,
        name: "one_webhook_deliverer",
        sql: include_str!("../migrations/postgres/0026_one_webhook_deliverer.sql"),
    },
    Migration {
        version: 27,
        name: "subjects_name_only_readable_blobs",
        sql: include_str!("../migrations/postgres/0027_subjects_name_only_readable_blobs.sql"),
    },
    Migration {
        version: 28,
        name: "chain_lock_only_the_routines_take",
        sql: include_str!("../migrations/postgres/0028_chain_lock_only_the_routines_take.sql"),
    },
    Migration {
        version: 29,
        name: "patterns_matched_without_counted_repeats",
        sql: include_str!(
            "../migrations/postgres/0029_patterns_matched_without_counted_repeats.sql"
        ),
    },
    Migration {
        version: 30,
        name: "tokens_revoked_and_replaced",
        sql: include_str!("../migrations/postgres/0030_tokens_revoked_and_replaced.sql"),
    },
    Migration {
        version: 31,
        name: "a_mission_is_named_only_under_its_grant",
        sql: include_str!(
            "../migrations/postgres/0031_a_mission_is_named_only_under_its_grant.sql"
        ),
    },
    Migration {
        version: 32,
        name: "reads_only_by_this_stores_identities",
        sql: include_str!("../migrations/postgres/0032_reads_only_by_this_stores_identities.sql"),
    },
    Migration {
        version: 33,
        name: "policies_pin_risk_criteria_and_checks",
        sql: include_str!("../migrations/postgres/0033_policies_pin_risk_criteria_and_checks.sql"),
    },
    Migration {
        version: 34,
        name: "an_approval_names_what_it_clears",
        sql: include_str!("../migrations/postgres/0034_an_approval_names_what_it_clears.sql"),
    },
    Migration {
        version: 35,
        name: "names_operators_and_clocks_held_by_the_store",
        sql: include_str!(
            "../migrations/postgres/0035_names_operators_and_clocks_held_by_the_store.sql"
        ),
    },
    Migration {
        version: 36,
        name: "denials_bounded_per_principal",
        sql: include_str!("../migrations/postgres/0036_denials_bounded_per_principal.sql"),
    },
    Migration {
        version: 37,
        name: "an_approval_names_the_rule_it_clears",
        sql: include_str!("../migrations/postgres/0037_an_approval_names_the_rule_it_clears.sql"),
    },
    Migration {
        version: 38,
        name: "a_job_attempt_is_admitted_under_its_claim",
        sql: include_str!(
            "../migrations/postgres/0038_a_job_attempt_is_admitted_under_its_claim.sql"
        ),
    },
    Migration {
        version: 39,
        name: "cancellations_found_by_index",
        sql: include_str!("../migrations/postgres/0039_cancellations_found_by_index.sql"),
    },
    Migration {
        version: 40,
        name: "a_claim_checks_the_grant_of_the_job_it_takes",
        sql: include_str!(
            "../migrations/postgres/0040_a_claim_checks_the_grant_of_the_job_it_takes.sql"
        ),
    },
    Migration {
        version: 41,
        name: "a_write_is_one_statement",
        sql: include_str!("../migrations/postgres/0041_a_write_is_one_statement.sql"),
    },
    Migration {
        version: 42,
        name: "logins_given_again_and_taken_back",
        sql: include_str!("../migrations/postgres/0042_logins_given_again_and_taken_back.sql"),
    },
    Migration {
        version: 43,
        name: "runs_end_once_and_keys_read_nothing",
        sql: include_str!("../migrations/postgres/0043_runs_end_once_and_keys_read_nothing.sql"),
    },
    Migration {
        version: 44,
        name: "records_the_reader_can_read",
        sql: include_str!("../migrations/postgres/0044_records_the_reader_can_read.sql"),
    },
];

/// What `migrate` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MigrationReport {
    /// Schema version before.
    pub from: i64,
    /// Schema version after.
    pub to: i64,
}
