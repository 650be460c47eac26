-- verdict store, PostgreSQL schema version 30: a principal's token can be revoked and replaced.
--
-- A principal's record keeps the SHA-256 of the token it was given and is never changed, so a
-- token could be neither retired nor replaced; only its grants could be revoked. What changes:
-- - verdict.credential_changes: the principal's `n`th change of token (from 1, keyed
--   `<principal>#<n>`, so two changes made from the same state cannot both be stored) names
--   the SHA-256 of the one token it holds from then on, or none after a revocation (hashed
--   under the domain `store.credential-change`; `principal`, `n` and `token_sha256` derived
--   from the body). A token is held only while nothing after it names another: the
--   principal's own record's until its first change, then the latest change's. A hash is held
--   at most once, in a principal's record or here.
-- - put_one_credential_changes, SECURITY DEFINER with a fixed search_path, the one way to
--   append: the refusals of the engine's identity and the system role (schema 19) and the
--   identity check of version 7 first, then the bounds, digest, canonical form,
--   members and key of the body (22023), and the authority: an operator changes any stored
--   principal's token; any other principal's identity only replaces its own token (a change
--   naming itself with a new hash), so it can neither revoke nor touch another's (42501). Under
--   the chain lock, `n` must follow the principal's last change and a new hash must be one no
--   principal ever held. It notifies the store's channel (`<prefix>jobs`, payload
--   `credentials`) in its transaction, so every handle listening forgets who held a token once
--   the change commits. EXECUTE is granted to the principal roles; no role writes the table
--   directly, and only the owner and `<prefix>service` read it (token hashes stay private, as
--   schema 10 keeps them).
-- - principal_by_token answers only with the principal holding the token now; token_changes_of
--   counts a principal's changes without showing them.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

CREATE TABLE verdict.credential_changes (
    seq bigint NOT NULL UNIQUE,
    key text PRIMARY KEY,
    digest text NOT NULL,
    body text NOT NULL,
    principal text NOT NULL,
    n bigint NOT NULL,
    token_sha256 text UNIQUE,
    UNIQUE (principal, n)
);

CREATE TRIGGER credential_changes_append_only BEFORE UPDATE OR DELETE ON verdict.credential_changes
    FOR EACH ROW EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER credential_changes_no_truncate BEFORE TRUNCATE ON verdict.credential_changes
    FOR EACH STATEMENT EXECUTE FUNCTION verdict.refuse_change();

REVOKE ALL ON verdict.credential_changes FROM PUBLIC;
GRANT SELECT ON verdict.credential_changes TO __SERVICE__;
REVOKE UPDATE, DELETE, TRUNCATE ON verdict.credential_changes FROM __OWNER__;
ALTER TABLE verdict.credential_changes ENABLE ROW LEVEL SECURITY;
ALTER TABLE verdict.credential_changes FORCE ROW LEVEL SECURITY;
CREATE POLICY credential_changes_read_all ON verdict.credential_changes FOR SELECT
    TO __OWNER__, __SERVICE__ USING (true);
CREATE POLICY credential_changes_append ON verdict.credential_changes FOR INSERT
    TO __OWNER__ WITH CHECK (true);
COMMENT ON COLUMN verdict.credential_changes.principal IS
    'derived from the body by the write routine: ((body)::jsonb ->> ''principal''::text)';
COMMENT ON COLUMN verdict.credential_changes.n IS
    'derived from the body by the write routine: (((body)::jsonb ->> ''n''::text))::bigint';
COMMENT ON COLUMN verdict.credential_changes.token_sha256 IS
    'derived from the body by the write routine: ((body)::jsonb ->> ''token_sha256''::text)';

