-- verdict store, PostgreSQL schema version 31: a subject names a mission only under its
-- producer's write grant on that mission.
--
-- A grant by mission covers every execution whose current subject names that mission. Schema
-- 21 holds an execution to the mission of its current subject, but the first subject of an
-- execution was held to nothing: a producer granted write on one execution only could name any
-- mission in that execution's first subject, and every grant on that mission (the verifiers it
-- trusts, the people who approve its work) then covered the execution, so the producer chose
-- who verified and approved its own work. What changes:
-- - A subject written in the producer role that names a mission is stored (put_subjects and
--   put_one_subjects, by the trigger of schema 21 on subjects) only while its writer holds a
--   write grant in force, not revoked, at the database's clock (any time, on a manual clock),
--   whose scope is that mission. A write grant on the execution alone does not put the
--   execution in a mission; the refusal names the mission and the grant missing (SQLSTATE
--   42501) and nothing is appended. This holds for every subject, the first and each later
--   one: a producer handed another's execution of a mission by a grant on its id needs a
--   write grant on the mission too. An operator may name any mission.
-- A superuser connection with no role set is not bound by the trigger, as by schema 21.
-- `_subject_of_the_execution_as_stored` is recreated with the check after that of schema 21
-- (CREATE OR REPLACE keeps its owner, privileges and trigger), so a subject that changes its
-- execution's mission is still refused for that first.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

-- Refuses subject `p_digest` (body `p_new`), written by `p_principal` in `p_role`, when it
-- names a mission and a producer writes it without a write grant in force on that mission.
CREATE FUNCTION verdict._subject_names_mission_under_grant(p_digest text, p_new jsonb,
    p_principal text, p_role text) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = verdict, pg_temp AS $$
BEGIN
    IF p_role = 'producer' AND (p_new ->> 'mission') IS NOT NULL
        AND NOT verdict._grant_in_force(p_principal, NULL, p_new ->> 'mission', 'write') THEN
        RAISE EXCEPTION 'subject %: producer % names mission %, but holds no write grant in force on mission %; a grant on the execution alone does not put it in a mission',
            p_digest, p_principal, p_new ->> 'mission', p_new ->> 'mission'
            USING ERRCODE = '42501';
    END IF;
END $$;
REVOKE ALL ON FUNCTION verdict._subject_names_mission_under_grant(text, jsonb, text, text)
    FROM PUBLIC;

-- A subject stored by put_subjects or put_one_subjects: as schema 21, then the mission it names.
CREATE OR REPLACE FUNCTION verdict._subject_of_the_execution_as_stored() RETURNS trigger
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
    PERFORM verdict._subject_names_mission_under_grant(NEW.key, NEW.body::jsonb, v_principal,
        v_role);
    RETURN NEW;
END $$;

RESET ROLE;
