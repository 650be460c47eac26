-- verdict store, PostgreSQL schema version 38: a run named as a verify job's attempt is admitted
-- only under that job's claim.
--
-- A verifier worker names its attempt at a verify job `job-<job>-<fencing>`, from the job's id
-- and the token of its claim; both are small integers anyone can guess. Any verifier holding a
-- grant on the execution could admit itself first under the names of the attempts to come, so
-- that each attempt of the worker met a run id stored for another admission, the job was given
-- up, and the request's run cap was spent on runs nobody would finish. A run whose id has that
-- form is now stored only while the job it names is a verify job, running, whose claim carries
-- that token and is held by the run's verifier, for the run's request and class. Any other run
-- id is untouched. The engine refuses the same first, as a denial.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

CREATE FUNCTION verdict._job_attempt_under_its_claim() RETURNS trigger
LANGUAGE plpgsql SET search_path = verdict, pg_temp AS $$
DECLARE
    v_parts text[];
    v_body jsonb;
BEGIN
    -- The form `records::job_run` reads: at most 18 digits each.
    v_parts := regexp_match(NEW.key, '^job-([0-9]{1,18})-([0-9]{1,18})$');
    IF v_parts IS NULL THEN
        RETURN NEW;
    END IF;
    v_body := NEW.body::jsonb;
    IF NOT EXISTS (SELECT 1 FROM verdict.jobs j
            WHERE j.id = v_parts[1]::bigint AND j.fencing = v_parts[2]::bigint
              AND j.kind = 'verify' AND j.state = 'running'
              AND j.principal = (v_body ->> 'verifier')
              AND j.request = (v_body ->> 'request_digest')
              AND j.class = (v_body ->> 'class')) THEN
        RAISE EXCEPTION 'verifier_runs %: names attempt % of verify job %; only the verifier holding that claim admits it',
            NEW.key, v_parts[2], v_parts[1] USING ERRCODE = '42501';
    END IF;
    RETURN NEW;
END $$;
REVOKE ALL ON FUNCTION verdict._job_attempt_under_its_claim() FROM PUBLIC;
CREATE TRIGGER verifier_runs_job_attempt_under_its_claim BEFORE INSERT ON verdict.verifier_runs
    FOR EACH ROW EXECUTE FUNCTION verdict._job_attempt_under_its_claim();

RESET ROLE;
