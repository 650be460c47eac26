-- verdict store, PostgreSQL schema version 6: authority is decided by the store.
--
-- The store's clock. Which clock a store keeps (the database's own, or a manual one for tests
-- and simulations) is chosen once, when the store is initialised, and recorded as the change
-- of the pointer `clock`/`store`, so it is audited like every other pointer move. cas_clock
-- allows that one change only: to a new pointer, under its one name, to one of the two
-- settings, and only while the store has no principal. The check runs under the chain lock,
-- so an `init` racing another, or coming after the first principal, is refused.
--
-- The execution pointer only moves forward. cas_execution used to take any value the caller
-- named, so a hand-written call could move an execution from generation 2 back to 1 and make
-- the old pass apply again. It now refuses a new head that is not a stored subject of that
-- execution at the generation the head names, or whose generation is below the one it
-- replaces. The store makes the same checks before it calls (both backends).
--
-- Admission leases belong to the operator role. cas_lease let a runner or verifier take any
-- lease for itself, including `admit <request>`, the lease the engine's admissions of a request
-- take turns under; a runner took it until 2099 and the operator's admissions failed. A lease
-- named `admit ...` now moves only in the operator role, in the store and in cas_lease; and
-- cas_lease itself now holds runners and verifiers to their own leases, as the store did.
--
-- A result needs its verifier's grant. A verifier whose grant was revoked could write its
-- result straight through put_verification_results, with no record that the grant had lapsed,
-- and the result counted. Both result routines now refuse a result unless its verifier holds
-- a grant on the subject's execution (or mission) that is not revoked and, on a store that
-- keeps the database's clock, has not expired at clock_timestamp(); the one exception is a
-- result whose run already ended `unavailable` for `grant_revoked`, which the engine records
-- before it keeps such a result as history (it never counts). The check is spliced into each
-- routine right after schema 5's check of the result's run, which must occur exactly once.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

CREATE FUNCTION verdict.cas_clock(p_principal text, p_role text, p_name text,
    p_expected_revision bigint, p_expected text, p_new text, p_key text, p_digest text, p_body text)
