-- verdict store, PostgreSQL schema version 3: the same write routines, doing less per record.
--
-- What a single append cost, and what changes (the guarantees do not):
-- - Every generated column parsed the body as jsonb again, and every INSERT rebuilt each
--   generation expression from the catalog. The columns become plain ones that the write
--   routine fills from one parse of the body, with exactly the expressions they were generated
--   by (read from the catalog below, and kept as each column's comment). Only the routines
--   write these tables, so a derived column still cannot disagree with its body.
-- - The role claim was checked by a nested SECURITY DEFINER call (`_claim`), a query of its
--   own; the routine now makes the same two checks itself. `_claim` stays for compare-and-set.
-- - The head lookup, the key lookup, the audit event and the row were four queries with a
--   dozen PL/pgSQL expressions around them, each set up again in every transaction; they are
--   now one statement per record. It still runs under the chain lock, checks the digest
--   first, returns a stored key's row without appending, and computes the audit hash here.
-- pointer_changes keeps its generated columns: it is written by compare-and-set, not here.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

DO $make$
DECLARE
    t record;
    c record;
    v_cols text;
    v_vals text;
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
            SELECT a.attname, pg_get_expr(d.adbin, d.adrelid) AS expr
            FROM pg_attribute a
            JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
            WHERE a.attrelid = format('verdict.%I', t.name)::regclass
              AND a.attgenerated = 's' AND NOT a.attisdropped
            ORDER BY a.attnum
        LOOP
            -- Each expression reads the body only as (body)::jsonb; the routine parses it once.
            IF position('(body)::jsonb' IN c.expr) = 0
                OR position('body' IN replace(c.expr, '(body)::jsonb', '')) > 0 THEN
                RAISE EXCEPTION '%.%: unexpected generation expression %', t.name, c.attname, c.expr;
            END IF;
            v_cols := v_cols || ', ' || quote_ident(c.attname);
            v_vals := v_vals || ', ' || replace(c.expr, '(body)::jsonb', 'ev.doc');
            EXECUTE format('ALTER TABLE verdict.%I ALTER COLUMN %I DROP EXPRESSION', t.name, c.attname);
            EXECUTE format('COMMENT ON COLUMN verdict.%I.%I IS %L', t.name, c.attname,
                'derived from the body by the write routine: ' || c.expr);
        END LOOP;
        IF v_cols = '' THEN
            RAISE EXCEPTION '%: no generated columns to derive', t.name;
        END IF;
        EXECUTE format($template$
CREATE OR REPLACE FUNCTION verdict.put_%1$s(p_principal text, p_role text, p_keys text[],
    p_digests text[], p_bodies text[], p_correlations text[])
RETURNS TABLE (r_seq bigint, r_digest text, r_body text, r_inserted boolean, r_counted boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = verdict, pg_temp AS $body$
DECLARE
    v_n integer := coalesce(array_length(p_keys, 1), 0);
    v_claimed text := __PREFIX_LITERAL__ || p_role;
    v_set text := current_setting('role');
    v_at text;
BEGIN
    IF NOT (p_role = ANY (%3$L::text[])) THEN
        RAISE EXCEPTION 'role %% may not write %1$s', p_role USING ERRCODE = '42501';
    END IF;
    -- The claimed role must be the one the connection acts in: the role set with SET ROLE
    -- or, without one, a role the session user is a member of (what _claim checks).
    IF v_set <> 'none' AND v_set <> v_claimed THEN
        RAISE EXCEPTION 'acting as role %%, not as %%', v_set, v_claimed USING ERRCODE = '42501';
    END IF;
    IF v_set = 'none' AND NOT pg_has_role(session_user, v_claimed, 'MEMBER') THEN
        RAISE EXCEPTION '%% is not a member of %%', session_user, v_claimed USING ERRCODE = '42501';
    END IF;
    IF v_n <> coalesce(array_length(p_digests, 1), 0) OR v_n <> coalesce(array_length(p_bodies, 1), 0)
        OR v_n <> coalesce(array_length(p_correlations, 1), 0) THEN
        RAISE EXCEPTION 'put_%1$s: arrays of different lengths' USING ERRCODE = '22023';
    END IF;
    -- Look and append under the chain lock, so a concurrent writer of the same key has either
    -- committed (and is found) or not started.
    PERFORM pg_advisory_xact_lock(8531478330712965377);
    v_at := to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"');
    FOR i IN 1 .. v_n LOOP
        IF p_digests[i] IS DISTINCT FROM 'sha256:' || encode(sha256(convert_to('verdict:' || %2$L || ':v1', 'UTF8')
            || '\x00'::bytea || convert_to(p_bodies[i], 'UTF8')), 'hex') THEN
            RAISE EXCEPTION '%1$s %%: digest %% does not match the body', p_keys[i], p_digests[i]
                USING ERRCODE = '22023';
        END IF;
        -- One statement: the stored row of the key, or else the next audit event after the
        -- head (its hash over the RFC 8785 form of the event without its hash: keys in order,
        -- strings escaped by to_json, which escapes exactly as JCS does) and the row, derived
        -- columns filled from one parse of the body.
        RETURN QUERY
        WITH old AS (
            SELECT t.seq, t.digest, t.body, %4$s AS counted FROM verdict.%1$I t WHERE t.key = p_keys[i]
        ), ev AS (
            SELECT h.seq, h.prev, p_bodies[i]::jsonb AS doc,
                'sha256:' || encode(sha256(convert_to('verdict:audit-event:v1', 'UTF8') || '\x00'::bytea
                    || convert_to('{"correlation":' || coalesce(to_json(p_correlations[i])::text, 'null')
                    || ',"event_type":"append","key":' || to_json(p_keys[i])::text
                    || ',"payload_digest":' || to_json(p_digests[i])::text
                    || ',"prev_hash":' || to_json(h.prev)::text
                    || ',"principal":' || to_json(p_principal)::text
                    || ',"recorded_at":' || to_json(v_at)::text
                    || ',"role":' || to_json(p_role)::text
                    || ',"seq":' || h.seq::text
                    || ',"table":"%1$s"}', 'UTF8')), 'hex') AS hash
            FROM (
                SELECT coalesce(a.seq, 0) + 1 AS seq, coalesce(a.hash, 'sha256:' || repeat('0', 64)) AS prev
                FROM (SELECT 1) one
                LEFT JOIN LATERAL (
                    SELECT e.seq, e.hash FROM verdict.audit_events e ORDER BY e.seq DESC LIMIT 1
                ) a ON true
                WHERE NOT EXISTS (SELECT 1 FROM old)
            ) h
        ), audit AS (
            INSERT INTO verdict.audit_events (seq, prev_hash, hash, event_type, tbl, key, principal,
                role, payload_digest, correlation, recorded_at)
            SELECT ev.seq, ev.prev, ev.hash, 'append', %1$L, p_keys[i], p_principal, p_role,
                p_digests[i], p_correlations[i], v_at
            FROM ev
        ), ins AS (
            INSERT INTO verdict.%1$I (seq, key, digest, body%6$s)
            SELECT ev.seq, p_keys[i], p_digests[i], p_bodies[i]%7$s
            FROM ev
            RETURNING seq, digest, body, %5$s AS counted
        )
        SELECT old.seq, old.digest, old.body, false, old.counted FROM old
        UNION ALL
        SELECT ins.seq, ins.digest, ins.body, true, ins.counted FROM ins;
    END LOOP;
END $body$;
$template$,
            t.name, t.domain, t.allowed,
            CASE WHEN t.name = 'verification_results' THEN 't.counted' ELSE 'NULL::boolean' END,
            CASE WHEN t.name = 'verification_results' THEN 'counted' ELSE 'NULL::boolean' END,
            v_cols, v_vals);
    END LOOP;
END $make$;

RESET ROLE;
