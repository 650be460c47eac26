-- verdict store, PostgreSQL schema version 21: an execution is written to only under a grant
-- on the execution as it is stored, and its pointer only moves forward.
--
-- Until now the grant a producer's subject needed was looked up from the new subject's own
-- body: a producer holding a write grant on some mission could put a subject for another
-- producer's execution naming that mission, move the execution to it and work it as its own.
-- A producer's check evidence was held to no grant at all, nor to the subject being its own.
-- And within one generation the pointer could go back to a subject it had left, bringing that
-- subject's evidence back with it. What changes:
-- - A subject for an execution that has a current subject keeps that subject's mission; one
--   naming another mission (or none, where it had one) is refused, whoever writes it
--   (put_subjects and put_one_subjects, by a trigger on subjects, and cas_execution). Since a
--   grant by mission now covers an execution only through the mission it keeps, a producer's
--   write grant on the new subject is a grant on the execution as stored.
-- - A producer puts a subject for (and moves) an execution whose current subject another
--   producer produced only while it holds a write grant in force on the execution itself, by
--   its id: a grant by mission lets producers work their own executions in it, not take over
--   each other's. The operator hands an execution over by granting it by id.
-- - cas_execution refuses to make current a subject the execution pointed to before, unless it
--   is the current one (which moves nothing).
-- - Check evidence written in the producer role is stored only when the writer produced the
--   evidence's subject and holds a write grant in force on its execution (or its mission), as
--   a runner's is (by a trigger on check_evidence, so the batched and the single routine both).
-- - A human decision written in the human role names role `human`, the current policy of a
--   gate and the current subject of its execution, as the engine requires before it writes.
-- The triggers read who wrote a row from its audit event (appended before the row, with the
-- same seq). A superuser connection with no role set is not bound by the triggers, as by the
-- identity check. cas_execution is spliced (each marker must occur exactly once).

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

-- Whether `p_principal` holds a write grant in force on execution `p_execution`, or on mission
-- `p_mission` when that is not null, at the database's clock (any time, on a manual clock).
CREATE FUNCTION verdict._write_grant_in_force(p_principal text, p_execution text, p_mission text)
RETURNS boolean
LANGUAGE sql STABLE SET search_path = verdict, pg_temp AS $$
    SELECT EXISTS (SELECT 1 FROM verdict.grants g
        WHERE g.principal = p_principal AND (g.body::jsonb ->> 'access') = 'write'
          AND ((g.scope_kind = 'execution' AND g.scope_id = p_execution)
            OR (p_mission IS NOT NULL AND g.scope_kind = 'mission' AND g.scope_id = p_mission))
          AND NOT EXISTS (SELECT 1 FROM verdict.grant_revocations v WHERE v.grant_id = g.key)
          AND ((g.body::jsonb ->> 'expires_at')::timestamptz > clock_timestamp()
            OR EXISTS (SELECT 1 FROM verdict.pointers c WHERE c.pointer = 'clock'
                AND c.name = 'store' AND c.value = '{"clock":"manual"}')))
$$;
REVOKE ALL ON FUNCTION verdict._write_grant_in_force(text, text, text) FROM PUBLIC;

-- Refuses subject `p_new` (digest `p_digest`) for execution `p_execution`, written by
-- `p_principal` in `p_role`, unless it keeps the mission of the execution's current subject
-- and, from a producer other than that subject's, the writer holds a write grant in force on
-- the execution by its id. Nothing to check while the execution has no current subject.
CREATE FUNCTION verdict._subject_keeps_execution(p_execution text, p_digest text, p_new jsonb,
    p_principal text, p_role text) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = verdict, pg_temp AS $$
DECLARE
    v_current_key text;
    v_current jsonb;
