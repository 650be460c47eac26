-- verdict store, PostgreSQL schema version 36: a principal's denials are bounded in time.
--
-- Every refusal is recorded as a denial, and a principal may record its own through
-- put_own_denial (schema 22). An authenticated principal could therefore append denials
-- without bound, one per refused request or routine call: the chain, the disk and every
-- other writer waiting for the chain's lock paid for it.
--
-- Now a denial is appended only while fewer than 60 denials naming the same principal (or
-- `unauthenticated`) were appended within the last 60 seconds, measured on the clock that
-- stamps the audit events (`recorded_at`, the database's own clock_timestamp(), which no
-- caller sets). A denial over that bound is refused with SQLSTATE VRD01 and nothing of it is
-- appended; the refusal it would have recorded still stands, answered to its caller as
-- before. So no principal appends more than 60 denials a minute, whichever routine or login
-- it goes through; other principals' denials are not affected.
--
-- How: a BEFORE INSERT trigger on denials counts, among the 60 latest denials naming the
-- principal (found through a new index on principal and seq, so the count reads at most 60
-- rows however many a principal has), those whose audit event was recorded within the last
-- 60 seconds. The audit event of the row being inserted is written first by every routine and
-- is not a denial row yet, so it is not counted. Every other append is unchanged.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

CREATE INDEX denials_principal_seq ON verdict.denials (principal, seq);

CREATE FUNCTION verdict._denials_within_their_bound() RETURNS trigger
LANGUAGE plpgsql SET search_path = verdict, pg_temp AS $fn$
DECLARE
    v_since constant text := to_char((clock_timestamp() - interval '60 seconds') AT TIME ZONE 'UTC',
        'YYYY-MM-DD"T"HH24:MI:SS.US"Z"');
BEGIN
    IF (SELECT count(*) FROM (SELECT d.seq FROM verdict.denials d
                WHERE d.principal = NEW.principal ORDER BY d.seq DESC LIMIT 60) AS recent
            JOIN verdict.audit_events e ON e.seq = recent.seq
            WHERE e.recorded_at >= v_since) >= 60 THEN
        RAISE EXCEPTION 'denials of %: 60 were recorded within the last minute, so this one is not appended (the refusal stands)',
            NEW.principal USING ERRCODE = 'VRD01';
    END IF;
    RETURN NEW;
END $fn$;
REVOKE ALL ON FUNCTION verdict._denials_within_their_bound() FROM PUBLIC;

CREATE TRIGGER denials_within_their_bound BEFORE INSERT ON verdict.denials
    FOR EACH ROW EXECUTE FUNCTION verdict._denials_within_their_bound();

RESET ROLE;
