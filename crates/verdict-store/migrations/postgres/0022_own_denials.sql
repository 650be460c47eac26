-- verdict store, PostgreSQL schema version 22: a principal's own login records its own denials.
--
-- Denials are appended by the system identity (`<prefix>system`), which no principal holds, so
-- that no caller can forge or pre-empt one. A store opened through a principal's own login
-- (`principal add --db-login`) cannot act as that identity, so a refusal it met was answered
-- but never recorded. put_own_denial lets every principal's identity append exactly one kind
-- of record: a denial naming itself.
--
-- - The principal is the session's identity (the role set with SET ROLE, else the login), looked
--   up in principal_roles, never an argument: the body must name that principal in its role,
--   and an identity that acts for no principal (the engine's, the gate's, the system's, the
--   service login's) is refused (SQLSTATE 42501).
-- - The body is a whole denial and nothing more: the members nonce, principal, role, code,
--   action, message and at, all strings; no token fingerprint (that belongs to the
--   unauthenticated); a code of permission_denied or self_verification_denied; the bounds the
--   store's own check holds (nonce 16-64 lowercase hex digits, action 1-1024 characters,
--   message at most 4096), and a time that is the database's own within five minutes (unless
--   the store keeps a manual clock). The digest, canonical form and key are checked as every
--   write routine checks them.
-- - The record and its audit event are appended as the system's denials are, so the chain reads
--   the same whichever login recorded the refusal: the event names `verdict-engine` in the
--   system role, the writer of every denial.
-- - Nothing else is reachable through it: it takes one body and writes one row of `denials`
--   and its event, under the chain's lock.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

CREATE FUNCTION verdict.put_own_denial(p_key text, p_digest text, p_body text)
RETURNS verdict.put_result
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = verdict, pg_temp
AS $fn$
DECLARE
    v_identity text := CASE WHEN current_setting('role') = 'none' THEN session_user::text
        ELSE current_setting('role') END;
    v_principal text;
    v_role text;
    v_doc jsonb;
    v_at text;
    v_seq bigint;
    v_prev text;
    r verdict.put_result;