BEGIN
    SELECT s.key, s.body::jsonb INTO v_current_key, v_current
        FROM verdict.pointers x JOIN verdict.subjects s
            ON s.key = (x.value::jsonb ->> 'subject_digest')
        WHERE x.pointer = 'execution' AND x.name = p_execution;
    IF v_current IS NULL THEN
        RETURN;
    END IF;
    IF (p_new ->> 'mission') IS DISTINCT FROM (v_current ->> 'mission') THEN
        RAISE EXCEPTION 'execution %: its current subject % is of mission %, but subject % names mission %; a subject does not change its execution''s mission',
            p_execution, v_current_key, coalesce(v_current ->> 'mission', 'none'), p_digest,
            coalesce(p_new ->> 'mission', 'none') USING ERRCODE = '42501';
    END IF;
    IF p_role = 'producer'
        AND (v_current #>> '{producer,principal}') IS DISTINCT FROM p_principal
        AND NOT verdict._write_grant_in_force(p_principal, p_execution, NULL) THEN
        RAISE EXCEPTION 'execution %: its current subject % is producer %''s; producer % takes it over only with a write grant in force on the execution itself',
            p_execution, v_current_key, v_current #>> '{producer,principal}', p_principal
            USING ERRCODE = '42501';
    END IF;
END $$;
REVOKE ALL ON FUNCTION verdict._subject_keeps_execution(text, text, jsonb, text, text) FROM PUBLIC;

-- Whether the connection is a superuser's with no role set, which the triggers do not bind.
CREATE FUNCTION verdict._unbound_superuser() RETURNS boolean
LANGUAGE sql STABLE SET search_path = verdict, pg_temp AS $$
    SELECT current_setting('role') = 'none' AND coalesce((SELECT r.rolsuper
        FROM pg_catalog.pg_roles r WHERE r.rolname = session_user), false)
$$;
REVOKE ALL ON FUNCTION verdict._unbound_superuser() FROM PUBLIC;

-- A subject stored by put_subjects or put_one_subjects.
CREATE FUNCTION verdict._subject_of_the_execution_as_stored() RETURNS trigger
LANGUAGE plpgsql SET search_path = verdict, pg_temp AS $$
DECLARE
    v_principal text;
    v_role text;
BEGIN
    IF verdict._unbound_superuser() THEN
        RETURN NEW;
    END IF;
    SELECT a.principal, a.role INTO v_principal, v_role FROM verdict.audit_events a
        WHERE a.seq = NEW.seq;
    PERFORM verdict._subject_keeps_execution(NEW.execution_id, NEW.key, NEW.body::jsonb,
        v_principal, v_role);
    RETURN NEW;
END $$;
REVOKE ALL ON FUNCTION verdict._subject_of_the_execution_as_stored() FROM PUBLIC;
CREATE TRIGGER subjects_of_the_execution_as_stored BEFORE INSERT ON verdict.subjects
    FOR EACH ROW EXECUTE FUNCTION verdict._subject_of_the_execution_as_stored();

-- Check evidence written in the producer role: about the writer's own subject, under a write
-- grant in force on its execution (or mission).
CREATE FUNCTION verdict._producer_evidence_under_grant() RETURNS trigger
LANGUAGE plpgsql SET search_path = verdict, pg_temp AS $$
DECLARE
    v_principal text;
    v_role text;
    v_execution text;
    v_subject jsonb;
BEGIN
    IF verdict._unbound_superuser() THEN
        RETURN NEW;
    END IF;
    SELECT a.principal, a.role INTO v_principal, v_role FROM verdict.audit_events a
        WHERE a.seq = NEW.seq;
    IF v_role IS DISTINCT FROM 'producer' THEN
        RETURN NEW;
    END IF;
    SELECT s.execution_id, s.body::jsonb INTO v_execution, v_subject FROM verdict.subjects s
        WHERE s.key = NEW.subject_digest;
    IF v_subject IS NULL OR (v_subject #>> '{producer,principal}') IS DISTINCT FROM v_principal THEN
        RAISE EXCEPTION 'check_evidence %: producer % did not produce subject %', NEW.key,
            v_principal, NEW.subject_digest USING ERRCODE = '42501';
    END IF;
    IF NOT verdict._write_grant_in_force(v_principal, v_execution, v_subject ->> 'mission') THEN
        RAISE EXCEPTION 'check_evidence %: % holds no write grant in force on its execution', NEW.key,
            v_principal USING ERRCODE = '42501';
    END IF;
    RETURN NEW;
END $$;
REVOKE ALL ON FUNCTION verdict._producer_evidence_under_grant() FROM PUBLIC;
CREATE TRIGGER check_evidence_producer_under_grant BEFORE INSERT ON verdict.check_evidence
    FOR EACH ROW EXECUTE FUNCTION verdict._producer_evidence_under_grant();

-- A human decision written in the human role: as the engine records one.
CREATE FUNCTION verdict._human_decision_on_what_is_current() RETURNS trigger
LANGUAGE plpgsql SET search_path = verdict, pg_temp AS $$
DECLARE
    v_doc jsonb := NEW.body::jsonb;
    v_role text;
BEGIN
    IF verdict._unbound_superuser() THEN
        RETURN NEW;
    END IF;
    SELECT a.role INTO v_role FROM verdict.audit_events a WHERE a.seq = NEW.seq;
    IF v_role IS DISTINCT FROM 'human' THEN
        RETURN NEW;
    END IF;
    IF (v_doc ->> 'role') IS DISTINCT FROM 'human' THEN
        RAISE EXCEPTION 'human_decisions %: a decision names role human, not %', NEW.key,
            coalesce(v_doc ->> 'role', 'none') USING ERRCODE = '42501';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM verdict.pointers g WHERE g.pointer = 'gate'
            AND (g.value::jsonb ->> 'policy_digest') = (v_doc ->> 'policy_digest')) THEN
        RAISE EXCEPTION 'human_decisions %: policy % is no gate''s current policy', NEW.key,
            coalesce(v_doc ->> 'policy_digest', 'none') USING ERRCODE = '42501';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM verdict.subjects s JOIN verdict.pointers x
                ON x.pointer = 'execution' AND x.name = s.execution_id
            WHERE s.key = (v_doc ->> 'subject_digest')
              AND (x.value::jsonb ->> 'subject_digest') = s.key) THEN
        RAISE EXCEPTION 'human_decisions %: subject % is not its execution''s current subject', NEW.key,
            coalesce(v_doc ->> 'subject_digest', 'none') USING ERRCODE = '42501';
    END IF;
    RETURN NEW;
