-- verdict store, SQLite schema version 36: a principal's denials are bounded in time.
--
-- A denial is appended only while fewer than 60 denials naming the same principal (or
-- `unauthenticated`) were appended within the last 60 seconds of the clock that stamps the
-- audit events; the store checks that in code before it appends one (on SQLite whoever can
-- write the file controls the store). This index lets that check read at most 60 rows.
CREATE INDEX denials_principal_seq ON denials (principal, seq);
