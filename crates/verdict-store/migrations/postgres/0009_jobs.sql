-- verdict store, PostgreSQL schema version 9: the job queue.
--
-- Jobs are operational state, not evidence: a row is claimed, its lease renewed, and it is
-- finished, each an UPDATE. Nothing a job does counts through this table: its effects are the
-- engine's ordinary audited writes, so `audit verify` neither covers nor needs it. Every time
-- here is the database's clock (clock_timestamp()), so workers on many machines agree on when
-- a lease lapses.
--
-- The principal roles read the table and change it only through the routines below (SECURITY
-- DEFINER, fixed search_path), each of which checks the role the call claims against the
-- connection (verdict._claim) and the role against the job's kind: runners take `checks` jobs,
-- verifiers `verify` jobs, the gate role `gate` jobs; operators and producers enqueue. A claim
-- takes a ready job, or one whose lease lapsed, with FOR UPDATE SKIP LOCKED, so concurrent
-- claims never wait on each other and never take the same job; every claim increments the
-- fencing token, and a heartbeat, completion or failure counts only with the current token.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

CREATE TABLE verdict.jobs (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind text NOT NULL CHECK (kind IN ('checks', 'verify', 'gate')),
    request text NOT NULL,
    class text NOT NULL DEFAULT '',
    state text NOT NULL DEFAULT 'ready' CHECK (state IN ('ready', 'running', 'done', 'failed')),
    attempts bigint NOT NULL DEFAULT 0,
    holder text,
    principal text,
    lease_until timestamptz,
    fencing bigint NOT NULL DEFAULT 0,
    not_before timestamptz,
    deadline_at timestamptz,
    outcome text,
    last_error text,
    enqueued_by text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    done_at timestamptz,
    UNIQUE (kind, request, class)
);
CREATE INDEX jobs_ready ON verdict.jobs (kind, state, not_before);
CREATE INDEX jobs_request ON verdict.jobs (request);
-- Row security is forced, as on every table: the owner (the routines) inserts and updates
-- through the policies below, and no policy lets anyone delete a job.
ALTER TABLE verdict.jobs ENABLE ROW LEVEL SECURITY;
ALTER TABLE verdict.jobs FORCE ROW LEVEL SECURITY;
CREATE POLICY jobs_read ON verdict.jobs FOR SELECT USING (true);
CREATE POLICY jobs_enqueue ON verdict.jobs FOR INSERT TO __OWNER__ WITH CHECK (true);
CREATE POLICY jobs_change ON verdict.jobs FOR UPDATE TO __OWNER__ USING (true) WITH CHECK (true);
REVOKE ALL ON verdict.jobs FROM PUBLIC;
GRANT SELECT ON verdict.jobs TO __OPERATOR__, __PRODUCER__, __RUNNER__, __VERIFIER__, __HUMAN__,
    __GATE__;

-- The role that works jobs of a kind.
CREATE FUNCTION verdict._job_role(p_kind text) RETURNS text
LANGUAGE sql IMMUTABLE SET search_path = verdict, pg_temp AS $$
    SELECT CASE p_kind WHEN 'checks' THEN 'runner' WHEN 'verify' THEN 'verifier'
        WHEN 'gate' THEN 'gate' END
$$;

CREATE FUNCTION verdict.job_enqueue(p_principal text, p_role text, p_kinds text[],
    p_requests text[], p_classes text[], p_deadline_ms bigint[])
RETURNS SETOF verdict.jobs
LANGUAGE plpgsql SECURITY DEFINER SET search_path = verdict, pg_temp AS $$
BEGIN
    IF p_role NOT IN ('operator', 'producer') THEN
        RAISE EXCEPTION 'role % may not enqueue jobs', p_role USING ERRCODE = '42501';
    END IF;
    PERFORM verdict._claim(p_role);
    INSERT INTO verdict.jobs (kind, request, class, enqueued_by, deadline_at)
    SELECT k, r, c, p_principal,
        CASE WHEN d IS NULL THEN NULL ELSE clock_timestamp() + d * interval '1 millisecond' END
    FROM unnest(p_kinds, p_requests, p_classes, p_deadline_ms) AS u(k, r, c, d)
    ON CONFLICT (kind, request, class) DO NOTHING;
    RETURN QUERY SELECT j.* FROM verdict.jobs j
        JOIN unnest(p_kinds, p_requests, p_classes) AS u(k, r, c)
          ON j.kind = u.k AND j.request = u.r AND j.class = u.c
        ORDER BY j.id;
