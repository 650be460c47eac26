-- verdict store, SQLite schema version 30: a principal's token can be revoked and replaced.
--
-- A principal's record keeps the SHA-256 of the token it was given and is never changed. Each
-- later change of its token is a row here: the principal's `n`th change (from 1, keyed
-- `<principal>#<n>`) names the SHA-256 of the one token it holds from then on, or none after a
-- revocation. A token is held only while nothing after it names another: the principal's own
-- record's token until its first change, then the latest change's. A hash is held at most
-- once, here or in a principal's record (the store checks, the index keeps it unique here).
-- An operator changes any principal's token; any other principal only replaces its own (the
-- store checks; on SQLite whoever can write the file controls the store). Append-only like
-- every evidence table.
CREATE TABLE credential_changes (
    seq INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    digest TEXT NOT NULL,
    body TEXT NOT NULL,
    principal TEXT GENERATED ALWAYS AS (json_extract(body, '$.principal')) VIRTUAL,
    n INTEGER GENERATED ALWAYS AS (json_extract(body, '$.n')) VIRTUAL,
    token_sha256 TEXT GENERATED ALWAYS AS (json_extract(body, '$.token_sha256')) VIRTUAL
) STRICT;
CREATE UNIQUE INDEX credential_changes_by_principal ON credential_changes (principal, n);
CREATE UNIQUE INDEX credential_changes_token_sha256 ON credential_changes (token_sha256);

CREATE TRIGGER credential_changes_no_update BEFORE UPDATE ON credential_changes
BEGIN SELECT RAISE(ABORT, 'credential_changes is append-only: UPDATE refused'); END;
CREATE TRIGGER credential_changes_no_delete BEFORE DELETE ON credential_changes
BEGIN SELECT RAISE(ABORT, 'credential_changes is append-only: DELETE refused'); END;
CREATE TRIGGER credential_changes_no_replace BEFORE INSERT ON credential_changes
WHEN EXISTS (SELECT 1 FROM credential_changes WHERE key = NEW.key OR seq = NEW.seq)
BEGIN SELECT RAISE(ABORT, 'credential_changes is append-only: REPLACE refused'); END;
