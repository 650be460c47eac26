-- verdict store, SQLite schema version 1.
--
-- Every evidence table holds the canonical bytes of a record (`body`), the digest those bytes
-- hash to, the key the record is unique by, and the audit sequence number of the event that
-- appended it (the rowid, so rows are stored in the order they were appended). Index columns are generated from `body`, so they can never disagree with it.
-- Triggers refuse UPDATE and DELETE on every evidence table and on the audit log; a BEFORE
-- INSERT trigger also refuses INSERT OR REPLACE, which would otherwise delete silently.
-- The only mutable rows are in `pointers`; each change must match an appended `pointer_changes`
-- record with the next revision.

CREATE TABLE schema_migrations (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at TEXT NOT NULL
) STRICT;

CREATE TRIGGER schema_migrations_no_update BEFORE UPDATE ON schema_migrations
BEGIN SELECT RAISE(ABORT, 'schema_migrations is append-only: UPDATE refused'); END;
CREATE TRIGGER schema_migrations_no_delete BEFORE DELETE ON schema_migrations
BEGIN SELECT RAISE(ABORT, 'schema_migrations is append-only: DELETE refused'); END;
CREATE TRIGGER schema_migrations_no_replace BEFORE INSERT ON schema_migrations
WHEN EXISTS (SELECT 1 FROM schema_migrations WHERE version = NEW.version)
BEGIN SELECT RAISE(ABORT, 'schema_migrations is append-only: REPLACE refused'); END;

CREATE TABLE audit_events (
    seq INTEGER PRIMARY KEY,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL,
    event_type TEXT NOT NULL,
    tbl TEXT NOT NULL,
    key TEXT NOT NULL,
    principal TEXT NOT NULL,
    role TEXT NOT NULL,
    payload_digest TEXT NOT NULL,
    correlation TEXT,
    recorded_at TEXT NOT NULL
) STRICT;

CREATE TRIGGER audit_events_no_update BEFORE UPDATE ON audit_events
BEGIN SELECT RAISE(ABORT, 'audit_events is append-only: UPDATE refused'); END;
CREATE TRIGGER audit_events_no_delete BEFORE DELETE ON audit_events
BEGIN SELECT RAISE(ABORT, 'audit_events is append-only: DELETE refused'); END;
CREATE TRIGGER audit_events_no_replace BEFORE INSERT ON audit_events
WHEN EXISTS (SELECT 1 FROM audit_events WHERE seq = NEW.seq)
BEGIN SELECT RAISE(ABORT, 'audit_events is append-only: REPLACE refused'); END;

CREATE TABLE principals (
    seq INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    digest TEXT NOT NULL,
    body TEXT NOT NULL,
    name TEXT GENERATED ALWAYS AS (json_extract(body, '$.name')) VIRTUAL,
    role TEXT GENERATED ALWAYS AS (json_extract(body, '$.role')) VIRTUAL,
    token_sha256 TEXT GENERATED ALWAYS AS (json_extract(body, '$.token_sha256')) VIRTUAL
) STRICT;

CREATE UNIQUE INDEX principals_token_sha256 ON principals (token_sha256);
CREATE TRIGGER principals_no_update BEFORE UPDATE ON principals
BEGIN SELECT RAISE(ABORT, 'principals is append-only: UPDATE refused'); END;
CREATE TRIGGER principals_no_delete BEFORE DELETE ON principals
BEGIN SELECT RAISE(ABORT, 'principals is append-only: DELETE refused'); END;
CREATE TRIGGER principals_no_replace BEFORE INSERT ON principals
WHEN EXISTS (SELECT 1 FROM principals WHERE key = NEW.key OR seq = NEW.seq)
BEGIN SELECT RAISE(ABORT, 'principals is append-only: REPLACE refused'); END;

CREATE TABLE grants (
    seq INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    digest TEXT NOT NULL,
    body TEXT NOT NULL,
    principal TEXT GENERATED ALWAYS AS (json_extract(body, '$.principal')) VIRTUAL,
    scope_kind TEXT GENERATED ALWAYS AS (json_extract(body, '$.scope.kind')) VIRTUAL,
    scope_id TEXT GENERATED ALWAYS AS (json_extract(body, '$.scope.id')) VIRTUAL
) STRICT;

