-- verdict store, SQLite schema version 27: each later principal that put a blob's bytes.
--
-- A blob is read by the principal that put it and by whoever holds a grant covering a subject
-- that names it, and a subject may name only bytes its producer may read. The first principal
-- to put the bytes is the blob's writer; each other principal that puts the same bytes later is
-- recorded here once: a blob record naming it as writer, hashed under the domain
-- `store.blob-holder` and keyed by that digest. The bytes are not stored again. `blob` and
-- `holder` are read from the body, and one principal holds one blob at most once. Append-only
-- like every evidence table.
CREATE TABLE blob_holders (
    seq INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    digest TEXT NOT NULL,
    body TEXT NOT NULL,
    blob TEXT GENERATED ALWAYS AS (json_extract(body, '$.digest')) VIRTUAL,
    holder TEXT GENERATED ALWAYS AS (json_extract(body, '$.writer')) VIRTUAL
) STRICT;
CREATE UNIQUE INDEX blob_holders_by_blob ON blob_holders (blob, holder);

CREATE TRIGGER blob_holders_no_update BEFORE UPDATE ON blob_holders
BEGIN SELECT RAISE(ABORT, 'blob_holders is append-only: UPDATE refused'); END;
CREATE TRIGGER blob_holders_no_delete BEFORE DELETE ON blob_holders
BEGIN SELECT RAISE(ABORT, 'blob_holders is append-only: DELETE refused'); END;
CREATE TRIGGER blob_holders_no_replace BEFORE INSERT ON blob_holders
WHEN EXISTS (SELECT 1 FROM blob_holders WHERE key = NEW.key OR seq = NEW.seq)
BEGIN SELECT RAISE(ABORT, 'blob_holders is append-only: REPLACE refused'); END;
