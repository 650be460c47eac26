-- verdict store, PostgreSQL schema version 23: the database scopes what a principal reads.
--
-- Writes were already held to the principal the connection acts as; reads were not: every
-- group role could SELECT every row, so a producer's, runner's, verifier's or human's own login
-- read the subjects, evidence, results, findings, decisions, blobs, jobs, grants, denials and
-- audit events of executions it holds no grant on. Now each table's read policy is split in two:
--
-- - `<table>_read_all` (USING true) for the owner (so every routine, SECURITY DEFINER, reads as
--   before), the operators' group (every operator's identity, and the engine's), the gate's and
--   the system's identities, and `<prefix>service`. The service login reads everything as
--   itself and scopes reads in the engine; its policy is the constant it was, so its plans do
--   not change (a permissive `true` folds away whatever other policy also applies to it).
-- - `<table>_read_granted` for the producers', runners', verifiers' and humans' groups: a row
--   is visible to the identity acting (the role set with SET ROLE, else the login itself) only
--   when the principal it acts for may read it:
--   * a row about a subject (subjects; evidence, requests, runs, run events, results, findings,
--     human and gate decisions, gate evaluations), when that principal holds a grant in force,
--     of either access, on the subject's execution or its mission: the test the write routines
--     make (verdict._grant_in_force, of which verdict._write_grant_in_force is now the write
--     case), or when that principal wrote the row (its audit event names it);
--   * an execution's pointer and its changes, as its current subject; an admission lease as its
--     request, a run's lease as its run; the gates' and the clock's pointers, by everyone;
--   * a blob, when that principal wrote it or a subject it may read names its digest;
--   * a job, when it may read the job's request, or it queued or holds the job;
--   * grants and their revocations, only its own; denials, only those naming it;
--   * an audit event, when it may read the row the event records (the event names its table
--     and key), or the event is its own act. A principal's view of the chain is therefore not
--     the whole chain: `audit verify` is for an operator's or the service login.
-- - principals stay closed to the group roles (schema 10); a principal reads its own row
--   through principal_by_token and principal_entries. policies, store_meta, schema_migrations
--   and principal_roles stay readable by every role (names and roles are not secret: the
--   routines already list them).
--
-- The checks are STABLE SECURITY DEFINER functions with a fixed search_path, so they read as
-- the owner (whose own policy is true, so they never recurse into a policy) and each is a few
-- primary-key or indexed lookups; an identity that acts for no principal of those groups
-- reads nothing through them. Every table of the schema has row security enabled and forced.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

-- Revocations are looked up by the grant they revoke, for every row a principal reads.
CREATE INDEX grant_revocations_grant_id ON verdict.grant_revocations (grant_id);
-- Subjects of a mission, for the blobs a principal holding a grant on a mission reads.
CREATE INDEX subjects_mission ON verdict.subjects (((body::jsonb) ->> 'mission'));

-- Whether `p_principal` holds a grant in force on execution `p_execution`, or on mission
-- `p_mission` when that is not null, at the database's clock (any time, on a manual clock), of
-- access `p_access` (either, when null).
CREATE FUNCTION verdict._grant_in_force(p_principal text, p_execution text, p_mission text,
    p_access text) RETURNS boolean
LANGUAGE plpgsql STABLE SET search_path = verdict, pg_temp AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM verdict.grants g
            WHERE g.principal = p_principal
              AND (p_access IS NULL OR (g.body::jsonb ->> 'access') = p_access)
              AND ((g.scope_kind = 'execution' AND g.scope_id = p_execution)
                OR (p_mission IS NOT NULL AND g.scope_kind = 'mission' AND g.scope_id = p_mission))
              AND NOT EXISTS (SELECT 1 FROM verdict.grant_revocations v WHERE v.grant_id = g.key)
              AND ((g.body::jsonb ->> 'expires_at')::timestamptz > clock_timestamp()
                OR EXISTS (SELECT 1 FROM verdict.pointers c WHERE c.pointer = 'clock'
                    AND c.name = 'store' AND c.value = '{"clock":"manual"}')));
END $$;
REVOKE ALL ON FUNCTION verdict._grant_in_force(text, text, text, text) FROM PUBLIC;

