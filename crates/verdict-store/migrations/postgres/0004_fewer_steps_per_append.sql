-- verdict store, PostgreSQL schema version 4: a routine per table for a single record, and the
-- routines for runs of records in fewer steps.
--
-- A single append is one call of one routine in a transaction of its own, so everything the
-- routine evaluates is set up again on every append: PostgreSQL keeps a routine's plans across
-- transactions, but builds the executor state of each statement, and of each PL/pgSQL
-- expression, anew in every transaction. Version 3 read the stored row and the chain head and
-- appended the audit event and the row in one statement of four common table expressions,
-- inside a loop over four arrays; setting that up cost more than the work itself. Counted with
-- callgrind on the server (pgbench, one check evidence document per call, the driver's own
-- statement subtracted): about 630,000 instructions per single append before, 566,000 for a
-- run of one record and 479,000 for a single record now (a bare INSERT of the same bytes:
-- 74,000). What changes:
-- - put_one_<table> takes one record as plain text arguments and returns one row of
--   put_result: no arrays to receive and index, no loop, and a result shape PostgreSQL keeps
--   cached instead of reading it back from the routine's OUT parameters on every call. It
--   makes the same checks and writes as put_<table>, and is granted to exactly the same roles.
-- - The stored row of the key and the chain head are read by plain queries, and the audit
--   event and the row are two plain INSERTs, each set up with a handful of plan nodes.
-- - The audit event's hash is one format() call over the RFC 8785 form instead of a chain of
--   two dozen concatenations; the bytes hashed are the same (keys in order; the key, principal,
--   correlation and previous hash escaped by to_json, which escapes exactly as JCS does; the
--   payload digest, the time and the role written as they are, since the routine has just
--   checked that they are a digest of the body, its own timestamp and one of the table's
--   roles, none of which JCS escapes). The domain prefixes of the digest check and of the
--   audit hash are byte constants instead of conversions made on every call.
-- - put_one_<table> reads the stored row of the key, then the chain head, with two plain
--   lookups; put_<table> reads both with one join (cheaper there, where it runs per record).
-- - The role claim (and the array lengths) are one test when all is well; each check still
--   raises its own error, in the same order as before, when one fails.
-- Unchanged: SECURITY DEFINER with a fixed search_path, EXECUTE granted per role (CREATE OR
-- REPLACE keeps the grants of put_<table>), the digest checked against the body before
-- anything is written, the chain lock taken before the head is read, a stored key returns the
-- stored row and appends nothing, the audit hash computed here, derived columns filled from
-- one parse of the body with the expressions kept as their column comments (read back from
-- those comments below, so the routines and `audit verify` use the same text).

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

-- What a single-record routine returns: a named row type, whose shape PostgreSQL keeps cached,
-- where OUT parameters would be read back from the catalog on every call.
CREATE TYPE verdict.put_result AS (r_seq bigint, r_digest text, r_body text, r_inserted boolean,
    r_counted boolean);

DO $make$
DECLARE
    t record;
    c record;
    v_cols text;
    v_vals text;
    v_note constant text := 'derived from the body by the write routine: ';
