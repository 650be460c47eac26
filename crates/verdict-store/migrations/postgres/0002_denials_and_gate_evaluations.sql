-- verdict store, PostgreSQL schema version 2: the engine's own records move out of
-- verification_requests into tables of their own.
--
-- denials: every refused action (the principal, or 'unauthenticated' with no role), written
-- only by the system role, which no principal holds. gate_evaluations: which items each gate
-- evaluation read, written only by the gate role. Both are append-only exactly like the
-- evidence tables of version 1: UPDATE, DELETE and TRUNCATE refused by triggers and revoked,
-- row security forced, writes only through SECURITY DEFINER routines with a fixed search_path
-- that append the audit event in the same transaction.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

CREATE TABLE verdict.denials (
    seq bigint NOT NULL UNIQUE,
    key text PRIMARY KEY,
    digest text NOT NULL,
    body text NOT NULL,
    principal text GENERATED ALWAYS AS (((body::jsonb) ->>'principal')) STORED,
    role text GENERATED ALWAYS AS (((body::jsonb) ->>'role')) STORED,
    code text GENERATED ALWAYS AS (((body::jsonb) ->>'code')) STORED,
    at text GENERATED ALWAYS AS (((body::jsonb) ->>'at')) STORED
);
CREATE INDEX denials_principal ON verdict.denials (principal);

CREATE TABLE verdict.gate_evaluations (
    seq bigint NOT NULL UNIQUE,
    key text PRIMARY KEY,
    digest text NOT NULL,
    body text NOT NULL,
    evaluation_key text GENERATED ALWAYS AS (((body::jsonb) ->>'evaluation_key')) STORED,
    subject_digest text GENERATED ALWAYS AS (((body::jsonb) ->>'subject_digest')) STORED,
    policy_digest text GENERATED ALWAYS AS (((body::jsonb) ->>'policy_digest')) STORED
);
CREATE INDEX gate_evaluations_evaluation_key ON verdict.gate_evaluations (evaluation_key);
CREATE INDEX gate_evaluations_subject_digest ON verdict.gate_evaluations (subject_digest);

CREATE TRIGGER denials_append_only BEFORE UPDATE OR DELETE ON verdict.denials
    FOR EACH ROW EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER denials_no_truncate BEFORE TRUNCATE ON verdict.denials
    FOR EACH STATEMENT EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER gate_evaluations_append_only BEFORE UPDATE OR DELETE ON verdict.gate_evaluations
    FOR EACH ROW EXECUTE FUNCTION verdict.refuse_change();
CREATE TRIGGER gate_evaluations_no_truncate BEFORE TRUNCATE ON verdict.gate_evaluations
    FOR EACH STATEMENT EXECUTE FUNCTION verdict.refuse_change();

-- The write routines, built from the same template as those of version 1: the role is checked
-- against the routine's list and against the role the connection acts in, every digest against
-- its body, a stored key returns the stored row, and a new row is appended with its audit event
-- under the chain lock.
DO $make$
DECLARE
    t record;
