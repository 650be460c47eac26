-- verdict store, PostgreSQL schema version 7: the database binds every write to a principal.
--
-- Until now the database knew roles, not principals: a connection in the producer role could
-- write as any producer, and any connection that held the operator role could add an operator.
-- Now every principal has a database role of its own, and every write routine checks that the
-- identity acting (the role set with SET ROLE, else the login itself) is the principal the
-- call names, in that principal's role.
--
-- - A principal's role is NOLOGIN, named `<prefix>p_` and 20 hex digits of the SHA-256 of
--   `<database>/<principal>`, so stores of one server never share a principal's identity. It
--   is a member of the group role of the principal's role (which holds the EXECUTE grants)
--   and `<prefix>service` is a member of it, so a service login granted `<prefix>service` can
--   SET ROLE to any principal, and only to act as it. `verdict principal add --db-login` gives
--   the principal's role a login of its own instead.
-- - principal_roles records which identity acts for which principal in which role. It is
--   append-only like every table here and filled only by a trigger on principals, in the
--   transaction that stores the principal; `audit verify` recomputes it from the principals.
-- - The gate's and the system's identities are built in: `<prefix>gate` writes as the gate
--   under any name, `<prefix>system` records denials. `<prefix>engine`, a member of the
--   operators' group role, acts for the engine's own principal, `verdict-engine`, in the
--   operator role, for the writes the engine still makes on a caller's behalf; no principal's
--   identity is a member of it (the service login is).
-- - The check is spliced at the very start of every put_, put_one_ and cas_ routine (and of
--   principal_login, by which an operator gives a principal a login of its own), so a call
--   whose identity does not act for its principal is refused (SQLSTATE 42501) before anything
--   else is read. cas_clock keeps its own rule: it acts only while the store has no principal,
--   which is when no identity exists yet.
-- - A superuser connection with no role set is not bound: it could rewrite the routines anyway.
--   A service login must not be a superuser.
-- - An execution's pointer is moved by the producer who put the subject, in its own role:
--   cas_execution takes a producer only for a subject that producer produced, while it holds
--   a write grant in force on the execution (or its mission) at the database's clock.
-- - The same grant is required of a producer's subjects and requests, a runner's evidence and
--   a human's decisions, checked by their routines at the database's clock.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

CREATE TABLE verdict.principal_roles (
    db_role text PRIMARY KEY,
    principal text UNIQUE,
    role text NOT NULL
);
CREATE TRIGGER principal_roles_append_only BEFORE UPDATE OR DELETE ON verdict.principal_roles
    FOR EACH ROW EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER principal_roles_no_truncate BEFORE TRUNCATE ON verdict.principal_roles
    FOR EACH STATEMENT EXECUTE FUNCTION verdict.refuse_change();
REVOKE ALL ON verdict.principal_roles FROM PUBLIC;
GRANT SELECT ON verdict.principal_roles
    TO __OPERATOR__, __PRODUCER__, __RUNNER__, __VERIFIER__, __HUMAN__, __GATE__, __SYSTEM__, __SERVICE__;
GRANT USAGE ON SCHEMA verdict TO __SERVICE__;
GRANT SELECT ON ALL TABLES IN SCHEMA verdict TO __SERVICE__;
ALTER TABLE verdict.principal_roles ENABLE ROW LEVEL SECURITY;
ALTER TABLE verdict.principal_roles FORCE ROW LEVEL SECURITY;
CREATE POLICY principal_roles_read ON verdict.principal_roles FOR SELECT USING (true);
CREATE POLICY principal_roles_append ON verdict.principal_roles FOR INSERT TO __OWNER__ WITH CHECK (true);

INSERT INTO verdict.principal_roles (db_role, principal, role) VALUES
    (__PREFIX_LITERAL__ || 'gate', NULL, 'gate'),
    (__PREFIX_LITERAL__ || 'system', NULL, 'system'),
    (__PREFIX_LITERAL__ || 'engine', 'verdict-engine', 'operator');

-- The database role of a principal of this store.
CREATE FUNCTION verdict.principal_db_role(p_name text) RETURNS text
LANGUAGE sql STABLE SET search_path = verdict, pg_temp AS $$
    SELECT __PREFIX_LITERAL__ || 'p_'
        || left(encode(sha256(convert_to(current_database() || '/' || p_name, 'UTF8')), 'hex'), 20)
$$;

-- Makes (or finds) the role of a newly stored principal and records what it acts for. A role
-- left by a dropped database of the same name is taken over, with its login taken away.
CREATE FUNCTION verdict._make_identity(p_name text, p_role text) RETURNS void
LANGUAGE plpgsql SET search_path = verdict, pg_temp AS $$
DECLARE
    v_db text := verdict.principal_db_role(p_name);