BEGIN
    -- The engine's identity writes nothing (schema 19), this record included.
    IF v_identity = __PREFIX_LITERAL__ || 'engine' THEN
        RAISE EXCEPTION 'database identity % writes nothing (schema 19): the engine writes as the acting principal, or as the system',
            v_identity USING ERRCODE = '42501';
    END IF;
    SELECT m.principal, m.role INTO v_principal, v_role FROM verdict.principal_roles m
        WHERE m.db_role = v_identity AND m.principal IS NOT NULL
          AND m.principal <> 'verdict-engine'
          AND m.role IN ('operator', 'producer', 'runner', 'verifier', 'human');
    IF NOT FOUND THEN
        RAISE EXCEPTION 'database identity % acts for no principal, so it records no denial of its own',
            v_identity USING ERRCODE = '42501';
    END IF;
    IF (octet_length(p_body) <= 16384 AND length(p_key) <= 320) IS NOT TRUE THEN
        RAISE EXCEPTION 'own denial: the body or key is over its bound' USING ERRCODE = '22023';
    END IF;
    IF p_digest IS DISTINCT FROM 'sha256:' || encode(sha256(E'\\x766572646963743a73746f72652e64656e69616c3a763100'::bytea
        || convert_to(p_body, 'UTF8')), 'hex') THEN
        RAISE EXCEPTION 'denials %: digest % does not match the body', p_key, p_digest
            USING ERRCODE = '22023';
    END IF;
    v_doc := p_body::jsonb;
    IF verdict._canonical(v_doc, p_body) IS DISTINCT FROM p_body THEN
        RAISE EXCEPTION 'denials %: the body is not in canonical form', p_key USING ERRCODE = '22023';
    END IF;
    IF p_digest IS DISTINCT FROM p_key THEN
        RAISE EXCEPTION 'denials %: the body is stored under key %, not under this one', p_key,
            p_digest USING ERRCODE = '22023';
    END IF;
    IF jsonb_typeof(v_doc) IS DISTINCT FROM 'object'
        OR (SELECT count(*) FROM jsonb_object_keys(v_doc)) <> 7
        OR NOT (v_doc ?& '{nonce,principal,role,code,action,message,at}'::text[])
        OR EXISTS (SELECT 1 FROM jsonb_each(v_doc) e WHERE jsonb_typeof(e.value) <> 'string') THEN
        RAISE EXCEPTION 'denials %: the body is not a denial of an authenticated principal: it holds exactly nonce, principal, role, code, action, message and at, as strings',
            p_key USING ERRCODE = '22023';
    END IF;
    IF (v_doc ->> 'principal') IS DISTINCT FROM v_principal OR (v_doc ->> 'role') IS DISTINCT FROM v_role THEN
        RAISE EXCEPTION 'denials %: identity % records only the denials of principal % in role %',
            p_key, v_identity, v_principal, v_role USING ERRCODE = '42501';
    END IF;
    IF (v_doc ->> 'nonce') !~ '^[0-9a-f]{16,64}$'
        OR (v_doc ->> 'code') NOT IN ('permission_denied', 'self_verification_denied')
        OR length(v_doc ->> 'action') NOT BETWEEN 1 AND 1024
        OR length(v_doc ->> 'message') > 4096
        OR (v_doc ->> 'at') !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?Z$' THEN
        RAISE EXCEPTION 'denials %: a member is outside its bounds (nonce, code, action, message or at)',
            p_key USING ERRCODE = '22023';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM verdict.pointers c WHERE c.pointer = 'clock'
            AND c.name = 'store' AND c.value = '{"clock":"manual"}')
        AND abs(extract(epoch FROM (clock_timestamp()
            - (left(v_doc ->> 'at', 19) || 'Z')::timestamptz))) > 300 THEN
        RAISE EXCEPTION 'denials %: at % is not the database''s time', p_key, v_doc ->> 'at'
            USING ERRCODE = '22023';
    END IF;
    PERFORM pg_advisory_xact_lock(8531478330712965377);
    SELECT t.seq, t.digest, t.body, false, NULL::boolean INTO r FROM verdict.denials t WHERE t.key = p_key;
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
    -- The event put_one_denials appends for the system, word for word.
    INSERT INTO verdict.audit_events (seq, prev_hash, hash, event_type, tbl, key, principal,
        role, payload_digest, correlation, recorded_at)
    VALUES (v_seq, v_prev, 'sha256:' || encode(sha256(E'\\x766572646963743a61756469742d6576656e743a763100'::bytea || convert_to(format('{"correlation":%s,"event_type":"append","key":%s,"payload_digest":"%s","prev_hash":%s,"principal":%s,"recorded_at":"%s","role":"%s","seq":%s,"table":"denials"}',
            'null', to_json(p_key), p_digest,
            to_json(v_prev), to_json('verdict-engine'::text), v_at, 'system', v_seq), 'UTF8')), 'hex'),
        'append', 'denials', p_key, 'verdict-engine', 'system', p_digest, NULL, v_at);
    INSERT INTO verdict.denials (seq, key, digest, body, principal, role, code, at)
    VALUES (v_seq, p_key, p_digest, p_body, (v_doc ->> 'principal'), (v_doc ->> 'role'),
        (v_doc ->> 'code'), (v_doc ->> 'at'))
    RETURNING seq, digest, body, true, NULL::boolean INTO r.r_seq, r.r_digest, r.r_body, r.r_inserted, r.r_counted;
    RETURN r;
END $fn$;

REVOKE ALL ON FUNCTION verdict.put_own_denial(text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION verdict.put_own_denial(text, text, text)
    TO __OPERATOR__, __PRODUCER__, __RUNNER__, __VERIFIER__, __HUMAN__;