END $$;
REVOKE ALL ON FUNCTION verdict._human_decision_on_what_is_current() FROM PUBLIC;
CREATE TRIGGER human_decisions_on_what_is_current BEFORE INSERT ON verdict.human_decisions
    FOR EACH ROW EXECUTE FUNCTION verdict._human_decision_on_what_is_current();

-- cas_execution: the execution as stored, and forward only.
DO $make$
DECLARE
    v_sig constant text := 'verdict.cas_execution(text, text, text, bigint, text, text, text, text, text)';
    v_def text;
    v_hits integer;
    v_marker constant text := E'    RETURN QUERY SELECT * FROM verdict._cas(''execution''';
BEGIN
    v_def := pg_get_functiondef(v_sig::regprocedure);
    v_hits := (length(v_def) - length(replace(v_def, v_marker, ''))) / length(v_marker);
    IF v_hits <> 1 THEN
        RAISE EXCEPTION '%: its call of _cas occurs % times, not once', v_sig, v_hits;
    END IF;
    EXECUTE replace(v_def, v_marker, $check$    PERFORM verdict._subject_keeps_execution(p_name,
        v_new ->> 'subject_digest', v_subject, p_principal, p_role);
    IF (SELECT x.value::jsonb ->> 'subject_digest' FROM verdict.pointers x
            WHERE x.pointer = 'execution' AND x.name = p_name)
            IS DISTINCT FROM (v_new ->> 'subject_digest')
        AND EXISTS (SELECT 1 FROM verdict.pointer_changes pc
            WHERE pc.pointer = 'execution' AND pc.name = p_name
              AND (pc.body::jsonb #>> '{new,subject_digest}') = (v_new ->> 'subject_digest')) THEN
        RAISE EXCEPTION 'execution %: subject % was its current subject before; an execution only moves forward',
            p_name, v_new ->> 'subject_digest' USING ERRCODE = '42501';
    END IF;
$check$ || v_marker);
    IF position('an execution only moves forward' IN
            (SELECT p.prosrc FROM pg_catalog.pg_proc p WHERE p.oid = v_sig::regprocedure)) = 0 THEN
        RAISE EXCEPTION '%: the forward check is not in it', v_sig;
    END IF;
END $make$;

RESET ROLE;
