-- verdict store, PostgreSQL schema version 43: a run's events follow one another and nothing
-- follows its end; a write routine answers a record stored under its key with that record's
-- body only to a caller offering the same bytes; a session holding the audit chain's lock in a
-- statement that does not end is ended like one idle in its transaction.
--
-- Found by trying them through a principal's own login:
-- - put_run_events took from a verifier any event for its own run, numbered as it liked, after
--   its end or before it. The engine took the first terminal event by number as the run's end,
--   so a verifier whose grant was revoked appended `unavailable`/`grant_revoked` as event 1000
--   (which lets a result be stored as history past the grant), then `completed` as event 1 and a
--   passing result: the result counted. One whose run an operator had cancelled (event 1)
--   appended `completed` as event 0. Now the routines take an event only as the next of its run
--   (numbered from 1, one more than the run's last, read under the chain's lock) and none after
--   the run's end (`completed`, `unavailable` or `cancelled`); the body must be a run event
--   (its members, a known status, a known reason exactly when unavailable). The engine reads a
--   run's events in the order the store recorded them, and a run whose events are not numbered
--   1, 2, … in that order with nothing after the end (written before this version) counts no
--   result.
-- - Every write routine looked its key up before it checked what the caller may write, and
--   answered a record stored under it with that record's body, whatever the caller offered: a
--   verifier with no grant read another execution's finding (and a run's events) by offering
--   a body under the finding's key. Now the body comes back only when the stored digest is the
--   one offered, as principals' have since schema 10; a caller offering other bytes learns
--   that the key is taken and the stored digest, which is the conflict it is told of anyway.
--   Blobs are keyed by the digest of their bytes, so their stored record is answered as before;
--   gate decisions, which only the gate's identity may write, converge on the first stored
--   under a key (every writer reads that one back), as before.
-- - _end_idle_chain_holder (schema 35) ended only a holder of the chain's lock idle in its
--   transaction. A login could call a write routine that takes the lock (one storing nothing,
--   its key already stored) and sleep in the same statement, holding every writer of the store
--   for as long as it liked. Now it also ends a holder whose transaction began more than 10 s
--   ago, whatever its state, unless the session belongs to the store's owner (a migration) or
--   a superuser (which it may not end). verdict's own writes are one statement each (schema
--   41) and end well within that.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

-- Refuses run event `p_doc` unless it is a run event that follows its run's events: numbered
-- one more than the run's last (from 1), with the run not ended. Called by the run event write
-- routines under the chain's lock, so the run's events cannot change meanwhile.
CREATE FUNCTION verdict._run_event_follows(p_doc jsonb) RETURNS void
LANGUAGE plpgsql SET search_path = verdict, pg_temp AS $$
DECLARE
    v_run text := p_doc ->> 'run_id';
    v_last bigint;
    v_end text;
BEGIN
    IF jsonb_typeof(p_doc -> 'run_id') IS DISTINCT FROM 'string'
        OR jsonb_typeof(p_doc -> 'n') IS DISTINCT FROM 'number'
        OR (p_doc ->> 'n') !~ '^[1-9][0-9]*$' OR length(p_doc ->> 'n') > 18
        OR jsonb_typeof(p_doc -> 'status') IS DISTINCT FROM 'string'
        OR NOT ((p_doc ->> 'status') = ANY ('{started,completed,unavailable,cancelled}'::text[]))
        OR (p_doc ? 'reason') IS DISTINCT FROM ((p_doc ->> 'status') = 'unavailable')
        OR (p_doc ? 'reason' AND (jsonb_typeof(p_doc -> 'reason') IS DISTINCT FROM 'string'
            OR NOT ((p_doc ->> 'reason') = ANY ('{timeout,provider_error,budget_exhausted,context_incomplete,grant_revoked,cancelled,invalid_output}'::text[]))))
        OR (p_doc - '{run_id,n,status,reason}'::text[]) <> '{}'::jsonb THEN
        RAISE EXCEPTION 'run event %: not a run event (run_id, n from 1, status started, completed, unavailable or cancelled, and a known reason exactly when unavailable; nothing else)',
            left(p_doc::text, 200) USING ERRCODE = '22023';
    END IF;
    SELECT max(e.n), min(e.status) FILTER (WHERE e.status <> 'started') INTO v_last, v_end
        FROM verdict.run_events e WHERE e.run_id = v_run;
    IF v_end IS NOT NULL THEN
        RAISE EXCEPTION 'run %: it has ended (%); nothing follows its end', v_run, v_end
            USING ERRCODE = '42501';
    END IF;
    IF (p_doc ->> 'n')::bigint <> coalesce(v_last, 0) + 1 THEN
        RAISE EXCEPTION 'run %: event % is not the next of its run, which is %', v_run,
            p_doc ->> 'n', coalesce(v_last, 0) + 1 USING ERRCODE = '42501';
    END IF;