CREATE INDEX grants_principal ON grants (principal);
CREATE TRIGGER grants_no_update BEFORE UPDATE ON grants
BEGIN SELECT RAISE(ABORT, 'grants is append-only: UPDATE refused'); END;
CREATE TRIGGER grants_no_delete BEFORE DELETE ON grants
BEGIN SELECT RAISE(ABORT, 'grants is append-only: DELETE refused'); END;
CREATE TRIGGER grants_no_replace BEFORE INSERT ON grants
WHEN EXISTS (SELECT 1 FROM grants WHERE key = NEW.key OR seq = NEW.seq)
BEGIN SELECT RAISE(ABORT, 'grants is append-only: REPLACE refused'); END;

CREATE TABLE grant_revocations (
    seq INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    digest TEXT NOT NULL,
    body TEXT NOT NULL,
    grant_id TEXT GENERATED ALWAYS AS (json_extract(body, '$.grant_id')) VIRTUAL
) STRICT;

CREATE TRIGGER grant_revocations_no_update BEFORE UPDATE ON grant_revocations
BEGIN SELECT RAISE(ABORT, 'grant_revocations is append-only: UPDATE refused'); END;
CREATE TRIGGER grant_revocations_no_delete BEFORE DELETE ON grant_revocations
BEGIN SELECT RAISE(ABORT, 'grant_revocations is append-only: DELETE refused'); END;
CREATE TRIGGER grant_revocations_no_replace BEFORE INSERT ON grant_revocations
WHEN EXISTS (SELECT 1 FROM grant_revocations WHERE key = NEW.key OR seq = NEW.seq)
BEGIN SELECT RAISE(ABORT, 'grant_revocations is append-only: REPLACE refused'); END;

CREATE TABLE subjects (
    seq INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    digest TEXT NOT NULL,
    body TEXT NOT NULL,
    execution_id TEXT GENERATED ALWAYS AS (json_extract(body, '$.execution.id')) VIRTUAL,
    generation INTEGER GENERATED ALWAYS AS (json_extract(body, '$.execution.generation')) VIRTUAL
) STRICT;

CREATE INDEX subjects_execution_id ON subjects (execution_id);
CREATE TRIGGER subjects_no_update BEFORE UPDATE ON subjects
BEGIN SELECT RAISE(ABORT, 'subjects is append-only: UPDATE refused'); END;
CREATE TRIGGER subjects_no_delete BEFORE DELETE ON subjects
BEGIN SELECT RAISE(ABORT, 'subjects is append-only: DELETE refused'); END;
CREATE TRIGGER subjects_no_replace BEFORE INSERT ON subjects
WHEN EXISTS (SELECT 1 FROM subjects WHERE key = NEW.key OR seq = NEW.seq)
BEGIN SELECT RAISE(ABORT, 'subjects is append-only: REPLACE refused'); END;

CREATE TABLE policies (
    seq INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    digest TEXT NOT NULL,
    body TEXT NOT NULL,
    name TEXT GENERATED ALWAYS AS (json_extract(body, '$.name')) VIRTUAL,
    revision INTEGER GENERATED ALWAYS AS (json_extract(body, '$.revision')) VIRTUAL
) STRICT;

CREATE INDEX policies_name ON policies (name);
CREATE TRIGGER policies_no_update BEFORE UPDATE ON policies
BEGIN SELECT RAISE(ABORT, 'policies is append-only: UPDATE refused'); END;
CREATE TRIGGER policies_no_delete BEFORE DELETE ON policies
BEGIN SELECT RAISE(ABORT, 'policies is append-only: DELETE refused'); END;
CREATE TRIGGER policies_no_replace BEFORE INSERT ON policies
WHEN EXISTS (SELECT 1 FROM policies WHERE key = NEW.key OR seq = NEW.seq)
BEGIN SELECT RAISE(ABORT, 'policies is append-only: REPLACE refused'); END;

CREATE TABLE check_evidence (
    seq INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    digest TEXT NOT NULL,
    body TEXT NOT NULL,
    subject_digest TEXT GENERATED ALWAYS AS (json_extract(body, '$.subject_digest')) VIRTUAL,
    evidence_id TEXT GENERATED ALWAYS AS (json_extract(body, '$.id')) VIRTUAL,
    check_id TEXT GENERATED ALWAYS AS (json_extract(body, '$.check')) VIRTUAL
) STRICT;

