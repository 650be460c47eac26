-- verdict store, PostgreSQL schema version 35: the database holds the rules of authority that
-- were the engine's alone.
--
-- - The last operator is never locked out. A token revocation (a change of token naming no
--   new hash) of an operator is refused by put_one_credential_changes, under the chain lock,
--   when afterwards no operator would hold a token: nobody could act as an operator again,
--   and `init` refuses a store that has principals. The refusal names the operator (SQLSTATE
--   VRA01, which the store reads as a conflict) and nothing is appended, whoever calls the
--   routine, the operator's own login included. A rotation always leaves a token and is never
--   refused for this. Nothing else removes an operator: principals are append-only (no role
--   changes, no removal), an operator's authority rests on its role, not on a grant, and a
--   login given to a principal is only added.
-- - A new principal's name is held by the database as by the engine (principals_name_held, a
--   trigger before each row of verdict.principals, so put_principals and put_one_principals
--   both meet it): only ASCII letters, digits and `. _ - @ +`, and no look-alike of a principal
--   already stored under another name, two names looking alike when their skeletons
--   (verdict._name_skeleton, the same function as verdict-core's `name_skeleton`) are equal:
--   `0perator` beside `operator`, `admln` beside `admin`, `ci_runner` beside `ci-runner`. A
--   refusal names why, and the stored principal it reads like (SQLSTATE 22023); the caller's
--   transaction is aborted and nothing is appended. Names already stored are read as they are;
--   a superuser connection with no role set is not bound, as by the triggers of schema 21.
-- - A grant expires at the store's time (verdict._store_now(), schema 17) on both kinds of
--   store. Every test of a grant in force in the routines and triggers (the checks written into
--   them by schemas 6, 7, 11, 14 and 21, and verdict._grant_in_force of schema 23, which the
--   write routines and the read policies share) compared the expiry with the database's clock
--   and, on a store that keeps a manual clock, took every grant as unexpired, while the engine
--   applied the expiry at the store's manual time: a login could write under a grant the
--   engine held expired. Each now compares it with the store's time; a write on a manual store
--   whose transaction names no time is refused (42501). A read on such a store whose
--   transaction names no time (reads outside the store's write transactions) applies no
--   expiry, as before: a login there may name any time anyway. A revocation on record revokes
--   whatever time either carries, as the engine reads it; a grant has no start.
-- - A session idle in a transaction that holds the chain's lock (schema 28) no longer stalls
--   every write until an operator ends it. take_chain_lock waits at most a second at a time and
--   between waits calls _end_idle_chain_holder, which ends (pg_terminate_backend) any other
--   session of this database holding the lock while idle in a transaction, aborted or not, for
--   more than 5 seconds; its transaction is rolled back and the writer takes the lock. A session
--   running a statement is never ended, nor a superuser's. Both run with the caller's rights,
--   the owner's inside the routines, and no login may call them. Ending another login's session
--   needs the owner to be a member of pg_signal_backend, and seeing that it is idle, of
--   pg_read_all_stats: the migrating login grants both to the owner when it may (a superuser,
--   or CREATEROLE on PostgreSQL 15), else a notice says so and writers wait as before.
--
-- How: a routine's text is patched where a marker occurs exactly as often as expected (the
-- token routine), or where the expiry test of the manual clock occurs (every routine holding
-- it, found by its pattern); the functions changed whole are replaced with CREATE OR REPLACE,
-- which keeps their owner, privileges and triggers.

-- Run as the migrating login, before acting as the owner: the routines' owner may end a
-- session that holds the chain idle (below) only as a member of pg_signal_backend, and see
-- whether it is idle only as a member of pg_read_all_stats. A superuser may grant both, and so
-- may a login with CREATEROLE on PostgreSQL 15; from 16 on only a login holding them with the
-- admin option. Without them the store still works as before: a writer waits for the holder.
DO $signal$
BEGIN
    EXECUTE format('GRANT pg_signal_backend, pg_read_all_stats TO %I', __PREFIX_LITERAL__ || 'owner');
EXCEPTION WHEN insufficient_privilege OR invalid_grant_operation THEN
    RAISE NOTICE 'the routines'' owner % is not granted pg_signal_backend and pg_read_all_stats (%): a session idle in a transaction that holds the chain''s lock is not ended by the store; grant both to it as a superuser',
        __PREFIX_LITERAL__ || 'owner', SQLERRM;
END $signal$;

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

DO $make$
DECLARE
    p record;
    v_def text;
    v_hits integer;
BEGIN
    FOR p IN SELECT * FROM (VALUES
        -- After the chain lock and the check that the change is not stored already: a
        -- revocation leaving no operator holding a token is refused.
        ('verdict.put_one_credential_changes(text, text, text, text, text, text)',
            $m$    IF v_n <> 1 + (SELECT count(*) FROM verdict.credential_changes c WHERE c.principal = v_whose) THEN$m$,
            $r$    IF v_hash IS NULL
        AND EXISTS (SELECT 1 FROM verdict.principals lo_p
            WHERE lo_p.key = v_whose AND lo_p.role = 'operator')
        AND NOT EXISTS (SELECT 1 FROM verdict.principals lo_o
            WHERE lo_o.role = 'operator' AND lo_o.key <> v_whose
              AND (NOT EXISTS (SELECT 1 FROM verdict.credential_changes lo_c
                      WHERE lo_c.principal = lo_o.key)
                OR EXISTS (SELECT 1 FROM verdict.credential_changes lo_c
                      WHERE lo_c.principal = lo_o.key AND lo_c.token_sha256 IS NOT NULL
                        AND NOT EXISTS (SELECT 1 FROM verdict.credential_changes lo_d
                            WHERE lo_d.principal = lo_c.principal AND lo_d.n > lo_c.n)))) THEN
        RAISE EXCEPTION 'revoking the token of operator % would leave no operator holding a token, and nobody could act as an operator again; rotate it instead, or give another operator a token first',
            to_json(v_whose)::text USING ERRCODE = 'VRA01';
    END IF;
    IF v_n <> 1 + (SELECT count(*) FROM verdict.credential_changes c WHERE c.principal = v_whose) THEN$r$,
            1)
    ) AS v(signature, marker, replacement, expected) LOOP
        v_def := pg_get_functiondef(p.signature::regprocedure);
        v_hits := (length(v_def) - length(replace(v_def, p.marker, ''))) / length(p.marker);
        IF v_hits <> p.expected THEN
            RAISE EXCEPTION '%: % occurs % times, not %', p.signature, p.marker, v_hits,
                p.expected;
        END IF;
        EXECUTE replace(v_def, p.marker, p.replacement);
    END LOOP;
END $make$;

-- A new principal's name: ASCII letters, digits and `. _ - @ +` only, and no look-alike of a
-- principal already stored. The skeleton is verdict-core's `name_skeleton`, written in SQL:
-- ASCII letters lowercased (`I` read as `l`), `0` as `o`, `1`, `i` and `|` as `l`, `5` as `s`,
-- `_` and `-` as `.`, every other character as it is; then `rn` as `m`, then `vv` as `w`, left
-- to right without overlap (what `replace` does on both sides).
-- PL/pgSQL, as schema 25 has every function the append path calls with a fixed search_path,
-- so that the trigger does not plan it again in every transaction.
CREATE FUNCTION verdict._name_skeleton(p_name text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = verdict, pg_temp AS $$
BEGIN
    RETURN replace(replace(translate(p_name,
        'ABCDEFGHIJKLMNOPQRSTUVWXYZ01i|5_-',
        'abcdefghljklmnopqrstuvwxyzollls..'), 'rn', 'm'), 'vv', 'w');
END $$;
REVOKE ALL ON FUNCTION verdict._name_skeleton(text) FROM PUBLIC;

CREATE FUNCTION verdict._principal_name_held() RETURNS trigger
LANGUAGE plpgsql SET search_path = verdict, pg_temp AS $$
DECLARE
    v_skeleton text;
    v_other text;
BEGIN
    IF verdict._unbound_superuser() THEN
        RETURN NEW;
    END IF;
    IF NEW.key !~ '^[ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._@+-]+$' THEN
        RAISE EXCEPTION 'principal name %: a principal''s name may hold only ASCII letters, digits, ''.'', ''_'', ''-'', ''@'' and ''+'', so that it cannot pass for another',
            to_json(NEW.key)::text USING ERRCODE = '22023';
    END IF;
    v_skeleton := verdict._name_skeleton(NEW.key);
    SELECT p.key INTO v_other FROM verdict.principals p
        WHERE p.key <> NEW.key AND verdict._name_skeleton(p.key) = v_skeleton
        ORDER BY p.seq LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'principal name %: it reads like principal %, already stored (both read as %)',
            to_json(NEW.key)::text, to_json(v_other)::text, to_json(v_skeleton)::text
            USING ERRCODE = '22023';
    END IF;
    RETURN NEW;
END $$;
REVOKE ALL ON FUNCTION verdict._principal_name_held() FROM PUBLIC;

-- Before the row, so a refused name stops the routine's statement and with it the audit event
-- written just before (the caller's transaction is aborted; nothing is appended).
CREATE TRIGGER principals_name_held BEFORE INSERT ON verdict.principals
    FOR EACH ROW EXECUTE FUNCTION verdict._principal_name_held();

-- Grants expire at the store's time. Every test of a grant in force written into a routine or a
-- trigger compared its expiry with clock_timestamp() and, on a store that keeps a manual clock,
-- took any grant as unexpired; each now compares it with verdict._store_now(), on both kinds of
-- store (on a manual store, a write whose transaction names no time is refused, 42501).
DO $make$
DECLARE
    r record;
    v_def text;
    v_new text;
    v_pattern constant text := 'clock_timestamp\(\)\s+OR EXISTS \(SELECT 1 FROM verdict\.pointers (\w+) WHERE \1\.pointer = ''clock''\s+AND \1\.name = ''store'' AND \1\.value = ''\{"clock":"manual"\}''\)';
    v_done integer := 0;
BEGIN
    FOR r IN SELECT f.oid FROM pg_catalog.pg_proc f
            WHERE f.pronamespace = 'verdict'::regnamespace
              AND f.prosrc ~ v_pattern
              AND f.proname <> '_grant_in_force' LOOP
        v_def := pg_get_functiondef(r.oid);
        v_new := regexp_replace(v_def, v_pattern, 'verdict._store_now()', 'g');
        IF v_new = v_def THEN
            RAISE EXCEPTION '%: nothing replaced', r.oid::regprocedure;
        END IF;
        EXECUTE v_new;
        v_done := v_done + 1;
    END LOOP;
    IF v_done = 0 THEN
        RAISE EXCEPTION 'no routine tested a grant''s expiry on the database''s clock';
    END IF;
END $make$;

-- The test of schema 23 that the read policies and the write routines share: the write case
-- at the store's time, always; a read at the store's time too, except on a manual store whose
-- transaction names no time (a read outside the store's write transactions), where, as before,
-- no expiry is applied: a login there may name any time it likes anyway.
CREATE OR REPLACE FUNCTION verdict._grant_in_force(p_principal text, p_execution text,
    p_mission text, p_access text) RETURNS boolean
LANGUAGE plpgsql STABLE SET search_path = verdict, pg_temp AS $$
DECLARE
    v_now timestamptz;
    v_named text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM verdict.pointers c WHERE c.pointer = 'clock'
            AND c.name = 'store' AND c.value = '{"clock":"manual"}') THEN
        v_now := clock_timestamp();
    ELSE
        v_named := current_setting('verdict.manual_now', true);
        IF v_named ~ '^-?[0-9]{1,18}$' THEN
            v_now := timestamptz 'epoch' + v_named::bigint * interval '1 microsecond';
        ELSIF coalesce(v_named, '') <> '' OR p_access = 'write' THEN
            RAISE EXCEPTION 'this store keeps a manual clock and the transaction names no time on it'
                USING ERRCODE = '42501';
        END IF;
    END IF;
    RETURN EXISTS (SELECT 1 FROM verdict.grants g
            WHERE g.principal = p_principal
              AND (p_access IS NULL OR (g.body::jsonb ->> 'access') = p_access)
              AND ((g.scope_kind = 'execution' AND g.scope_id = p_execution)
                OR (p_mission IS NOT NULL AND g.scope_kind = 'mission' AND g.scope_id = p_mission))
              AND NOT EXISTS (SELECT 1 FROM verdict.grant_revocations v WHERE v.grant_id = g.key)
              AND (v_now IS NULL OR (g.body::jsonb ->> 'expires_at')::timestamptz > v_now));
END $$;

DO $check$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_proc f WHERE f.pronamespace = 'verdict'::regnamespace
            AND f.prosrc ~ '''expires_at''\)::timestamptz\s*>\s*clock_timestamp\(\)') THEN
        RAISE EXCEPTION 'a routine still tests a grant''s expiry on the database''s clock';
    END IF;
END $check$;

-- A session idle in a transaction that holds the chain's lock is ended by the next writer that
-- waits for it. The routines take the lock through take_chain_lock, which now waits at most a
-- second at a time; between waits it calls _end_idle_chain_holder, which ends (with
-- pg_terminate_backend, its transaction rolled back) any other session of this database holding
-- the lock while idle in a transaction, aborted or not, for more than 5 seconds. A session
-- running a statement is never ended: the writer waits for it as before. Both run with their
-- caller's rights, which inside the write routines are the owner's; no login may call either.
CREATE FUNCTION verdict._end_idle_chain_holder() RETURNS integer
LANGUAGE plpgsql SET search_path = verdict, pg_temp AS $fn$
DECLARE
    r record;
    v_ended integer := 0;
BEGIN
    -- What pg_stat_activity shows is taken once per transaction unless cleared: a writer that
    -- waits in one transaction must see the holder's state as it is now.
    PERFORM pg_catalog.pg_stat_clear_snapshot();
    FOR r IN SELECT a.pid FROM pg_catalog.pg_locks l
            JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
            WHERE l.locktype = 'relation' AND l.granted
              AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d
                  WHERE d.datname = current_database())
              AND l.relation = 'verdict.chain_lock'::regclass
              AND l.pid <> pg_catalog.pg_backend_pid()
              AND a.state IN ('idle in transaction', 'idle in transaction (aborted)')
              AND a.state_change < clock_timestamp() - interval '5 seconds' LOOP
        BEGIN
            IF pg_catalog.pg_terminate_backend(r.pid, 5000) THEN
                v_ended := v_ended + 1;
            END IF;
        EXCEPTION WHEN insufficient_privilege THEN
            -- Not this owner's to end (a superuser's session): wait for it as before.
            NULL;
        END;
    END LOOP;
    RETURN v_ended;
END $fn$;
REVOKE ALL ON FUNCTION verdict._end_idle_chain_holder() FROM PUBLIC;

CREATE OR REPLACE FUNCTION verdict.take_chain_lock() RETURNS void
LANGUAGE plpgsql
SET search_path = verdict, pg_temp
SET lock_timeout = '1s'
AS $fn$
BEGIN
    LOOP
        BEGIN
            LOCK TABLE verdict.chain_lock IN EXCLUSIVE MODE;
            RETURN;
        EXCEPTION WHEN lock_not_available THEN
            PERFORM verdict._end_idle_chain_holder();
        END;
    END LOOP;
END
$fn$;

RESET ROLE;
