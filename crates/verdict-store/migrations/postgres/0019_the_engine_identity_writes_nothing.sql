-- verdict store, PostgreSQL schema version 19: the engine's own identity writes nothing.
--
-- Until now `<prefix>engine`, a member of the operators' group role, wrote as the engine's
-- principal (`verdict-engine`) in the operator role: webhook registrations and removals, the
-- records of webhook deliveries and failures, and an operator's run context. Readers believed
-- those records because the engine wrote them, so a database login granted `<prefix>engine`
-- could register a webhook of its own (and receive every event an operator may read), or write
-- what an operator would. Now:
-- - Registrations, removals and an operator's run context are written by the acting operator,
--   as itself; readers believe them only from a stored operator in the operator role (a
--   registration or removal naming its writer).
-- - The records of a webhook's deliveries and failures are the engine's bookkeeping, not
--   authority: written in the system role by `<prefix>system`, which may now append to the
--   requests table, besides its denials, those two kinds of record and nothing else
--   (`verdict.webhook-delivered/v1`, `verdict.webhook-failure/v1`, each with its members).
-- - `<prefix>engine` stays (older chains name it, and principal_roles, append-only, keeps its
--   row) but is a member of no role of the store: its memberships are revoked here, and the
--   migrating binary no longer grants one. Every write routine refuses (SQLSTATE 42501) a call
--   made as `<prefix>engine` before it reads anything, so the identity writes nothing even if a
--   membership came back: role names are shared by every database of the server that uses the
--   prefix, and a binary of an older schema migrating another such database grants it again.
--   That same revocation takes the engine's writes from any older store sharing the prefix.
--   A service login used the engine's membership to initialise a store (the clock and first
--   operator, which the routines take on an empty store from a caller acting as itself in the
--   operator role); the migrating binary makes `<prefix>service` a member of `<prefix>operator`
--   instead, which adds nothing to what it holds: it acts as every operator's identity already.
--   The binary also revokes the engine's memberships before it migrates (roles are shared, so
--   it does so retrying, as it makes them); the revocation here covers the rest.
-- - Every write routine but those of denials and of the requests table refuses (42501) a call
--   in the system role, whatever the grants on it say.
-- - The identity check that later migrations splice into new routines
--   (verdict._identity_check()) carries the engine's refusal too.
--
-- How: the refusals are spliced right after the top-level BEGIN of each routine (which must
-- occur exactly once), the requests table's check right after its key check (as in version 13;
-- that marker too must occur exactly once); CREATE OR REPLACE keeps each routine's grants,
-- owner and settings. Every routine that holds the identity check, and cas_clock, must end up
-- holding the engine's refusal.

-- The engine identity's memberships in the store's roles, revoked as the migrating login (which
-- may manage roles), before acting as the owner.
DO $revoke$
DECLARE
    v_engine constant text := __PREFIX_LITERAL__ || 'engine';
    m record;
BEGIN
    FOR m IN SELECT g.rolname AS grp, gr.rolname AS grantor
        FROM pg_catalog.pg_auth_members am
        JOIN pg_catalog.pg_roles e ON e.oid = am.member
        JOIN pg_catalog.pg_roles g ON g.oid = am.roleid
        LEFT JOIN pg_catalog.pg_roles gr ON gr.oid = am.grantor
        WHERE e.rolname = v_engine AND starts_with(g.rolname, __PREFIX_LITERAL__)
    LOOP
        -- From PostgreSQL 16 on a membership is revoked per grantor.
        IF current_setting('server_version_num')::int >= 160000 AND m.grantor IS NOT NULL THEN
            EXECUTE format('REVOKE %I FROM %I GRANTED BY %I', m.grp, v_engine, m.grantor);
        ELSE
            EXECUTE format('REVOKE %I FROM %I', m.grp, v_engine);
        END IF;
    END LOOP;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles g
            WHERE starts_with(g.rolname, __PREFIX_LITERAL__) AND g.rolname <> v_engine
              AND pg_has_role(v_engine, g.oid, 'MEMBER')) THEN
        RAISE EXCEPTION '% is still a member of a role of the store', v_engine;
    END IF;
END $revoke$;

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

DO $make$
DECLARE
    f record;
    v_def text;
    v_hits integer;
    v_at integer;
    v_marker text;
    v_count integer := 0;
    v_engine constant text := format($check$
    IF (CASE WHEN current_setting('role') = 'none' THEN session_user::text
            ELSE current_setting('role') END) = %L THEN
        RAISE EXCEPTION 'database identity %% writes nothing (schema 19): the engine writes as the acting principal, or as the system',
            %L USING ERRCODE = '42501';
    END IF;
$check$, __PREFIX_LITERAL__ || 'engine', __PREFIX_LITERAL__ || 'engine');
    v_system constant text := $check$
    IF p_role = 'system' THEN
        RAISE EXCEPTION 'the system role writes only denials and the records of webhook deliveries'
            USING ERRCODE = '42501';
    END IF;
