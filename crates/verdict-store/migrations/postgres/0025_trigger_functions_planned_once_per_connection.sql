-- verdict store, PostgreSQL schema version 25: the functions the write triggers call are planned
-- once per connection, not once per transaction.
--
-- `_unbound_superuser` (called by the BEFORE INSERT triggers of subjects, check_evidence and
-- human_decisions on every row) was an SQL function with its own search_path, as
-- `_write_grant_in_force` was until schema 23. Such a function is never inlined, and
-- PostgreSQL 15 keeps the plan of its query only for as long as the calling expression's state lives: a PL/pgSQL caller
-- rebuilds that state in every transaction, so each single append parsed and planned the query
-- over `pg_roles` again (measured at about 135 µs of server CPU per single append, more than
-- the body's canonical-form check). As PL/pgSQL functions, the same queries are planned once
-- per connection and kept. Each returns exactly what it returned before, for every input: the
-- expressions are the same, only the language around them changes. Owners, privileges,
-- volatility and search_path are kept (CREATE OR REPLACE keeps the grants).

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

-- Whether the connection is a superuser's with no role set, which the triggers do not bind.
CREATE OR REPLACE FUNCTION verdict._unbound_superuser() RETURNS boolean
LANGUAGE plpgsql STABLE SET search_path = verdict, pg_temp AS $$
BEGIN
    RETURN current_setting('role') = 'none' AND coalesce((SELECT r.rolsuper
        FROM pg_catalog.pg_roles r WHERE r.rolname = session_user), false);
END $$;

-- `_write_grant_in_force` is PL/pgSQL since schema 23, where it became the write case of
-- `_grant_in_force` (also PL/pgSQL), so it needs no change here.

-- Check evidence written in the producer role: about the writer's own subject, under a write
-- grant in force on its execution (or mission). As in schema 21, but the writer's role is read
-- first, so that evidence in any other role (a runner's, nearly all of it) returns without
-- calling `_unbound_superuser`: both tests only let a row through, so their order changes
-- nothing but the work.
CREATE OR REPLACE FUNCTION verdict._producer_evidence_under_grant() RETURNS trigger
LANGUAGE plpgsql SET search_path = verdict, pg_temp AS $$
DECLARE
    v_principal text;
    v_role text;
    v_execution text;
    v_subject jsonb;
BEGIN
    SELECT a.principal, a.role INTO v_principal, v_role FROM verdict.audit_events a
        WHERE a.seq = NEW.seq;
    IF v_role IS DISTINCT FROM 'producer' OR verdict._unbound_superuser() THEN
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
