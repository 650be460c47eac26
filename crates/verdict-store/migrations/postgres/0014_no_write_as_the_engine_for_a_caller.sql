-- verdict store, PostgreSQL schema version 14: the engine's remaining writes on a caller's
-- behalf are the caller's own, and a self-admission is held to the execution's cancellation and
-- to preflight's stored verdict; a decision is stored only under the name of a principal that
-- may gate.
--
-- - The first operator. `init` used to write the store's first principal as the engine's own
--   principal (`<prefix>engine`). It is now written as that operator itself: put_principals
--   and put_one_principals take, while the store holds no principal at all (checked under the
--   chain lock), exactly one principal record naming the calling principal in the operator
--   role, from any identity that may call them, although that operator has no identity yet.
--   Everything else keeps the identity check of version 7.
-- - Admission leases. A verifier admitting itself to a request with a run cap used to have its
--   `admit <request>` lease taken by the engine's identity. A verifier now takes it itself:
--   cas_lease takes `admit <request>` in the verifier role only holding itself (as before for
--   every lease of a runner or verifier), only for a stored `verdict.request/v1` whose
--   subject's execution (or mission) the verifier holds a grant in force on, and, on a store
--   that keeps the database's clock, for at most 60 seconds from clock_timestamp(), so a
--   verifier cannot hold other admissions back for longer than the engine would.
-- - A run is never admitted on a cancelled execution (a trigger on verifier_runs, whoever
--   writes): the requests table holds no cancellation of the run's execution from one who may
--   cancel it, as the audit chain names the writer (the operator role, or the execution's
--   producer naming itself).
-- - Preflight's verdict, which the admission note stores in the admitting transaction, is held
--   for a verifier admitting itself: a note whose preflight decided (`skipped`) needs its run
--   ended `cancelled` in the same transaction (checked at commit), so no run preflight stopped
--   stays open for a model; and a note saying preflight did not decide is refused while the
--   store holds a note, written by an operator or by the same verifier and confirmed by its
--   run, in which preflight decided for the same request at the same generation, and no check
--   evidence about the subject has been stored since. What preflight computes is still not
--   recomputed by the database.
-- - A gate decision is stored only under the name of a stored principal that may gate: an
--   operator, or a principal holding a grant (read or write) in force on the execution (or
--   mission) of the decision's subject. The gate's identity used to take any name at all.
--
-- How: the principals' identity check and cas_lease are spliced (each marker must occur
-- exactly once); the other checks are triggers, which read who wrote a row from its audit
-- event (appended before the row, with the same seq). A superuser connection with no role set
-- is not bound by the decision check, as by the identity check.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

-- Whether a call of a principals' routine stores the store's first principal, an operator,
-- naming the calling principal itself.
CREATE FUNCTION verdict._first_operator(p_principal text, p_role text, p_bodies text[])
RETURNS boolean
LANGUAGE plpgsql SET search_path = verdict, pg_temp AS $$
DECLARE
    v_doc jsonb;
BEGIN
    IF p_role IS DISTINCT FROM 'operator' OR coalesce(array_length(p_bodies, 1), 0) <> 1
        OR EXISTS (SELECT 1 FROM verdict.principals) THEN
        RETURN false;
    END IF;
    -- Under the chain lock, so two first operators racing cannot both be the first.
    PERFORM pg_advisory_xact_lock(8531478330712965377);
    IF EXISTS (SELECT 1 FROM verdict.principals) THEN
        RETURN false;
    END IF;
    BEGIN
        v_doc := p_bodies[1]::jsonb;
    EXCEPTION WHEN others THEN
        RETURN false;
    END;
    RETURN jsonb_typeof(v_doc) = 'object' AND (v_doc ->> 'name') IS NOT DISTINCT FROM p_principal
        AND (v_doc ->> 'role') IS NOT DISTINCT FROM 'operator';
END $$;
REVOKE ALL ON FUNCTION verdict._first_operator(text, text, text[]) FROM PUBLIC;

DO $make$
DECLARE
    f record;
    v_def text;
    v_hits integer;
    v_marker constant text := E'    IF NOT EXISTS (SELECT 1 FROM verdict.principal_roles id_m\n';
