-- verdict store, PostgreSQL schema version 6: authority is decided by the store.
--
-- The store's clock. Which clock a store keeps (the database's own, or a manual one for tests
-- and simulations) is chosen once, when the store is initialised, and recorded as the change
-- of the pointer `clock`/`store`, so it is audited like every other pointer move. cas_clock
-- allows that one change only: to a new pointer, under its one name, to one of the two
-- settings, and only while the store has no principal. The check runs under the chain lock,
-- so an `init` racing another, or coming after the first principal, is refused.

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

REVOKE ALL ON FUNCTION verdict.cas_clock(text, text, text, bigint, text, text, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION verdict.cas_clock(text, text, text, bigint, text, text, text, text, text) TO __OPERATOR__;

RESET ROLE;
