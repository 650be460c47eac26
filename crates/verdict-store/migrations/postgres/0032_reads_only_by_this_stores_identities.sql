-- verdict store, PostgreSQL schema version 32: every row is read only by an identity this store
-- records.
--
-- Roles belong to the whole cluster, not to one database. Since schema 23 a table's read policy
-- `<table>_read_all` gave every row to the operators' group role `<prefix>operator`. Two stores
-- migrated with one role prefix share that group, so an operator's identity of one store (its
-- own login, or any role made a member of the group) read every row of the other, though the
-- other records no such principal: its writes were refused, since the routines look the
-- identity up in this store's principal_roles, but its reads were not. Migrating now refuses
-- a prefix the store of another database is marked with (the comment on `<prefix>owner`); this
-- keeps the rows closed where two stores share a prefix anyway (both migrated before the
-- mark, or a mark removed by hand).
--
-- Reads of every row by the operators' group now rest on an identity recorded here, as writes
-- do: each read policy that gives rows to that group no longer names it, and a policy
-- `<table>_read_operator` gives it every row only when the identity acting (the role set with
-- SET ROLE, else the login, as the identity check reads it) is recorded in this store's
-- principal_roles as an operator's. Any other member of the group reads nothing through it.
-- The check is a scalar subquery, evaluated once per statement rather than once per row.
-- The owner, the gate's, the system's and the engine's identities and `<prefix>service` keep
-- their policies as they were: the service login reads through its own policy, still the
-- constant `true`, which folds away the operators' check it also meets (it is a member of the
-- operators' group), so its plans do not change.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

-- Whether the identity acting is recorded in this store as an operator's.
CREATE FUNCTION verdict._reads_all_as_operator() RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = verdict, pg_temp AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM verdict.principal_roles m
        WHERE m.db_role = (CASE WHEN current_setting('role') = 'none' THEN session_user::text
                ELSE current_setting('role') END)
          AND m.principal IS NOT NULL AND m.role = 'operator');
END $$;
REVOKE ALL ON FUNCTION verdict._reads_all_as_operator() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION verdict._reads_all_as_operator() TO __OPERATOR__;

DO $policies$
DECLARE
    pol record;
    v_operator constant name := (__PREFIX_LITERAL__ || 'operator')::name;
    v_others text;
BEGIN
    FOR pol IN SELECT tablename, policyname, roles FROM pg_catalog.pg_policies
            WHERE schemaname = 'verdict' AND cmd = 'SELECT' AND v_operator = ANY (roles)
            ORDER BY tablename, policyname LOOP
        SELECT string_agg(quote_ident(r), ', ' ORDER BY r) INTO v_others
            FROM unnest(pol.roles) AS r WHERE r <> v_operator;
        IF v_others IS NULL THEN
            EXECUTE format('DROP POLICY %I ON verdict.%I', pol.policyname, pol.tablename);
        ELSE
            EXECUTE format('ALTER POLICY %I ON verdict.%I TO %s', pol.policyname, pol.tablename,
                v_others);
        END IF;
        EXECUTE format('CREATE POLICY %I ON verdict.%I FOR SELECT TO %I '
                'USING ((SELECT verdict._reads_all_as_operator()))',
            pol.tablename || '_read_operator', pol.tablename, v_operator);
    END LOOP;
    -- No read policy is left that gives rows to the operators' group but the checked one.
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_policies p
            WHERE p.schemaname = 'verdict' AND p.cmd = 'SELECT' AND v_operator = ANY (p.roles)
              AND p.policyname <> p.tablename || '_read_operator') THEN
        RAISE EXCEPTION 'a read policy gives rows to % unchecked', v_operator;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_policies p
            WHERE p.schemaname = 'verdict' AND p.policyname = 'audit_events_read_operator') THEN
        RAISE EXCEPTION 'no checked read policy for % on audit_events', v_operator;
    END IF;
END $policies$;

RESET ROLE;