CREATE INDEX check_evidence_subject_digest ON check_evidence (subject_digest);
CREATE TRIGGER check_evidence_no_update BEFORE UPDATE ON check_evidence
BEGIN SELECT RAISE(ABORT, 'check_evidence is append-only: UPDATE refused'); END;
CREATE TRIGGER check_evidence_no_delete BEFORE DELETE ON check_evidence
BEGIN SELECT RAISE(ABORT, 'check_evidence is append-only: DELETE refused'); END;
CREATE TRIGGER check_evidence_no_replace BEFORE INSERT ON check_evidence
WHEN EXISTS (SELECT 1 FROM check_evidence WHERE key = NEW.key OR seq = NEW.seq)
BEGIN SELECT RAISE(ABORT, 'check_evidence is append-only: REPLACE refused'); END;

CREATE TABLE verification_requests (
    seq INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    digest TEXT NOT NULL,
    body TEXT NOT NULL,
    subject_digest TEXT GENERATED ALWAYS AS (json_extract(body, '$.subject_digest')) VIRTUAL
) STRICT;

CREATE INDEX verification_requests_subject_digest ON verification_requests (subject_digest);
CREATE TRIGGER verification_requests_no_update BEFORE UPDATE ON verification_requests
BEGIN SELECT RAISE(ABORT, 'verification_requests is append-only: UPDATE refused'); END;
CREATE TRIGGER verification_requests_no_delete BEFORE DELETE ON verification_requests
BEGIN SELECT RAISE(ABORT, 'verification_requests is append-only: DELETE refused'); END;
CREATE TRIGGER verification_requests_no_replace BEFORE INSERT ON verification_requests
WHEN EXISTS (SELECT 1 FROM verification_requests WHERE key = NEW.key OR seq = NEW.seq)
BEGIN SELECT RAISE(ABORT, 'verification_requests is append-only: REPLACE refused'); END;

CREATE TABLE verifier_runs (
    seq INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    digest TEXT NOT NULL,
    body TEXT NOT NULL,
    run_id TEXT GENERATED ALWAYS AS (json_extract(body, '$.run_id')) VIRTUAL,
    request_digest TEXT GENERATED ALWAYS AS (json_extract(body, '$.request_digest')) VIRTUAL,
    subject_digest TEXT GENERATED ALWAYS AS (json_extract(body, '$.subject_digest')) VIRTUAL,
    verifier TEXT GENERATED ALWAYS AS (json_extract(body, '$.verifier')) VIRTUAL,
    class TEXT GENERATED ALWAYS AS (json_extract(body, '$.class')) VIRTUAL,
    generation INTEGER GENERATED ALWAYS AS (json_extract(body, '$.admitted_generation')) VIRTUAL
) STRICT;

CREATE INDEX verifier_runs_subject_digest ON verifier_runs (subject_digest);
CREATE TRIGGER verifier_runs_no_update BEFORE UPDATE ON verifier_runs
BEGIN SELECT RAISE(ABORT, 'verifier_runs is append-only: UPDATE refused'); END;
CREATE TRIGGER verifier_runs_no_delete BEFORE DELETE ON verifier_runs
BEGIN SELECT RAISE(ABORT, 'verifier_runs is append-only: DELETE refused'); END;
CREATE TRIGGER verifier_runs_no_replace BEFORE INSERT ON verifier_runs
WHEN EXISTS (SELECT 1 FROM verifier_runs WHERE key = NEW.key OR seq = NEW.seq)
BEGIN SELECT RAISE(ABORT, 'verifier_runs is append-only: REPLACE refused'); END;

CREATE TABLE run_events (
    seq INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    digest TEXT NOT NULL,
    body TEXT NOT NULL,
    run_id TEXT GENERATED ALWAYS AS (json_extract(body, '$.run_id')) VIRTUAL,
    n INTEGER GENERATED ALWAYS AS (json_extract(body, '$.n')) VIRTUAL,
    status TEXT GENERATED ALWAYS AS (json_extract(body, '$.status')) VIRTUAL
) STRICT;

CREATE INDEX run_events_run_id ON run_events (run_id);
CREATE TRIGGER run_events_no_update BEFORE UPDATE ON run_events
BEGIN SELECT RAISE(ABORT, 'run_events is append-only: UPDATE refused'); END;
CREATE TRIGGER run_events_no_delete BEFORE DELETE ON run_events
BEGIN SELECT RAISE(ABORT, 'run_events is append-only: DELETE refused'); END;
CREATE TRIGGER run_events_no_replace BEFORE INSERT ON run_events
WHEN EXISTS (SELECT 1 FROM run_events WHERE key = NEW.key OR seq = NEW.seq)
BEGIN SELECT RAISE(ABORT, 'run_events is append-only: REPLACE refused'); END;