END $$;

CREATE FUNCTION verdict.job_claim(p_principal text, p_role text, p_kind text, p_holder text,
    p_lease_ms bigint)
RETURNS SETOF verdict.jobs
LANGUAGE plpgsql SECURITY DEFINER SET search_path = verdict, pg_temp AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
    v_id bigint;
BEGIN
    IF p_role IS DISTINCT FROM verdict._job_role(p_kind) THEN
        RAISE EXCEPTION 'role % may not work % jobs', p_role, p_kind USING ERRCODE = '42501';
    END IF;
    IF p_lease_ms IS NULL OR p_lease_ms < 1 THEN
        RAISE EXCEPTION 'a lease must be positive' USING ERRCODE = '22023';
    END IF;
    PERFORM verdict._claim(p_role);
    SELECT j.id INTO v_id FROM verdict.jobs j
    WHERE j.kind = p_kind
      AND ((j.state = 'ready' AND (j.not_before IS NULL OR j.not_before <= v_now))
        OR (j.state = 'running' AND j.lease_until <= v_now))
      -- A verify job waits for the checks job of its request (preflight reads the evidence
      -- the checks write); a gate job waits for every other job of its request, or for its
      -- deadline.
      AND ((j.kind = 'gate' AND j.deadline_at <= v_now) OR NOT EXISTS (
            SELECT 1 FROM verdict.jobs o WHERE o.request = j.request
              AND o.state NOT IN ('done', 'failed')
              AND ((j.kind = 'gate' AND o.kind <> 'gate')
                OR (j.kind = 'verify' AND o.kind = 'checks'))))
    ORDER BY coalesce(j.not_before, j.created_at), j.id
    LIMIT 1
    FOR UPDATE SKIP LOCKED;
    IF v_id IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY UPDATE verdict.jobs SET state = 'running', holder = p_holder,
        principal = p_principal, lease_until = v_now + p_lease_ms * interval '1 millisecond',
        fencing = fencing + 1, attempts = attempts + 1
    WHERE id = v_id RETURNING *;
END $$;

-- The job, if the caller still holds it under this fencing token; else an exception.
CREATE FUNCTION verdict._job_held(p_principal text, p_role text, p_id bigint, p_fencing bigint)
RETURNS verdict.jobs
LANGUAGE plpgsql SET search_path = verdict, pg_temp AS $$
DECLARE
    v_job verdict.jobs;
BEGIN
    PERFORM verdict._claim(p_role);
    SELECT * INTO v_job FROM verdict.jobs WHERE id = p_id FOR UPDATE;
    IF NOT FOUND OR p_role IS DISTINCT FROM verdict._job_role(v_job.kind) THEN
        RAISE EXCEPTION 'role % holds no job %', p_role, p_id USING ERRCODE = '42501';
    END IF;
    IF v_job.state <> 'running' OR v_job.fencing <> p_fencing
        OR v_job.principal IS DISTINCT FROM p_principal THEN
        RAISE EXCEPTION 'job %: fencing token % is not the current claim (token %, %)', p_id,
            p_fencing, v_job.fencing, v_job.state USING ERRCODE = 'VRJ01';
    END IF;
    RETURN v_job;
END $$;

CREATE FUNCTION verdict.job_heartbeat(p_principal text, p_role text, p_id bigint,
    p_fencing bigint, p_lease_ms bigint)
RETURNS SETOF verdict.jobs
LANGUAGE plpgsql SECURITY DEFINER SET search_path = verdict, pg_temp AS $$
BEGIN
    IF p_lease_ms IS NULL OR p_lease_ms < 1 THEN
        RAISE EXCEPTION 'a lease must be positive' USING ERRCODE = '22023';
    END IF;
    PERFORM verdict._job_held(p_principal, p_role, p_id, p_fencing);
    RETURN QUERY UPDATE verdict.jobs
        SET lease_until = clock_timestamp() + p_lease_ms * interval '1 millisecond'
        WHERE id = p_id RETURNING *;
END $$;

CREATE FUNCTION verdict.job_complete(p_principal text, p_role text, p_id bigint,
    p_fencing bigint, p_outcome text)