BEGIN
    FOR f IN SELECT * FROM (VALUES
        ('verdict.put_principals(text, text, text[], text[], text[], text[])', 'p_bodies'),
        ('verdict.put_one_principals(text, text, text, text, text, text)', 'ARRAY[p_body]')
    ) AS v(signature, bodies) LOOP
        v_def := pg_get_functiondef(f.signature::regprocedure);
        v_hits := (length(v_def) - length(replace(v_def, v_marker, ''))) / length(v_marker);
        IF v_hits <> 1 THEN
            RAISE EXCEPTION '%: the identity check occurs % times, not once', f.signature, v_hits;
        END IF;
        EXECUTE replace(v_def, v_marker, format(
            E'    IF NOT verdict._first_operator(p_principal, p_role, %s)\n        AND NOT EXISTS (SELECT 1 FROM verdict.principal_roles id_m\n',
            f.bodies));
    END LOOP;
END $make$;

-- Admission leases in the verifier role.
DO $lease$
DECLARE
    v_def text;
    v_hits integer;
    v_role_marker constant text := E'IF p_role IS DISTINCT FROM ''operator'' AND starts_with(p_name, ''admit '') THEN\n        RAISE EXCEPTION ''% is an admission lease; only the operator role moves it'', p_name';
    v_marker constant text := 'RETURN QUERY SELECT * FROM verdict._cas(''lease''';
    v_check constant text := $check$IF p_role = 'verifier' AND starts_with(p_name, 'admit ') THEN
        IF NOT EXISTS (SELECT 1 FROM verdict.verification_requests vl_q, verdict.subjects vl_s,
                verdict.grants vl_g
            WHERE vl_q.key = substr(p_name, 7)
              AND (vl_q.body::jsonb ->> 'schema') = 'verdict.request/v1'
              AND vl_s.key = vl_q.subject_digest
              AND vl_g.principal = p_principal
              AND ((vl_g.scope_kind = 'execution' AND vl_g.scope_id = vl_s.execution_id)
                OR (vl_g.scope_kind = 'mission' AND vl_g.scope_id = (vl_s.body::jsonb ->> 'mission')))
              AND NOT EXISTS (SELECT 1 FROM verdict.grant_revocations vl_v
                  WHERE vl_v.grant_id = vl_g.key)
              AND ((vl_g.body::jsonb ->> 'expires_at')::timestamptz > clock_timestamp()
                OR EXISTS (SELECT 1 FROM verdict.pointers vl_c WHERE vl_c.pointer = 'clock'
                    AND vl_c.name = 'store' AND vl_c.value = '{"clock":"manual"}'))) THEN
            RAISE EXCEPTION 'lease %: verifier % takes the admission lease only of a stored request about an execution it holds a grant in force on',
                p_name, p_principal USING ERRCODE = '42501';
        END IF;
        IF p_new IS NOT NULL
            AND NOT EXISTS (SELECT 1 FROM verdict.pointers vl_c WHERE vl_c.pointer = 'clock'
                AND vl_c.name = 'store' AND vl_c.value = '{"clock":"manual"}')
            AND (p_new::jsonb ->> 'expires_at')::timestamptz > clock_timestamp() + interval '60 seconds' THEN
            RAISE EXCEPTION 'lease %: a verifier holds an admission lease for at most 60 seconds',
                p_name USING ERRCODE = '42501';
        END IF;
    END IF;
    $check$;