CREATE TABLE verification_results (
    seq INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    digest TEXT NOT NULL,
    body TEXT NOT NULL,
    counted INTEGER NOT NULL CHECK (counted IN (0, 1)),
    subject_digest TEXT GENERATED ALWAYS AS (json_extract(body, '$.subject_digest')) VIRTUAL,
    run_id TEXT GENERATED ALWAYS AS (json_extract(body, '$.verifier.run')) VIRTUAL,
    verifier TEXT GENERATED ALWAYS AS (json_extract(body, '$.verifier.principal')) VIRTUAL,
    class TEXT GENERATED ALWAYS AS (json_extract(body, '$.verifier.class')) VIRTUAL,
    generation INTEGER GENERATED ALWAYS AS (json_extract(body, '$.generation')) VIRTUAL,
    status TEXT GENERATED ALWAYS AS (json_extract(body, '$.status')) VIRTUAL
) STRICT;

CREATE INDEX verification_results_subject_digest ON verification_results (subject_digest);
CREATE INDEX verification_results_run_id ON verification_results (run_id);
CREATE TRIGGER verification_results_no_update BEFORE UPDATE ON verification_results
BEGIN SELECT RAISE(ABORT, 'verification_results is append-only: UPDATE refused'); END;
CREATE TRIGGER verification_results_no_delete BEFORE DELETE ON verification_results
BEGIN SELECT RAISE(ABORT, 'verification_results is append-only: DELETE refused'); END;
CREATE TRIGGER verification_results_no_replace BEFORE INSERT ON verification_results
WHEN EXISTS (SELECT 1 FROM verification_results WHERE key = NEW.key OR seq = NEW.seq)
BEGIN SELECT RAISE(ABORT, 'verification_results is append-only: REPLACE refused'); END;

CREATE TABLE findings (
    seq INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    digest TEXT NOT NULL,
    body TEXT NOT NULL,
    finding_id TEXT GENERATED ALWAYS AS (json_extract(body, '$.id')) VIRTUAL,
    version INTEGER GENERATED ALWAYS AS (json_extract(body, '$.version')) VIRTUAL,
    subject_digest TEXT GENERATED ALWAYS AS (json_extract(body, '$.subject_digest')) VIRTUAL
) STRICT;

CREATE INDEX findings_subject_digest ON findings (subject_digest);
CREATE UNIQUE INDEX findings_digest ON findings (digest);
CREATE TRIGGER findings_no_update BEFORE UPDATE ON findings
BEGIN SELECT RAISE(ABORT, 'findings is append-only: UPDATE refused'); END;
CREATE TRIGGER findings_no_delete BEFORE DELETE ON findings
BEGIN SELECT RAISE(ABORT, 'findings is append-only: DELETE refused'); END;
CREATE TRIGGER findings_no_replace BEFORE INSERT ON findings
WHEN EXISTS (SELECT 1 FROM findings WHERE key = NEW.key OR seq = NEW.seq)
BEGIN SELECT RAISE(ABORT, 'findings is append-only: REPLACE refused'); END;

CREATE TABLE human_decisions (
    seq INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    digest TEXT NOT NULL,
    body TEXT NOT NULL,
    subject_digest TEXT GENERATED ALWAYS AS (json_extract(body, '$.subject_digest')) VIRTUAL,
    policy_digest TEXT GENERATED ALWAYS AS (json_extract(body, '$.policy_digest')) VIRTUAL,
    principal TEXT GENERATED ALWAYS AS (json_extract(body, '$.principal')) VIRTUAL
) STRICT;

CREATE INDEX human_decisions_subject_digest ON human_decisions (subject_digest);
CREATE TRIGGER human_decisions_no_update BEFORE UPDATE ON human_decisions
BEGIN SELECT RAISE(ABORT, 'human_decisions is append-only: UPDATE refused'); END;
CREATE TRIGGER human_decisions_no_delete BEFORE DELETE ON human_decisions
BEGIN SELECT RAISE(ABORT, 'human_decisions is append-only: DELETE refused'); END;
CREATE TRIGGER human_decisions_no_replace BEFORE INSERT ON human_decisions
WHEN EXISTS (SELECT 1 FROM human_decisions WHERE key = NEW.key OR seq = NEW.seq)
BEGIN SELECT RAISE(ABORT, 'human_decisions is append-only: REPLACE refused'); END;