BEGIN
    FOR t IN SELECT * FROM (VALUES
        ('principals', 'store.principal', ARRAY['operator']),
        ('grants', 'store.grant', ARRAY['operator']),
        ('grant_revocations', 'store.grant-revocation', ARRAY['operator']),
        ('subjects', 'subject', ARRAY['producer', 'operator']),
        ('policies', 'policy', ARRAY['operator']),
        ('check_evidence', 'evidence', ARRAY['runner', 'producer']),
        ('verification_requests', 'request', ARRAY['operator', 'producer']),
        ('verifier_runs', 'store.verifier-run', ARRAY['operator']),
        ('run_events', 'store.run-event', ARRAY['operator', 'verifier']),
        ('verification_results', 'verification', ARRAY['verifier']),
        ('findings', 'finding', ARRAY['verifier']),
        ('human_decisions', 'human-decision', ARRAY['human']),
        ('gate_decisions', 'decision', ARRAY['gate']),
        ('denials', 'store.denial', ARRAY['system']),
        ('gate_evaluations', 'store.gate-evaluation', ARRAY['gate'])
    ) AS v(name, domain, allowed) LOOP
        v_cols := '';
        v_vals := '';
        FOR c IN
            SELECT a.attname, substr(d.description, length(v_note) + 1) AS expr
            FROM pg_attribute a
            JOIN pg_description d ON d.objoid = a.attrelid AND d.objsubid = a.attnum
                AND d.classoid = 'pg_class'::regclass
            WHERE a.attrelid = format('verdict.%I', t.name)::regclass
              AND starts_with(d.description, v_note) AND NOT a.attisdropped
            ORDER BY a.attnum
        LOOP
            -- Each expression reads the body only as (body)::jsonb; the routine parses it once.
            IF position('(body)::jsonb' IN c.expr) = 0
                OR position('body' IN replace(c.expr, '(body)::jsonb', '')) > 0 THEN
                RAISE EXCEPTION '%.%: unexpected derivation %', t.name, c.attname, c.expr;
            END IF;
            v_cols := v_cols || ', ' || quote_ident(c.attname);
            v_vals := v_vals || ', ' || replace(c.expr, '(body)::jsonb', 'v_doc');
        END LOOP;
        IF v_cols = '' THEN
            RAISE EXCEPTION '%: no derived columns on record', t.name;
        END IF;
        EXECUTE format($template$
CREATE OR REPLACE FUNCTION verdict.put_%1$s(p_principal text, p_role text, p_keys text[],
    p_digests text[], p_bodies text[], p_correlations text[])
RETURNS TABLE (r_seq bigint, r_digest text, r_body text, r_inserted boolean, r_counted boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = verdict, pg_temp AS $body$
DECLARE
    v_n integer := coalesce(array_length(p_keys, 1), 0);
    v_set text := current_setting('role');
    v_at text;
    v_seq bigint;
    v_prev text;
    v_doc jsonb;
BEGIN
    -- The role must be one this table allows, and the one the connection acts in: the role set
    -- with SET ROLE or, without one, a role the session user is a member of (what _claim
    -- checks). One test when all is well; the checks one by one, in order, when not.
    IF (CASE WHEN NOT (p_role = ANY (%3$L::text[])) THEN true
            WHEN v_set = 'none' THEN NOT pg_has_role(session_user, __PREFIX_LITERAL__ || p_role, 'MEMBER')
            ELSE v_set <> __PREFIX_LITERAL__ || p_role END)
        OR v_n <> coalesce(array_length(p_digests, 1), 0) OR v_n <> coalesce(array_length(p_bodies, 1), 0)
        OR v_n <> coalesce(array_length(p_correlations, 1), 0) THEN
        IF NOT (p_role = ANY (%3$L::text[])) THEN
            RAISE EXCEPTION 'role %% may not write %1$s', p_role USING ERRCODE = '42501';
        END IF;
        IF v_set <> 'none' AND v_set <> __PREFIX_LITERAL__ || p_role THEN
            RAISE EXCEPTION 'acting as role %%, not as %%', v_set, __PREFIX_LITERAL__ || p_role
                USING ERRCODE = '42501';
        END IF;
        IF v_set = 'none' AND NOT pg_has_role(session_user, __PREFIX_LITERAL__ || p_role, 'MEMBER') THEN
            RAISE EXCEPTION '%% is not a member of %%', session_user, __PREFIX_LITERAL__ || p_role
                USING ERRCODE = '42501';
        END IF;
        RAISE EXCEPTION 'put_%1$s: arrays of different lengths' USING ERRCODE = '22023';
    END IF;
    -- Look and append under the chain lock, so a concurrent writer of the same key has either
    -- committed (and is found) or not started.
    PERFORM pg_advisory_xact_lock(8531478330712965377);
    v_at := to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"');
    FOR i IN 1 .. v_n LOOP
        IF p_digests[i] IS DISTINCT FROM 'sha256:' || encode(sha256(%2$L::bytea
            || convert_to(p_bodies[i], 'UTF8')), 'hex') THEN
            RAISE EXCEPTION '%1$s %%: digest %% does not match the body', p_keys[i], p_digests[i]
                USING ERRCODE = '22023';
        END IF;
        -- The stored row of the key, if there is one, and the head of the chain.
        SELECT t.seq, t.digest, t.body, %4$s, coalesce(h.seq, 0) + 1,
                coalesce(h.hash, 'sha256:' || repeat('0', 64))
            INTO r_seq, r_digest, r_body, r_counted, v_seq, v_prev
            FROM (SELECT 1) one
            LEFT JOIN verdict.%1$I t ON t.key = p_keys[i]
            LEFT JOIN LATERAL (
                SELECT e.seq, e.hash FROM verdict.audit_events e ORDER BY e.seq DESC LIMIT 1
            ) h ON true;
        IF r_seq IS NOT NULL THEN
            r_inserted := false;
            RETURN NEXT;
            CONTINUE;
        END IF;
        -- The next audit event; its hash is over the RFC 8785 form of the event without its hash.
        -- Strings that may need escaping go through to_json; the digest (just checked), the
        -- time and the role (one of this table's) are known to need none, as they are.
        INSERT INTO verdict.audit_events (seq, prev_hash, hash, event_type, tbl, key, principal,
            role, payload_digest, correlation, recorded_at)
        VALUES (v_seq, v_prev, 'sha256:' || encode(sha256(%5$L::bytea || convert_to(format(%6$L,
                coalesce(to_json(p_correlations[i])::text, 'null'), to_json(p_keys[i]),
                p_digests[i], to_json(v_prev), to_json(p_principal), v_at, p_role, v_seq),
                'UTF8')), 'hex'),
            'append', %1$L, p_keys[i], p_principal, p_role, p_digests[i], p_correlations[i], v_at);
        v_doc := p_bodies[i]::jsonb;
        INSERT INTO verdict.%1$I (seq, key, digest, body%7$s)
        VALUES (v_seq, p_keys[i], p_digests[i], p_bodies[i]%8$s)
        RETURNING seq, digest, body, true, %9$s INTO r_seq, r_digest, r_body, r_inserted, r_counted;
        RETURN NEXT;
    END LOOP;
END $body$;

CREATE FUNCTION verdict.put_one_%1$s(p_principal text, p_role text, p_key text, p_digest text,
    p_body text, p_correlation text)
RETURNS verdict.put_result
LANGUAGE plpgsql SECURITY DEFINER SET search_path = verdict, pg_temp AS $body$
DECLARE
    v_set text := current_setting('role');
    v_at text;
    v_seq bigint;
    v_prev text;
    v_doc jsonb;
    r verdict.put_result;
BEGIN
    IF (CASE WHEN NOT (p_role = ANY (%3$L::text[])) THEN true
            WHEN v_set = 'none' THEN NOT pg_has_role(session_user, __PREFIX_LITERAL__ || p_role, 'MEMBER')
            ELSE v_set <> __PREFIX_LITERAL__ || p_role END) THEN
        IF NOT (p_role = ANY (%3$L::text[])) THEN
            RAISE EXCEPTION 'role %% may not write %1$s', p_role USING ERRCODE = '42501';
        END IF;
        IF v_set <> 'none' THEN
            RAISE EXCEPTION 'acting as role %%, not as %%', v_set, __PREFIX_LITERAL__ || p_role
                USING ERRCODE = '42501';
        END IF;
        RAISE EXCEPTION '%% is not a member of %%', session_user, __PREFIX_LITERAL__ || p_role
            USING ERRCODE = '42501';
    END IF;
    IF p_digest IS DISTINCT FROM 'sha256:' || encode(sha256(%2$L::bytea
        || convert_to(p_body, 'UTF8')), 'hex') THEN
        RAISE EXCEPTION '%1$s %%: digest %% does not match the body', p_key, p_digest
            USING ERRCODE = '22023';
    END IF;
    PERFORM pg_advisory_xact_lock(8531478330712965377);
    -- The stored row of the key, if there is one; else the head of the chain and the next event
    -- (two plain lookups cost less to set up than one join of both).
    SELECT t.seq, t.digest, t.body, false, %4$s INTO r FROM verdict.%1$I t WHERE t.key = p_key;
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
    -- As in put_%1$s: to_json for strings that may need escaping, the rest as they are.
    INSERT INTO verdict.audit_events (seq, prev_hash, hash, event_type, tbl, key, principal,
        role, payload_digest, correlation, recorded_at)
    VALUES (v_seq, v_prev, 'sha256:' || encode(sha256(%5$L::bytea || convert_to(format(%6$L,
            coalesce(to_json(p_correlation)::text, 'null'), to_json(p_key), p_digest,
            to_json(v_prev), to_json(p_principal), v_at, p_role, v_seq), 'UTF8')), 'hex'),
        'append', %1$L, p_key, p_principal, p_role, p_digest, p_correlation, v_at);
    v_doc := p_body::jsonb;
    INSERT INTO verdict.%1$I (seq, key, digest, body%7$s)
    VALUES (v_seq, p_key, p_digest, p_body%8$s)
    RETURNING seq, digest, body, true, %9$s INTO r.r_seq, r.r_digest, r.r_body, r.r_inserted, r.r_counted;
    RETURN r;
END $body$;
$template$,
            t.name,
            '\x' || encode(convert_to('verdict:' || t.domain || ':v1', 'UTF8') || '\x00'::bytea, 'hex'),
            t.allowed,
            CASE WHEN t.name = 'verification_results' THEN 't.counted' ELSE 'NULL::boolean' END,
            '\x' || encode(convert_to('verdict:audit-event:v1', 'UTF8') || '\x00'::bytea, 'hex'),
            '{"correlation":%s,"event_type":"append","key":%s,"payload_digest":"%s","prev_hash":%s,'
                || '"principal":%s,"recorded_at":"%s","role":"%s","seq":%s,"table":"' || t.name || '"}',
            v_cols, v_vals,
            CASE WHEN t.name = 'verification_results' THEN 'counted' ELSE 'NULL::boolean' END);
        -- The single-record routine may be called by exactly the roles that may call the
        -- routine for runs of records (a new function is executable by PUBLIC until revoked).
        EXECUTE format('REVOKE ALL ON FUNCTION verdict.put_one_%s(text, text, text, text, text, text) FROM PUBLIC',
            t.name);
        FOR c IN
            SELECT a.grantee::regrole::text AS grantee
            FROM pg_proc p, aclexplode(p.proacl) a
            WHERE p.oid = format('verdict.put_%s(text, text, text[], text[], text[], text[])', t.name)::regprocedure
              AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner
        LOOP
            EXECUTE format('GRANT EXECUTE ON FUNCTION verdict.put_one_%s(text, text, text, text, text, text) TO %s',
                t.name, c.grantee);
        END LOOP;
    END LOOP;
END $make$;

RESET ROLE;