RETURNS SETOF verdict.jobs
LANGUAGE plpgsql SECURITY DEFINER SET search_path = verdict, pg_temp AS $$
BEGIN
    PERFORM verdict._job_held(p_principal, p_role, p_id, p_fencing);
    RETURN QUERY UPDATE verdict.jobs SET state = 'done', outcome = p_outcome,
        done_at = clock_timestamp(), lease_until = NULL
        WHERE id = p_id RETURNING *;
END $$;

-- p_retry_ms NULL: give up (state failed); else ready again after that many milliseconds.
CREATE FUNCTION verdict.job_fail(p_principal text, p_role text, p_id bigint, p_fencing bigint,
    p_why text, p_retry_ms bigint)
RETURNS SETOF verdict.jobs
LANGUAGE plpgsql SECURITY DEFINER SET search_path = verdict, pg_temp AS $$
BEGIN
    PERFORM verdict._job_held(p_principal, p_role, p_id, p_fencing);
    RETURN QUERY UPDATE verdict.jobs SET last_error = p_why, lease_until = NULL,
        state = CASE WHEN p_retry_ms IS NULL THEN 'failed' ELSE 'ready' END,
        not_before = CASE WHEN p_retry_ms IS NULL THEN not_before
            ELSE clock_timestamp() + p_retry_ms * interval '1 millisecond' END,
        done_at = CASE WHEN p_retry_ms IS NULL THEN clock_timestamp() END
        WHERE id = p_id RETURNING *;
END $$;

REVOKE ALL ON FUNCTION verdict._job_role(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION verdict._job_held(text, text, bigint, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION verdict.job_enqueue(text, text, text[], text[], text[], bigint[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION verdict.job_claim(text, text, text, text, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION verdict.job_heartbeat(text, text, bigint, bigint, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION verdict.job_complete(text, text, bigint, bigint, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION verdict.job_fail(text, text, bigint, bigint, text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION verdict.job_enqueue(text, text, text[], text[], text[], bigint[])
    TO __OPERATOR__, __PRODUCER__;
GRANT EXECUTE ON FUNCTION verdict.job_claim(text, text, text, text, bigint)
    TO __RUNNER__, __VERIFIER__, __GATE__;
GRANT EXECUTE ON FUNCTION verdict.job_heartbeat(text, text, bigint, bigint, bigint)
    TO __RUNNER__, __VERIFIER__, __GATE__;
GRANT EXECUTE ON FUNCTION verdict.job_complete(text, text, bigint, bigint, text)
    TO __RUNNER__, __VERIFIER__, __GATE__;
GRANT EXECUTE ON FUNCTION verdict.job_fail(text, text, bigint, bigint, text, bigint)
    TO __RUNNER__, __VERIFIER__, __GATE__;

-- The identity check of schema 7, at the very start of each routine a worker or an enqueuer
-- calls: the identity acting (the role set with SET ROLE, else the login itself) must act for
-- the principal and role the call names, so a worker's login cannot claim, renew or finish a
-- job as another principal. The text is schema 7's, read from `verdict._identity_check()`.
DO $make$
DECLARE
    f record;
    v_def text;
    v_at integer;
    v_marker constant text := E'\nBEGIN\n';
    v_check constant text := verdict._identity_check();
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure AS signature FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = 'verdict'::regnamespace
          AND p.proname IN ('job_enqueue', 'job_claim', 'job_heartbeat', 'job_complete', 'job_fail')
    LOOP
        v_def := pg_get_functiondef(f.signature);
        v_at := position(v_marker IN v_def);
        IF v_at = 0 THEN
            RAISE EXCEPTION '%: no BEGIN to splice the identity check after', f.signature;
        END IF;
        EXECUTE substr(v_def, 1, v_at + length(v_marker) - 1) || v_check
            || substr(v_def, v_at + length(v_marker));
    END LOOP;
    IF (SELECT count(*) FROM pg_catalog.pg_proc p WHERE p.pronamespace = 'verdict'::regnamespace
            AND p.proname IN ('job_enqueue', 'job_claim', 'job_heartbeat', 'job_complete', 'job_fail')
            AND position('database identity % does not act' IN p.prosrc) > 0) <> 5 THEN
        RAISE EXCEPTION 'the identity check is not in every job routine';
    END IF;
END $make$;