CREATE TABLE gate_decisions (
    seq INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    digest TEXT NOT NULL,
    body TEXT NOT NULL,
    evaluation_key TEXT GENERATED ALWAYS AS (json_extract(body, '$.evaluation_key')) VIRTUAL,
    subject_digest TEXT GENERATED ALWAYS AS (json_extract(body, '$.subject_digest')) VIRTUAL,
    policy_digest TEXT GENERATED ALWAYS AS (json_extract(body, '$.policy_digest')) VIRTUAL,
    outcome TEXT GENERATED ALWAYS AS (json_extract(body, '$.outcome')) VIRTUAL
) STRICT;

CREATE INDEX gate_decisions_subject_digest ON gate_decisions (subject_digest);
CREATE UNIQUE INDEX gate_decisions_digest ON gate_decisions (digest);
CREATE TRIGGER gate_decisions_no_update BEFORE UPDATE ON gate_decisions
BEGIN SELECT RAISE(ABORT, 'gate_decisions is append-only: UPDATE refused'); END;
CREATE TRIGGER gate_decisions_no_delete BEFORE DELETE ON gate_decisions
BEGIN SELECT RAISE(ABORT, 'gate_decisions is append-only: DELETE refused'); END;
CREATE TRIGGER gate_decisions_no_replace BEFORE INSERT ON gate_decisions
WHEN EXISTS (SELECT 1 FROM gate_decisions WHERE key = NEW.key OR seq = NEW.seq)
BEGIN SELECT RAISE(ABORT, 'gate_decisions is append-only: REPLACE refused'); END;

CREATE TABLE pointer_changes (
    seq INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    digest TEXT NOT NULL,
    body TEXT NOT NULL,
    pointer TEXT GENERATED ALWAYS AS (json_extract(body, '$.pointer')) VIRTUAL,
    name TEXT GENERATED ALWAYS AS (json_extract(body, '$.name')) VIRTUAL,
    revision INTEGER GENERATED ALWAYS AS (json_extract(body, '$.revision')) VIRTUAL
) STRICT;

CREATE INDEX pointer_changes_name ON pointer_changes (pointer, name, revision);
CREATE TRIGGER pointer_changes_no_update BEFORE UPDATE ON pointer_changes
BEGIN SELECT RAISE(ABORT, 'pointer_changes is append-only: UPDATE refused'); END;
CREATE TRIGGER pointer_changes_no_delete BEFORE DELETE ON pointer_changes
BEGIN SELECT RAISE(ABORT, 'pointer_changes is append-only: DELETE refused'); END;
CREATE TRIGGER pointer_changes_no_replace BEFORE INSERT ON pointer_changes
WHEN EXISTS (SELECT 1 FROM pointer_changes WHERE key = NEW.key OR seq = NEW.seq)
BEGIN SELECT RAISE(ABORT, 'pointer_changes is append-only: REPLACE refused'); END;

-- Pointers: the only mutable rows. A row changes only to the next revision, and only to the
-- value an appended pointer_changes record of that revision names; rows are never deleted.
CREATE TABLE pointers (
    pointer TEXT NOT NULL,
    name TEXT NOT NULL,
    revision INTEGER NOT NULL,
    value TEXT,
    PRIMARY KEY (pointer, name)
) STRICT;

CREATE TRIGGER pointers_no_delete BEFORE DELETE ON pointers
BEGIN SELECT RAISE(ABORT, 'pointers are never deleted: DELETE refused'); END;
CREATE TRIGGER pointers_insert_audited BEFORE INSERT ON pointers
WHEN NEW.revision != 1
  OR EXISTS (SELECT 1 FROM pointers WHERE pointer = NEW.pointer AND name = NEW.name)
  OR NOT EXISTS (
    SELECT 1 FROM pointer_changes c
    WHERE c.pointer = NEW.pointer AND c.name = NEW.name AND c.revision = NEW.revision
      AND ((NEW.value IS NULL AND json_type(c.body, '$.new') = 'null')
           OR json(NEW.value) = json_extract(c.body, '$.new')))
BEGIN SELECT RAISE(ABORT, 'pointer insert without a matching pointer_changes record refused'); END;
CREATE TRIGGER pointers_update_audited BEFORE UPDATE ON pointers
WHEN NEW.pointer != OLD.pointer OR NEW.name != OLD.name OR NEW.revision != OLD.revision + 1
  OR NOT EXISTS (
    SELECT 1 FROM pointer_changes c
    WHERE c.pointer = NEW.pointer AND c.name = NEW.name AND c.revision = NEW.revision
      AND ((NEW.value IS NULL AND json_type(c.body, '$.new') = 'null')
           OR json(NEW.value) = json_extract(c.body, '$.new')))
BEGIN SELECT RAISE(ABORT, 'pointer update without a matching pointer_changes record refused'); END;
