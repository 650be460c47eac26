-- verdict store, PostgreSQL schema version 29: a string's pattern is matched without a counted
-- repeat where an equal test has none.
--
-- The schema checks of version 24 match every string that has a pattern with that pattern, as
-- written: a digest with '^sha256:[0-9a-f]{64}$', an id with '^[a-z0-9][a-z0-9._-]{0,127}$'.
-- PostgreSQL's regular expressions build the states of their automaton again in every match,
-- and a counted repeat is that many states: matching one digest cost about 19 microseconds,
-- one id about 12, against 2 and under 1 for the same test written with '*' and the string's
-- length. A piece of check evidence holds three digests and two ids, so these matches were most
-- of what its schema check cost (about 110 microseconds per append in a transaction of its own).
--
-- Now a pattern of the form ^A..A X{m,n} B..B$, where each A and B is one character (a literal,
-- an escaped punctuation character, '.' or a bracket class) and X is one such atom with any one
-- quantifier ({n}, {m,n}, {m,}, *, + or ?), is matched as
--     length(s) BETWEEN k + m AND k + n AND s ~ '^A..A X* B..B$'
-- with k the number of single-character atoms: as every other atom takes exactly one character,
-- the star takes exactly length(s) - k, so the two tests accept the same strings. Any other
-- pattern (groups, alternatives, more than one repeat, a zero-width escape) is matched as
-- written. _pattern_sql makes the test; a differential test holds it to the pattern over
-- generated strings around every bound.
--
-- _conforms_sql is rewritten from its own current definition with the one line that wrote the
-- pattern test changed, and the seven _body_conforms_<table> functions are made again from it,
-- as version 24 made them; the routines call them by name, so nothing else changes. What is
-- stored and what is refused, and every message, stay the same.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

-- The SQL test that `p_value` (an expression of type text) matches `p_pattern`, with no counted
-- repeat when the pattern has the form above; otherwise the match as written.
CREATE FUNCTION verdict._pattern_sql(p_value text, p_pattern text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT SET search_path = verdict, pg_temp AS $body$
DECLARE
    -- One character: a bracket class (no escape or bracket inside), an escaped character that
    -- is not a letter or digit (so not \d, \b, \m, \y or another class or zero-width escape),
    -- '.', or a character with no meaning of its own.
    c_atom constant text := '(\[\^?\]?[^]\\[]*\]|\\[^A-Za-z0-9]|[^][\\^$.|?*+(){}]|\.)';
    c_quantifier constant text := '(\{[0-9]+\}|\{[0-9]+,[0-9]*\}|[*+?])?';
    v_inner text;
    v_parts text[];
    v_rest text;
    v_star text := '';
    v_fixed integer := 0;
    v_min integer;
    v_max integer;
    v_repeats integer := 0;
BEGIN
    IF left(p_pattern, 1) <> '^' OR right(p_pattern, 1) <> '$' OR right(p_pattern, 2) = '\$' THEN
        RETURN format('(%s ~ %L)', p_value, p_pattern);
    END IF;
    v_inner := substr(p_pattern, 2, length(p_pattern) - 2);
    v_rest := v_inner;
    WHILE v_rest <> '' LOOP
        v_parts := regexp_match(v_rest, '^' || c_atom || c_quantifier);
        IF v_parts IS NULL THEN
            RETURN format('(%s ~ %L)', p_value, p_pattern);
        END IF;
        v_rest := substr(v_rest, length(v_parts[1]) + coalesce(length(v_parts[2]), 0) + 1);
        IF v_parts[2] IS NULL THEN
            v_fixed := v_fixed + 1;
            v_star := v_star || v_parts[1];
            CONTINUE;
        END IF;
        v_repeats := v_repeats + 1;
        IF v_repeats > 1 THEN
            RETURN format('(%s ~ %L)', p_value, p_pattern);
        END IF;
        v_star := v_star || v_parts[1] || '*';
        CASE
            WHEN v_parts[2] = '*' THEN v_min := 0; v_max := NULL;
            WHEN v_parts[2] = '+' THEN v_min := 1; v_max := NULL;
            WHEN v_parts[2] = '?' THEN v_min := 0; v_max := 1;
            WHEN v_parts[2] ~ '^\{[0-9]+\}$' THEN
                v_min := substring(v_parts[2] FROM '[0-9]+')::integer;
                v_max := v_min;
            ELSE
                v_min := substring(v_parts[2] FROM '^\{([0-9]+),')::integer;
                v_max := nullif(substring(v_parts[2] FROM ',([0-9]*)\}$'), '')::integer;
        END CASE;
    END LOOP;
    IF v_repeats = 0 OR v_max < v_min THEN
        RETURN format('(%s ~ %L)', p_value, p_pattern);
    END IF;
    RETURN format('(length(%1$s) %2$s AND %1$s ~ %3$L)', p_value,
        CASE WHEN v_max IS NULL THEN '>= ' || (v_fixed + v_min)
            ELSE format('BETWEEN %s AND %s', v_fixed + v_min, v_fixed + v_max) END,
        '^' || v_star || '$');
END $body$;
REVOKE ALL ON FUNCTION verdict._pattern_sql(text, text) FROM PUBLIC;

DO $make$
DECLARE
    v_def text;
    v_old constant text := $old$t := t || format('(%s #>> ''{}'') ~ %L', p_v, p_schema ->> 'pattern');$old$;
    v_new constant text := $new$t := t || verdict._pattern_sql(format('(%s #>> ''{}'')', p_v), p_schema ->> 'pattern');$new$;
    v_code text;
    t record;
BEGIN
    v_def := pg_get_functiondef('verdict._conforms_sql(jsonb, jsonb, text, integer)'::regprocedure);
    IF (length(v_def) - length(replace(v_def, v_old, ''))) / length(v_old) <> 1 THEN
        RAISE EXCEPTION '_conforms_sql: the pattern test occurs % times, not once',
            (length(v_def) - length(replace(v_def, v_old, ''))) / length(v_old);
    END IF;
    EXECUTE replace(v_def, v_old, v_new);

    -- As version 24 made them, from the new _conforms_sql.
    FOR t IN SELECT * FROM (VALUES
        ('subjects', 'subject', NULL),
        ('policies', 'policy', NULL),
        ('check_evidence', 'evidence', NULL),
        ('verification_results', 'verification', NULL),
        ('findings', 'bundle', 'Finding'),
        ('human_decisions', 'bundle', 'HumanDecision'),
        ('gate_decisions', 'decision', NULL)
    ) AS v(tbl, schema_name, def) LOOP
        v_code := verdict._conforms_plsql(CASE WHEN t.def IS NULL
                THEN verdict._stored_form(verdict._contract_schema(t.schema_name))
                ELSE jsonb_build_object('$ref', '#/$defs/' || t.def) END,
            verdict._stored_form(verdict._contract_schema(t.schema_name)), 'p_doc', 1);
        EXECUTE format($f$CREATE OR REPLACE FUNCTION verdict.%I(p_doc jsonb) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE STRICT SET search_path = verdict, pg_temp AS $body$
DECLARE%s
BEGIN
%sRETURN true;
END $body$$f$, '_body_conforms_' || t.tbl,
            (SELECT coalesce(string_agg(format(E'\n    %s text;', k), '' ORDER BY k), '')
                FROM (SELECT DISTINCT m[1] AS k FROM regexp_matches(v_code, 'FOR (k[0-9]+) IN SELECT', 'g') AS m) AS ks),
            v_code);
    END LOOP;
END $make$;

RESET ROLE;
