-- verdict store, SQLite schema version 2: the engine's own records move out of
-- verification_requests into tables of their own, append-only like every evidence table.
--
-- denials: every refused action (the principal, or 'unauthenticated' with no role), keyed by
-- the digest of its body. gate_evaluations: which items each gate evaluation read, keyed by
-- digest and found by evaluation key, so a stored decision can be replayed.

CREATE TABLE denials (
    seq INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    digest TEXT NOT NULL,
    body TEXT NOT NULL,
    principal TEXT GENERATED ALWAYS AS (json_extract(body, '$.principal')) VIRTUAL,
    role TEXT GENERATED ALWAYS AS (json_extract(body, '$.role')) VIRTUAL,
    code TEXT GENERATED ALWAYS AS (json_extract(body, '$.code')) VIRTUAL,
    at TEXT GENERATED ALWAYS AS (json_extract(body, '$.at')) VIRTUAL
) STRICT;

CREATE INDEX denials_principal ON denials (principal);
CREATE TRIGGER denials_no_update BEFORE UPDATE ON denials
BEGIN SELECT RAISE(ABORT, 'denials is append-only: UPDATE refused'); END;
CREATE TRIGGER denials_no_delete BEFORE DELETE ON denials
BEGIN SELECT RAISE(ABORT, 'denials is append-only: DELETE refused'); END;
CREATE TRIGGER denials_no_replace BEFORE INSERT ON denials
WHEN EXISTS (SELECT 1 FROM denials WHERE key = NEW.key OR seq = NEW.seq)
BEGIN SELECT RAISE(ABORT, 'denials is append-only: REPLACE refused'); END;

CREATE TABLE gate_evaluations (
    seq INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    digest TEXT NOT NULL,
    body TEXT NOT NULL,
    evaluation_key TEXT GENERATED ALWAYS AS (json_extract(body, '$.evaluation_key')) VIRTUAL,
    subject_digest TEXT GENERATED ALWAYS AS (json_extract(body, '$.subject_digest')) VIRTUAL,
    policy_digest TEXT GENERATED ALWAYS AS (json_extract(body, '$.policy_digest')) VIRTUAL
) STRICT;

CREATE INDEX gate_evaluations_evaluation_key ON gate_evaluations (evaluation_key);
CREATE INDEX gate_evaluations_subject_digest ON gate_evaluations (subject_digest);
CREATE TRIGGER gate_evaluations_no_update BEFORE UPDATE ON gate_evaluations
BEGIN SELECT RAISE(ABORT, 'gate_evaluations is append-only: UPDATE refused'); END;
CREATE TRIGGER gate_evaluations_no_delete BEFORE DELETE ON gate_evaluations
BEGIN SELECT RAISE(ABORT, 'gate_evaluations is append-only: DELETE refused'); END;
CREATE TRIGGER gate_evaluations_no_replace BEFORE INSERT ON gate_evaluations
WHEN EXISTS (SELECT 1 FROM gate_evaluations WHERE key = NEW.key OR seq = NEW.seq)
BEGIN SELECT RAISE(ABORT, 'gate_evaluations is append-only: REPLACE refused'); END;
