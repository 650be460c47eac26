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
--   answered a record stored under it with that record's body and digest, whatever the caller
--   offered: a verifier with no grant read another execution's finding (and a run's events) by
--   offering a body under the finding's key, and a record of few possible bodies (a run event)
--   could be read from its digest alone. Now the body comes back only when the stored digest
--   is the one offered, as principals' have since schema 10, and the stored digest only to a
--   caller that may read the record (by the rule of its table's read policy, schema 23, or one
--   that reads every record); any other is refused (42501), told only that the key is taken by
--   a record it may not read. Blobs are keyed by the digest of their bytes, so their
--   stored record is answered as before; gate decisions, which only the gate's identity may
--   write, converge on the first stored under a key (every writer reads that one back), as
--   before; principals' and credential changes' routines answered a body only to the same
--   bytes already, and their digests name nothing guessable.
-- - take_chain_lock (schema 35) ended, between its waits, only a holder of the chain's lock
--   idle in its transaction. A login could call a write routine that takes the lock (one
--   storing nothing, its key already stored) and sleep in the same statement, holding every
--   writer of the store for as long as it liked. Now a waiter also ends a holder it has itself
--   seen holding the lock, in the same transaction, for 10 seconds, whatever that holder is
--   doing, unless the holder is a superuser's session or one of the routines' owner (a
--   migration). The time is the waiter's own observation, not the holder's transaction's age:
--   a writer that waited long for the lock is not ended for having waited. Only the lock the
--   routines take (EXCLUSIVE) counts, so a reader of the table (a backup) is never ended.
-- - A result's routine waived its check of the verifier's grant when any event of the run said
--   it ended for a lapsed grant; now only when that is the run's end (its first terminal event
--   as recorded), as the store's code has it.

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

