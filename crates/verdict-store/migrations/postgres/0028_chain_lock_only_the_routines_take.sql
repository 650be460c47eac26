-- verdict store, PostgreSQL schema version 28: the chain's lock is one only the routines take.
--
-- Every write routine serialised the audit chain with pg_advisory_xact_lock on a fixed key.
-- PostgreSQL lets any role take any advisory lock, and the key is in the routines' source, so
-- any login of the database, even one that may write nothing, could hold that key in an idle
-- session and stall every write of the store.
--
-- The chain is now serialised by an EXCLUSIVE lock on verdict.chain_lock, a table with no rows
-- on which no role but its owner (the routines' owner) holds any privilege: LOCK TABLE needs a
-- privilege on the table, so a principal's or the service's login cannot take or hold it, and
-- only the SECURITY DEFINER routines do, for as long as the transaction that called them.
-- EXCLUSIVE conflicts with itself and with nothing a plain read of the table takes, and the
-- lock is released at the end of the transaction, as the advisory one was.
--
-- The routines are rewritten from their own current definitions, with the one call replaced,
-- so nothing else in them changes.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

CREATE TABLE verdict.chain_lock ();
REVOKE ALL ON verdict.chain_lock FROM PUBLIC;
-- Like every table of the schema (version 23), under forced row security; it has no rows and
-- no policy, and no role but the owner holds a privilege on it.
ALTER TABLE verdict.chain_lock ENABLE ROW LEVEL SECURITY;
ALTER TABLE verdict.chain_lock FORCE ROW LEVEL SECURITY;

-- Runs with its caller's rights: only inside a routine running as the owner does it succeed.
CREATE FUNCTION verdict.take_chain_lock() RETURNS void
LANGUAGE plpgsql
SET search_path = verdict, pg_temp
AS $fn$
BEGIN
    LOCK TABLE verdict.chain_lock IN EXCLUSIVE MODE;
END
$fn$;
REVOKE ALL ON FUNCTION verdict.take_chain_lock() FROM PUBLIC;

DO $migrate$
DECLARE
    r record;
    v_def text;
BEGIN
    FOR r IN
        SELECT p.oid FROM pg_proc p
        WHERE p.pronamespace = 'verdict'::regnamespace
          AND p.prosrc LIKE '%pg_advisory_xact_lock(8531478330712965377)%'
    LOOP
        v_def := replace(pg_get_functiondef(r.oid),
            'pg_advisory_xact_lock(8531478330712965377)',
            'verdict.take_chain_lock()');
        EXECUTE v_def;
    END LOOP;
    IF EXISTS (SELECT 1 FROM pg_proc p WHERE p.pronamespace = 'verdict'::regnamespace
               AND p.prosrc LIKE '%8531478330712965377%') THEN
        RAISE EXCEPTION 'a routine still takes the advisory chain lock';
    END IF;
END
$migrate$;