DO $make$
BEGIN
    EXECUTE format($template$
CREATE FUNCTION verdict.put_one_credential_changes(p_principal text, p_role text, p_key text,
    p_digest text, p_body text, p_correlation text)
RETURNS verdict.put_result
LANGUAGE plpgsql SECURITY DEFINER SET search_path = verdict, pg_temp AS $body$
DECLARE
    v_at text;
    v_seq bigint;
    v_prev text;
    v_doc jsonb;
    v_whose text;
    v_n bigint;
    v_hash text;
    r verdict.put_result;
BEGIN
    -- The engine's identity writes nothing and the system role changes no token (schema 19),
    -- refused before the identity check as in every write routine.
    IF (CASE WHEN current_setting('role') = 'none' THEN session_user::text
            ELSE current_setting('role') END) = %L THEN
        RAISE EXCEPTION 'database identity %% writes nothing (schema 19): the engine writes as the acting principal, or as the system',
            %L USING ERRCODE = '42501';
    END IF;
    IF p_role = 'system' THEN
        RAISE EXCEPTION 'the system role writes only denials and the records of webhook deliveries'
            USING ERRCODE = '42501';
    END IF;
%s
    IF p_role IS NULL OR NOT (p_role = ANY ('{operator,producer,runner,verifier,human}'::text[])) THEN
        RAISE EXCEPTION 'role %% may not change tokens', p_role USING ERRCODE = '42501';
    END IF;
    IF (octet_length(p_body) <= 4194304 AND length(p_key) <= 320 AND length(p_principal) BETWEEN 1 AND 256
        AND coalesce(length(p_correlation), 0) <= 256) IS NOT TRUE THEN
        PERFORM verdict._refuse_bounds('credential_changes', p_principal, p_key, p_body, p_correlation, NULL, NULL);
    END IF;
    IF p_digest IS DISTINCT FROM 'sha256:' || encode(sha256(%L::bytea
        || convert_to(p_body, 'UTF8')), 'hex') THEN
        RAISE EXCEPTION 'credential_changes %%: digest %% does not match the body', p_key, p_digest
            USING ERRCODE = '22023';
    END IF;
    v_doc := p_body::jsonb;
    IF verdict._canonical(v_doc, p_body) IS DISTINCT FROM p_body THEN
        RAISE EXCEPTION 'credential_changes %%: the body is not in canonical form (RFC 8785: no whitespace, members in order, no member named twice, numbers as written by verdict)',
            p_key USING ERRCODE = '22023';
    END IF;
    IF jsonb_typeof(v_doc) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'credential_changes %%: a change of token is an object', p_key
            USING ERRCODE = '22023';
    END IF;
    IF jsonb_typeof(v_doc -> 'principal') IS DISTINCT FROM 'string'
        OR jsonb_typeof(v_doc -> 'n') IS DISTINCT FROM 'number'
        OR (v_doc ->> 'n') !~ '^[1-9][0-9]{0,15}$'
        OR jsonb_typeof(v_doc -> 'changed_at') IS DISTINCT FROM 'string'
        OR jsonb_typeof(v_doc -> 'reason') IS DISTINCT FROM 'string'
        OR length(v_doc ->> 'reason') > 1024
        OR (v_doc ? 'token_sha256' AND ((v_doc ->> 'token_sha256') IS NULL
            OR (v_doc ->> 'token_sha256') !~ '^sha256:[0-9a-f]+$'
            OR length(v_doc ->> 'token_sha256') <> 71))
        OR EXISTS (SELECT 1 FROM jsonb_object_keys(v_doc) k
            WHERE k NOT IN ('principal', 'n', 'token_sha256', 'changed_at', 'reason')) THEN
        RAISE EXCEPTION 'credential_changes %%: a change of token holds principal, n (from 1), changed_at, reason (at most 1024 characters) and, for a new token, its token_sha256, and nothing else',
            p_key USING ERRCODE = '22023';
    END IF;
    v_whose := v_doc ->> 'principal';
    v_n := (v_doc ->> 'n')::bigint;
    v_hash := v_doc ->> 'token_sha256';
    IF p_key IS DISTINCT FROM v_whose || '#' || v_n::text THEN
        RAISE EXCEPTION 'credential_changes %%: the key of change %% of %% is %%', p_key, v_n,
            v_whose, v_whose || '#' || v_n::text USING ERRCODE = '22023';
    END IF;
    -- Anyone but an operator only replaces its own token.
    IF p_role <> 'operator' AND (v_whose IS DISTINCT FROM p_principal OR v_hash IS NULL) THEN
        RAISE EXCEPTION 'credential_changes %%: principal %% in role %% may only replace its own token',
            p_key, p_principal, p_role USING ERRCODE = '42501';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM verdict.principals p WHERE p.key = v_whose) THEN
        RAISE EXCEPTION 'credential_changes %%: no principal %% is stored', p_key, v_whose
            USING ERRCODE = '22023';
    END IF;
    PERFORM verdict.take_chain_lock();
    SELECT t.seq, t.digest, CASE WHEN t.digest = p_digest THEN t.body END, false, NULL::boolean
        INTO r FROM verdict.credential_changes t WHERE t.key = p_key;
    IF FOUND THEN
        RETURN r;
    END IF;
    IF v_n <> 1 + (SELECT count(*) FROM verdict.credential_changes c WHERE c.principal = v_whose) THEN
        RAISE EXCEPTION 'credential_changes %%: change %% does not follow the last change of %%',
            p_key, v_n, v_whose USING ERRCODE = '22023';
    END IF;
    IF v_hash IS NOT NULL AND (EXISTS (SELECT 1 FROM verdict.principals p WHERE p.token_sha256 = v_hash)
            OR EXISTS (SELECT 1 FROM verdict.credential_changes c WHERE c.token_sha256 = v_hash)) THEN
        RAISE EXCEPTION 'credential_changes %%: that token''s hash was held by a principal before',
            p_key USING ERRCODE = '22023';
    END IF;
    SELECT e.seq + 1, e.hash INTO v_seq, v_prev
        FROM verdict.audit_events e ORDER BY e.seq DESC LIMIT 1;
    IF NOT FOUND THEN
        v_seq := 1;
        v_prev := 'sha256:' || repeat('0', 64);
    END IF;
    v_at := to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"');
    INSERT INTO verdict.audit_events (seq, prev_hash, hash, event_type, tbl, key, principal,
        role, payload_digest, correlation, recorded_at)
    VALUES (v_seq, v_prev, 'sha256:' || encode(sha256(%L::bytea || convert_to(format(%L,
            coalesce(to_json(p_correlation)::text, 'null'), to_json(p_key), p_digest,
            to_json(v_prev), to_json(p_principal), v_at, p_role, v_seq), 'UTF8')), 'hex'),
        'append', 'credential_changes', p_key, p_principal, p_role, p_digest, p_correlation, v_at);
    INSERT INTO verdict.credential_changes (seq, key, digest, body, principal, n, token_sha256)
    VALUES (v_seq, p_key, p_digest, p_body, v_whose, v_n, v_hash)
    RETURNING seq, digest, body, true, NULL::boolean
        INTO r.r_seq, r.r_digest, r.r_body, r.r_inserted, r.r_counted;
    -- Whoever keeps who holds a token forgets it once this commits (a hint: anyone may notify).
    PERFORM pg_notify(%L, 'credentials');
    RETURN r;