RETURNS TABLE (r_ok boolean, r_revision bigint, r_value text, r_seq bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = verdict, pg_temp AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(8531478330712965377);
    IF p_name IS DISTINCT FROM 'store' OR p_expected_revision <> 0 OR p_expected IS NOT NULL
        OR p_new IS NULL OR p_new NOT IN ('{"clock":"manual"}', '{"clock":"system"}')
        OR EXISTS (SELECT 1 FROM verdict.principals) THEN
        RAISE EXCEPTION 'the store''s clock is chosen once, when the store is initialised, before its first principal'
            USING ERRCODE = '42501';
    END IF;
    RETURN QUERY SELECT * FROM verdict._cas('clock', ARRAY['operator'], p_principal, p_role, p_name,
        p_expected_revision, p_expected, p_new, p_key, p_digest, p_body);
END $$;

CREATE OR REPLACE FUNCTION verdict.cas_execution(p_principal text, p_role text, p_name text,
    p_expected_revision bigint, p_expected text, p_new text, p_key text, p_digest text, p_body text)
RETURNS TABLE (r_ok boolean, r_revision bigint, r_value text, r_seq bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = verdict, pg_temp AS $$
DECLARE
    v_new jsonb := p_new::jsonb;
    v_generation bigint := (v_new ->> 'generation')::bigint;
BEGIN
    IF v_generation IS NULL OR NOT EXISTS (SELECT 1 FROM verdict.subjects s
            WHERE s.key = (v_new ->> 'subject_digest') AND s.execution_id = p_name
              AND s.generation = v_generation) THEN
        RAISE EXCEPTION 'execution %: % is not a stored subject of it at generation %', p_name,
            coalesce(v_new ->> 'subject_digest', 'none'), coalesce(v_generation::text, 'none')
            USING ERRCODE = '42501';
    END IF;
    IF v_generation < coalesce((p_expected::jsonb ->> 'generation')::bigint, 0) THEN
        RAISE EXCEPTION 'execution % cannot go back from generation % to %', p_name,
            p_expected::jsonb ->> 'generation', v_generation USING ERRCODE = '42501';
    END IF;
    RETURN QUERY SELECT * FROM verdict._cas('execution', ARRAY['operator'], p_principal, p_role,
        p_name, p_expected_revision, p_expected, p_new, p_key, p_digest, p_body);
END $$;

CREATE OR REPLACE FUNCTION verdict.cas_lease(p_principal text, p_role text, p_name text,
    p_expected_revision bigint, p_expected text, p_new text, p_key text, p_digest text, p_body text)
RETURNS TABLE (r_ok boolean, r_revision bigint, r_value text, r_seq bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = verdict, pg_temp AS $$
BEGIN
    IF p_role IS DISTINCT FROM 'operator' AND starts_with(p_name, 'admit ') THEN
        RAISE EXCEPTION '% is an admission lease; only the operator role moves it', p_name
            USING ERRCODE = '42501';
    END IF;
    -- Runners and verifiers take and release only their own leases, as the store checks.
    IF p_role IS DISTINCT FROM 'operator' AND (
            (p_new IS NOT NULL AND (p_new::jsonb ->> 'holder') IS DISTINCT FROM p_principal)
            OR (p_new IS NULL AND (p_expected::jsonb ->> 'holder') IS DISTINCT FROM p_principal)) THEN
        RAISE EXCEPTION '% may take and release only its own leases', p_principal
            USING ERRCODE = '42501';
    END IF;
    RETURN QUERY SELECT * FROM verdict._cas('lease', ARRAY['operator', 'runner', 'verifier'],
        p_principal, p_role, p_name, p_expected_revision, p_expected, p_new, p_key, p_digest,
        p_body);
END $$;

DO $make$
DECLARE
    f record;
    v_def text;
    v_hits integer;
    -- The last lines of schema 5's check of the result's run: the grant is checked after the
    -- claims, so a result that names the wrong run is still refused for that.
    v_marker text := $marker$coalesce(v_doc ->> 'generation', 'none') USING ERRCODE = '42501';
    END IF;$marker$;
    v_check text := $check$
    IF NOT EXISTS (SELECT 1 FROM verdict.grants ck_g JOIN verdict.subjects ck_s
            ON ck_s.key = (v_doc ->> 'subject_digest')
            WHERE ck_g.principal = p_principal
              AND ((ck_g.scope_kind = 'execution' AND ck_g.scope_id = ck_s.execution_id)
                OR (ck_g.scope_kind = 'mission' AND ck_g.scope_id = (ck_s.body::jsonb ->> 'mission')))
              AND NOT EXISTS (SELECT 1 FROM verdict.grant_revocations ck_r WHERE ck_r.grant_id = ck_g.key)
              AND ((ck_g.body::jsonb ->> 'expires_at')::timestamptz > clock_timestamp()
                OR EXISTS (SELECT 1 FROM verdict.pointers ck_c WHERE ck_c.pointer = 'clock'
                    AND ck_c.name = 'store' AND ck_c.value = '{"clock":"manual"}')))
        AND NOT EXISTS (SELECT 1 FROM verdict.run_events ck_e
            WHERE ck_e.run_id = (v_doc #>> '{verifier,run}') AND ck_e.status = 'unavailable'
              AND (ck_e.body::jsonb ->> 'reason') = 'grant_revoked') THEN
        RAISE EXCEPTION 'result %: verifier % holds no grant in force on its subject', @KEY@,
            p_principal USING ERRCODE = '42501';
    END IF;$check$;
BEGIN
    FOR f IN SELECT * FROM (VALUES
        ('verdict.put_verification_results(text, text, text[], text[], text[], text[])',
            'p_keys[i]'),
        ('verdict.put_one_verification_results(text, text, text, text, text, text)', 'p_key')
    ) AS r(signature, key_expr) LOOP
        v_def := pg_get_functiondef(f.signature::regprocedure);
        v_hits := (length(v_def) - length(replace(v_def, v_marker, ''))) / length(v_marker);
        IF v_hits <> 1 THEN
            RAISE EXCEPTION '%: the run check of schema 5 occurs % times, not once', f.signature,
                v_hits;
        END IF;
        EXECUTE replace(v_def, v_marker, v_marker || replace(v_check, '@KEY@', f.key_expr));
    END LOOP;
END $make$;

REVOKE ALL ON FUNCTION verdict.cas_clock(text, text, text, bigint, text, text, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION verdict.cas_clock(text, text, text, bigint, text, text, text, text, text) TO __OPERATOR__;

RESET ROLE;