-- The digest of the record stored under `p_key` in table `p_tbl`, as a write routine answers it
-- to a caller offering `p_offered`: to a caller offering the same digest, or one that may read
-- the record (an identity that reads every record, or by the table's read rule), as it is; any
-- other caller is refused, so a routine answers nothing of a record its caller may not read.
-- NULL for no record.
CREATE FUNCTION verdict._stored_digest(p_tbl text, p_key text, p_stored text, p_offered text)
RETURNS text
LANGUAGE plpgsql STABLE SET search_path = verdict, pg_temp AS $$
BEGIN
    IF p_stored IS NULL OR p_stored = p_offered OR verdict._reader() IS NULL
        OR verdict._reads_record(p_tbl, p_key) THEN
        RETURN p_stored;
    END IF;
    RAISE EXCEPTION '%: the key % is taken by a record this identity may not read', p_tbl,
        p_key USING ERRCODE = '42501';
END $$;
REVOKE ALL ON FUNCTION verdict._stored_digest(text, text, text, text) FROM PUBLIC;

DO $migrate$
DECLARE
    f record;
    v_def text;
    v_hits integer;
    v_lookup text := 'SELECT t.seq, t.digest, t.body, ';
    v_insert text := 'INSERT INTO verdict.run_events (seq, key, digest, body, run_id, n, status)';
    v_offered text;
    -- A result's check of its verifier's grant is waived for a run that ended for a lapsed
    -- grant (schema 6): now only when that is the run's end, its first terminal event as
    -- recorded, as the store's code reads it, not any event saying so.
    v_waiver text := $w$        AND NOT EXISTS (SELECT 1 FROM verdict.run_events ck_e
            WHERE ck_e.run_id = (v_doc #>> '{verifier,run}') AND ck_e.status = 'unavailable'
              AND (ck_e.body::jsonb ->> 'reason') = 'grant_revoked') THEN$w$;
    v_end_waiver text := $w$        AND NOT EXISTS (SELECT 1 FROM (SELECT ck_e.status, ck_e.body
                FROM verdict.run_events ck_e
                WHERE ck_e.run_id = (v_doc #>> '{verifier,run}') AND ck_e.status <> 'started'
                ORDER BY ck_e.seq LIMIT 1) ck_end
            WHERE ck_end.status = 'unavailable'
              AND (ck_end.body::jsonb ->> 'reason') = 'grant_revoked') THEN$w$;
BEGIN
    -- Every write routine but blobs' (keyed by their bytes' digest), gate decisions' (the
    -- gate's alone, converging on the first), principals' and credential changes' (an
    -- operator's alone, answering a body only to its own bytes already) and put_own_denial's
    -- (which builds its key from the caller's own denial).
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
        v_offered := CASE WHEN f.proname ~ '^put_one_' THEN 'p_digest' ELSE 'p_digests[i]' END;
        v_def := replace(v_def, v_lookup, format(
            'SELECT t.seq, verdict._stored_digest(%L, t.key, t.digest, %s), CASE WHEN t.digest = %s THEN t.body END, ',
            regexp_replace(f.proname, '^put_(one_)?', ''), v_offered, v_offered));
        IF f.proname IN ('put_run_events', 'put_one_run_events') THEN
            v_hits := (length(v_def) - length(replace(v_def, v_insert, ''))) / length(v_insert);
            IF v_hits <> 1 THEN
                RAISE EXCEPTION '%: the run event''s insert occurs % times, not once',
                    f.signature, v_hits;
            END IF;
            v_def := replace(v_def, v_insert,
                'PERFORM verdict._run_event_follows(v_doc);' || E'\n    ' || v_insert);
        END IF;
        IF f.proname IN ('put_verification_results', 'put_one_verification_results') THEN
            v_hits := (length(v_def) - length(replace(v_def, v_waiver, ''))) / length(v_waiver);
            IF v_hits <> 1 THEN
                RAISE EXCEPTION '%: the waiver of the grant check occurs % times, not once',
                    f.signature, v_hits;
            END IF;
            v_def := replace(v_def, v_waiver, v_end_waiver);
        END IF;
        EXECUTE v_def;
    END LOOP;
END
$migrate$;

-- Ends, for a writer waiting for the chain's lock, each other session holding it (EXCLUSIVE,
-- the mode the routines take) that is idle in its transaction for more than 5 seconds (as
-- schema 35 did), or that this waiter has seen holding it, in the same transaction, for 10
-- seconds (`p_seen`: each holder's pid and transaction start, with the time this waiter first
-- saw it hold the lock); a superuser's session and one of a member of the routines' owner (a
-- migration) are waited for in the second case. Returns the holders seen now, with the times
-- they were first seen, for the waiter's next call.
CREATE FUNCTION verdict._end_chain_holder(p_seen jsonb) RETURNS jsonb
LANGUAGE plpgsql SET search_path = verdict, pg_temp AS $$
DECLARE
    r record;
    v_now double precision := extract(epoch FROM clock_timestamp());
    v_seen jsonb := '{}';
    v_first double precision;
BEGIN
    -- What pg_stat_activity shows is taken once per transaction unless cleared: a writer that
    -- waits in one transaction must see the holder's state as it is now.
    PERFORM pg_catalog.pg_stat_clear_snapshot();
    FOR r IN SELECT a.pid, a.pid::text || '@' || coalesce(a.xact_start::text, '') AS holder,
                a.state, a.state_change, a.usesysid
            FROM pg_catalog.pg_locks l
            JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
            WHERE l.locktype = 'relation' AND l.granted AND l.mode = 'ExclusiveLock'
              AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d
                  WHERE d.datname = current_database())
              AND l.relation = 'verdict.chain_lock'::regclass
              AND l.pid <> pg_catalog.pg_backend_pid() LOOP
        v_first := coalesce((p_seen ->> r.holder)::double precision, v_now);
        IF (r.state IN ('idle in transaction', 'idle in transaction (aborted)')
                AND r.state_change < clock_timestamp() - interval '5 seconds')
            OR (v_now - v_first >= 10
                -- current_user is the routines' owner: they alone take the lock.
                AND NOT pg_catalog.pg_has_role(r.usesysid, current_user, 'MEMBER')) THEN
            BEGIN
                PERFORM pg_catalog.pg_terminate_backend(r.pid, 5000);
            EXCEPTION WHEN insufficient_privilege THEN
                -- Not this owner's to end (a superuser's session): wait for it as before.
                NULL;
            END;
        END IF;
        v_seen := v_seen || jsonb_build_object(r.holder, v_first);
    END LOOP;
    RETURN v_seen;
END $$;
REVOKE ALL ON FUNCTION verdict._end_chain_holder(jsonb) FROM PUBLIC;

CREATE OR REPLACE FUNCTION verdict.take_chain_lock() RETURNS void
LANGUAGE plpgsql SET search_path = verdict, pg_temp SET lock_timeout = '1s' AS $$
DECLARE
    -- The holders this waiter has seen, with when it first saw each (see _end_chain_holder).
    v_seen jsonb := '{}';
BEGIN
    LOOP
        BEGIN
            LOCK TABLE verdict.chain_lock IN EXCLUSIVE MODE;
            RETURN;
        EXCEPTION WHEN lock_not_available THEN
            v_seen := verdict._end_chain_holder(v_seen);
        END;
    END LOOP;
END $$;

-- Schema 35's reaper, which take_chain_lock no longer calls.
DROP FUNCTION verdict._end_idle_chain_holder();
