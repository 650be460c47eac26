-- verdict store, PostgreSQL schema version 15: a verify job's records of its runs are written by
-- the worker doing the job, as itself, and only under the job's current claim.
--
-- Until now the engine's own identity wrote the record of a refused result and the run end that
-- goes with it, a run's context note, and the record of a run ended by a takeover
-- (`verdict.run-takeover/v1`) with that run's end, after checking the worker's claim in a
-- transaction of its own. A verifier's identity may now append them itself, held by checks
-- spliced into the write routines (SQLSTATE 42501):
-- - put_verification_requests (both forms) takes from a verifier, besides its admission note:
--   a result refusal (`verdict.result-refusal/v1`) or a run context (`verdict.run-context/v1`)
--   about a run admitted to that verifier, for the run's own subject; for a run named as a
--   verify job's attempt (`job-<job>-<fencing>`), only while the writer holds that job's claim
--   of that token (the job running, claimed under its name, with that fencing token);
--   and a takeover record only naming the writer, in the verifier role, as the claimant, about
--   an existing run `job-<job>-<stale_fencing>` of the subject it names, while the writer holds
--   the job's claim whose token the record names, a later token than the run's.
--   The admission-note check of version 13 now applies to admission notes only.
-- - put_run_events (both forms) takes from a verifier a run of another verifier only as a
--   takeover: `cancelled` with no reason, for a run `job-<job>-<stale>` while the writer holds
--   the claim of that job with a later token.
-- - The run cap of a verifier's own admission (version 13) no longer counts a run ended by a
--   takeover recorded by the claimant that took the job (a verifier naming itself, whose job
--   has reached the record's token), as well as one the engine recorded before this version.
-- The claim these checks read is the one the engine's worker renews in the same transaction,
-- through job_heartbeat, which locks the job's row until the write commits: no claim can take
-- the job between the check and the write.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

-- Raises unless a verifier may append `v_doc` (a refused result, a run context or a takeover
-- record) to the requests table under the claims the jobs table holds now.
CREATE FUNCTION verdict._verifier_run_note(p_principal text, v_doc jsonb, p_key text)
RETURNS void
LANGUAGE plpgsql SET search_path = verdict, pg_temp AS $$
DECLARE
    v_run text := v_doc ->> 'run_id';
    v_job text[] := regexp_match(coalesce(v_doc ->> 'run_id', ''),
        '^job-([0-9]{1,18})-([0-9]{1,18})$');
BEGIN
    IF jsonb_typeof(v_doc -> 'run_id') IS DISTINCT FROM 'string'
        OR jsonb_typeof(v_doc -> 'subject_digest') IS DISTINCT FROM 'string' THEN
        RAISE EXCEPTION '%: verifier %: a record of a run names the run and its subject', p_key,
            p_principal USING ERRCODE = '42501';
    END IF;
    IF (v_doc ->> 'schema') = 'verdict.run-takeover/v1' THEN
        IF jsonb_typeof(v_doc -> 'job') IS DISTINCT FROM 'number'
            OR jsonb_typeof(v_doc -> 'fencing') IS DISTINCT FROM 'number'
            OR jsonb_typeof(v_doc -> 'stale_fencing') IS DISTINCT FROM 'number'
            OR (v_doc #>> '{taken_by,principal}') IS DISTINCT FROM p_principal
            OR (v_doc #>> '{taken_by,role}') IS DISTINCT FROM 'verifier' THEN
            RAISE EXCEPTION '%: verifier % records a takeover only naming itself as the claimant, with the job and both tokens',
                p_key, p_principal USING ERRCODE = '42501';
        END IF;
        IF v_job IS NULL OR v_job[1] <> (v_doc ->> 'job') OR v_job[2] <> (v_doc ->> 'stale_fencing')
            OR NOT EXISTS (SELECT 1 FROM verdict.jobs to_j
                WHERE to_j.id = v_job[1]::bigint AND to_j.kind = 'verify'
                  AND to_j.state = 'running' AND to_j.principal = p_principal
                  AND to_j.fencing::text = (v_doc ->> 'fencing')
                  AND to_j.fencing > v_job[2]::bigint)
            OR NOT EXISTS (SELECT 1 FROM verdict.verifier_runs to_r
                WHERE to_r.key = v_run AND to_r.subject_digest = (v_doc ->> 'subject_digest')) THEN
            RAISE EXCEPTION '%: verifier % may record the takeover of run % only while it holds the claim of that run''s job that superseded the run''s',
                p_key, p_principal, v_run USING ERRCODE = '42501';
        END IF;
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM verdict.verifier_runs rn_r
            WHERE rn_r.key = v_run AND rn_r.verifier = p_principal
              AND rn_r.subject_digest = (v_doc ->> 'subject_digest')) THEN
        RAISE EXCEPTION '%: verifier % may record only about a run of its own (not %), for its subject',
            p_key, p_principal, v_run USING ERRCODE = '42501';
    END IF;
    IF v_job IS NOT NULL AND NOT EXISTS (SELECT 1 FROM verdict.jobs rn_j
            WHERE rn_j.id = v_job[1]::bigint AND rn_j.kind = 'verify' AND rn_j.state = 'running'
              AND rn_j.principal = p_principal AND rn_j.fencing = v_job[2]::bigint) THEN
        RAISE EXCEPTION '%: run % is a job''s attempt; verifier % records it only while it holds that claim of the job',
            p_key, v_run, p_principal USING ERRCODE = '42501';
    END IF;
END $$;
REVOKE ALL ON FUNCTION verdict._verifier_run_note(text, jsonb, text) FROM PUBLIC;

-- Whether `v_doc`, a run event a verifier writes for a run not its own, ends that run as a
-- takeover by the holder of a later claim of the run's job.
CREATE FUNCTION verdict._takeover_end(p_principal text, v_doc jsonb) RETURNS boolean
LANGUAGE plpgsql SET search_path = verdict, pg_temp AS $$
DECLARE
    v_job text[] := regexp_match(coalesce(v_doc ->> 'run_id', ''),
        '^job-([0-9]{1,18})-([0-9]{1,18})$');
BEGIN
    IF v_job IS NULL OR (v_doc ->> 'status') IS DISTINCT FROM 'cancelled' OR v_doc ? 'reason'
        OR (v_doc ->> 'run_id') <> format('job-%s-%s', v_job[1]::bigint, v_job[2]::bigint) THEN
        RETURN false;
    END IF;
    RETURN EXISTS (SELECT 1 FROM verdict.jobs te_j
        WHERE te_j.id = v_job[1]::bigint AND te_j.kind = 'verify' AND te_j.state = 'running'
          AND te_j.principal = p_principal AND te_j.fencing > v_job[2]::bigint);
END $$;
REVOKE ALL ON FUNCTION verdict._takeover_end(text, jsonb) FROM PUBLIC;

DO $make$
DECLARE
    t record;
    f record;
    v_def text;
    v_hits integer;
BEGIN
    FOR t IN SELECT * FROM (VALUES
        -- The records of a job's runs, from a verifier, before version 11's refusal of
        -- anything but an admission note.
        ('verification_requests',
            $m$    IF p_role = 'verifier' AND ((v_doc ->> 'schema') IS DISTINCT FROM 'verdict.admission/v1'$m$,
            $r$    IF p_role = 'verifier' AND (v_doc ->> 'schema') IN ('verdict.run-takeover/v1',
            'verdict.result-refusal/v1', 'verdict.run-context/v1') THEN
        PERFORM verdict._verifier_run_note(p_principal, v_doc, @KEY@);
    ELSIF p_role = 'verifier' AND ((v_doc ->> 'schema') IS DISTINCT FROM 'verdict.admission/v1'$r$),
        -- Version 13's check of a verifier's admission note, for admission notes only.
        ('verification_requests',
            $m$    IF p_role = 'verifier' AND NOT EXISTS (SELECT 1 FROM verdict.verifier_runs an_r$m$,
            $r$    IF p_role = 'verifier' AND (v_doc ->> 'schema') IS NOT DISTINCT FROM 'verdict.admission/v1'
        AND NOT EXISTS (SELECT 1 FROM verdict.verifier_runs an_r$r$),
        -- A takeover's run end, from the claimant.
        ('run_events',
            $m$            WHERE a.key = (v_doc ->> 'run_id') AND a.verifier = p_principal) THEN$m$,
            $r$            WHERE a.key = (v_doc ->> 'run_id') AND a.verifier = p_principal)
        AND NOT verdict._takeover_end(p_principal, v_doc) THEN$r$),
        -- The run cap: a takeover recorded by its claimant gives the run's place back too.
        ('verifier_runs',
            $m$                              AND sa_a.principal = 'verdict-engine' AND sa_a.role = 'operator'))$m$,
            $r$                              AND ((sa_a.principal = 'verdict-engine' AND sa_a.role = 'operator')
                                OR (sa_a.role = 'verifier'
                                  AND sa_a.principal = (sa_t.body::jsonb #>> '{taken_by,principal}')
                                  AND EXISTS (SELECT 1 FROM verdict.jobs sa_j
                                      WHERE sa_j.kind = 'verify'
                                        AND sa_j.id::text = (sa_t.body::jsonb ->> 'job')
                                        AND sa_n.run_id = format('job-%s-%s', sa_j.id,
                                            sa_t.body::jsonb ->> 'stale_fencing')
                                        AND sa_j.fencing >= CASE
                                            WHEN jsonb_typeof(sa_t.body::jsonb -> 'fencing') = 'number'
                                            THEN (sa_t.body::jsonb ->> 'fencing')::numeric END)))))$r$)
    ) AS v(name, marker, replacement) LOOP
        FOR f IN SELECT * FROM (VALUES
            (format('verdict.put_%s(text, text, text[], text[], text[], text[])', t.name), 'p_keys[i]'),
            (format('verdict.put_one_%s(text, text, text, text, text, text)', t.name), 'p_key')
        ) AS r(signature, key_expr) LOOP
            v_def := pg_get_functiondef(f.signature::regprocedure);
            v_hits := (length(v_def) - length(replace(v_def, t.marker, ''))) / length(t.marker);
            IF v_hits <> 1 THEN
                RAISE EXCEPTION '%: the marker of the check to extend occurs % times, not once: %',
                    f.signature, v_hits, t.marker;
            END IF;
            EXECUTE replace(v_def, t.marker, replace(t.replacement, '@KEY@', f.key_expr));
        END LOOP;
    END LOOP;
END $make$;

RESET ROLE;
