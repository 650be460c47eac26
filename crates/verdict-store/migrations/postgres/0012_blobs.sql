-- verdict store, PostgreSQL schema version 12: content-addressed blobs, checked by the database.
--
-- The bytes a subject names by raw digest (its objective, its resources, a check's definition)
-- can now be kept in the store. A row of verdict.blobs is keyed by the raw digest of its bytes
-- (`sha256:` and the lowercase hex SHA-256, no domain prefix); `body` is the canonical record
-- of the blob (`digest`, `size`, `media_type`, `writer`, `stored_at`), hashed under the domain
-- `store.blob` into the audit chain like every other row; `bytes` holds the bytes.
--
-- The one write routine, put_blobs, is SECURITY DEFINER with a fixed search_path, like every
-- put_ routine, and granted to the producer, operator and runner group roles only. Before it
-- reads anything else it makes the identity check of version 7 (verdict._identity_check()).
-- Then it refuses, with SQLSTATE 22023 and a message naming the key:
-- - bytes over 8 MiB (8388608 bytes), before they are hashed;
-- - a key that is not the SHA-256 the database computes itself from the bytes;
-- - a record that is not the canonical form of its JSON, whose digest is not its own, or that
--   says other bytes (digest), another length (size) or another writer than the caller;
-- - a media type over 255 characters, audit fields out of their bounds (as in version 8).
-- A key stored already returns the stored record and appends nothing: the digest is the
-- identity. No group role may INSERT, UPDATE, DELETE or TRUNCATE the table; triggers refuse
-- UPDATE, DELETE and TRUNCATE to everyone, row security is forced.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

CREATE TABLE verdict.blobs (
    seq bigint NOT NULL UNIQUE,
    key text PRIMARY KEY,
    digest text NOT NULL,
    body text NOT NULL,
    bytes bytea NOT NULL
);

CREATE TRIGGER blobs_append_only BEFORE UPDATE OR DELETE ON verdict.blobs
    FOR EACH ROW EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER blobs_no_truncate BEFORE TRUNCATE ON verdict.blobs
    FOR EACH STATEMENT EXECUTE FUNCTION verdict.refuse_change();

REVOKE ALL ON verdict.blobs FROM PUBLIC;
GRANT SELECT ON verdict.blobs
    TO __OPERATOR__, __PRODUCER__, __RUNNER__, __VERIFIER__, __HUMAN__, __GATE__, __SYSTEM__, __SERVICE__;
REVOKE UPDATE, DELETE, TRUNCATE ON verdict.blobs FROM __OWNER__;
ALTER TABLE verdict.blobs ENABLE ROW LEVEL SECURITY;
ALTER TABLE verdict.blobs FORCE ROW LEVEL SECURITY;
CREATE POLICY blobs_read ON verdict.blobs FOR SELECT USING (true);
CREATE POLICY blobs_append ON verdict.blobs FOR INSERT TO __OWNER__ WITH CHECK (true);

DO $make$
BEGIN
    EXECUTE format($template$
CREATE FUNCTION verdict.put_blobs(p_principal text, p_role text, p_key text, p_digest text,
    p_body text, p_correlation text, p_bytes bytea)
RETURNS verdict.put_result
LANGUAGE plpgsql SECURITY DEFINER SET search_path = verdict, pg_temp AS $body$
DECLARE
    v_at text;
    v_seq bigint;
    v_prev text;
    v_doc jsonb;
    v_actual text;
    r verdict.put_result;
BEGIN
%s
    IF p_role IS NULL OR NOT (p_role = ANY ('{operator,producer,runner}'::text[])) THEN
        RAISE EXCEPTION 'role %% may not write blobs', p_role USING ERRCODE = '42501';
    END IF;
    IF p_bytes IS NULL THEN
        RAISE EXCEPTION 'blobs %%: no bytes', p_key USING ERRCODE = '22023';
    END IF;
    -- The size first: oversized bytes are refused before they are hashed.
    IF octet_length(p_bytes) > 8388608 THEN
        RAISE EXCEPTION 'blobs %%: %% bytes exceed the limit of 8388608 bytes', p_key,
            octet_length(p_bytes) USING ERRCODE = '22023';
    END IF;
    IF (octet_length(p_body) <= 4194304 AND length(p_key) <= 320 AND length(p_principal) BETWEEN 1 AND 256
        AND coalesce(length(p_correlation), 0) <= 256) IS NOT TRUE THEN
        PERFORM verdict._refuse_bounds('blobs', p_principal, p_key, p_body, p_correlation, NULL, NULL);
    END IF;
    -- The key is the SHA-256 of the bytes, computed here.
    v_actual := 'sha256:' || encode(sha256(p_bytes), 'hex');
    IF p_key IS DISTINCT FROM v_actual THEN
        RAISE EXCEPTION 'blobs %%: the bytes hash to %%, not to their key', p_key, v_actual
            USING ERRCODE = '22023';
    END IF;
    IF p_digest IS DISTINCT FROM 'sha256:' || encode(sha256(%L::bytea
        || convert_to(p_body, 'UTF8')), 'hex') THEN
        RAISE EXCEPTION 'blobs %%: digest %% does not match the body', p_key, p_digest
            USING ERRCODE = '22023';
    END IF;
    v_doc := p_body::jsonb;
    IF verdict._canonical(v_doc, p_body) IS DISTINCT FROM p_body THEN
        RAISE EXCEPTION 'blobs %%: the body is not in canonical form (RFC 8785: no whitespace, members in order, no member named twice, numbers as written by verdict)',
            p_key USING ERRCODE = '22023';
    END IF;
    IF jsonb_typeof(v_doc -> 'digest') IS DISTINCT FROM 'string' OR (v_doc ->> 'digest') IS DISTINCT FROM p_key THEN
        RAISE EXCEPTION 'blobs %%: the record names other bytes (%%)', p_key,
            coalesce(v_doc ->> 'digest', 'none') USING ERRCODE = '22023';
    END IF;
    IF jsonb_typeof(v_doc -> 'size') IS DISTINCT FROM 'number'
        OR (v_doc ->> 'size') IS DISTINCT FROM octet_length(p_bytes)::text THEN
        RAISE EXCEPTION 'blobs %%: the record says %% bytes, the bytes are %%', p_key,
            coalesce(v_doc ->> 'size', 'no size'), octet_length(p_bytes) USING ERRCODE = '22023';
    END IF;
    IF jsonb_typeof(v_doc -> 'writer') IS DISTINCT FROM 'string' OR (v_doc ->> 'writer') IS DISTINCT FROM p_principal THEN
        RAISE EXCEPTION 'blobs %%: the record names writer %%, not %%', p_key,
            coalesce(v_doc ->> 'writer', 'none'), p_principal USING ERRCODE = '42501';
    END IF;
    IF v_doc ? 'media_type' AND (jsonb_typeof(v_doc -> 'media_type') IS DISTINCT FROM 'string'
            OR length(v_doc ->> 'media_type') NOT BETWEEN 1 AND 255) THEN
        RAISE EXCEPTION 'blobs %%: a media type is a string of 1 to 255 characters', p_key
            USING ERRCODE = '22023';
    END IF;
    PERFORM pg_advisory_xact_lock(8531478330712965377);
    -- The digest is the identity: the same bytes stored already are returned as they are.
    SELECT t.seq, t.digest, t.body, false, NULL::boolean INTO r FROM verdict.blobs t
        WHERE t.key = p_key;
    IF FOUND THEN
        RETURN r;
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
        'append', 'blobs', p_key, p_principal, p_role, p_digest, p_correlation, v_at);
    INSERT INTO verdict.blobs (seq, key, digest, body, bytes)
    VALUES (v_seq, p_key, p_digest, p_body, p_bytes)
    RETURNING seq, digest, body, true, NULL::boolean INTO r.r_seq, r.r_digest, r.r_body, r.r_inserted, r.r_counted;
    RETURN r;
END $body$;
$template$,
        verdict._identity_check(),
        '\x' || encode(convert_to('verdict:store.blob:v1', 'UTF8') || '\x00'::bytea, 'hex'),
        '\x' || encode(convert_to('verdict:audit-event:v1', 'UTF8') || '\x00'::bytea, 'hex'),
        '{"correlation":%s,"event_type":"append","key":%s,"payload_digest":"%s","prev_hash":%s,'
            || '"principal":%s,"recorded_at":"%s","role":"%s","seq":%s,"table":"blobs"}');
END $make$;

REVOKE ALL ON FUNCTION verdict.put_blobs(text, text, text, text, text, text, bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION verdict.put_blobs(text, text, text, text, text, text, bytea)
    TO __OPERATOR__, __PRODUCER__, __RUNNER__;

RESET ROLE;