END $body$;
$template$,
        __PREFIX_LITERAL__ || 'engine', __PREFIX_LITERAL__ || 'engine',
        verdict._identity_check(),
        '\x' || encode(convert_to('verdict:store.credential-change:v1', 'UTF8') || '\x00'::bytea, 'hex'),
        '\x' || encode(convert_to('verdict:audit-event:v1', 'UTF8') || '\x00'::bytea, 'hex'),
        '{"correlation":%s,"event_type":"append","key":%s,"payload_digest":"%s","prev_hash":%s,'
            || '"principal":%s,"recorded_at":"%s","role":"%s","seq":%s,"table":"credential_changes"}',
        __PREFIX_LITERAL__ || 'jobs');
END $make$;

REVOKE ALL ON FUNCTION verdict.put_one_credential_changes(text, text, text, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION verdict.put_one_credential_changes(text, text, text, text, text, text)
    TO __OPERATOR__, __PRODUCER__, __RUNNER__, __VERIFIER__, __HUMAN__;

-- Only the principal holding the token now: its own record's token while it never changed it,
-- else the token its latest change names.
CREATE OR REPLACE FUNCTION verdict.principal_by_token(p_token_sha256 text)
RETURNS TABLE (r_seq bigint, r_key text, r_digest text, r_body text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = verdict, pg_temp AS $$
    SELECT p.seq, p.key, p.digest, p.body FROM verdict.principals p
    WHERE p.token_sha256 = p_token_sha256
      AND NOT EXISTS (SELECT 1 FROM verdict.credential_changes c WHERE c.principal = p.key)
    UNION ALL
    SELECT p.seq, p.key, p.digest, p.body FROM verdict.credential_changes c
        JOIN verdict.principals p ON p.key = c.principal
    WHERE c.token_sha256 = p_token_sha256
      AND NOT EXISTS (SELECT 1 FROM verdict.credential_changes d
          WHERE d.principal = c.principal AND d.n > c.n)
$$;

-- How many times a principal's token was changed: what the store numbers the next change by.
CREATE FUNCTION verdict.token_changes_of(p_name text) RETURNS bigint
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = verdict, pg_temp AS $$
    SELECT count(*) FROM verdict.credential_changes c WHERE c.principal = p_name
$$;
REVOKE ALL ON FUNCTION verdict.token_changes_of(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION verdict.token_changes_of(text)
    TO __OPERATOR__, __PRODUCER__, __RUNNER__, __VERIFIER__, __HUMAN__, __GATE__, __SERVICE__;

RESET ROLE;
