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
--
-- How: each routine's text is patched where a marker occurs exactly as often as expected.

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

RESET ROLE;