BEGIN
    v_def := pg_get_functiondef(
        'verdict.cas_lease(text, text, text, bigint, text, text, text, text, text)'::regprocedure);
    v_hits := (length(v_def) - length(replace(v_def, v_role_marker, ''))) / length(v_role_marker);
    IF v_hits <> 1 THEN
        RAISE EXCEPTION 'cas_lease: the admission lease''s role check occurs % times, not once', v_hits;
    END IF;
    v_hits := (length(v_def) - length(replace(v_def, v_marker, ''))) / length(v_marker);
    IF v_hits <> 1 THEN
        RAISE EXCEPTION 'cas_lease: its call of _cas occurs % times, not once', v_hits;
    END IF;
    v_def := replace(v_def, v_role_marker, E'IF coalesce(p_role, '''') NOT IN (''operator'', ''verifier'') AND starts_with(p_name, ''admit '') THEN\n        RAISE EXCEPTION ''% is an admission lease; only an operator, or a verifier for its own admission, moves it'', p_name');
    EXECUTE replace(v_def, v_marker, v_check || v_marker);
END $lease$;

-- No run on a cancelled execution.
CREATE FUNCTION verdict._run_on_live_execution() RETURNS trigger
LANGUAGE plpgsql SET search_path = verdict, pg_temp AS $$
DECLARE
    v_execution text;
BEGIN
    SELECT s.execution_id INTO v_execution FROM verdict.subjects s
        WHERE s.key = (NEW.body::jsonb ->> 'subject_digest');
    IF EXISTS (SELECT 1 FROM verdict.subjects cs
            JOIN verdict.verification_requests c ON c.subject_digest = cs.key
            JOIN verdict.audit_events a ON a.seq = c.seq
        WHERE cs.execution_id = v_execution
          AND (c.body::jsonb ->> 'schema') = 'verdict.cancellation/v1'
          AND (c.body::jsonb #>> '{cancelled,kind}') = 'execution'
          AND (c.body::jsonb #>> '{cancelled,id}') = v_execution
          AND a.tbl = 'verification_requests'
          AND (a.role = 'operator'
            OR (a.role = 'producer' AND (c.body::jsonb #>> '{by,principal}') = a.principal
                AND (cs.body::jsonb #>> '{producer,principal}') = a.principal))) THEN
        RAISE EXCEPTION 'verifier_runs %: execution % was cancelled; it admits no run', NEW.key,
            v_execution USING ERRCODE = '42501';
    END IF;
    RETURN NEW;
END $$;
REVOKE ALL ON FUNCTION verdict._run_on_live_execution() FROM PUBLIC;
CREATE TRIGGER verifier_runs_live_execution BEFORE INSERT ON verdict.verifier_runs
    FOR EACH ROW EXECUTE FUNCTION verdict._run_on_live_execution();

-- A verifier's admission note against preflight's stored verdict.
CREATE FUNCTION verdict._admission_note_preflight() RETURNS trigger
LANGUAGE plpgsql SET search_path = verdict, pg_temp AS $$
DECLARE
    v_doc jsonb := NEW.body::jsonb;
    v_principal text;
    v_role text;
BEGIN
    IF (v_doc ->> 'schema') IS DISTINCT FROM 'verdict.admission/v1' THEN
        RETURN NULL;
    END IF;
    SELECT a.principal, a.role INTO v_principal, v_role FROM verdict.audit_events a
        WHERE a.seq = NEW.seq;
    IF v_role IS DISTINCT FROM 'verifier' THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(v_doc #> '{preflight,skipped}') IS DISTINCT FROM 'boolean' THEN
        RAISE EXCEPTION 'verification_requests %: an admission note says whether preflight decided (preflight.skipped)',
            NEW.key USING ERRCODE = '22023';
    END IF;
    IF (v_doc #>> '{preflight,skipped}') = 'false' AND EXISTS (
        SELECT 1 FROM verdict.verification_requests p
            JOIN verdict.audit_events pa ON pa.seq = p.seq
            JOIN verdict.verifier_runs pr ON pr.key = (p.body::jsonb ->> 'run_id')
        WHERE p.subject_digest = (v_doc ->> 'subject_digest') AND p.seq < NEW.seq
          AND (p.body::jsonb ->> 'schema') = 'verdict.admission/v1'
          AND (p.body::jsonb ->> 'request_digest') = (v_doc ->> 'request_digest')
          AND (p.body::jsonb ->> 'generation') = (v_doc ->> 'generation')
          AND (p.body::jsonb #>> '{preflight,skipped}') = 'true'
          AND pa.tbl = 'verification_requests'
          AND (pa.role = 'operator' OR (pa.role = 'verifier' AND pa.principal = v_principal))
          AND pr.request_digest = (p.body::jsonb ->> 'request_digest')
          AND pr.subject_digest = p.subject_digest
          AND pr.verifier = (p.body::jsonb ->> 'verifier')
          AND pr.generation::text = (p.body::jsonb ->> 'generation')
          AND NOT EXISTS (SELECT 1 FROM verdict.check_evidence e
              WHERE e.subject_digest = p.subject_digest AND e.seq > p.seq)) THEN
        RAISE EXCEPTION '%: preflight already decided request % at generation %, and no check evidence about its subject has been stored since; verifier % may not note that it did not',
            NEW.key, v_doc ->> 'request_digest', v_doc ->> 'generation', v_principal
            USING ERRCODE = '42501';
    END IF;
    RETURN NULL;
END $$;
REVOKE ALL ON FUNCTION verdict._admission_note_preflight() FROM PUBLIC;
CREATE TRIGGER verification_requests_admission_preflight AFTER INSERT
    ON verdict.verification_requests FOR EACH ROW
    WHEN (position('"schema":"verdict.admission/v1"' IN NEW.body) > 0)
    EXECUTE FUNCTION verdict._admission_note_preflight();

-- At commit: a verifier's note in which preflight decided has its run ended `cancelled` in the
-- same transaction. Runs at commit, outside the write routines, so as the schema's owner.
CREATE FUNCTION verdict._skipped_run_ended() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = verdict, pg_temp AS $$
DECLARE
    v_run text := NEW.body::jsonb ->> 'run_id';
BEGIN
    IF (NEW.body::jsonb ->> 'schema') IS DISTINCT FROM 'verdict.admission/v1'
        OR (NEW.body::jsonb #>> '{preflight,skipped}') IS DISTINCT FROM 'true'
        OR NOT EXISTS (SELECT 1 FROM verdict.audit_events a WHERE a.seq = NEW.seq
            AND a.role = 'verifier') THEN
        RETURN NULL;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM verdict.run_events e
            WHERE e.run_id = v_run AND e.status = 'cancelled'
              AND e.xmin = xid(pg_current_xact_id())) THEN
        RAISE EXCEPTION '%: preflight decided for run %, which the admitting transaction must end cancelled',
            NEW.key, v_run USING ERRCODE = '42501';
    END IF;
    RETURN NULL;
END $$;
REVOKE ALL ON FUNCTION verdict._skipped_run_ended() FROM PUBLIC;
CREATE CONSTRAINT TRIGGER verification_requests_skipped_run_ended AFTER INSERT
    ON verdict.verification_requests DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (position('"schema":"verdict.admission/v1"' IN NEW.body) > 0
        AND position('"skipped":true' IN NEW.body) > 0)
    EXECUTE FUNCTION verdict._skipped_run_ended();

-- A decision only under the name of a stored principal that may gate.
CREATE FUNCTION verdict._decision_by_one_who_may_gate() RETURNS trigger
LANGUAGE plpgsql SET search_path = verdict, pg_temp AS $$
DECLARE
    v_principal text;
    v_subject text := NEW.body::jsonb ->> 'subject_digest';
BEGIN
    IF current_setting('role') = 'none' AND coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles r
            WHERE r.rolname = session_user), false) THEN
        RETURN NEW;
    END IF;
    SELECT a.principal INTO v_principal FROM verdict.audit_events a WHERE a.seq = NEW.seq;
    IF NOT EXISTS (SELECT 1 FROM verdict.principals p WHERE p.key = v_principal
            AND (p.role = 'operator' OR EXISTS (SELECT 1 FROM verdict.subjects s, verdict.grants g
                WHERE s.key = v_subject AND g.principal = p.key
                  AND ((g.scope_kind = 'execution' AND g.scope_id = s.execution_id)
                    OR (g.scope_kind = 'mission' AND g.scope_id = (s.body::jsonb ->> 'mission')))
                  AND NOT EXISTS (SELECT 1 FROM verdict.grant_revocations v
                      WHERE v.grant_id = g.key)
                  AND ((g.body::jsonb ->> 'expires_at')::timestamptz > clock_timestamp()
                    OR EXISTS (SELECT 1 FROM verdict.pointers c WHERE c.pointer = 'clock'
                        AND c.name = 'store' AND c.value = '{"clock":"manual"}'))))) THEN
        RAISE EXCEPTION 'gate_decisions %: a decision is stored only under the name of a stored operator, or of a principal holding a grant in force on its execution, not %',
            NEW.key, coalesce(v_principal, 'nobody') USING ERRCODE = '42501';
    END IF;
    RETURN NEW;
END $$;
REVOKE ALL ON FUNCTION verdict._decision_by_one_who_may_gate() FROM PUBLIC;
CREATE TRIGGER gate_decisions_by_one_who_may_gate BEFORE INSERT ON verdict.gate_decisions
    FOR EACH ROW EXECUTE FUNCTION verdict._decision_by_one_who_may_gate();

RESET ROLE;
