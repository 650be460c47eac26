-- verdict store, PostgreSQL schema version 17: a claim counts only while its lease holds at the
-- store's time, and a verifier's admission lease is held to a minute on every store.
--
-- - The store's time, as the routines read it (verdict._store_now()): the database's clock on a
--   store that keeps the system clock, as before. On a store that keeps a manual clock (tests
--   and simulations) the time is the one the calling handle set, which the store names at the
--   start of each transaction it opens, in the transaction-local setting `verdict.manual_now`
--   (microseconds since the epoch, digits only); a transaction on such a store that names no
--   time, or not in that form, is refused (SQLSTATE 42501) wherever the time is needed. A login
--   may name a time of its own there, as any handle of a manual store sets its own: on the
--   system clock the setting is never read.
-- - The job queue keeps the store's time: enqueue, claim, heartbeat, completion and failure
--   take every time from verdict._store_now() instead of clock_timestamp(), so on a manual
--   store a lease lapses when the store's time passes it, as the store's code reads it.
-- - A lapsed claim is no longer held. _job_held (every heartbeat, completion and failure, and
--   the claim a write under a job's claim renews first) refuses a claim whose lease lapsed at
--   the store's time, taken over or not (SQLSTATE VRJ01, as for a stale token). The checks of
--   version 15 that a verifier's run records are written under the claim it holds
--   (_verifier_run_note: a takeover record, a refused result, a run context; _takeover_end: a
--   takeover's run end) now also need that claim's lease to hold at the store's time.
-- - Admission leases. cas_lease held a verifier's own `admit <request>` lease to 60 seconds
--   from clock_timestamp() only on a store that keeps the database's clock; it now measures
--   the 60 seconds from the store's time on every store, and refuses a lease whose expiry is
--   missing or unreadable instead of letting it through.
--
-- How: each routine's text is patched where a marker occurs exactly as often as expected.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

CREATE FUNCTION verdict._store_now() RETURNS timestamptz
LANGUAGE plpgsql SET search_path = verdict, pg_temp AS $$
DECLARE
    v_named text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM verdict.pointers sn_c WHERE sn_c.pointer = 'clock'
            AND sn_c.name = 'store' AND sn_c.value = '{"clock":"manual"}') THEN
        RETURN clock_timestamp();
    END IF;
    v_named := current_setting('verdict.manual_now', true);
    IF v_named IS NULL OR v_named !~ '^-?[0-9]{1,18}$' THEN
        RAISE EXCEPTION 'this store keeps a manual clock and the transaction names no time on it'
            USING ERRCODE = '42501';
    END IF;
    RETURN timestamptz 'epoch' + v_named::bigint * interval '1 microsecond';
END $$;
REVOKE ALL ON FUNCTION verdict._store_now() FROM PUBLIC;
-- The store's code asks which jobs are claimable at the store's time in the acting identity's
-- own transaction (its wake-up notifications).
GRANT EXECUTE ON FUNCTION verdict._store_now() TO __OPERATOR__, __PRODUCER__, __RUNNER__,
    __VERIFIER__, __HUMAN__, __GATE__;

DO $make$
DECLARE
    p record;
    v_def text;
    v_hits integer;
BEGIN
    FOR p IN SELECT * FROM (VALUES
        -- The job routines: every time the store's.
        ('verdict.job_enqueue(text, text, text[], text[], text[], bigint[])',
            'clock_timestamp()', 'verdict._store_now()', 1),
        ('verdict.job_claim(text, text, text, text, bigint)',
            'clock_timestamp()', 'verdict._store_now()', 1),
        ('verdict.job_heartbeat(text, text, bigint, bigint, bigint)',
            'clock_timestamp()', 'verdict._store_now()', 1),
        ('verdict.job_complete(text, text, bigint, bigint, text)',
            'clock_timestamp()', 'verdict._store_now()', 1),
        ('verdict.job_fail(text, text, bigint, bigint, text, bigint)',
            'clock_timestamp()', 'verdict._store_now()', 2),
        -- An enqueued job's creation time too, which orders claims with retries' back-offs.
        ('verdict.job_enqueue(text, text, text[], text[], text[], bigint[])',
            'INSERT INTO verdict.jobs (kind, request, class, enqueued_by, deadline_at)',
            'INSERT INTO verdict.jobs (kind, request, class, enqueued_by, deadline_at, created_at)', 1),
        ('verdict.job_enqueue(text, text, text[], text[], text[], bigint[])',
            $m$* interval '1 millisecond' END
    FROM unnest($m$,
            $r$* interval '1 millisecond' END,
        verdict._store_now()
    FROM unnest($r$, 1),
        -- A claim is held only while its lease holds.
        ('verdict._job_held(text, text, bigint, bigint)',
            E'    RETURN v_job;\nEND',
            E'    IF v_job.lease_until IS NULL OR v_job.lease_until <= verdict._store_now() THEN\n'
            || E'        RAISE EXCEPTION ''job %: the lease of claim % lapsed at %, at the store''''s time'', p_id,\n'
            || E'            p_fencing, v_job.lease_until USING ERRCODE = ''VRJ01'';\n'
            || E'    END IF;\n    RETURN v_job;\nEND', 1),
        -- The run records a verifier writes under a claim: only while its lease holds.
        ('verdict._verifier_run_note(text, jsonb, text)',
            'AND to_j.fencing > v_job[2]::bigint)',
            E'AND to_j.fencing > v_job[2]::bigint\n                  AND to_j.lease_until > verdict._store_now())', 1),
        ('verdict._verifier_run_note(text, jsonb, text)',
            'AND rn_j.principal = p_principal AND rn_j.fencing = v_job[2]::bigint)',
            E'AND rn_j.principal = p_principal AND rn_j.fencing = v_job[2]::bigint\n              AND rn_j.lease_until > verdict._store_now())', 1),
        ('verdict._takeover_end(text, jsonb)',
            'AND te_j.principal = p_principal AND te_j.fencing > v_job[2]::bigint);',
            E'AND te_j.principal = p_principal AND te_j.fencing > v_job[2]::bigint\n          AND te_j.lease_until > verdict._store_now());', 1),
        -- A verifier's admission lease: at most 60 seconds from the store's time, on every store.
        ('verdict.cas_lease(text, text, text, bigint, text, text, text, text, text)',
            $m$AND NOT EXISTS (SELECT 1 FROM verdict.pointers vl_c WHERE vl_c.pointer = 'clock'
                AND vl_c.name = 'store' AND vl_c.value = '{"clock":"manual"}')
            AND (p_new::jsonb ->> 'expires_at')::timestamptz > clock_timestamp() + interval '60 seconds' THEN$m$,
            $r$AND NOT coalesce((p_new::jsonb ->> 'expires_at')::timestamptz
                <= verdict._store_now() + interval '60 seconds', false) THEN$r$, 1)
    ) AS v(signature, marker, replacement, expected) LOOP
        v_def := pg_get_functiondef(p.signature::regprocedure);
        v_hits := (length(v_def) - length(replace(v_def, p.marker, ''))) / length(p.marker);
        IF v_hits <> p.expected THEN
            RAISE EXCEPTION '%: % occurs % times, not %', p.signature, p.marker, v_hits,
                p.expected;
        END IF;
        EXECUTE replace(v_def, p.marker, p.replacement);
    END LOOP;
    -- Nothing left on the database's clock alone in the queue's routines.
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_proc f WHERE f.pronamespace = 'verdict'::regnamespace
            AND f.proname IN ('job_enqueue', 'job_claim', 'job_heartbeat', 'job_complete',
                'job_fail', '_job_held')
            AND position('clock_timestamp()' IN f.prosrc) > 0) THEN
        RAISE EXCEPTION 'a job routine still reads clock_timestamp()';
    END IF;
END $make$;

RESET ROLE;
