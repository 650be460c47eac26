-- verdict store, PostgreSQL schema version 13: more of what the engine checks is held by the
-- write routines themselves, for every caller.
--
-- - A body's structure. Until now a routine checked a body's size, canonical form and key, so a
--   login calling it by hand could append a canonical object that is not a record of the table
--   at all (a grant with no access, a run with no verifier); `audit verify` reported it later.
--   Every put_<table> and put_one_<table> now refuses (SQLSTATE 22023) a body that is not a JSON
--   object holding every member the table's type requires, right after the key check. In the
--   requests table, which also holds the engine's notes, that is an object; a request
--   (`verdict.request/v1`) and an admission note (`verdict.admission/v1`) must hold all of
--   theirs.
-- - A verifier admitting itself by hand (schema 11 let its own login append its run and note)
--   is now also held to what the engine checks of an admission (SQLSTATE 42501): the run's
--   request is a stored `verdict.request/v1` for the run's subject that asks for the run's
--   class; that subject is the execution's current subject, at the generation the run names;
--   the request pins the gate's current policy; and a request with `budget.max_runs` has fewer
--   runs stored than that, counted under the chain lock, so two admissions racing for the last
--   run cannot both be stored. A run the engine ended because its worker lost the job (its
--   `verdict.run-takeover/v1` record, written by the engine) is not counted, as the engine
--   does not count it. The admission note a verifier appends must match a run of its own
--   stored in the same transaction (run id, request, subject, generation and class).
--   Preflight's verdict in the note is not recomputed here.
-- - A gate decision is stored only with its evaluation record: put_gate_decisions refuses
--   (42501) a decision unless the gate_evaluations table holds a record with the decision's
--   evaluation key, subject and policy, stored in the same transaction (or the decision's key is
--   already stored, when the routine returns the stored decision and appends nothing). A
--   superuser connection with no role set is not bound, as by the identity check.
-- - Gate jobs are claimed only under the name of a stored operator (job_claim): the gate's
--   identity acts under any principal name, and could otherwise work the queue's gate jobs as
--   anyone. Renewing, finishing and failing a job already need its holder's name.
-- - Giving a principal a login of its own (principal_login) is recorded in the audit chain: the
--   routine appends, as the operator who gave it and in the same transaction, a note
--   (`verdict.db-login/v1`) naming the principal, its database identity and the time, to the
--   requests table. A login that cannot be recorded is not given.
--
-- How: the checks are spliced into each routine right after its key check (so the identity,
-- bounds, digest, form and key checks of versions 7 and 8 still run first), every marker must
-- occur exactly once, and CREATE OR REPLACE keeps each routine's grants, owner and settings.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

DO $make$
DECLARE
    t record;
    f record;
    v_def text;
    v_hits integer;
    v_marker text;
    v_check text;
