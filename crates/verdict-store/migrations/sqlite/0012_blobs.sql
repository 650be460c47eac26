-- verdict store, SQLite schema version 12: content-addressed blobs.
--
-- The bytes a subject names by raw digest (its objective, its resources, a check's definition)
-- can now be kept in the store. A row is keyed by the raw digest of its bytes (`sha256:` and
-- the lowercase hex SHA-256, no domain prefix); `body` is the canonical record of the blob
-- (digest, size, media type, writer, the store's time), hashed like every other row into the
-- audit chain, and `bytes` holds the bytes themselves, at most 8 MiB. The store hashes the
-- bytes and checks the record before it writes; SQLite cannot hash, so nothing below the store
-- repeats that check, and `audit verify` hashes every row's bytes again. Append-only like every
-- evidence table: UPDATE, DELETE and INSERT OR REPLACE are refused by triggers.
CREATE TABLE blobs (
    seq INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    digest TEXT NOT NULL,
    body TEXT NOT NULL,
    bytes BLOB NOT NULL CHECK (length(bytes) <= 8388608)
) STRICT;

CREATE TRIGGER blobs_no_update BEFORE UPDATE ON blobs
BEGIN SELECT RAISE(ABORT, 'blobs is append-only: UPDATE refused'); END;
CREATE TRIGGER blobs_no_delete BEFORE DELETE ON blobs
BEGIN SELECT RAISE(ABORT, 'blobs is append-only: DELETE refused'); END;
CREATE TRIGGER blobs_no_replace BEFORE INSERT ON blobs
WHEN EXISTS (SELECT 1 FROM blobs WHERE key = NEW.key OR seq = NEW.seq)
BEGIN SELECT RAISE(ABORT, 'blobs is append-only: REPLACE refused'); END;
