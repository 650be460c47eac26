-- verdict store, PostgreSQL schema version 20: the job queue's routines hold, by themselves,
-- the rules the engine holds when it queues and claims.
--
-- A login calling the routines by hand could, until now:
-- - queue jobs for a request that does not exist, or, as a producer, for another producer's
--   request (the engine allows an operator, or the producer of the request's subject), which
--   then held the (kind, request, class) place the request's own jobs would take; and give a
--   deadline already past, or a verify job a class its request does not require;
-- - claim or renew a job for as long as it liked (a runner took a lease of ten years), so that
--   no other worker could take the job over.
--
-- Now job_enqueue refuses (SQLSTATE 42501, nothing queued) a negative deadline, a verify job
-- with no class and a checks or gate job with one, from anyone; and from a producer, a job of
-- anything but a stored request record (`verdict.request/v1`) whose subject it produced, or a
-- verify job whose class is not among the request's `verifier_classes`. An operator may queue
-- for any request (the operator's tools queue by digest; a job of a request never stored finds
-- nothing to do and fails). job_claim and
-- job_heartbeat refuse a lease longer than a day (86,400,000 ms; SQLSTATE 22023), the longest
-- `verdict worker --lease-seconds` takes; the store refuses it before calling them.
--
-- How: each routine's text is patched where a marker occurs exactly as often as expected.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

DO $make$
DECLARE
    p record;
    v_def text;
    v_hits integer;
BEGIN
    FOR p IN SELECT * FROM (VALUES
        ('verdict.job_enqueue(text, text, text[], text[], text[], bigint[])',
            E'    PERFORM verdict._claim(p_role);\n    INSERT INTO verdict.jobs',
            $r$    PERFORM verdict._claim(p_role);
    IF coalesce(array_length(p_kinds, 1), 0) <> coalesce(array_length(p_requests, 1), 0)
        OR coalesce(array_length(p_kinds, 1), 0) <> coalesce(array_length(p_classes, 1), 0)
        OR coalesce(array_length(p_kinds, 1), 0) <> coalesce(array_length(p_deadline_ms, 1), 0) THEN
        RAISE EXCEPTION 'jobs: kinds, requests, classes and deadlines differ in number'
            USING ERRCODE = '22023';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_kinds, p_requests, p_classes, p_deadline_ms)
            AS qe_u(k, r, c, d)
        LEFT JOIN verdict.verification_requests qe_q ON qe_q.key = qe_u.r
        LEFT JOIN verdict.subjects qe_s ON qe_s.key = qe_q.subject_digest
        WHERE qe_u.d < 0
           OR (qe_u.k = 'verify') IS DISTINCT FROM (coalesce(qe_u.c, '') <> '')
           OR (p_role = 'producer' AND (qe_q.key IS NULL
               OR (qe_q.body::jsonb ->> 'schema') IS DISTINCT FROM 'verdict.request/v1'
               OR (qe_s.body::jsonb #>> '{producer,principal}') IS DISTINCT FROM p_principal
               OR (qe_u.k = 'verify'
                   AND NOT coalesce((qe_q.body::jsonb -> 'verifier_classes') ? qe_u.c, false))))) THEN
        RAISE EXCEPTION 'jobs: % may queue only jobs with no deadline past, a class for a verify job and none for another%',
            p_principal, CASE WHEN p_role = 'producer'
                THEN ', of stored requests whose subjects it produced and the classes they require'
                ELSE '' END
            USING ERRCODE = '42501';
    END IF;
    INSERT INTO verdict.jobs$r$, 1),
        ('verdict.job_claim(text, text, text, text, bigint)',
            $m$IF p_lease_ms IS NULL OR p_lease_ms < 1 THEN
        RAISE EXCEPTION 'a lease must be positive' USING ERRCODE = '22023';$m$,
            $r$IF p_lease_ms IS NULL OR p_lease_ms < 1 OR p_lease_ms > 86400000 THEN
        RAISE EXCEPTION 'a lease of % ms is not 1 ms to a day (86400000 ms)', p_lease_ms
            USING ERRCODE = '22023';$r$, 1),
        ('verdict.job_heartbeat(text, text, bigint, bigint, bigint)',
            $m$IF p_lease_ms IS NULL OR p_lease_ms < 1 THEN
        RAISE EXCEPTION 'a lease must be positive' USING ERRCODE = '22023';$m$,
            $r$IF p_lease_ms IS NULL OR p_lease_ms < 1 OR p_lease_ms > 86400000 THEN
        RAISE EXCEPTION 'a lease of % ms is not 1 ms to a day (86400000 ms)', p_lease_ms
            USING ERRCODE = '22023';$r$, 1)
    ) AS v(signature, marker, replacement, expected) LOOP
        v_def := pg_get_functiondef(p.signature::regprocedure);
        v_hits := (length(v_def) - length(replace(v_def, p.marker, ''))) / length(p.marker);
        IF v_hits <> p.expected THEN
            RAISE EXCEPTION '%: % occurs % times, not %', p.signature, p.marker, v_hits,
                p.expected;
        END IF;
        EXECUTE replace(v_def, p.marker, p.replacement);
    END LOOP;
END $make$;

RESET ROLE;
