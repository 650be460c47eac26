-- verdict store, PostgreSQL schema version 42: a principal's login is given again or taken back.
--
-- principal_login (schema 7) gave a principal's database identity a login with a fresh
-- password when the principal was added (`principal add --db-login`), and nothing else could
-- touch it: a password that leaked kept opening connections until a superuser stepped in, and
-- a session opened with it stayed open. What changes:
-- - principal_login with a NULL password takes the login back: the identity may no longer log
--   in (NOLOGIN, its password removed). With a password it gives the login as before, which,
--   for a principal that had one, replaces the old password. Either way its note is appended by
--   the operator in the same transaction: `verdict.db-login/v1` for a login given,
--   `verdict.db-login-taken/v1` for one taken back (the same members), so no login changes
--   without a record of who changed it.
-- - principal_sessions_end ends every session logged in as a principal's identity, other than
--   the caller's own, and answers how many are still open (sessions it may not end). It ends
--   only the sessions of a login taken back (NOLOGIN; 55000 otherwise), so an operator's own
--   login cannot use it to cut a principal off without a note on record. The store calls it
--   once the taking back has committed, and gives a login in use again only in three steps:
--   taken back, its sessions ended, given with the new password. A session opened with the old
--   password could otherwise set a password of its own (any role may change its own) between
--   the new password's commit and the end of its sessions; a role that may not log in cannot
--   make itself one that may. It makes the checks principal_login makes
--   first (its text is taken from that routine): the identity check, the refusals of the
--   engine's identity and the system role, an operator only, a stored principal. Ending
--   another login's session needs the owner to hold pg_signal_backend, which schema 35 grants
--   where the migrating login may; without it the sessions stay open and the count says so.
--
-- How: principal_login is patched where each of two markers occurs exactly once; the new
-- routine is built from principal_login's text up to its password check, so both share their
-- checks word for word.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

-- The note of a login given or taken back, appended to the requests table by the operator,
-- through the table's own write routine (so the identity check and every check of a body
-- apply). Members in canonical order; strings written by to_json, which escapes as RFC 8785
-- does.
CREATE FUNCTION verdict._note_login(p_operator text, p_name text, p_db_role text,
    p_taken boolean) RETURNS void
LANGUAGE plpgsql SET search_path = verdict, pg_temp AS $$
DECLARE
    v_body text := '{"at":' || to_json(to_char(clock_timestamp() AT TIME ZONE 'UTC',
            'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))::text
        || ',"by":{"principal":' || to_json(p_operator)::text || ',"role":"operator"}'
        || ',"db_role":' || to_json(p_db_role)::text
        || ',"principal":' || to_json(p_name)::text
        || ',"schema":"' || CASE WHEN p_taken THEN 'verdict.db-login-taken/v1'
            ELSE 'verdict.db-login/v1' END || '"}';
    v_digest text := verdict.row_digest('request', v_body);
    r verdict.put_result;
BEGIN
    r := verdict.put_one_verification_requests(p_operator, 'operator', v_digest, v_digest, v_body,
        NULL);
    IF r.r_inserted IS NOT TRUE THEN
        RAISE EXCEPTION 'principal %: the change of its login could not be recorded', p_name
            USING ERRCODE = '42501';
    END IF;
END $$;
REVOKE ALL ON FUNCTION verdict._note_login(text, text, text, boolean) FROM PUBLIC;

DO $make$
DECLARE
    v_def text;
    v_head text;
    v_check constant text := E'    IF p_password IS NULL OR length(p_password) < 32 THEN\n';
    v_give constant text := E'    PERFORM verdict._note_login(p_principal, p_name, v_db);\n'
        || E'    EXECUTE format(''ALTER ROLE %I LOGIN PASSWORD %L'', v_db, p_password);\n';
    v_name constant text := E'FUNCTION verdict.principal_login(p_principal text, p_role text, p_name text, p_password text)\n RETURNS text';
    v_declare constant text := E'DECLARE\n    v_db text;\n';
    v_who constant text := 'only an operator gives a principal a login, not %';
BEGIN
    v_def := pg_get_functiondef('verdict.principal_login(text, text, text, text)'::regprocedure);
    IF (length(v_def) - length(replace(v_def, v_check, ''))) / length(v_check) <> 1
        OR (length(v_def) - length(replace(v_def, v_give, ''))) / length(v_give) <> 1
        OR (length(v_def) - length(replace(v_def, v_name, ''))) / length(v_name) <> 1
        OR (length(v_def) - length(replace(v_def, v_declare, ''))) / length(v_declare) <> 1
        OR (length(v_def) - length(replace(v_def, v_who, ''))) / length(v_who) <> 1 THEN
        RAISE EXCEPTION 'principal_login is not the routine schema 41 left';
    END IF;
    -- Everything before the password check: the identity check, the refusals, an operator
    -- only, a stored principal (v_db its identity).
    v_head := substr(v_def, 1, position(v_check IN v_def) - 1);

    EXECUTE replace(replace(v_def, v_check,
            E'    IF p_password IS NOT NULL AND length(p_password) < 32 THEN\n'),
        v_give, $give$    PERFORM verdict._note_login(p_principal, p_name, v_db, p_password IS NULL);
    IF p_password IS NULL THEN
        EXECUTE format('ALTER ROLE %I NOLOGIN PASSWORD NULL', v_db);
    ELSE
        EXECUTE format('ALTER ROLE %I LOGIN PASSWORD %L', v_db, p_password);
    END IF;
$give$);

    v_head := replace(replace(replace(v_head, v_name,
                E'FUNCTION verdict.principal_sessions_end(p_principal text, p_role text, p_name text)\n RETURNS integer'),
            v_declare, E'DECLARE\n    v_db text;\n    v_pid integer;\n    v_round integer;\n    v_left integer;\n'),
        v_who, 'only an operator ends the sessions of a principal login, not %');
    EXECUTE v_head || $end$    IF (SELECT r.rolcanlogin FROM pg_catalog.pg_roles r WHERE r.rolname = v_db) THEN
        RAISE EXCEPTION 'principal %: its login is in use; only the sessions of a login taken back are ended',
            p_name USING ERRCODE = '55000';
    END IF;
    -- Twice, a moment apart: a backend that authenticated just before the login was taken
    -- back may show in the activity only a moment later. The activity is a snapshot kept for
    -- the transaction, so it is read afresh each time.
    FOR v_round IN 1..2 LOOP
        PERFORM pg_catalog.pg_stat_clear_snapshot();
        FOR v_pid IN SELECT a.pid FROM pg_catalog.pg_stat_activity a
            WHERE a.usename = v_db AND a.pid <> pg_catalog.pg_backend_pid() LOOP
            BEGIN
                PERFORM pg_catalog.pg_terminate_backend(v_pid, 5000);
            EXCEPTION WHEN insufficient_privilege THEN
                -- Not the owner's to end: counted below as still open.
                NULL;
            END;
        END LOOP;
        IF v_round = 1 THEN
            PERFORM pg_catalog.pg_sleep(0.1);
        END IF;
    END LOOP;
    PERFORM pg_catalog.pg_stat_clear_snapshot();
    SELECT count(*) INTO v_left FROM pg_catalog.pg_stat_activity a
        WHERE a.usename = v_db AND a.pid <> pg_catalog.pg_backend_pid();
    RETURN v_left;
END $function$
$end$;
END $make$;

DROP FUNCTION verdict._note_login(text, text, text);
REVOKE ALL ON FUNCTION verdict.principal_sessions_end(text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION verdict.principal_sessions_end(text, text, text) TO __OPERATOR__;

RESET ROLE;
