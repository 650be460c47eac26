-- verdict store, PostgreSQL schema version 5: a row's claims about who wrote it must match the
-- writer, checked by the database.
--
-- Until now the database held each principal role to its tables (EXECUTE per role), and the
-- store held each principal to its own documents. That left a verifier connection free to call
-- put_verification_results by hand for a run it was never admitted to, and a producer
-- connection free to file check evidence that says a runner produced it. The write routines of
-- six tables now refuse a body that claims another writer than the principal they append the
-- audit event for, in the role they have just checked against the connection:
-- - check_evidence: `produced_by` names the writer's principal and role;
-- - subjects written by a producer: `producer.principal` is the writer;
-- - human_decisions: `principal` is the writer;
-- - verification_results: `verifier.principal` is the writer, and `verifier.run` is a run
--   admitted for that verifier, with the result's class, subject and generation;
-- - findings: the writer holds a run admitted for the finding's subject;
-- - run_events written by a verifier: the run was admitted for that verifier.
-- Refusals raise SQLSTATE 42501, as every other authority check here does, and abort the call.
--
-- How: each routine of these tables, for a single record and for runs of records, gets one
-- more statement right after it parses the body, where the parsed body, the principal and the
-- role are at hand. A trigger would make the same checks, but it has to parse the body again
-- and read the row's audit event back, which cost a fifth of a batched append. The statement is
-- spliced into each routine's definition at the line that parses the body, which must occur
-- exactly once; CREATE OR REPLACE keeps each routine's grants, owner and settings.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

DO $make$
DECLARE
    t record;
    f record;
    v_def text;
    v_check text;
    v_marker text;
    v_hits integer;
BEGIN
    FOR t IN SELECT * FROM (VALUES
        ('check_evidence', $check$
    IF (v_doc #>> '{produced_by,principal}') IS DISTINCT FROM p_principal
        OR (v_doc #>> '{produced_by,role}') IS DISTINCT FROM p_role THEN
        RAISE EXCEPTION 'evidence % says it was produced by % as %, but % as % is writing it',
            @KEY@, coalesce(v_doc #>> '{produced_by,principal}', 'nobody'),
            coalesce(v_doc #>> '{produced_by,role}', 'no role'), p_principal, p_role
            USING ERRCODE = '42501';
    END IF;$check$),
        ('subjects', $check$
    IF p_role = 'producer' AND (v_doc #>> '{producer,principal}') IS DISTINCT FROM p_principal THEN
        RAISE EXCEPTION 'producer % may not register work of producer %', p_principal,
            coalesce(v_doc #>> '{producer,principal}', 'nobody') USING ERRCODE = '42501';
    END IF;$check$),
        ('human_decisions', $check$
    IF (v_doc ->> 'principal') IS DISTINCT FROM p_principal THEN
        RAISE EXCEPTION 'human decision % is signed by %, not by %', @KEY@,
            coalesce(v_doc ->> 'principal', 'nobody'), p_principal USING ERRCODE = '42501';
    END IF;$check$),
        ('verification_results', $check$
    IF (v_doc #>> '{verifier,principal}') IS DISTINCT FROM p_principal THEN
        RAISE EXCEPTION 'result % names verifier %, but % is writing it', @KEY@,
            coalesce(v_doc #>> '{verifier,principal}', 'nobody'), p_principal USING ERRCODE = '42501';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM verdict.verifier_runs a
            WHERE a.key = (v_doc #>> '{verifier,run}') AND a.verifier = p_principal
              AND a.class = (v_doc #>> '{verifier,class}')
              AND a.subject_digest = (v_doc ->> 'subject_digest')
              AND a.generation = (v_doc ->> 'generation')::bigint) THEN
        RAISE EXCEPTION 'result %: run % was not admitted for verifier % on class %, subject %, generation %',
            @KEY@, coalesce(v_doc #>> '{verifier,run}', 'none'), p_principal,
            coalesce(v_doc #>> '{verifier,class}', 'none'), coalesce(v_doc ->> 'subject_digest', 'none'),
            coalesce(v_doc ->> 'generation', 'none') USING ERRCODE = '42501';
    END IF;$check$),
        ('findings', $check$
    IF NOT EXISTS (SELECT 1 FROM verdict.verifier_runs a
            WHERE a.subject_digest = (v_doc ->> 'subject_digest') AND a.verifier = p_principal) THEN
        RAISE EXCEPTION 'finding %: % holds no run admitted for subject %', @KEY@, p_principal,
            coalesce(v_doc ->> 'subject_digest', 'none') USING ERRCODE = '42501';
    END IF;$check$),
        ('run_events', $check$
    IF p_role = 'verifier' AND NOT EXISTS (SELECT 1 FROM verdict.verifier_runs a
            WHERE a.key = (v_doc ->> 'run_id') AND a.verifier = p_principal) THEN
        RAISE EXCEPTION 'run % does not belong to verifier %', coalesce(v_doc ->> 'run_id', 'none'),
            p_principal USING ERRCODE = '42501';
    END IF;$check$)
    ) AS v(name, check_sql) LOOP
        FOR f IN SELECT * FROM (VALUES
            (format('verdict.put_%s(text, text, text[], text[], text[], text[])', t.name),
                'v_doc := p_bodies[i]::jsonb;', 'p_keys[i]'),
            (format('verdict.put_one_%s(text, text, text, text, text, text)', t.name),
                'v_doc := p_body::jsonb;', 'p_key')
        ) AS r(signature, marker, key_expr) LOOP
            v_def := pg_get_functiondef(f.signature::regprocedure);
            v_hits := (length(v_def) - length(replace(v_def, f.marker, ''))) / length(f.marker);
            IF v_hits <> 1 THEN
                RAISE EXCEPTION '%: the body is parsed % times, not once', f.signature, v_hits;
            END IF;
            v_check := replace(t.check_sql, '@KEY@', f.key_expr);
            EXECUTE replace(v_def, f.marker, f.marker || v_check);
        END LOOP;
    END LOOP;
END $make$;

RESET ROLE;
