-- verdict store, PostgreSQL schema version 16: a batch's shared work done once per batch.
--
-- Since schema version 13 the benchmark's writer is a real runner (its own identity, a write
-- grant on the execution), and a batch of 1,000 records paid for each record what it shares
-- with the others: the lookup of the chain's head, the lookup of its own key even when none of
-- the batch's keys was stored, and the whole grant check (the subject, the writer's grants,
-- their revocations and the store's clock) for every record about the same subject. What
-- changes, in put_<table> (records in arrays) of the tables listed below:
-- - The head of the audit chain is read once, after the chain lock is taken. Under that lock
--   only this call appends to the chain, so each event's hash, returned by its INSERT, is the
--   next event's previous hash and the next sequence number is one more: exactly what the
--   per-record lookup read back.
-- - Whether any key of the call is stored already, or any key occurs twice in it, is asked once,
--   under the lock (one index probe per key in one statement). Only then does each record look
--   its key up, as before; otherwise none is stored, and none can be stored by anyone else
--   while the lock is held. The key's unique index stays the last word either way.
-- - When no key is stored or repeated, each record's event hash is computed in the loop (by the
--   same expression) and, once every record has passed its checks, all the call's events and
--   rows are appended by two set-based INSERTs, in the records' order, instead of two INSERTs
--   per record. The rows' derived columns read each record's parsed body, kept from the loop.
-- - The grant check (subjects, check evidence and human decisions) runs for the first record
--   of each subject (for subjects: of each execution and mission) in a call, and again whenever
--   the subject changes; a record about the subject just checked is not checked again. What
--   the check depends on cannot change within the call: the principal and role are the call's,
--   the subject is append-only, and the call holds one transaction with one audit time for all
--   its records. A grant revoked or expiring while a batch runs is therefore judged at the
--   moment the batch first checked it, as all of the batch's events are recorded at one time.
-- The single-record routines (put_one_<table>) are left as they are. Reading the acting role
-- from a variable instead of current_setting('role') was tried there and set aside: the
-- planner then folds the role into a custom plan of the grant check that looks cheaper than the
-- generic one, and plans that statement again on every call, which cost more than it saved.
-- Unchanged: every check of a record (bounds, digest, canonical form, key, required members,
-- the writer's claims) still runs for every record, in the same order, with the same errors;
-- the identity and role checks still run once per call before anything else; a record whose
-- key is stored returns the stored row and appends nothing; a refusal of any record refuses
-- the whole call.
--
-- Redefined (CREATE OR REPLACE, keeping grants, owner and settings): put_<table> of principals,
-- grants, grant_revocations, subjects, policies, check_evidence, verification_results,
-- findings, human_decisions and denials. The routines of verifier runs,
-- verification requests, run events, gate decisions and gate evaluations, and every
-- put_one_<table>, are left as they are.
-- Every marker spliced at must occur exactly once in the routine's current text.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

-- Where `p_marker` occurs in `p_def`, which it must exactly once. Used by this migration only,
-- and dropped at its end.
CREATE FUNCTION verdict._once(p_sig text, p_def text, p_marker text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_hits integer := (length(p_def) - length(replace(p_def, p_marker, ''))) / length(p_marker);
BEGIN
    IF v_hits <> 1 THEN
        RAISE EXCEPTION '%: % occurs % times, not once', p_sig, p_marker, v_hits;
    END IF;
    RETURN position(p_marker IN p_def);
END $$;

DO $make$
DECLARE
    t record;
    v_sig text;
    v_def text;
    v_hits integer;
    v_marker text;
    v_pair text[];
    v_from integer;
    v_to integer;
    v_audit text;
    v_hash text;
    v_row text;
    v_cols text;
    v_vals text;
    v_returning text;
BEGIN
    FOR t IN SELECT * FROM (VALUES
        ('principals', NULL),
        ('grants', NULL),
        ('grant_revocations', NULL),
        ('subjects', $k$jsonb_build_array(v_doc #>> '{execution,id}', v_doc ->> 'mission')::text$k$),
        ('policies', NULL),
        ('check_evidence', $k$v_doc ->> 'subject_digest'$k$),
        ('verification_results', NULL),
        ('findings', NULL),
        ('human_decisions', $k$v_doc ->> 'subject_digest'$k$),
        ('denials', NULL)
    ) AS v(name, grant_key) LOOP
        -- The routine for records in arrays.
        v_sig := format('verdict.put_%s(text, text, text[], text[], text[], text[])', t.name);
        v_def := pg_get_functiondef(v_sig::regprocedure);
        FOR v_pair IN SELECT ARRAY[m, r] FROM (VALUES
            -- Two more variables.
            (E'    v_doc jsonb;\nBEGIN\n',
             E'    v_doc jsonb;\n    v_lookup boolean;\n    v_granted text;\n    a_seq bigint[];\n    a_prev text[];\n'
                 || E'    a_hash text[];\n    a_doc jsonb[];\nBEGIN\n'),
            -- The head, and whether any key may be stored, once, under the lock.
            (E'    FOR i IN 1 .. v_n LOOP\n',
             format(E'    -- The head of the chain, read once: under the chain lock only this call appends to it.\n'
                 || E'    SELECT e.seq + 1, e.hash INTO v_seq, v_prev\n'
                 || E'        FROM verdict.audit_events e ORDER BY e.seq DESC LIMIT 1;\n'
                 || E'    IF NOT FOUND THEN\n'
                 || E'        v_seq := 1;\n'
                 || E'        v_prev := ''sha256:'' || repeat(''0'', 64);\n'
                 || E'    END IF;\n'
                 || E'    -- Whether a record must look its key up: some key of the call is stored, or occurs twice.\n'
                 || E'    v_lookup := EXISTS (SELECT 1 FROM verdict.%I k_t WHERE k_t.key = ANY (p_keys))\n'
                 || E'        OR (SELECT count(DISTINCT k_k) FROM unnest(p_keys) AS k_k) <> v_n;\n'
                 || E'    FOR i IN 1 .. v_n LOOP\n', t.name)),
            -- The stored row of the key, when one may be stored; no head lookup.
            (E'        -- The stored row of the key, if there is one, and the head of the chain.\n        SELECT ',
             E'        -- The stored row of the key, if the call''s keys may hold one; the head is carried.\n'
                 || E'        r_seq := NULL;\n        IF v_lookup THEN\n            SELECT '),
            (format(E', coalesce(h.seq, 0) + 1,\n                coalesce(h.hash, ''sha256:'' || repeat(''0'', 64))\n'
                 || E'            INTO r_seq, r_digest, r_body, r_counted, v_seq, v_prev\n'
                 || E'            FROM (SELECT 1) one\n'
                 || E'            LEFT JOIN verdict.%I t ON t.key = p_keys[i]\n'
                 || E'            LEFT JOIN LATERAL (\n'
                 || E'                SELECT e.seq, e.hash FROM verdict.audit_events e ORDER BY e.seq DESC LIMIT 1\n'
                 || E'            ) h ON true;\n', t.name),
             format(E'\n                INTO r_seq, r_digest, r_body, r_counted\n'
                 || E'                FROM verdict.%I t WHERE t.key = p_keys[i];\n'
                 || E'        END IF;\n', t.name)),
            -- The event's hash is the next one's previous hash.
            (E'p_digests[i], p_correlations[i], v_at);\n',
             E'p_digests[i], p_correlations[i], v_at)\n        RETURNING hash INTO v_prev;\n'),
            (E'        RETURN NEXT;\n    END LOOP;\n',
             E'        RETURN NEXT;\n        v_seq := v_seq + 1;\n    END LOOP;\n')
        ) AS s(m, r) LOOP
            v_marker := v_pair[1];
            v_hits := (length(v_def) - length(replace(v_def, v_marker, ''))) / length(v_marker);
            IF v_hits <> 1 THEN
                RAISE EXCEPTION '%: % occurs % times, not once', v_sig, v_marker, v_hits;
            END IF;
            v_def := replace(v_def, v_marker, v_pair[2]);
        END LOOP;

        -- The audit event: appended by its own statement when a record looks its key up, else
        -- its hash is computed in the loop and the event appended with the others after it.
        v_from := verdict._once(v_sig, v_def,
            E'        INSERT INTO verdict.audit_events (seq, prev_hash, hash, event_type, tbl, key, principal,\n');
        v_marker := E'p_digests[i], p_correlations[i], v_at)\n        RETURNING hash INTO v_prev;\n';
        v_to := verdict._once(v_sig, v_def, v_marker) + length(v_marker);
        v_audit := substr(v_def, v_from, v_to - v_from);
        v_hash := substring(v_audit FROM E'VALUES \\(v_seq, v_prev, (.*),\n            ''append'', ');
        IF v_from > v_to OR v_hash IS NULL OR position('''append''' IN v_hash) > 0 THEN
            RAISE EXCEPTION '%: the audit event''s hash is not where it was', v_sig;
        END IF;
        v_def := substr(v_def, 1, v_from - 1)
            || E'        IF v_lookup THEN\n' || v_audit
            || E'        ELSE\n'
            || E'            -- Appended with the call''s other events after the loop; its hash as above.\n'
            || E'            a_seq := a_seq || v_seq;\n'
            || E'            a_prev := a_prev || v_prev;\n'
            || E'            v_prev := ' || v_hash || E';\n'
            || E'            a_hash := a_hash || v_prev;\n'
            || E'        END IF;\n'
            || substr(v_def, v_to);

        -- The row, likewise: with the other rows after the loop unless the record looked its
        -- key up. The columns derived from the body read the record's parsed body, kept.
        v_from := verdict._once(v_sig, v_def,
            format(E'        INSERT INTO verdict.%I (seq, key, digest, body', t.name));
        v_marker := E'        RETURN NEXT;\n        v_seq := v_seq + 1;\n    END LOOP;\n';
        v_to := verdict._once(v_sig, v_def, v_marker);
        v_row := substr(v_def, v_from, v_to - v_from);
        v_cols := substring(v_row FROM E'^        INSERT INTO verdict\\.[a-z_]+ \\(seq, key, digest, body([^)]*)\\)\n');
        v_vals := substring(v_row FROM E'\n        VALUES \\(v_seq, p_keys\\[i\\], p_digests\\[i\\], p_bodies\\[i\\](.*)\\)\n        RETURNING ');
        v_returning := substring(v_row FROM E'\n        RETURNING (.*) INTO r_seq, r_digest, r_body, r_inserted, r_counted;\n$');
        IF v_from > v_to OR v_cols IS NULL OR v_vals IS NULL OR v_returning IS NULL
            OR v_vals ~ '\[i\]|\mp_' THEN
            RAISE EXCEPTION '%: the row''s INSERT is not as it was', v_sig;
        END IF;
        v_def := substr(v_def, 1, v_from - 1)
            || E'        IF v_lookup THEN\n' || v_row
            || E'            RETURN NEXT;\n'
            || E'        ELSE\n'
            || E'            a_doc := a_doc || v_doc;\n'
            || E'        END IF;\n'
            || E'        v_seq := v_seq + 1;\n'
            || E'    END LOOP;\n'
            || E'    -- No key of the call was stored: the events and rows of all its records, in their order.\n'
            || E'    IF NOT v_lookup AND v_n > 0 THEN\n'
            || E'        INSERT INTO verdict.audit_events (seq, prev_hash, hash, event_type, tbl, key, principal,\n'
            || E'            role, payload_digest, correlation, recorded_at)\n'
            || format(E'        SELECT u.s, u.p, u.h, ''append'', %L, u.k, p_principal, p_role, u.d, u.c, v_at\n', t.name)
            || E'            FROM unnest(a_seq, a_prev, a_hash, p_keys, p_digests, p_correlations) AS u(s, p, h, k, d, c);\n'
            || E'        RETURN QUERY WITH ins AS (\n'
            || format(E'            INSERT INTO verdict.%I (seq, key, digest, body%s)\n', t.name, v_cols)
            || E'            SELECT u.s, u.k, u.d, u.b' || replace(v_vals, 'v_doc', 'u.v_doc') || E'\n'
            || E'                FROM unnest(a_seq, p_keys, p_digests, p_bodies, a_doc) AS u(s, k, d, b, v_doc)\n'
            || E'            RETURNING ' || v_returning || E'\n'
            || E'        ) SELECT * FROM ins ORDER BY 1;\n'
            || E'    END IF;\n'
            || substr(v_def, v_to + length(v_marker));

        -- The grant check, once per subject (or execution and mission) of consecutive records:
        -- a record about the subject just checked skips the whole statement, not only its lookups.
        IF t.grant_key IS NOT NULL THEN
            v_marker := E'\n        AND NOT (current_setting(''role'') = ''none'' AND coalesce((SELECT gr_r.rolsuper\n';
            v_from := verdict._once(v_sig, v_def, v_marker);
            v_audit := substr(v_def, 1, v_from - 1);
            v_from := length(v_audit) - position(E'\n' IN reverse(v_audit)) + 2;
            IF substr(v_def, v_from, 18) <> '    IF p_role = AN' THEN
                RAISE EXCEPTION '%: the grant check does not start where it did', v_sig;
            END IF;
            v_marker := E'holds no write grant in force on its execution'', p_keys[i], p_principal\n'
                || E'            USING ERRCODE = ''42501'';\n    END IF;\n';
            v_to := verdict._once(v_sig, v_def, v_marker) + length(v_marker);
            v_def := substr(v_def, 1, v_from - 1)
                || format(E'    IF v_granted IS NULL OR (%s) IS NULL OR v_granted <> (%s) THEN\n',
                    t.grant_key, t.grant_key)
                || substr(v_def, v_from, v_to - v_from)
                || format(E'    v_granted := %s;\n    END IF;\n', t.grant_key)
                || substr(v_def, v_to);
        END IF;
        EXECUTE v_def;
    END LOOP;
END $make$;
DROP FUNCTION verdict._once(text, text, text);

RESET ROLE;
