-- verdict store, SQLite schema version 9: the job queue.
--
-- Jobs are operational state, not evidence: a row is claimed, its lease renewed, and it is
-- finished, each an UPDATE. Nothing a job does counts through this table: its effects are the
-- engine's ordinary audited writes, so `audit verify` neither covers nor needs it. Times are
-- microseconds since the Unix epoch on the clock of the process that claims (SQLite has one
-- machine); PostgreSQL keeps them on the database's clock.
CREATE TABLE jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL CHECK (kind IN ('checks', 'verify', 'gate')),
    request TEXT NOT NULL,
    class TEXT NOT NULL DEFAULT '',
    state TEXT NOT NULL DEFAULT 'ready' CHECK (state IN ('ready', 'running', 'done', 'failed')),
    attempts INTEGER NOT NULL DEFAULT 0,
    holder TEXT,
    principal TEXT,
    lease_until INTEGER,
    fencing INTEGER NOT NULL DEFAULT 0,
    not_before INTEGER,
    deadline_at INTEGER,
    outcome TEXT,
    last_error TEXT,
    enqueued_by TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    done_at INTEGER,
    UNIQUE (kind, request, class)
);
CREATE INDEX jobs_ready ON jobs (kind, state, not_before);
CREATE INDEX jobs_request ON jobs (request);