-- The write routines' test, now the write case of the one above.
CREATE OR REPLACE FUNCTION verdict._write_grant_in_force(p_principal text, p_execution text,
    p_mission text) RETURNS boolean
LANGUAGE plpgsql STABLE SET search_path = verdict, pg_temp AS $$
BEGIN
    RETURN verdict._grant_in_force(p_principal, p_execution, p_mission, 'write');
END $$;

-- The principal whose reads are scoped that the session acts for: the identity set with SET
-- ROLE, else the login, as the identity check reads it. Null for any other identity.
CREATE FUNCTION verdict._reader() RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = verdict, pg_temp AS $$
BEGIN
    RETURN (SELECT m.principal FROM verdict.principal_roles m
        WHERE m.db_role = (CASE WHEN current_setting('role') = 'none' THEN session_user::text
                ELSE current_setting('role') END)
          AND m.principal IS NOT NULL AND m.role IN ('producer', 'runner', 'verifier', 'human'));
END $$;

-- Whether the reader wrote the row of sequence number `p_seq` (its audit event names it).
CREATE FUNCTION verdict._reader_wrote(p_seq bigint) RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = verdict, pg_temp AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM verdict.audit_events a
            WHERE a.seq = p_seq AND a.principal = verdict._reader());
END $$;

-- Whether the reader holds a grant in force on the execution of subject `p_subject` (or on its
-- mission). The subject's body, which may be large, is parsed for its mission only when the
-- reader holds no grant on the execution itself but some grant on a mission.
CREATE FUNCTION verdict._reads_subject(p_subject text) RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = verdict, pg_temp AS $$
DECLARE
    v_reader text := verdict._reader();
    v_execution text;
BEGIN
    IF v_reader IS NULL OR p_subject IS NULL THEN
        RETURN false;
    END IF;
    SELECT s.execution_id INTO v_execution FROM verdict.subjects s WHERE s.key = p_subject;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF verdict._grant_in_force(v_reader, v_execution, NULL, NULL) THEN
        RETURN true;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM verdict.grants g
            WHERE g.principal = v_reader AND g.scope_kind = 'mission') THEN
        RETURN false;
    END IF;
    RETURN verdict._grant_in_force(v_reader, v_execution,
        (SELECT s.body::jsonb ->> 'mission' FROM verdict.subjects s WHERE s.key = p_subject), NULL);
END $$;

-- Whether the reader holds a grant in force on execution `p_execution` (or on the mission of
-- its current subject, which every later subject keeps).
CREATE FUNCTION verdict._reads_execution(p_execution text) RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = verdict, pg_temp AS $$
BEGIN
    RETURN verdict._grant_in_force(verdict._reader(), p_execution,
            (SELECT s.body::jsonb ->> 'mission' FROM verdict.pointers x JOIN verdict.subjects s
                ON s.key = (x.value::jsonb ->> 'subject_digest')
             WHERE x.pointer = 'execution' AND x.name = p_execution), NULL);
END $$;

-- Whether the reader may read the verifier run `p_run` (by its subject).
CREATE FUNCTION verdict._reads_run(p_run text) RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = verdict, pg_temp AS $$
BEGIN
    RETURN coalesce((SELECT verdict._reads_subject(r.subject_digest) FROM verdict.verifier_runs r
            WHERE r.key = p_run), false);
END $$;

-- Whether the reader may read the request (or note) `p_request` (by its subject).
CREATE FUNCTION verdict._reads_request(p_request text) RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = verdict, pg_temp AS $$
BEGIN
    RETURN coalesce((SELECT verdict._reads_subject(q.subject_digest)
            FROM verdict.verification_requests q WHERE q.key = p_request), false);
END $$;

-- Whether the reader may read pointer `p_pointer` named `p_name`: an execution's as the
-- execution, a lease as what it leases, the gates' and the clock's always.
CREATE FUNCTION verdict._reads_pointer(p_pointer text, p_name text) RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = verdict, pg_temp AS $$
BEGIN
    RETURN CASE
            WHEN p_pointer IN ('gate', 'clock') THEN true
            WHEN p_pointer = 'execution' THEN verdict._reads_execution(p_name)
            WHEN p_pointer = 'lease' AND starts_with(p_name, 'admit ')
                THEN verdict._reads_request(substr(p_name, 7))
            WHEN p_pointer = 'lease' AND starts_with(p_name, 'run ')
                THEN verdict._reads_run(substr(p_name, 5))
            ELSE false END;
