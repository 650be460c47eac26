-- verdict store, PostgreSQL schema version 26: one process at a time delivers webhooks.
--
-- Every server started with a webhook key used to deliver every event, so two servers over one
-- store delivered each event twice. A duty lease elects the one that delivers: a row per duty
-- naming its holder and until when it holds, at the store's time. Like the job queue it is
-- operational state, not evidence: renewing it is an UPDATE every few seconds, which the audit
-- chain does not record (an audited renewal would move the chain's head, and with it every
-- answer kept under that head, several times a minute). What delivery does is still recorded
-- in the chain, as before: each event delivered or given up on.
--
-- The engine's system identity changes the table only through `duty_hold` (SECURITY DEFINER,
-- fixed search_path), which takes the lease when nobody holds it or its lease lapsed, renews
-- it for its holder, and otherwise leaves it; the call returns the lease as it stands.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

CREATE TABLE verdict.duty_leases (
    duty text PRIMARY KEY CHECK (duty IN ('webhook-delivery')),
    holder text NOT NULL CHECK (length(holder) BETWEEN 1 AND 256),
    term bigint NOT NULL,
    lease_until timestamptz NOT NULL
);
ALTER TABLE verdict.duty_leases ENABLE ROW LEVEL SECURITY;
ALTER TABLE verdict.duty_leases FORCE ROW LEVEL SECURITY;
-- Read by the identities that act for no principal (schema 23's rule); no principal's group
-- may select the table at all.
CREATE POLICY duty_leases_read_all ON verdict.duty_leases FOR SELECT
    TO __OWNER__, __OPERATOR__, __SYSTEM__, __SERVICE__ USING (true);
CREATE POLICY duty_leases_take ON verdict.duty_leases FOR INSERT TO __OWNER__ WITH CHECK (true);
CREATE POLICY duty_leases_change ON verdict.duty_leases FOR UPDATE TO __OWNER__ USING (true)
    WITH CHECK (true);
REVOKE ALL ON verdict.duty_leases FROM PUBLIC;
GRANT SELECT ON verdict.duty_leases TO __OPERATOR__, __SYSTEM__;

-- Takes or renews `p_duty` for `p_holder` for `p_lease_ms` from the store's time, when the
-- duty is free, lapsed or already `p_holder`'s; returns the lease as it stands afterwards, its
-- expiry in microseconds since the epoch. A taking by another holder starts a new term.
CREATE FUNCTION verdict.duty_hold(p_principal text, p_role text, p_duty text, p_holder text,
    p_lease_ms bigint)
RETURNS TABLE (r_holder text, r_term bigint, r_lease_until bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = verdict, pg_temp AS $$
DECLARE
    v_now timestamptz;
BEGIN
    -- The engine's own identity writes nothing (schema 19), a lease included.
    IF (CASE WHEN current_setting('role') = 'none' THEN session_user::text
            ELSE current_setting('role') END) = __PREFIX_LITERAL__ || 'engine' THEN
        RAISE EXCEPTION 'database identity % writes nothing (schema 19): the engine writes as the acting principal, or as the system',
            __PREFIX_LITERAL__ || 'engine' USING ERRCODE = '42501';
    END IF;
    -- @identity check@
    IF p_role <> 'system' OR p_principal <> 'verdict-engine' THEN
        RAISE EXCEPTION 'only the engine, in the system role, holds duties, not % as %',
            p_principal, p_role USING ERRCODE = '42501';
    END IF;
    PERFORM verdict._claim(p_role);
    IF p_lease_ms IS NULL OR p_lease_ms < 1 OR p_lease_ms > 86400000 THEN
        RAISE EXCEPTION 'a duty lease of % ms is not between 1 ms and a day', p_lease_ms
            USING ERRCODE = '22023';
    END IF;
    v_now := verdict._store_now();
    INSERT INTO verdict.duty_leases AS d (duty, holder, term, lease_until)
    VALUES (p_duty, p_holder, 1, v_now + p_lease_ms * interval '1 millisecond')
    ON CONFLICT (duty) DO UPDATE
        SET holder = EXCLUDED.holder,
            term = d.term + CASE WHEN d.holder = EXCLUDED.holder THEN 0 ELSE 1 END,
            lease_until = EXCLUDED.lease_until
        WHERE d.holder = EXCLUDED.holder OR d.lease_until <= v_now;
    RETURN QUERY SELECT d.holder, d.term,
        (extract(epoch FROM d.lease_until) * 1000000)::bigint
        FROM verdict.duty_leases d WHERE d.duty = p_duty;
END $$;
-- The identity check every write routine makes (schema 7, with schema 19's refusal of the
-- engine's own identity), spliced in after that refusal, as into the routines before it.
DO $make$
DECLARE
    v_def text := pg_get_functiondef(
        'verdict.duty_hold(text, text, text, text, bigint)'::regprocedure);
    v_marker constant text := E'    -- @identity check@\n';
BEGIN
    IF (length(v_def) - length(replace(v_def, v_marker, ''))) / length(v_marker) <> 1 THEN
        RAISE EXCEPTION 'duty_hold: the place of the identity check does not occur once';
    END IF;
    EXECUTE replace(v_def, v_marker, verdict._identity_check());
END $make$;
REVOKE ALL ON FUNCTION verdict.duty_hold(text, text, text, text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION verdict.duty_hold(text, text, text, text, bigint) TO __SYSTEM__;

RESET ROLE;
