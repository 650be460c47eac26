-- verdict store, PostgreSQL schema version 31: a placeholder that changes nothing.
SELECT 1;