END $$;

-- Whether the reader may read blob `p_key`: one a subject it may read names by its digest.
-- Only the subjects of the executions and missions it holds a grant in force on are searched.
CREATE FUNCTION verdict._reads_blob(p_key text) RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = verdict, pg_temp AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM verdict.grants g, LATERAL (
                SELECT e.key, e.body FROM verdict.subjects e
                WHERE g.scope_kind = 'execution' AND e.execution_id = g.scope_id
                UNION ALL
                SELECT m.key, m.body FROM verdict.subjects m
                WHERE g.scope_kind = 'mission' AND (m.body::jsonb ->> 'mission') = g.scope_id) s
            WHERE g.principal = verdict._reader()
              AND position(p_key IN s.body) > 0
              AND verdict._reads_subject(s.key));
END $$;

-- Whether the reader holds grant `p_grant`.
CREATE FUNCTION verdict._reads_grant(p_grant text) RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = verdict, pg_temp AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM verdict.grants g
            WHERE g.key = p_grant AND g.principal = verdict._reader());
END $$;

-- Whether the reader may read the row an audit event records (table `p_tbl`, key `p_key`),
-- by the rule of that table.
CREATE FUNCTION verdict._reads_record(p_tbl text, p_key text) RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = verdict, pg_temp AS $$
DECLARE
    v_subject text;
    v_found boolean;
BEGIN
    CASE p_tbl
        WHEN 'policies' THEN RETURN true;
        WHEN 'subjects' THEN RETURN verdict._reads_subject(p_key);
        WHEN 'check_evidence' THEN SELECT t.subject_digest INTO v_subject FROM verdict.check_evidence t WHERE t.key = p_key;
        WHEN 'verification_requests' THEN SELECT t.subject_digest INTO v_subject FROM verdict.verification_requests t WHERE t.key = p_key;
        WHEN 'verifier_runs' THEN SELECT t.subject_digest INTO v_subject FROM verdict.verifier_runs t WHERE t.key = p_key;
        WHEN 'verification_results' THEN SELECT t.subject_digest INTO v_subject FROM verdict.verification_results t WHERE t.key = p_key;
        WHEN 'findings' THEN SELECT t.subject_digest INTO v_subject FROM verdict.findings t WHERE t.key = p_key;
        WHEN 'human_decisions' THEN SELECT t.subject_digest INTO v_subject FROM verdict.human_decisions t WHERE t.key = p_key;
        WHEN 'gate_decisions' THEN SELECT t.subject_digest INTO v_subject FROM verdict.gate_decisions t WHERE t.key = p_key;
        WHEN 'gate_evaluations' THEN SELECT t.subject_digest INTO v_subject FROM verdict.gate_evaluations t WHERE t.key = p_key;
        WHEN 'run_events' THEN
            SELECT verdict._reads_run(t.run_id) INTO v_found FROM verdict.run_events t WHERE t.key = p_key;
            RETURN coalesce(v_found, false);
        WHEN 'pointer_changes' THEN
            SELECT verdict._reads_pointer(t.pointer, t.name) INTO v_found FROM verdict.pointer_changes t WHERE t.key = p_key;
            RETURN coalesce(v_found, false);
        WHEN 'grants' THEN RETURN verdict._reads_grant(p_key);
        WHEN 'grant_revocations' THEN
            SELECT verdict._reads_grant(t.grant_id) INTO v_found FROM verdict.grant_revocations t WHERE t.key = p_key;
            RETURN coalesce(v_found, false);
        WHEN 'denials' THEN
            RETURN EXISTS (SELECT 1 FROM verdict.denials t WHERE t.key = p_key
                AND t.principal = verdict._reader());
        WHEN 'blobs' THEN RETURN verdict._reads_blob(p_key);
        ELSE RETURN false;
    END CASE;
    RETURN v_subject IS NOT NULL AND verdict._reads_subject(v_subject);
END $$;

DO $policies$
DECLARE
    t record;
    v_all constant text := '__OWNER__, __OPERATOR__, __GATE__, __SYSTEM__, __SERVICE__, __ENGINE__';
    v_scoped constant text := '__PRODUCER__, __RUNNER__, __VERIFIER__, __HUMAN__';