BEGIN
    IF p_role IS NULL OR p_role NOT IN ('operator', 'producer', 'runner', 'verifier', 'human') THEN
        RAISE EXCEPTION 'principal %: % is not a principal role', p_name, coalesce(p_role, 'no role')
            USING ERRCODE = '42501';
    END IF;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = v_db) THEN
        EXECUTE format('ALTER ROLE %I NOLOGIN PASSWORD NULL', v_db);
    ELSE
        EXECUTE format('CREATE ROLE %I NOLOGIN', v_db);
    END IF;
    EXECUTE format('GRANT %I TO %I', __PREFIX_LITERAL__ || p_role, v_db);
    EXECUTE format('GRANT %I TO %I', v_db, __PREFIX_LITERAL__ || 'service');
    INSERT INTO verdict.principal_roles (db_role, principal, role) VALUES (v_db, p_name, p_role);
END $$;
REVOKE ALL ON FUNCTION verdict._make_identity(text, text) FROM PUBLIC;

CREATE FUNCTION verdict.principal_identity() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = verdict, pg_temp AS $$
BEGIN
    PERFORM verdict._make_identity(NEW.name, NEW.role);
    RETURN NULL;
END $$;
REVOKE ALL ON FUNCTION verdict.principal_identity() FROM PUBLIC;

CREATE TRIGGER principals_identity AFTER INSERT ON verdict.principals
    FOR EACH ROW EXECUTE FUNCTION verdict.principal_identity();

-- Existing principals get their roles now, in the order they were stored.
SELECT verdict._make_identity(p.name, p.role) FROM verdict.principals p ORDER BY p.seq;

-- The gate pointer's routine, in PL/pgSQL so the identity check below can be spliced into it.
CREATE OR REPLACE FUNCTION verdict.cas_gate(p_principal text, p_role text, p_name text,
    p_expected_revision bigint, p_expected text, p_new text, p_key text, p_digest text, p_body text)