$check$;
    v_old text;
    v_roles text;
BEGIN
    -- The refusals, at the start of every write routine.
    FOR f IN SELECT p.oid::regprocedure AS signature, p.proname::text AS name
        FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = 'verdict'::regnamespace AND NOT starts_with(p.proname, '_')
          AND (position('database identity % does not act' IN p.prosrc) > 0
            OR p.proname = 'cas_clock')
        ORDER BY p.proname
    LOOP
        v_def := pg_get_functiondef(f.signature);
        v_marker := E'\nBEGIN\n';
        v_hits := (length(v_def) - length(replace(v_def, v_marker, ''))) / length(v_marker);
        IF v_hits <> 1 THEN
            RAISE EXCEPTION '%: the top-level BEGIN occurs % times, not once', f.signature, v_hits;
        END IF;
        IF position('writes nothing (schema 19)' IN v_def) > 0 THEN
            RAISE EXCEPTION '%: the engine''s refusal is there already', f.signature;
        END IF;
        v_at := position(v_marker IN v_def) + length(v_marker) - 1;
        EXECUTE substr(v_def, 1, v_at) || v_engine
            || CASE WHEN f.name IN ('put_denials', 'put_one_denials', 'put_verification_requests',
                    'put_one_verification_requests') THEN '' ELSE v_system END
            || substr(v_def, v_at + 1);
        v_count := v_count + 1;
    END LOOP;
    -- 15 tables with two routines each, the blobs' routine, four pointer routines, five job
    -- routines and the one giving a login.
    IF v_count <> 41 OR EXISTS (SELECT 1 FROM pg_catalog.pg_proc p
            WHERE p.pronamespace = 'verdict'::regnamespace AND NOT starts_with(p.proname, '_')
              AND (position('database identity % does not act' IN p.prosrc) > 0
                OR p.proname = 'cas_clock')
              AND position('writes nothing (schema 19)' IN p.prosrc) = 0) THEN
        RAISE EXCEPTION 'the engine''s refusal is not in every write routine (% spliced)', v_count;
    END IF;

    -- What the system role may append to the requests table.
    FOR f IN SELECT * FROM (VALUES
        ('verdict.put_verification_requests(text, text, text[], text[], text[], text[])',
            'p_keys[i]', '        '),
        ('verdict.put_one_verification_requests(text, text, text, text, text, text)',
            'p_key', '    ')
    ) AS r(signature, key_expr, ind) LOOP
        v_def := pg_get_functiondef(f.signature::regprocedure);
        v_marker := E'(it names no key)'') USING ERRCODE = ''22023'';\n' || f.ind || E'END IF;\n';
        v_hits := (length(v_def) - length(replace(v_def, v_marker, ''))) / length(v_marker);
        IF v_hits <> 1 THEN
            RAISE EXCEPTION '%: the key check ends % times, not once', f.signature, v_hits;
        END IF;
        -- The role list of version 3 names the system role too.
        v_roles := '''{operator,producer,verifier}''::text[]';
        v_hits := (length(v_def) - length(replace(v_def, v_roles, ''))) / length(v_roles);
        IF v_hits <> 2 THEN
            RAISE EXCEPTION '%: the role list occurs % times, not twice', f.signature, v_hits;
        END IF;
        v_def := replace(v_def, v_roles, '''{operator,producer,verifier,system}''::text[]');
        EXECUTE replace(v_def, v_marker, v_marker || replace($check$
    IF p_role = 'system' AND NOT (
        ((v_doc ->> 'schema') IS NOT DISTINCT FROM 'verdict.webhook-delivered/v1'
            AND v_doc ?& ARRAY['webhook', 'event', 'at'])
        OR ((v_doc ->> 'schema') IS NOT DISTINCT FROM 'verdict.webhook-failure/v1'
            AND v_doc ?& ARRAY['webhook', 'event', 'attempts', 'error', 'at'])) THEN
        RAISE EXCEPTION '%: the system role appends to the requests table only the record of a webhook delivery or failure',
            @KEY@ USING ERRCODE = '42501';
    END IF;
$check$, '@KEY@', f.key_expr));
    END LOOP;

    -- Routines made by later migrations get the engine's refusal with the identity check.
    v_old := verdict._identity_check();
    IF position('writes nothing (schema 19)' IN v_old) > 0 THEN
        RAISE EXCEPTION 'the identity check holds the engine''s refusal already';
    END IF;
    EXECUTE format('CREATE OR REPLACE FUNCTION verdict._identity_check() RETURNS text '
        'LANGUAGE sql IMMUTABLE SET search_path = verdict, pg_temp AS %L',
        'SELECT ' || quote_literal(v_old || v_engine) || '::text');
END $make$;

GRANT EXECUTE ON FUNCTION verdict.put_verification_requests(text, text, text[], text[], text[], text[])
    TO __SYSTEM__;
GRANT EXECUTE ON FUNCTION verdict.put_one_verification_requests(text, text, text, text, text, text)
    TO __SYSTEM__;

RESET ROLE;
