-- verdict store, PostgreSQL schema version 41: a write of several parts is one statement.
--
-- A write of records of more than one table, or of records with a job's renewal, end or
-- enqueueing, was a transaction of several statements, each a round trip from the store's
-- client: the identity and BEGIN, the claim's renewal, one call per table, the job's end and
-- its notification, the COMMIT. The first record appended takes the audit chain's lock
-- (verdict.chain_lock, schema 28), which is held until the transaction ends, so every round
-- trip after it was spent with every other writer of the store waiting: sampled under load,
-- the backends waiting on that lock outnumbered all others together.
--
-- verdict.write does the same steps, in the same order, inside one statement, so the client
-- sends one message and the transaction commits when that statement ends. The chain's lock is
-- then held only while the database itself works and commits.
--
-- It grants nothing. It runs with its caller's rights (SECURITY INVOKER): its first act is to
-- act as the identity named (set_config('role', ..., true), the SET LOCAL ROLE the client sent
-- before, which PostgreSQL allows only to a login that is a member of that role), and every
-- step after is a call of a routine that identity could already call itself (job_heartbeat,
-- put_<table> or, for a single record, put_one_<table>, job_complete, job_enqueue), with the
-- same arguments, so every check those routines make is made as before, for the same caller.
-- Any login may call it for that reason. Its last act is to act again as whoever called it, so
-- a call made inside a longer transaction leaves nothing of the identity behind. A step refused
-- raises, and the statement's transaction, with everything before it, is rolled back.
--
-- verdict._notify_claimable signals the store's channel once for each kind of which a job of
-- the given requests is claimable now (the predicate job_claim holds, and SQLite's store code);
-- the client sent that query itself before, and now calls this function as verdict.write does,
-- so PostgreSQL's notifications ask it in one place.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

CREATE FUNCTION verdict._notify_claimable(p_channel text, p_requests text[]) RETURNS void
LANGUAGE sql SET search_path = verdict, pg_temp AS $fn$
    SELECT pg_notify(p_channel, k.kind) FROM (SELECT DISTINCT j.kind FROM verdict.jobs j
        WHERE j.request = ANY (p_requests)
          AND j.state IN ('ready', 'running')
          AND ((j.state = 'ready' AND (j.not_before IS NULL OR j.not_before <= verdict._store_now()))
            OR (j.state = 'running' AND j.lease_until <= verdict._store_now()))
          AND ((j.kind = 'gate' AND j.deadline_at <= verdict._store_now()) OR NOT EXISTS (
              SELECT 1 FROM verdict.jobs o WHERE o.request = j.request
                AND o.state NOT IN ('done', 'failed')
                AND ((j.kind = 'gate' AND o.kind <> 'gate')
                  OR (j.kind = 'verify' AND o.kind = 'checks'))))) k;
$fn$;
-- Anyone may notify any channel, and what it reads every role of the store may read.
GRANT EXECUTE ON FUNCTION verdict._notify_claimable(text, text[]) TO PUBLIC;

CREATE FUNCTION verdict.write(
    p_identity text, p_manual_now text, p_principal text, p_role text,
    -- The claim to renew before anything is written (p_job NULL: none), and the outcome to end
    -- its job with after the records (NULL: the job goes on).
    p_job bigint, p_fencing bigint, p_lease_ms bigint, p_outcome text,
    -- The records, in order; consecutive records of one table are one call of its routine.
    p_tables text[], p_keys text[], p_digests text[], p_bodies text[], p_correlations text[],
    -- Whether a record already stored under its key with another digest is taken as it is
    -- (true) or refused as a conflict (false or NULL).
    p_converge boolean[],
    -- Jobs to enqueue after the records and the job's end.
    p_kinds text[], p_requests text[], p_classes text[], p_deadline_ms bigint[],
    -- The channel the store signals claimable jobs on.
    p_channel text)
RETURNS TABLE (r_seq bigint, r_digest text, r_body text, r_inserted boolean, r_counted boolean,
    j_id bigint, j_kind text, j_request text, j_class text, j_state text, j_attempts bigint,
    j_holder text, j_principal text, j_lease_until bigint, j_fencing bigint,
    j_not_before bigint, j_deadline_at bigint, j_outcome text, j_last_error text,
    j_enqueued_by text, j_created_at bigint, j_done_at bigint)
LANGUAGE plpgsql SET search_path = verdict, pg_temp AS $fn$
DECLARE
    v_n integer := coalesce(cardinality(p_tables), 0);
    v_jobs integer := coalesce(cardinality(p_kinds), 0);
    v_from integer := 1;
    v_to integer;
    v_routine regprocedure;
    v_at integer;
    v_sql text;
    v_rows verdict.put_result[];
    v_row verdict.put_result;
    v_jobs_out verdict.jobs[];
    -- Who called, to act as again at the end.
    v_caller constant text := current_setting('role');
    v_caller_now constant text := current_setting('verdict.manual_now', true);
BEGIN
    PERFORM set_config('role', coalesce(p_identity, 'none'), true);
    IF p_manual_now IS NOT NULL THEN
        PERFORM set_config('verdict.manual_now', p_manual_now, true);
    END IF;
    IF coalesce(cardinality(p_keys), 0) <> v_n OR coalesce(cardinality(p_digests), 0) <> v_n
        OR coalesce(cardinality(p_bodies), 0) <> v_n
        OR coalesce(cardinality(p_correlations), 0) <> v_n
        OR coalesce(cardinality(p_converge), 0) <> v_n THEN
        RAISE EXCEPTION 'write: % tables, but % keys, % digests, % bodies, % correlations and % convergences',
            v_n, cardinality(p_keys), cardinality(p_digests), cardinality(p_bodies),
            cardinality(p_correlations), cardinality(p_converge) USING ERRCODE = '22023';
    END IF;
    IF coalesce(cardinality(p_requests), 0) <> v_jobs
        OR coalesce(cardinality(p_classes), 0) <> v_jobs
        OR coalesce(cardinality(p_deadline_ms), 0) <> v_jobs THEN
        RAISE EXCEPTION 'write: % job kinds, but % requests, % classes and % deadlines', v_jobs,
            cardinality(p_requests), cardinality(p_classes), cardinality(p_deadline_ms)
            USING ERRCODE = '22023';
    END IF;
    IF p_outcome IS NOT NULL AND p_job IS NULL THEN
        RAISE EXCEPTION 'write: an outcome names no job to end' USING ERRCODE = '22023';
    END IF;
    IF p_job IS NOT NULL THEN
        PERFORM verdict.job_heartbeat(p_principal, p_role, p_job, p_fencing, p_lease_ms);
    END IF;
    WHILE v_from <= v_n LOOP
        v_to := v_from;
        WHILE v_to < v_n AND p_tables[v_to + 1] = p_tables[v_from] LOOP
            v_to := v_to + 1;
        END LOOP;
        -- Only a table's put routine, by its exact signature: the single-record one for one
        -- record (the one a table without a routine for runs has), else the one for runs.
        IF p_tables[v_from] !~ '^[a-z_]+$' THEN
            v_routine := NULL;
        ELSIF v_to = v_from THEN
            v_routine := to_regprocedure(format(
                'verdict.put_one_%s(text, text, text, text, text, text)', p_tables[v_from]));
        ELSE
            v_routine := to_regprocedure(format(
                'verdict.put_%s(text, text, text[], text[], text[], text[])', p_tables[v_from]));
        END IF;
        IF v_routine IS NULL THEN
            RAISE EXCEPTION 'write: no table % to append % records to', p_tables[v_from],
                v_to - v_from + 1 USING ERRCODE = '22023';
        END IF;
        -- The routine's rows in the order it answered them (its records' order).
        v_sql := format('SELECT array_agg(ROW(w.r_seq, w.r_digest, w.r_body, w.r_inserted, '
            'w.r_counted)::verdict.put_result ORDER BY w.n) FROM %s($1, $2, $3, $4, $5, $6) '
            'WITH ORDINALITY w(r_seq, r_digest, r_body, r_inserted, r_counted, n)',
            v_routine::regproc);
        IF v_to = v_from THEN
            EXECUTE v_sql INTO v_rows USING p_principal, p_role, p_keys[v_from],
                p_digests[v_from], p_bodies[v_from], p_correlations[v_from];
        ELSE
            EXECUTE v_sql INTO v_rows USING p_principal, p_role, p_keys[v_from:v_to],
                p_digests[v_from:v_to], p_bodies[v_from:v_to], p_correlations[v_from:v_to];
        END IF;
        v_at := v_from;
        FOREACH v_row IN ARRAY coalesce(v_rows, ARRAY[]::verdict.put_result[])
        LOOP
            -- A record already stored under its key with another digest is a conflict, unless
            -- the caller accepts what is stored (p_converge). The client settled this after
            -- the routine's answer, inside its transaction; the statement is the transaction
            -- now, so it is settled here, and the whole write is rolled back.
            IF NOT v_row.r_inserted AND v_row.r_digest IS DISTINCT FROM p_digests[v_at]
                AND NOT coalesce(p_converge[v_at], false) THEN
                RAISE EXCEPTION 'write: record % (% %) is stored with digest %, not %', v_at,
                    p_tables[v_at], p_keys[v_at], v_row.r_digest, p_digests[v_at]
                    USING ERRCODE = 'VRW01', DETAIL = format('%s %s', v_at, v_row.r_digest);
            END IF;
            r_seq := v_row.r_seq;
            r_digest := v_row.r_digest;
            r_body := v_row.r_body;
            r_inserted := v_row.r_inserted;
            r_counted := v_row.r_counted;
            RETURN NEXT;
            v_at := v_at + 1;
        END LOOP;
        IF v_at <> v_to + 1 THEN
            RAISE EXCEPTION 'write: put_% answered % rows for % records', p_tables[v_from],
                v_at - v_from, v_to - v_from + 1 USING ERRCODE = 'XX000';
        END IF;
        v_from := v_to + 1;
    END LOOP;
    r_seq := NULL;
    r_digest := NULL;
    r_body := NULL;
    r_inserted := NULL;
    r_counted := NULL;
    -- The jobs the write ended or queued, in the order they were answered.
    IF p_outcome IS NOT NULL THEN
        SELECT array_agg(c) INTO v_jobs_out
            FROM verdict.job_complete(p_principal, p_role, p_job, p_fencing, p_outcome) c;
        IF cardinality(v_jobs_out) IS DISTINCT FROM 1 THEN
            RAISE EXCEPTION 'write: job % was not ended', p_job USING ERRCODE = 'P0002';
        END IF;
        PERFORM verdict._notify_claimable(p_channel, ARRAY[v_jobs_out[1].request]);
    END IF;
    IF v_jobs > 0 THEN
        v_jobs_out := coalesce(v_jobs_out, ARRAY[]::verdict.jobs[]) || ARRAY(
            SELECT e FROM verdict.job_enqueue(p_principal, p_role, p_kinds, p_requests,
                p_classes, p_deadline_ms) e);
        PERFORM verdict._notify_claimable(p_channel,
            ARRAY(SELECT DISTINCT u.r FROM unnest(p_requests) u(r)));
    END IF;
    -- Each with its times in microseconds, as the client reads a job.
    RETURN QUERY SELECT NULL::bigint, NULL::text, NULL::text, NULL::boolean, NULL::boolean,
        d.id, d.kind, d.request, d.class, d.state, d.attempts, d.holder, d.principal,
        (extract(epoch FROM d.lease_until) * 1000000)::bigint, d.fencing,
        (extract(epoch FROM d.not_before) * 1000000)::bigint,
        (extract(epoch FROM d.deadline_at) * 1000000)::bigint, d.outcome, d.last_error,
        d.enqueued_by, (extract(epoch FROM d.created_at) * 1000000)::bigint,
        (extract(epoch FROM d.done_at) * 1000000)::bigint
        FROM unnest(coalesce(v_jobs_out, ARRAY[]::verdict.jobs[])) WITH ORDINALITY d
        ORDER BY d.ordinality;
    PERFORM set_config('role', v_caller, true);
    PERFORM set_config('verdict.manual_now', coalesce(v_caller_now, ''), true);
END
$fn$;
-- Any login may call it: it acts only as an identity that login may already act as, through
-- routines that identity may already call.
GRANT EXECUTE ON FUNCTION verdict.write(text, text, text, text, bigint, bigint, bigint, text,
    text[], text[], text[], text[], text[], boolean[], text[], text[], text[], bigint[], text)
    TO PUBLIC;