BEGIN
    FOR t IN SELECT * FROM (VALUES
        ('denials', 'store.denial', ARRAY['system']),
        ('gate_evaluations', 'store.gate-evaluation', ARRAY['gate'])
    ) AS v(name, domain, allowed) LOOP
        EXECUTE format($template$
CREATE FUNCTION verdict.put_%1$s(p_principal text, p_role text, p_keys text[], p_digests text[],
    p_bodies text[], p_correlations text[])
RETURNS TABLE (r_seq bigint, r_digest text, r_body text, r_inserted boolean, r_counted boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = verdict, pg_temp AS $body$
DECLARE
    v_last bigint;
    v_prev text;
    v_at text;
    v_pre text;
    v_hash text;
BEGIN
    IF NOT (p_role = ANY (%3$L::text[])) THEN
        RAISE EXCEPTION 'role %% may not write %1$s', p_role USING ERRCODE = '42501';
    END IF;
    PERFORM verdict._claim(p_role);
    IF coalesce(array_length(p_keys, 1), 0) <> coalesce(array_length(p_digests, 1), 0)
        OR coalesce(array_length(p_keys, 1), 0) <> coalesce(array_length(p_bodies, 1), 0)
        OR coalesce(array_length(p_keys, 1), 0) <> coalesce(array_length(p_correlations, 1), 0) THEN
        RAISE EXCEPTION 'put_%1$s: arrays of different lengths' USING ERRCODE = '22023';
    END IF;
    PERFORM pg_advisory_xact_lock(8531478330712965377);
    SELECT seq, hash INTO v_last, v_prev FROM verdict.audit_events ORDER BY seq DESC LIMIT 1;
    v_last := coalesce(v_last, 0);
    v_prev := coalesce(v_prev, 'sha256:' || repeat('0', 64));
    v_at := to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"');
    FOR i IN 1 .. coalesce(array_length(p_keys, 1), 0) LOOP
        IF p_digests[i] IS DISTINCT FROM 'sha256:' || encode(sha256(convert_to('verdict:' || %2$L || ':v1', 'UTF8')
            || '\x00'::bytea || convert_to(p_bodies[i], 'UTF8')), 'hex') THEN
            RAISE EXCEPTION '%1$s %%: digest %% does not match the body', p_keys[i], p_digests[i]
                USING ERRCODE = '22023';
        END IF;
        SELECT seq, digest, body, NULL::boolean INTO r_seq, r_digest, r_body, r_counted
            FROM verdict.%1$I WHERE key = p_keys[i];
        IF FOUND THEN
            r_inserted := false;
            RETURN NEXT;
            CONTINUE;
        END IF;
        v_last := v_last + 1;
        v_pre := '{"correlation":' || coalesce(to_json(p_correlations[i])::text, 'null')
            || ',"event_type":"append","key":' || to_json(p_keys[i])::text
            || ',"payload_digest":' || to_json(p_digests[i])::text
            || ',"prev_hash":' || to_json(v_prev)::text
            || ',"principal":' || to_json(p_principal)::text
            || ',"recorded_at":' || to_json(v_at)::text
            || ',"role":' || to_json(p_role)::text
            || ',"seq":' || v_last::text
            || ',"table":"%1$s"}';
        v_hash := 'sha256:' || encode(sha256(convert_to('verdict:audit-event:v1', 'UTF8') || '\x00'::bytea
            || convert_to(v_pre, 'UTF8')), 'hex');
        INSERT INTO verdict.audit_events (seq, prev_hash, hash, event_type, tbl, key, principal, role,
            payload_digest, correlation, recorded_at)
        VALUES (v_last, v_prev, v_hash, 'append', %1$L, p_keys[i], p_principal, p_role, p_digests[i],
            p_correlations[i], v_at);
        INSERT INTO verdict.%1$I (seq, key, digest, body)
            VALUES (v_last, p_keys[i], p_digests[i], p_bodies[i]);
        v_prev := v_hash;
        r_seq := v_last;
        r_digest := p_digests[i];
        r_body := p_bodies[i];
        r_counted := NULL;
        r_inserted := true;
        RETURN NEXT;
    END LOOP;
END $body$;
$template$,
            t.name, t.domain, t.allowed);
    END LOOP;
END $make$;

-- Privileges: read for every role, write only through the routines above.
GRANT USAGE ON SCHEMA verdict TO __SYSTEM__;
REVOKE ALL ON verdict.denials, verdict.gate_evaluations FROM PUBLIC;
GRANT SELECT ON verdict.denials, verdict.gate_evaluations
    TO __OPERATOR__, __PRODUCER__, __RUNNER__, __VERIFIER__, __HUMAN__, __GATE__, __SYSTEM__;
REVOKE UPDATE, DELETE, TRUNCATE ON verdict.denials, verdict.gate_evaluations FROM __OWNER__;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA verdict FROM PUBLIC;
GRANT EXECUTE ON FUNCTION verdict.put_denials(text, text, text[], text[], text[], text[]) TO __SYSTEM__;
GRANT EXECUTE ON FUNCTION verdict.put_gate_evaluations(text, text, text[], text[], text[], text[]) TO __GATE__;

-- Row security, forced: the owner too inserts only through these policies.
ALTER TABLE verdict.denials ENABLE ROW LEVEL SECURITY;
ALTER TABLE verdict.denials FORCE ROW LEVEL SECURITY;
CREATE POLICY denials_read ON verdict.denials FOR SELECT USING (true);
CREATE POLICY denials_append ON verdict.denials FOR INSERT TO __OWNER__ WITH CHECK (true);
ALTER TABLE verdict.gate_evaluations ENABLE ROW LEVEL SECURITY;
ALTER TABLE verdict.gate_evaluations FORCE ROW LEVEL SECURITY;
CREATE POLICY gate_evaluations_read ON verdict.gate_evaluations FOR SELECT USING (true);
CREATE POLICY gate_evaluations_append ON verdict.gate_evaluations FOR INSERT TO __OWNER__ WITH CHECK (true);

RESET ROLE;
