-- verdict store, PostgreSQL schema version 40: a claim checks the claimant's grant only for the
-- job it is about to take.
--
-- job_claim (schema 27) took the first claimable job of its kind that the claimant's grants
-- cover, by one query that filtered every claimable job through _job_covered and then ordered
-- what was left. So every claim checked the grant of every job waiting, and a claim's cost grew
-- with the backlog: with a few hundred requests queued, a few hundred grant checks a claim.
--
-- Now the claimable jobs are read in the order they are taken, without the grant, and the grant
-- is checked one job at a time until a covered one is locked (FOR UPDATE SKIP LOCKED, its own
-- state and lease checked again under the lock, as another claim may have taken it meanwhile).
-- Which job a claim takes is unchanged: the first covered one, in the same order; a job no
-- grant of the claimant covers is still skipped and left for a worker that may do it. SQLite's
-- claim already walked the jobs this way. job_claim is spliced as schema 27 spliced it.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

DO $make$
DECLARE
    v_def text;
    v_hits integer;
    v_declare constant text := E'    v_id bigint;\n';
    v_select constant text := E'    SELECT j.id INTO v_id FROM verdict.jobs j\n    WHERE j.kind = p_kind\n';
    v_tail constant text :=
        E'      -- Only a job the claimant''s grants cover (schema 27); gate jobs as before.\n'
        || E'      AND (j.kind = ''gate'' OR verdict._job_covered(p_principal, j.kind, j.request, v_now))\n'
        || E'    ORDER BY coalesce(j.not_before, j.created_at), j.id\n'
        || E'    LIMIT 1\n'
        || E'    FOR UPDATE SKIP LOCKED;\n';
    v_marker text;
BEGIN
    v_def := pg_get_functiondef('verdict.job_claim(text, text, text, text, bigint)'::regprocedure);
    FOREACH v_marker IN ARRAY ARRAY[v_declare, v_select, v_tail] LOOP
        v_hits := (length(v_def) - length(replace(v_def, v_marker, ''))) / length(v_marker);
        IF v_hits <> 1 THEN
            RAISE EXCEPTION 'job_claim: a part to replace occurs % times, not once: %', v_hits,
                v_marker;
        END IF;
    END LOOP;
    v_def := replace(v_def, v_declare, v_declare || E'    v_next record;\n');
    v_def := replace(v_def, v_select,
        E'    FOR v_next IN SELECT j.id, j.request FROM verdict.jobs j\n    WHERE j.kind = p_kind\n');
    v_def := replace(v_def, v_tail,
        E'    ORDER BY coalesce(j.not_before, j.created_at), j.id\n'
        || E'    LOOP\n'
        || E'        -- Only a job the claimant''s grants cover (schema 27), checked for the job about\n'
        || E'        -- to be taken only (schema 40); gate jobs as before.\n'
        || E'        CONTINUE WHEN p_kind <> ''gate''\n'
        || E'            AND NOT verdict._job_covered(p_principal, p_kind, v_next.request, v_now);\n'
        || E'        SELECT j.id INTO v_id FROM verdict.jobs j\n'
        || E'        WHERE j.id = v_next.id\n'
        || E'          AND ((j.state = ''ready'' AND (j.not_before IS NULL OR j.not_before <= v_now))\n'
        || E'            OR (j.state = ''running'' AND j.lease_until <= v_now))\n'
        || E'        FOR UPDATE SKIP LOCKED;\n'
        || E'        EXIT WHEN v_id IS NOT NULL;\n'
        || E'    END LOOP;\n');
    EXECUTE v_def;
END $make$;

RESET ROLE;
