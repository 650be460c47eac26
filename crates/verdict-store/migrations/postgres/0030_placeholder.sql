-- verdict store, PostgreSQL schema version 30: a placeholder that changes nothing.
SELECT 1;