BEGIN
    FOR t IN SELECT * FROM (VALUES
        ('principals', 'a principal', ARRAY['name', 'role', 'token_sha256'], ''),
        ('grants', 'a grant', ARRAY['grant_id', 'principal', 'scope', 'access', 'expires_at'], ''),
        ('grant_revocations', 'a revocation', ARRAY['grant_id', 'revoked_at', 'reason'], ''),
        ('subjects', 'a subject', ARRAY['schema', 'execution', 'work_items', 'producer', 'objective',
            'criteria', 'resources', 'checks', 'workflow_revision', 'risk'], ''),
        ('policies', 'a policy', ARRAY['schema', 'name', 'revision'], ''),
        ('check_evidence', 'check evidence', ARRAY['id', 'kind', 'check', 'subject_digest',
            'definition_digest', 'produced_by', 'outcome', 'content_digest', 'observed_at',
            'freshness'], ''),
        ('verification_requests', 'a request or a note', ARRAY[]::text[], $check$
    IF (v_doc ->> 'schema') IS NOT DISTINCT FROM 'verdict.request/v1' AND NOT (v_doc ?& ARRAY['execution',
            'subject_digest', 'generation', 'gate', 'policy_digest', 'verifier_classes',
            'prior_blockers', 'risk_class', 'budget']) THEN
        RAISE EXCEPTION 'verification_requests %: the body is not a verification request: it lacks a required member',
            @KEY@ USING ERRCODE = '22023';
    END IF;
    IF (v_doc ->> 'schema') IS NOT DISTINCT FROM 'verdict.admission/v1' AND NOT (v_doc ?& ARRAY['run_id',
            'request_digest', 'subject_digest', 'generation', 'verifier', 'class', 'preflight']) THEN
        RAISE EXCEPTION 'verification_requests %: the body is not an admission note: it lacks a required member',
            @KEY@ USING ERRCODE = '22023';
    END IF;
    IF p_role = 'verifier' AND NOT EXISTS (SELECT 1 FROM verdict.verifier_runs an_r
            WHERE an_r.key = (v_doc ->> 'run_id') AND an_r.verifier = p_principal
              AND an_r.request_digest = (v_doc ->> 'request_digest')
              AND an_r.subject_digest = (v_doc ->> 'subject_digest')
              AND an_r.class = (v_doc ->> 'class')
              AND an_r.generation::text = (v_doc ->> 'generation')
              AND an_r.xmin = xid(pg_current_xact_id())) THEN
        RAISE EXCEPTION '%: verifier % may append an admission note only with its own run, stored in the same transaction',
            @KEY@, p_principal USING ERRCODE = '42501';
    END IF;$check$),
        ('verifier_runs', 'a verifier run', ARRAY['run_id', 'request_digest', 'subject_digest',
            'verifier', 'class', 'admitted_generation'], $check$
    IF p_role = 'verifier' THEN
        -- Under the chain lock, so admissions racing for a request's last run take turns.
        PERFORM pg_advisory_xact_lock(8531478330712965377);
        IF NOT EXISTS (SELECT 1 FROM verdict.verification_requests sa_q, verdict.subjects sa_s,
                verdict.pointers sa_x, verdict.pointers sa_g
            WHERE sa_q.key = (v_doc ->> 'request_digest')
              AND (sa_q.body::jsonb ->> 'schema') = 'verdict.request/v1'
              AND sa_q.subject_digest = (v_doc ->> 'subject_digest')
              AND jsonb_typeof(sa_q.body::jsonb -> 'verifier_classes') = 'array'
              AND (sa_q.body::jsonb -> 'verifier_classes') ? (v_doc ->> 'class')
              AND sa_s.key = sa_q.subject_digest
              AND sa_s.generation::text = (v_doc ->> 'admitted_generation')
              AND sa_x.pointer = 'execution' AND sa_x.name = sa_s.execution_id
              AND (sa_x.value::jsonb ->> 'subject_digest') = sa_s.key
              AND sa_g.pointer = 'gate' AND sa_g.name = (sa_q.body::jsonb ->> 'gate')
              AND (sa_g.value::jsonb ->> 'policy_digest') = (sa_q.body::jsonb ->> 'policy_digest')) THEN
            RAISE EXCEPTION '%: verifier % may admit itself only under a stored request that asks for its class, for the execution''s current subject at its generation and the gate''s current policy',
                @KEY@, p_principal USING ERRCODE = '42501';
        END IF;
        IF EXISTS (SELECT 1 FROM verdict.verification_requests sa_c
                WHERE sa_c.key = (v_doc ->> 'request_digest')
                  AND jsonb_typeof(sa_c.body::jsonb #> '{budget,max_runs}') = 'number'
                  AND (SELECT count(*) FROM verdict.verifier_runs sa_n
                      WHERE sa_n.request_digest = sa_c.key AND sa_n.key <> @KEY@
                        -- A run the engine ended because its worker lost the job gives its
                        -- place back (the engine's own record, as the audit chain shows it).
                        AND NOT EXISTS (SELECT 1 FROM verdict.verification_requests sa_t
                            JOIN verdict.audit_events sa_a ON sa_a.seq = sa_t.seq
                            WHERE sa_t.subject_digest = sa_n.subject_digest
                              AND (sa_t.body::jsonb ->> 'schema') = 'verdict.run-takeover/v1'
                              AND (sa_t.body::jsonb ->> 'run_id') = sa_n.run_id
                              AND sa_a.tbl = 'verification_requests'
                              AND sa_a.principal = 'verdict-engine' AND sa_a.role = 'operator'))
                    >= (sa_c.body::jsonb #>> '{budget,max_runs}')::numeric) THEN
            RAISE EXCEPTION '%: request % has admitted all the runs its budget allows', @KEY@,
                v_doc ->> 'request_digest' USING ERRCODE = '42501';
        END IF;
    END IF;$check$),
        ('run_events', 'a run event', ARRAY['run_id', 'n', 'status'], ''),
        ('verification_results', 'a verification result', ARRAY['id', 'verifier', 'subject_digest',
            'generation', 'status', 'criteria', 'findings', 'dispositions'], ''),
        ('findings', 'a finding', ARRAY['id', 'version', 'criterion', 'type', 'severity', 'scope',
            'subject_digest', 'evidence_refs', 'method'], ''),
        ('human_decisions', 'a human decision', ARRAY['id', 'principal', 'role', 'subject_digest',
            'policy_digest', 'decision', 'reason', 'decided_at'], ''),
        ('gate_decisions', 'a gate decision', ARRAY['schema', 'outcome', 'evaluation_key',
            'criteria', 'reasons'], $check$
    -- A superuser with no role set is not bound, as by the identity check: it could rewrite
    -- this routine anyway (and it is how a decision of a store from before schema 2, which
    -- has no evaluation record, is reproduced in tests).
    IF NOT (current_setting('role') = 'none' AND coalesce((SELECT gd_r.rolsuper
            FROM pg_catalog.pg_roles gd_r WHERE gd_r.rolname = session_user), false))
        AND NOT EXISTS (SELECT 1 FROM verdict.gate_evaluations gd_e
            WHERE gd_e.evaluation_key = (v_doc ->> 'evaluation_key')
              AND gd_e.subject_digest IS NOT DISTINCT FROM (v_doc ->> 'subject_digest')
              AND gd_e.policy_digest IS NOT DISTINCT FROM (v_doc ->> 'policy_digest')
              AND (gd_e.xmin = xid(pg_current_xact_id())
                OR EXISTS (SELECT 1 FROM verdict.gate_decisions gd_d WHERE gd_d.key = @KEY@))) THEN
        RAISE EXCEPTION '%: a gate decision is stored only with its evaluation record (same key, subject and policy), in the same transaction',
            @KEY@ USING ERRCODE = '42501';
    END IF;$check$),
        ('denials', 'a denial', ARRAY['nonce', 'principal', 'code', 'action', 'message', 'at'], ''),
        ('gate_evaluations', 'an evaluation record', ARRAY['schema', 'evaluation_key',
            'subject_digest', 'policy_digest', 'now', 'evidence', 'verifications',
            'human_decisions', 'prior_findings'], '')
    ) AS v(name, what, required, extra) LOOP
        FOR f IN SELECT * FROM (VALUES
            (format('verdict.put_%s(text, text, text[], text[], text[], text[])', t.name),
                'p_keys[i]', '        '),
            (format('verdict.put_one_%s(text, text, text, text, text, text)', t.name),
                'p_key', '    ')
        ) AS r(signature, key_expr, ind) LOOP
            v_def := pg_get_functiondef(f.signature::regprocedure);
            v_marker := E'(it names no key)'') USING ERRCODE = ''22023'';\n' || f.ind || E'END IF;\n';
            v_hits := (length(v_def) - length(replace(v_def, v_marker, ''))) / length(v_marker);
            IF v_hits <> 1 THEN
                RAISE EXCEPTION '%: the key check ends % times, not once', f.signature, v_hits;
            END IF;
            v_check := format($check$
    IF jsonb_typeof(v_doc) IS DISTINCT FROM 'object' OR NOT (v_doc ?& %L::text[]) THEN
        RAISE EXCEPTION '%s %%: the body is not %s: it is not an object holding each of %s',
            @KEY@ USING ERRCODE = '22023';
    END IF;$check$, t.required, t.name, t.what, array_to_string(t.required, ', '))
                || t.extra || E'\n';
            EXECUTE replace(v_def, v_marker, v_marker || replace(v_check, '@KEY@', f.key_expr));
        END LOOP;
    END LOOP;

    -- Gate jobs claimed under a stored operator's name only.
    FOR f IN SELECT p.oid::regprocedure AS signature FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = 'verdict'::regnamespace
          AND p.proname = 'job_claim'
    LOOP
        v_def := pg_get_functiondef(f.signature);
        v_marker := E'    PERFORM verdict._claim(p_role);\n';
        v_hits := (length(v_def) - length(replace(v_def, v_marker, ''))) / length(v_marker);
        IF v_hits <> 1 THEN
            RAISE EXCEPTION '%: the role claim occurs % times, not once', f.signature, v_hits;
        END IF;
        EXECUTE replace(v_def, v_marker, v_marker || $check$    IF p_role = 'gate' AND NOT EXISTS (SELECT 1 FROM verdict.principal_roles gj_m
            WHERE gj_m.principal = p_principal AND gj_m.role = 'operator') THEN
        RAISE EXCEPTION 'gate jobs are worked only under a stored operator''s name, not %', p_principal
            USING ERRCODE = '42501';
    END IF;
$check$);
    END LOOP;
    IF (SELECT count(*) FROM pg_catalog.pg_proc p WHERE p.pronamespace = 'verdict'::regnamespace
            AND p.proname = 'job_claim'
            AND position('gate jobs are worked only' IN p.prosrc) > 0) <> 1 THEN
        RAISE EXCEPTION 'the gate jobs check is not in job_claim';
    END IF;

    -- The login's note, appended by principal_login itself before it gives the login.
    v_def := pg_get_functiondef(
        'verdict.principal_login(text, text, text, text)'::regprocedure);
    v_marker := E'    EXECUTE format(''ALTER ROLE %I LOGIN PASSWORD %L'', v_db, p_password);\n';
    v_hits := (length(v_def) - length(replace(v_def, v_marker, ''))) / length(v_marker);
    IF v_hits <> 1 THEN
        RAISE EXCEPTION 'principal_login: the login is given % times, not once', v_hits;
    END IF;
    EXECUTE replace(v_def, v_marker, $check$    PERFORM verdict._note_login(p_principal, p_name, v_db);
$check$ || v_marker);
END $make$;

-- The note of a login given (`verdict.db-login/v1`), appended to the requests table by the
-- operator giving it, through the table's own write routine (so the identity check and every
-- check of a body apply). Members in canonical order; strings written by to_json, which escapes
-- as RFC 8785 does.
CREATE FUNCTION verdict._note_login(p_operator text, p_name text, p_db_role text) RETURNS void
LANGUAGE plpgsql SET search_path = verdict, pg_temp AS $$
DECLARE
    v_body text := '{"at":' || to_json(to_char(clock_timestamp() AT TIME ZONE 'UTC',
            'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))::text
        || ',"by":{"principal":' || to_json(p_operator)::text || ',"role":"operator"}'
        || ',"db_role":' || to_json(p_db_role)::text
        || ',"principal":' || to_json(p_name)::text
        || ',"schema":"verdict.db-login/v1"}';
    v_digest text := verdict.row_digest('request', v_body);
    r verdict.put_result;
BEGIN
    r := verdict.put_one_verification_requests(p_operator, 'operator', v_digest, v_digest, v_body,
        NULL);
    IF r.r_inserted IS NOT TRUE THEN
        RAISE EXCEPTION 'principal %: the login could not be recorded', p_name USING ERRCODE = '42501';
    END IF;
END $$;
REVOKE ALL ON FUNCTION verdict._note_login(text, text, text) FROM PUBLIC;

RESET ROLE;