BEGIN
    FOR t IN SELECT * FROM (VALUES
        ('subjects', 'verdict._reads_subject(key) OR verdict._reader_wrote(seq)'),
        ('check_evidence', 'verdict._reads_subject(subject_digest) OR verdict._reader_wrote(seq)'),
        ('verification_requests', 'verdict._reads_subject(subject_digest) OR verdict._reader_wrote(seq)'),
        ('verifier_runs', 'verdict._reads_subject(subject_digest) OR verdict._reader_wrote(seq)'),
        ('run_events', 'verdict._reads_run(run_id) OR verdict._reader_wrote(seq)'),
        ('verification_results', 'verdict._reads_subject(subject_digest) OR verdict._reader_wrote(seq)'),
        ('findings', 'verdict._reads_subject(subject_digest) OR verdict._reader_wrote(seq)'),
        ('human_decisions', 'verdict._reads_subject(subject_digest) OR verdict._reader_wrote(seq)'),
        ('gate_decisions', 'verdict._reads_subject(subject_digest) OR verdict._reader_wrote(seq)'),
        ('gate_evaluations', 'verdict._reads_subject(subject_digest) OR verdict._reader_wrote(seq)'),
        ('pointers', 'verdict._reads_pointer(pointer, name)'),
        ('pointer_changes', 'verdict._reads_pointer(pointer, name) OR verdict._reader_wrote(seq)'),
        ('blobs', 'verdict._reader_wrote(seq) OR verdict._reads_blob(key)'),
        ('jobs', 'verdict._reads_request(request) OR enqueued_by = verdict._reader() OR principal = verdict._reader()'),
        ('grants', 'principal = verdict._reader()'),
        ('grant_revocations', 'verdict._reads_grant(grant_id)'),
        ('denials', 'principal = verdict._reader()'),
        ('audit_events', 'principal = verdict._reader() OR verdict._reads_record(tbl, key)'),
        ('principals', 'key = verdict._reader()')
    ) AS v(name, rule) LOOP
        EXECUTE format('DROP POLICY %I ON verdict.%I', t.name || '_read', t.name);
        EXECUTE format('CREATE POLICY %I ON verdict.%I FOR SELECT TO %s USING (true)',
            t.name || '_read_all', t.name,
            -- The token hashes stay with the owner and the service (schema 10).
            CASE WHEN t.name = 'principals' THEN '__OWNER__, __SERVICE__' ELSE v_all END);
        EXECUTE format('CREATE POLICY %I ON verdict.%I FOR SELECT TO %s USING (%s)',
            t.name || '_read_granted', t.name, v_scoped, t.rule);
    END LOOP;
    -- Every table of the schema keeps row security, enabled and forced, and no read policy
    -- open to every role is left but on the tables everyone reads.
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_class c
            WHERE c.relnamespace = 'verdict'::regnamespace AND c.relkind IN ('r', 'p')
              AND NOT (c.relrowsecurity AND c.relforcerowsecurity)) THEN
        RAISE EXCEPTION 'a table of the schema has no forced row security';
    END IF;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_policies p
            WHERE p.schemaname = 'verdict' AND p.cmd = 'SELECT' AND p.roles = '{public}'
              AND p.tablename NOT IN ('policies', 'store_meta', 'schema_migrations',
                  'principal_roles')) THEN
        RAISE EXCEPTION 'a read policy open to every role is left';
    END IF;
END $policies$;

-- The policies call these as the reading role.
REVOKE ALL ON FUNCTION verdict._reader(), verdict._reader_wrote(bigint),
    verdict._reads_subject(text), verdict._reads_execution(text), verdict._reads_run(text),
    verdict._reads_request(text), verdict._reads_pointer(text, text), verdict._reads_blob(text),
    verdict._reads_grant(text), verdict._reads_record(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION verdict._reader(), verdict._reader_wrote(bigint),
    verdict._reads_subject(text), verdict._reads_execution(text), verdict._reads_run(text),
    verdict._reads_request(text), verdict._reads_pointer(text, text), verdict._reads_blob(text),
    verdict._reads_grant(text), verdict._reads_record(text, text)
    TO __PRODUCER__, __RUNNER__, __VERIFIER__, __HUMAN__;

RESET ROLE;
