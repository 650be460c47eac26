-- verdict store, SQLite schema version 26: one process at a time delivers webhooks.
--
-- A duty lease elects the one process that delivers webhooks: a row per duty naming its holder
-- and until when it holds (microseconds since the Unix epoch, at the store's time). Like the
-- job queue it is operational state, not evidence, and the audit chain does not record its
-- renewals; the store takes or renews it inside one `BEGIN IMMEDIATE` transaction.
CREATE TABLE duty_leases (
    duty TEXT PRIMARY KEY CHECK (duty IN ('webhook-delivery')),
    holder TEXT NOT NULL CHECK (length(holder) BETWEEN 1 AND 256),
    term INTEGER NOT NULL,
    lease_until INTEGER NOT NULL
);
