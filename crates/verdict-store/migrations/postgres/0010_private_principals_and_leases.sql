-- verdict store, PostgreSQL schema version 10: token hashes are private, leases have a purpose.
--
-- Token hashes. Every principal group role could SELECT every table, principals included, so a
-- runner's own login read every principal's token hash. The group roles (operators' too) now
-- lose SELECT on verdict.principals; only the schema's owner and `<prefix>service` (the service
-- login that acts for principals, and runs `audit verify`, which re-hashes every row) read it.
-- What the store needs of the table without reading it goes through two SECURITY DEFINER
-- routines with a fixed search_path:
-- - principal_by_token(hash): the principal row holding exactly that token hash. The caller
--   already holds the hash it asks with, so the row tells it nothing it did not know; this is
--   how a principal's own login still authenticates tokens.
-- - principal_entries(name, after, limit): principals' names and roles (and seq), never their
--   bodies: a lookup by name, or a listing a page at a time.
-- And put_principals / put_one_principals return a stored principal's body only to a call
-- offering exactly that body.
--
-- Leases. cas_lease let a runner or verifier take any lease name holding itself; only
-- `admit <request>` was reserved to the operator role. A lease now has a purpose its name says:
-- - `admit <request digest>`: the admission lease of a stored verification request, moved
--   only in the operator role (the engine takes it as its own identity);
-- - `run <run id>`: the lease of a stored verifier run, which a runner or verifier moves only
--   when the run was admitted to it (an operator may move any run's lease);
-- - any other name is refused, in every role.
-- The check is spliced into cas_lease right before it hands the change to _cas, so the identity
-- check of version 7 still runs first. The store makes the same checks first, on both backends.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

REVOKE SELECT ON verdict.principals
    FROM __OPERATOR__, __PRODUCER__, __RUNNER__, __VERIFIER__, __HUMAN__, __GATE__;
-- The service reads every table itself (version 7); said again here so no later change to the
-- group roles can take the principals from `audit verify`.
GRANT SELECT ON verdict.principals TO __SERVICE__;

CREATE FUNCTION verdict.principal_by_token(p_token_sha256 text)
RETURNS TABLE (r_seq bigint, r_key text, r_digest text, r_body text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = verdict, pg_temp AS $$
    SELECT p.seq, p.key, p.digest, p.body FROM verdict.principals p
    WHERE p.token_sha256 = p_token_sha256
$$;

CREATE FUNCTION verdict.principal_entries(p_name text, p_after bigint, p_limit bigint)
RETURNS TABLE (r_seq bigint, r_name text, r_role text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = verdict, pg_temp AS $$
    SELECT p.seq, p.name, p.role FROM verdict.principals p
    WHERE (p_name IS NULL OR p.key = p_name) AND p.seq > p_after
    ORDER BY p.seq LIMIT greatest(p_limit, 0)
$$;

REVOKE ALL ON FUNCTION verdict.principal_by_token(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION verdict.principal_entries(text, bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION verdict.principal_by_token(text)
    TO __OPERATOR__, __PRODUCER__, __RUNNER__, __VERIFIER__, __HUMAN__, __GATE__, __SERVICE__;
GRANT EXECUTE ON FUNCTION verdict.principal_entries(text, bigint, bigint)
    TO __OPERATOR__, __PRODUCER__, __RUNNER__, __VERIFIER__, __HUMAN__, __GATE__, __SERVICE__;

-- The principals' write routines returned the stored row of a name already taken, whatever
-- body the call offered: an operator's login offering any body under another principal's name
-- got that principal's token hash back. They now return the stored body only to a call that
-- offers exactly it (same digest); otherwise no body, and the store reports the conflict.
DO $own$
DECLARE
    f record;
    v_def text;
    v_hits integer;
BEGIN
    FOR f IN SELECT * FROM (VALUES
        ('verdict.put_principals(text, text, text[], text[], text[], text[])',
            'SELECT t.seq, t.digest, t.body, NULL::boolean,',
            'SELECT t.seq, t.digest, CASE WHEN t.digest = p_digests[i] THEN t.body END, NULL::boolean,'),
        ('verdict.put_one_principals(text, text, text, text, text, text)',
            'SELECT t.seq, t.digest, t.body, false, NULL::boolean INTO r',
            'SELECT t.seq, t.digest, CASE WHEN t.digest = p_digest THEN t.body END, false, NULL::boolean INTO r')
    ) AS v(signature, marker, replacement) LOOP
        v_def := pg_get_functiondef(f.signature::regprocedure);
        v_hits := (length(v_def) - length(replace(v_def, f.marker, ''))) / length(f.marker);
        IF v_hits <> 1 THEN
            RAISE EXCEPTION '%: the lookup of a stored row occurs % times, not once', f.signature,
                v_hits;
        END IF;
        EXECUTE replace(v_def, f.marker, f.replacement);
    END LOOP;
END $own$;

DO $lease$
DECLARE
    v_def text;
    v_hits integer;
    v_marker constant text := 'RETURN QUERY SELECT * FROM verdict._cas(''lease''';
    -- A name out of its bounds is left to _cas, whose bounds check (22023) refuses it next.
    v_check constant text := $check$
    IF coalesce(length(p_name), 0) NOT BETWEEN 1 AND 256 THEN
        NULL;
    ELSIF starts_with(p_name, 'admit ') THEN
        IF NOT EXISTS (SELECT 1 FROM verdict.verification_requests ls_q
                WHERE ls_q.key = substr(p_name, 7)) THEN
            RAISE EXCEPTION 'lease %: no verification request % is stored', p_name,
                substr(p_name, 7) USING ERRCODE = '42501';
        END IF;
    ELSIF starts_with(p_name, 'run ') THEN
        IF NOT EXISTS (SELECT 1 FROM verdict.verifier_runs ls_r
                WHERE ls_r.key = substr(p_name, 5)
                  AND (p_role = 'operator' OR ls_r.verifier = p_principal)) THEN
            RAISE EXCEPTION 'lease %: no run % admitted to %', p_name, substr(p_name, 5),
                p_principal USING ERRCODE = '42501';
        END IF;
    ELSE
        RAISE EXCEPTION 'lease %: a lease is named `admit <request>` or `run <run id>`', p_name
            USING ERRCODE = '42501';
    END IF;
    $check$;
BEGIN
    v_def := pg_get_functiondef(
        'verdict.cas_lease(text, text, text, bigint, text, text, text, text, text)'::regprocedure);
    v_hits := (length(v_def) - length(replace(v_def, v_marker, ''))) / length(v_marker);
    IF v_hits <> 1 THEN
        RAISE EXCEPTION 'cas_lease: its call of _cas occurs % times, not once', v_hits;
    END IF;
    EXECUTE replace(v_def, v_marker, v_check || v_marker);
END $lease$;

RESET ROLE;
