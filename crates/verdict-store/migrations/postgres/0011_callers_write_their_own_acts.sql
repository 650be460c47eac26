-- verdict store, PostgreSQL schema version 11: callers write their own acts.
--
-- Until now only the operator role could append a verifier run, so a verifier admitting itself
-- went through the engine's identity (`<prefix>engine`), and a verifier using only its own
-- login could not admit itself. A verifier's identity may now call put_verifier_runs and
-- put_verification_requests (both forms: the verifier joins the roles each lets write its
-- table, and its group role is granted EXECUTE), held to its own act by checks spliced right
-- after each routine parses the body, refused with SQLSTATE 42501:
-- - a verifier run must name the writer as its verifier, for a stored subject the writer did
--   not produce (nor under the producer's run id), and the writer must hold a grant in force
--   (read or write, not revoked and, on a store that keeps the database's clock, not expired
--   at clock_timestamp()) on the subject's execution or mission, as the engine requires;
-- - a document a verifier appends to the requests table must be an admission note
--   (`verdict.admission/v1`) naming the writer as its verifier: never a request, nor any other
--   of the engine's notes.
-- A producer's identity may now call put_run_events (both forms) to end, as `cancelled`, a run
-- admitted for a subject it produced, and only once the requests table holds a cancellation of
-- that subject's execution naming it as the producer that cancelled it, and the audit chain
-- names it as that record's writer: the runs of an
-- execution it cancelled, never one run on its own, nor any other status.
-- The operator role is unchanged. The engine believes an admission note only when the run
-- record confirms it, and that record's verifier is now always its writer or an operator's.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

DO $make$
DECLARE
    t record;
    f record;
    v_def text;
    v_hits integer;
BEGIN
    FOR t IN SELECT * FROM (VALUES
        ('verifier_runs', $check$
    IF p_role = 'verifier'
        AND (jsonb_typeof(v_doc -> 'verifier') IS DISTINCT FROM 'string'
            OR (v_doc ->> 'verifier') IS DISTINCT FROM p_principal
            OR NOT EXISTS (SELECT 1 FROM verdict.subjects ad_s
                WHERE ad_s.key = (v_doc ->> 'subject_digest')
                  AND (ad_s.body::jsonb #>> '{producer,principal}') IS DISTINCT FROM p_principal
                  AND (ad_s.body::jsonb #>> '{producer,run}') IS DISTINCT FROM (v_doc ->> 'run_id')
                  AND EXISTS (SELECT 1 FROM verdict.grants ad_g
                      WHERE ad_g.principal = p_principal
                        AND ((ad_g.scope_kind = 'execution' AND ad_g.scope_id = ad_s.execution_id)
                          OR (ad_g.scope_kind = 'mission'
                              AND ad_g.scope_id = (ad_s.body::jsonb ->> 'mission')))
                        AND NOT EXISTS (SELECT 1 FROM verdict.grant_revocations ad_v
                            WHERE ad_v.grant_id = ad_g.key)
                        AND ((ad_g.body::jsonb ->> 'expires_at')::timestamptz > clock_timestamp()
                          OR EXISTS (SELECT 1 FROM verdict.pointers ad_c WHERE ad_c.pointer = 'clock'
                              AND ad_c.name = 'store' AND ad_c.value = '{"clock":"manual"}'))))) THEN
        RAISE EXCEPTION '%: verifier % may admit only itself, independent of the subject''s producer and under a grant in force on its execution',
            @KEY@, p_principal USING ERRCODE = '42501';
    END IF;$check$, '{operator}', '{operator,verifier}'),
        ('verification_requests', $check$
    IF p_role = 'verifier' AND ((v_doc ->> 'schema') IS DISTINCT FROM 'verdict.admission/v1'
            OR jsonb_typeof(v_doc -> 'verifier') IS DISTINCT FROM 'string'
            OR (v_doc ->> 'verifier') IS DISTINCT FROM p_principal) THEN
        RAISE EXCEPTION '%: verifier % may append only the note of its own admission', @KEY@,
            p_principal USING ERRCODE = '42501';
    END IF;$check$, '{operator,producer}', '{operator,producer,verifier}'),
        ('run_events', $check$
    IF p_role = 'producer' AND NOT ((v_doc ->> 'status') IS NOT DISTINCT FROM 'cancelled'
            AND NOT (v_doc ? 'reason')
            AND EXISTS (SELECT 1 FROM verdict.verifier_runs rc_r, verdict.subjects rc_s,
                    verdict.verification_requests rc_c
                WHERE rc_r.key = (v_doc ->> 'run_id')
                  AND rc_s.key = (rc_r.body::jsonb ->> 'subject_digest')
                  AND (rc_s.body::jsonb #>> '{producer,principal}') = p_principal
                  AND (rc_c.body::jsonb ->> 'schema') = 'verdict.cancellation/v1'
                  AND (rc_c.body::jsonb #>> '{cancelled,kind}') = 'execution'
                  AND (rc_c.body::jsonb #>> '{cancelled,id}') = rc_s.execution_id
                  AND (rc_c.body::jsonb #>> '{by,principal}') = p_principal
                  AND (rc_c.body::jsonb #>> '{by,role}') = 'producer'
                  AND EXISTS (SELECT 1 FROM verdict.audit_events rc_a WHERE rc_a.seq = rc_c.seq
                      AND rc_a.tbl = 'verification_requests' AND rc_a.principal = p_principal
                      AND rc_a.role = 'producer'))) THEN
        RAISE EXCEPTION '%: producer % may only cancel a run of its own execution once it has cancelled that execution',
            @KEY@, p_principal USING ERRCODE = '42501';
    END IF;$check$, '{operator,verifier}', '{operator,verifier,producer}')
    ) AS v(name, body, roles, new_roles) LOOP
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
            -- The roles each routine lets write its table, as version 4 wrote them in.
            v_hits := (length(v_def) - length(replace(v_def, format('p_role = ANY (%L::text[])', t.roles), '')))
                / length(format('p_role = ANY (%L::text[])', t.roles));
            IF v_hits = 0 THEN
                RAISE EXCEPTION '%: no list of roles % to extend', f.signature, t.roles;
            END IF;
            v_def := replace(v_def, format('p_role = ANY (%L::text[])', t.roles),
                format('p_role = ANY (%L::text[])', t.new_roles));
            EXECUTE replace(v_def, f.marker, f.marker || replace(t.body, '@KEY@', f.key_expr));
        END LOOP;
    END LOOP;
END $make$;

GRANT EXECUTE ON FUNCTION verdict.put_verifier_runs(text, text, text[], text[], text[], text[]) TO __VERIFIER__;
GRANT EXECUTE ON FUNCTION verdict.put_one_verifier_runs(text, text, text, text, text, text) TO __VERIFIER__;
GRANT EXECUTE ON FUNCTION verdict.put_verification_requests(text, text, text[], text[], text[], text[]) TO __VERIFIER__;
GRANT EXECUTE ON FUNCTION verdict.put_one_verification_requests(text, text, text, text, text, text) TO __VERIFIER__;
GRANT EXECUTE ON FUNCTION verdict.put_run_events(text, text, text[], text[], text[], text[]) TO __PRODUCER__;
GRANT EXECUTE ON FUNCTION verdict.put_one_run_events(text, text, text, text, text, text) TO __PRODUCER__;

RESET ROLE;