END $$;
REVOKE ALL ON FUNCTION verdict._run_event_follows(jsonb) FROM PUBLIC;

DO $migrate$
DECLARE
    f record;
    v_def text;
    v_hits integer;
    v_lookup text := 'SELECT t.seq, t.digest, t.body, ';
    v_insert text := 'INSERT INTO verdict.run_events (seq, key, digest, body, run_id, n, status)';
BEGIN
    -- Every write routine but blobs' (keyed by their bytes' digest), gate decisions' (the
    -- gate's alone, converging on the first), and those that answer a body only to its own
    -- bytes already (principals, credential changes) or can only meet the caller's own record
    -- (put_own_denial builds its key from the caller's own denial).
    FOR f IN SELECT p.oid, p.proname, p.oid::regprocedure::text AS signature
            FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
            WHERE n.nspname = 'verdict' AND p.proname ~ '^put_'
              AND p.proname NOT IN ('put_blobs', 'put_own_denial', 'put_principals',
                  'put_one_principals', 'put_one_credential_changes', 'put_gate_decisions',
                  'put_one_gate_decisions')
            ORDER BY p.proname LOOP
        v_def := pg_get_functiondef(f.oid);
        v_hits := (length(v_def) - length(replace(v_def, v_lookup, ''))) / length(v_lookup);
        IF v_hits <> 1 THEN
            RAISE EXCEPTION '%: the stored row''s lookup occurs % times, not once', f.signature,
                v_hits;
        END IF;
        v_def := replace(v_def, v_lookup, format('SELECT t.seq, t.digest, CASE WHEN t.digest = %s THEN t.body END, ',
            CASE WHEN f.proname ~ '^put_one_' THEN 'p_digest' ELSE 'p_digests[i]' END));
        IF f.proname IN ('put_run_events', 'put_one_run_events') THEN
            v_hits := (length(v_def) - length(replace(v_def, v_insert, ''))) / length(v_insert);
            IF v_hits <> 1 THEN
                RAISE EXCEPTION '%: the run event''s insert occurs % times, not once',
                    f.signature, v_hits;
            END IF;
            v_def := replace(v_def, v_insert,
                'PERFORM verdict._run_event_follows(v_doc);' || E'\n    ' || v_insert);
        END IF;
        EXECUTE v_def;
    END LOOP;
END
$migrate$;

CREATE OR REPLACE FUNCTION verdict._end_idle_chain_holder() RETURNS integer
LANGUAGE plpgsql SET search_path = verdict, pg_temp AS $$
DECLARE
    r record;
    v_ended integer := 0;
BEGIN
    -- What pg_stat_activity shows is taken once per transaction unless cleared: a writer that
    -- waits in one transaction must see the holder's state as it is now.
    PERFORM pg_catalog.pg_stat_clear_snapshot();
    FOR r IN SELECT a.pid FROM pg_catalog.pg_locks l
            JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
            WHERE l.locktype = 'relation' AND l.granted
              AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d
                  WHERE d.datname = current_database())
              AND l.relation = 'verdict.chain_lock'::regclass
              AND l.pid <> pg_catalog.pg_backend_pid()
              AND ((a.state IN ('idle in transaction', 'idle in transaction (aborted)')
                    AND a.state_change < clock_timestamp() - interval '5 seconds')
                OR (a.xact_start < clock_timestamp() - interval '10 seconds'
                    -- The owner's own sessions (a migration, run as it) are waited for.
                    AND NOT pg_catalog.pg_has_role(a.usesysid, current_user, 'MEMBER'))) LOOP
        BEGIN
            IF pg_catalog.pg_terminate_backend(r.pid, 5000) THEN
                v_ended := v_ended + 1;
            END IF;
        EXCEPTION WHEN insufficient_privilege THEN
            -- Not this owner's to end (a superuser's session): wait for it as before.
            NULL;
        END;
    END LOOP;
    RETURN v_ended;
END $$;
REVOKE ALL ON FUNCTION verdict._end_idle_chain_holder() FROM PUBLIC;