RETURNS TABLE (r_ok boolean, r_revision bigint, r_value text, r_seq bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = verdict, pg_temp AS $$
BEGIN
    RETURN QUERY SELECT * FROM verdict._cas('gate', ARRAY['operator'], p_principal, p_role, p_name,
        p_expected_revision, p_expected, p_new, p_key, p_digest, p_body);
END $$;

-- The execution pointer: as in version 6 (forward only, to a stored subject of the execution
-- at the generation the head names), and now also moved by the subject's own producer.
CREATE OR REPLACE FUNCTION verdict.cas_execution(p_principal text, p_role text, p_name text,
    p_expected_revision bigint, p_expected text, p_new text, p_key text, p_digest text, p_body text)
RETURNS TABLE (r_ok boolean, r_revision bigint, r_value text, r_seq bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = verdict, pg_temp AS $$
DECLARE
    v_new jsonb := p_new::jsonb;
    v_generation bigint := (v_new ->> 'generation')::bigint;
    v_subject jsonb;
BEGIN
    SELECT s.body::jsonb INTO v_subject FROM verdict.subjects s
        WHERE s.key = (v_new ->> 'subject_digest') AND s.execution_id = p_name
          AND s.generation = v_generation;
    IF v_generation IS NULL OR v_subject IS NULL THEN
        RAISE EXCEPTION 'execution %: % is not a stored subject of it at generation %', p_name,
            coalesce(v_new ->> 'subject_digest', 'none'), coalesce(v_generation::text, 'none')
            USING ERRCODE = '42501';
    END IF;
    IF v_generation < coalesce((p_expected::jsonb ->> 'generation')::bigint, 0) THEN
        RAISE EXCEPTION 'execution % cannot go back from generation % to %', p_name,
            p_expected::jsonb ->> 'generation', v_generation USING ERRCODE = '42501';
    END IF;
    IF p_role = 'producer' THEN
        IF (v_subject #>> '{producer,principal}') IS DISTINCT FROM p_principal THEN
            RAISE EXCEPTION 'execution %: producer % did not produce subject %', p_name, p_principal,
                v_new ->> 'subject_digest' USING ERRCODE = '42501';
        END IF;
        IF NOT EXISTS (SELECT 1 FROM verdict.grants g
                WHERE g.principal = p_principal AND (g.body::jsonb ->> 'access') = 'write'
                  AND ((g.scope_kind = 'execution' AND g.scope_id = p_name)
                    OR (g.scope_kind = 'mission' AND g.scope_id = (v_subject ->> 'mission')))
                  AND NOT EXISTS (SELECT 1 FROM verdict.grant_revocations r WHERE r.grant_id = g.key)
                  AND ((g.body::jsonb ->> 'expires_at')::timestamptz > clock_timestamp()
                    OR EXISTS (SELECT 1 FROM verdict.pointers c WHERE c.pointer = 'clock'
                        AND c.name = 'store' AND c.value = '{"clock":"manual"}'))) THEN
            RAISE EXCEPTION 'execution %: producer % holds no write grant in force on it', p_name,
                p_principal USING ERRCODE = '42501';
        END IF;
    END IF;
    RETURN QUERY SELECT * FROM verdict._cas('execution', ARRAY['operator', 'producer'], p_principal,
        p_role, p_name, p_expected_revision, p_expected, p_new, p_key, p_digest, p_body);
END $$;
GRANT EXECUTE ON FUNCTION verdict.cas_execution(text, text, text, bigint, text, text, text, text, text) TO __PRODUCER__;

-- A login of a principal's own (schema version 7): its identity may log in, with the password
-- given. Only an operator gives one (the identity check is spliced in below), and only to a
-- stored principal; the password is chosen by the caller's store from 32 random bytes.
CREATE FUNCTION verdict.principal_login(p_principal text, p_role text, p_name text,
    p_password text) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = verdict, pg_temp AS $$
DECLARE
    v_db text;
BEGIN
    IF p_role IS DISTINCT FROM 'operator' THEN
        RAISE EXCEPTION 'only an operator gives a principal a login, not %', p_role
            USING ERRCODE = '42501';
    END IF;
    SELECT m.db_role INTO v_db FROM verdict.principal_roles m JOIN verdict.principals p
        ON p.name = m.principal WHERE m.principal = p_name;
    IF v_db IS NULL THEN
        RAISE EXCEPTION 'principal % is not stored', p_name USING ERRCODE = '42501';
    END IF;
    IF p_password IS NULL OR length(p_password) < 32 THEN
        RAISE EXCEPTION 'a login''s password has at least 32 characters' USING ERRCODE = '22023';
    END IF;
    EXECUTE format('ALTER ROLE %I LOGIN PASSWORD %L', v_db, p_password);
    RETURN v_db;
END $$;
REVOKE ALL ON FUNCTION verdict.principal_login(text, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION verdict.principal_login(text, text, text, text) TO __OPERATOR__;

-- Grants at the database's clock: a producer's subject and request, a runner's evidence and a
-- human's decision need the writer's write grant on the execution (or mission) of the subject
-- they are about, not revoked and, on a store that keeps the database's clock, not expired at
-- clock_timestamp(), as the engine requires before it writes. Spliced right after each
-- routine parses the body. A superuser connection with no role set is not bound (as above).
DO $grants$
DECLARE
    t record;
    f record;
    v_def text;
    v_hits integer;
    v_check constant text := $check$
    IF p_role = ANY (@ROLES@::text[]) AND (@ABOUT@)
        AND NOT (current_setting('role') = 'none' AND coalesce((SELECT gr_r.rolsuper
            FROM pg_catalog.pg_roles gr_r WHERE gr_r.rolname = session_user), false))
        AND NOT EXISTS (SELECT 1 FROM verdict.grants gr_g, (@SUBJECT@) gr_s (execution_id, mission)
            WHERE gr_g.principal = p_principal AND (gr_g.body::jsonb ->> 'access') = 'write'
              AND ((gr_g.scope_kind = 'execution' AND gr_g.scope_id = gr_s.execution_id)
                OR (gr_g.scope_kind = 'mission' AND gr_g.scope_id = gr_s.mission))
              AND NOT EXISTS (SELECT 1 FROM verdict.grant_revocations gr_v
                  WHERE gr_v.grant_id = gr_g.key)
              AND ((gr_g.body::jsonb ->> 'expires_at')::timestamptz > clock_timestamp()
                OR EXISTS (SELECT 1 FROM verdict.pointers gr_c WHERE gr_c.pointer = 'clock'
                    AND gr_c.name = 'store' AND gr_c.value = '{"clock":"manual"}'))) THEN
        RAISE EXCEPTION '%: % holds no write grant in force on its execution', @KEY@, p_principal
            USING ERRCODE = '42501';
    END IF;$check$;
    v_of_subject constant text := 'SELECT s.execution_id, s.body::jsonb ->> ''mission'' '
        || 'FROM verdict.subjects s WHERE s.key = (v_doc ->> ''subject_digest'')';
BEGIN
    FOR t IN SELECT * FROM (VALUES
        ('subjects', 'ARRAY[''producer'']',
            'SELECT v_doc #>> ''{execution,id}'', v_doc ->> ''mission''', 'true'),
        -- A document in the requests table that is about no subject is a note, which counts
        -- only when the engine wrote it; there is no execution to hold a grant on.
        ('verification_requests', 'ARRAY[''producer'']', v_of_subject, 'v_doc ? ''subject_digest'''),
        ('check_evidence', 'ARRAY[''runner'']', v_of_subject, 'true'),
        ('human_decisions', 'ARRAY[''human'']', v_of_subject, 'true')
    ) AS v(name, roles, subject, about) LOOP
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
            EXECUTE replace(v_def, f.marker, f.marker || replace(replace(replace(replace(v_check,
                '@ROLES@', t.roles), '@ABOUT@', t.about), '@SUBJECT@', t.subject), '@KEY@',
                f.key_expr));
        END LOOP;
    END LOOP;
END $grants$;

-- The role claim of compare-and-set: the identity acting must be a member of the role the
-- call claims (a principal's role is a member of its group role). The identity check spliced
-- below says which principal it acts for.
CREATE OR REPLACE FUNCTION verdict._claim(p_role text) RETURNS void
LANGUAGE plpgsql SET search_path = verdict, pg_temp AS $$
DECLARE
    v_claimed text := __PREFIX_LITERAL__ || p_role;
    v_set text := current_setting('role');
BEGIN
    IF v_set <> 'none' AND NOT pg_has_role(v_set, v_claimed, 'MEMBER') THEN
        RAISE EXCEPTION 'acting as role %, not as %', v_set, v_claimed USING ERRCODE = '42501';
    END IF;
    IF v_set = 'none' AND NOT pg_has_role(session_user, v_claimed, 'MEMBER') THEN
        RAISE EXCEPTION '% is not a member of %', session_user, v_claimed USING ERRCODE = '42501';
    END IF;
END $$;

-- The identity check's text, kept in one place: every migration that splices it into a routine
-- (this one into the write routines, later ones into theirs) reads it from here.
CREATE FUNCTION verdict._identity_check() RETURNS text
LANGUAGE sql IMMUTABLE SET search_path = verdict, pg_temp AS $function$ SELECT $check$
    IF NOT EXISTS (SELECT 1 FROM verdict.principal_roles id_m
            WHERE id_m.db_role = (CASE WHEN current_setting('role') = 'none'
                THEN session_user::text ELSE current_setting('role') END)
              AND id_m.role = p_role AND (id_m.principal IS NULL OR id_m.principal = p_principal))
        AND NOT (current_setting('role') = 'none' AND coalesce((SELECT id_r.rolsuper
            FROM pg_catalog.pg_roles id_r WHERE id_r.rolname = session_user), false)) THEN
        RAISE EXCEPTION 'database identity % does not act for principal % in role %',
            CASE WHEN current_setting('role') = 'none' THEN session_user::text
                ELSE current_setting('role') END, p_principal, p_role USING ERRCODE = '42501';
    END IF;
$check$::text $function$;
REVOKE ALL ON FUNCTION verdict._identity_check() FROM PUBLIC;

-- The identity check, at the very start of every write routine but cas_clock.
DO $make$
DECLARE
    f record;
    v_def text;
    v_at integer;
    v_marker constant text := E'\nBEGIN\n';
    v_claim constant text := 'v_set <> ' || quote_literal(__PREFIX_LITERAL__) || ' || p_role';
    v_check constant text := verdict._identity_check();
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure AS signature, p.proname::text AS name FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = 'verdict'::regnamespace
          AND (p.proname ~ '^put_(one_)?[a-z_]+$' OR p.proname IN ('cas_execution', 'cas_gate', 'cas_lease', 'principal_login'))
        ORDER BY p.proname
    LOOP
        v_def := pg_get_functiondef(f.signature);
        v_at := position(v_marker IN v_def);
        IF v_at = 0 THEN
            RAISE EXCEPTION '%: no BEGIN to splice the identity check after', f.signature;
        END IF;
        -- The role claim of versions 3 and 4 asked for the group role itself; the identity,
        -- checked first, now says which role the call acts in.
        IF starts_with(f.name, 'put_') THEN
            IF position(v_claim IN v_def) = 0 THEN
                RAISE EXCEPTION '%: no role claim to replace', f.signature;
            END IF;
            v_def := replace(v_def, v_claim, 'false');
        END IF;
        EXECUTE substr(v_def, 1, v_at + length(v_marker) - 1) || v_check
            || substr(v_def, v_at + length(v_marker));
    END LOOP;
    -- 15 tables, two routines each, three pointer routines and the one giving a login.
    IF (SELECT count(*) FROM pg_catalog.pg_proc p WHERE p.pronamespace = 'verdict'::regnamespace
            AND (p.proname ~ '^put_(one_)?[a-z_]+$' OR p.proname IN ('cas_execution', 'cas_gate', 'cas_lease', 'principal_login'))
            AND position('database identity % does not act' IN p.prosrc) > 0) <> 34 THEN
        RAISE EXCEPTION 'the identity check is not in every write routine';
    END IF;
END $make$;

RESET ROLE;
