-- verdict store, PostgreSQL schema version 8: the write routines refuse a malformed body.
--
-- Until now the routines checked a body's digest and its claims about the writer, and took the
-- rest on trust from the store. A database login calling them by hand could append a body that
-- is not canonical (whitespace, members out of order, a member named twice: jsonb keeps the
-- last, so a second `produced_by` passed the writer check while the stored text said
-- otherwise), under a key the body does not derive, of any size, with audit fields (key,
-- principal, correlation, pointer names and values) of any size. Every put_<table>,
-- put_one_<table> and compare-and-set now refuses, with SQLSTATE 22023 and a message naming the
-- table, the key and what is wrong:
-- - a body over 4 MiB (4194304 bytes: the store's limit), before it is hashed or parsed;
-- - a principal that is not 1 to 256 characters, a key over 320 characters (above the longest
--   key a body derives: a pointer change's, 287), a correlation or pointer name over 256
--   characters, a pointer value over 4096 bytes;
-- - a body that is not exactly the canonical form (RFC 8785) of the JSON it parses to: the
--   canonical text is rebuilt from the parsed jsonb (members sorted by UTF-16 code units,
--   strings escaped as JCS does, numbers as ECMAScript writes them, integers only within
--   ±(2^53−1), as the store's reader allows) and compared with the body's text, which also
--   catches a duplicated member, since jsonb kept only one;
-- - a key other than the one the body derives, exactly as the store derives it: the digest for
--   documents and the store's own records kept by digest; the name, grant id or run id; run id
--   `#` n for run events; id `@` version for findings; the evaluation key for gate decisions;
--   pointer `:` revision `:` name for pointer changes;
-- - a compare-and-set whose new pointer value is not the canonical text of the change's `new`.
-- A body that is not JSON at all still fails the parse (SQLSTATE 22P02), and one whose strings
-- hold U+0000, which jsonb cannot, as before (SQLSTATE 22P05).
--
-- How: the checks are spliced into each routine around its digest check (the bounds just
-- before it, the parse and the form and key checks just after it), so they run before the
-- chain lock is taken and before a stored key is looked up. The body is parsed there once; the
-- later parse that schema 5's claim checks followed is dropped, and those checks read the same
-- parsed body. Every marker must occur exactly once in the routine it is spliced into; CREATE
-- OR REPLACE keeps each routine's grants, owner and settings. The functions below are owned by the
-- owner and executable by nobody else: only the routines call them.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

-- A number as RFC 8785 writes it (ECMAScript's Number.prototype.toString of the double the
-- number reads as), or NULL for a number verdict's reader refuses or cannot have written: an
-- integral value beyond ±(2^53−1), or a value too small to be anything but zero. The shortest
-- round-trip digits come from PostgreSQL's own float8 output, pinned to its shortest form by
-- extra_float_digits; only their layout is ECMAScript's.
CREATE FUNCTION verdict._jcs_number(p numeric) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT SET extra_float_digits = 1 SET search_path = verdict, pg_temp AS $$
DECLARE
    v_text text;
    v_mantissa text;
    v_exp integer := 0;
    v_int text;
    v_digits text;
    v_n integer;
    v_k integer;
    v_out text;
BEGIN
    IF p = trunc(p) THEN
        IF abs(p) > 9007199254740991 THEN
            RETURN NULL;
        END IF;
        RETURN trunc(p)::text;
    END IF;
    -- A fraction beyond 2^53 reads as an integral double, which the reader refuses there.
    IF abs(p) > 9007199254740992 OR abs(p) < 5e-324 THEN
        RETURN NULL;
    END IF;
    v_text := abs(p)::float8::text;
    IF position('e' IN v_text) > 0 THEN
        v_mantissa := split_part(v_text, 'e', 1);
        v_exp := split_part(v_text, 'e', 2)::integer;
    ELSE
        v_mantissa := v_text;
    END IF;
    v_int := split_part(v_mantissa, '.', 1);
    v_digits := v_int || split_part(v_mantissa, '.', 2);
    -- The value is 0.<digits> × 10^n.
    v_n := length(v_int) + v_exp - (length(v_digits) - length(ltrim(v_digits, '0')));
    v_digits := rtrim(ltrim(v_digits, '0'), '0');
    v_k := length(v_digits);
    IF v_k = 0 THEN
        RETURN NULL;
    ELSIF v_k <= v_n AND v_n <= 21 THEN
        v_out := v_digits || repeat('0', v_n - v_k);
    ELSIF 0 < v_n AND v_n <= 21 THEN
        v_out := left(v_digits, v_n) || '.' || substr(v_digits, v_n + 1);
    ELSIF -6 < v_n AND v_n <= 0 THEN
        v_out := '0.' || repeat('0', -v_n) || v_digits;
    ELSE
        v_out := left(v_digits, 1) || CASE WHEN v_k > 1 THEN '.' || substr(v_digits, 2) ELSE '' END
            || 'e' || CASE WHEN v_n - 1 >= 0 THEN '+' ELSE '-' END || abs(v_n - 1)::text;
    END IF;
    RETURN CASE WHEN p < 0 THEN '-' ELSE '' END || v_out;
END $$;

-- The order of a member name among names that may hold characters U+E000 to U+FFFF: its UTF-8
-- bytes with the lead byte of each such character raised above every lead byte of a
-- supplementary character (0xEE, 0xEF become 0xF5, 0xF6), so bytes compare as UTF-16 code
-- units do. Without such characters UTF-8 byte order already is UTF-16 order.
CREATE FUNCTION verdict._jcs_key(p text) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT SET search_path = verdict, pg_temp AS $$
    SELECT coalesce(string_agg(CASE WHEN ascii(c) BETWEEN 57344 AND 65535
            THEN set_byte(convert_to(c, 'UTF8'), 0, get_byte(convert_to(c, 'UTF8'), 0) + 7)
            ELSE convert_to(c, 'UTF8') END, ''::bytea ORDER BY i), ''::bytea)
    FROM regexp_split_to_table(p, '') WITH ORDINALITY AS s(c, i)
$$;

-- The canonical text of a JSON value. Scalars are written in place: a string or name by jsonb's
-- own escaping, which is JCS's (the two-character escapes, \u00XX in lower-case hex for the
-- other controls, everything else as it is), an integer within range as its digits. A member or
-- element with no canonical text (NULL) drops out, so the result cannot equal a body that holds
-- one. `p_remap`: order names by _jcs_key, else by their bytes.
--
-- A function call per object or array would set up a query of its own each time, which cost
-- more than the rest of an append; so the first levels are one expression of nested subqueries
-- (one subquery a level, for objects and arrays alike), built below, and only a value nested
-- deeper than that calls _jcs again. _canonical is the same expression for a whole body, with
-- the order chosen from the body's text (any name that could need the slower order holds a
-- character U+E000 to U+FFFF, which a canonical body holds as it is). The planner estimates
-- each nested subquery at a hundred rows a level, and JIT-compiling the expression for that cost
-- took a second a call: both functions run without JIT, and on a generic plan (a plan for the
-- body at hand always looked cheaper, so the expression was planned again on every call).
DO $make$
DECLARE
    -- Beyond the unrolled levels: a container calls _jcs, a scalar is written in place.
    v_scalar constant text := $scalar$CASE WHEN jsonb_typeof(@V@) = 'number' THEN CASE WHEN scale((@V@)::numeric) = 0
            AND abs((@V@)::numeric) <= 9007199254740991 THEN (@V@)::text
        ELSE verdict._jcs_number((@V@)::numeric) END
    ELSE (@V@)::text END$scalar$;
    v_expr text := $deeper$CASE WHEN jsonb_typeof(@V@) IN ('object', 'array') THEN verdict._jcs(@V@, p_remap)
    ELSE $deeper$ || v_scalar || ' END';
BEGIN
    FOR d IN REVERSE 3 .. 1 LOOP
        v_expr := replace(replace(replace(replace($level$CASE WHEN jsonb_typeof(@V@) IN ('object', 'array') THEN (
        SELECT CASE jsonb_typeof(@V@) WHEN 'object' THEN '{' ELSE '[' END
            || coalesce(string_agg(coalesce(to_json(m@D@.k)::text || ':', '') || @CHILD@, ','
                ORDER BY CASE WHEN p_remap THEN verdict._jcs_key(m@D@.k) END, m@D@.k COLLATE "C", m@D@.i), '')
            || CASE jsonb_typeof(@V@) WHEN 'object' THEN '}' ELSE ']' END
        FROM (SELECT e.key, e.value, NULL::bigint
                FROM jsonb_each(CASE jsonb_typeof(@V@) WHEN 'object' THEN @V@ ELSE '{}' END) AS e
            UNION ALL
            SELECT NULL, a.value, a.i
                FROM jsonb_array_elements(CASE jsonb_typeof(@V@) WHEN 'array' THEN @V@ ELSE '[]' END)
                WITH ORDINALITY AS a(value, i)) AS m@D@(k, v, i))
    ELSE @SCALAR@ END$level$, '@SCALAR@', v_scalar), '@CHILD@', replace(v_expr, '@V@', 'm@D@.v')), '@D@', d::text),
            '@V@', CASE WHEN d = 1 THEN 'p' ELSE '@V@' END);
    END LOOP;
    EXECUTE format($f$CREATE FUNCTION verdict._jcs(p jsonb, p_remap boolean) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT SET search_path = verdict, pg_temp SET jit = off
    SET plan_cache_mode = force_generic_plan AS $body$
BEGIN
    RETURN %s;
END $body$$f$, v_expr);
    EXECUTE format($f$CREATE FUNCTION verdict._canonical(p jsonb, p_text text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT SET search_path = verdict, pg_temp SET jit = off
    SET plan_cache_mode = force_generic_plan AS $body$
DECLARE
    p_remap boolean := octet_length(p_text) <> length(p_text) AND p_text ~ '[\uE000-\uFFFF]';
BEGIN
    RETURN %s;
END $body$$f$, v_expr);
END $make$;

-- Raises the refusal of a record whose body or audit fields are out of bounds (the routines
-- call it only when one is). `p_name` and `p_value` are a pointer's name and new value.
CREATE FUNCTION verdict._refuse_bounds(p_table text, p_principal text, p_key text, p_body text,
    p_correlation text, p_name text, p_value text) RETURNS void
LANGUAGE plpgsql SET search_path = verdict, pg_temp AS $$
DECLARE
    v_key text := coalesce(left(p_key, 80) || CASE WHEN length(p_key) > 80 THEN '...' ELSE '' END,
        'with no key');
BEGIN
    IF p_body IS NULL THEN
        RAISE EXCEPTION '% %: no body', p_table, v_key USING ERRCODE = '22023';
    END IF;
    IF octet_length(p_body) > 4194304 THEN
        RAISE EXCEPTION '% %: a body of % bytes exceeds the limit of 4194304 bytes', p_table, v_key,
            octet_length(p_body) USING ERRCODE = '22023';
    END IF;
    IF p_key IS NULL OR length(p_key) > 320 THEN
        RAISE EXCEPTION '% %: a key of % characters is not 1 to 320 characters', p_table, v_key,
            coalesce(length(p_key), 0) USING ERRCODE = '22023';
    END IF;
    IF coalesce(length(p_principal), 0) NOT BETWEEN 1 AND 256 THEN
        RAISE EXCEPTION '% %: a principal of % characters is not 1 to 256 characters', p_table,
            v_key, coalesce(length(p_principal), 0) USING ERRCODE = '22023';
    END IF;
    IF length(p_correlation) > 256 THEN
        RAISE EXCEPTION '% %: a correlation of % characters exceeds 256 characters', p_table, v_key,
            length(p_correlation) USING ERRCODE = '22023';
    END IF;
    IF p_table = 'pointer_changes' AND coalesce(length(p_name), 0) NOT BETWEEN 1 AND 256 THEN
        RAISE EXCEPTION '% %: a pointer name of % characters is not 1 to 256 characters', p_table,
            v_key, coalesce(length(p_name), 0) USING ERRCODE = '22023';
    END IF;
    IF octet_length(p_value) > 4096 THEN
        RAISE EXCEPTION '% %: a pointer value of % bytes exceeds 4096 bytes', p_table, v_key,
            octet_length(p_value) USING ERRCODE = '22023';
    END IF;
    RAISE EXCEPTION '% %: a field is out of bounds', p_table, v_key USING ERRCODE = '22023';
END $$;

REVOKE ALL ON FUNCTION verdict._jcs_number(numeric) FROM PUBLIC;
REVOKE ALL ON FUNCTION verdict._jcs_key(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION verdict._jcs(jsonb, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION verdict._canonical(jsonb, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION verdict._refuse_bounds(text, text, text, text, text, text, text) FROM PUBLIC;

DO $make$
DECLARE
    t record;
    f record;
    v_def text;
    v_before text;
    v_after text;
    v_hits integer;
    v_marker text;
BEGIN
    FOR t IN SELECT * FROM (VALUES
        ('principals', $k$CASE WHEN jsonb_typeof(v_doc -> 'name') = 'string' THEN v_doc ->> 'name' END$k$),
        ('grants', $k$CASE WHEN jsonb_typeof(v_doc -> 'grant_id') = 'string' THEN v_doc ->> 'grant_id' END$k$),
        ('grant_revocations', $k$CASE WHEN jsonb_typeof(v_doc -> 'grant_id') = 'string' THEN v_doc ->> 'grant_id' END$k$),
        ('subjects', '@DIGEST@'),
        ('policies', '@DIGEST@'),
        ('check_evidence', '@DIGEST@'),
        ('verification_requests', '@DIGEST@'),
        ('verifier_runs', $k$CASE WHEN jsonb_typeof(v_doc -> 'run_id') = 'string' THEN v_doc ->> 'run_id' END$k$),
        ('run_events', $k$CASE WHEN jsonb_typeof(v_doc -> 'run_id') = 'string'
            AND jsonb_typeof(v_doc -> 'n') = 'number' THEN (v_doc ->> 'run_id') || '#' || (v_doc ->> 'n') END$k$),
        ('verification_results', '@DIGEST@'),
        ('findings', $k$CASE WHEN jsonb_typeof(v_doc -> 'id') = 'string'
            AND jsonb_typeof(v_doc -> 'version') = 'number' THEN (v_doc ->> 'id') || '@' || (v_doc ->> 'version') END$k$),
        ('human_decisions', '@DIGEST@'),
        ('gate_decisions', $k$CASE WHEN jsonb_typeof(v_doc -> 'evaluation_key') = 'string' THEN v_doc ->> 'evaluation_key' END$k$),
        ('denials', '@DIGEST@'),
        ('gate_evaluations', '@DIGEST@')
    ) AS v(name, key_sql) LOOP
        FOR f IN SELECT * FROM (VALUES
            (format('verdict.put_%s(text, text, text[], text[], text[], text[])', t.name),
                '        IF p_digests[i] IS DISTINCT FROM ''sha256:'' || encode(sha256(',
                format(E'%s %%: digest %% does not match the body'', p_keys[i], p_digests[i]\n                USING ERRCODE = ''22023'';\n        END IF;\n', t.name),
                'p_keys[i]', 'p_digests[i]', 'p_bodies[i]', 'p_correlations[i]', '        '),
            (format('verdict.put_one_%s(text, text, text, text, text, text)', t.name),
                '    IF p_digest IS DISTINCT FROM ''sha256:'' || encode(sha256(',
                format(E'%s %%: digest %% does not match the body'', p_key, p_digest\n            USING ERRCODE = ''22023'';\n    END IF;\n', t.name),
                'p_key', 'p_digest', 'p_body', 'p_correlation', '    ')
        ) AS r(signature, before_marker, after_marker, k, d, b, c, ind) LOOP
            v_def := pg_get_functiondef(f.signature::regprocedure);
            FOREACH v_marker IN ARRAY ARRAY[f.before_marker, f.after_marker, 'v_doc := ' || f.b || '::jsonb;'] LOOP
                v_hits := (length(v_def) - length(replace(v_def, v_marker, ''))) / length(v_marker);
                IF v_hits <> 1 THEN
                    RAISE EXCEPTION '%: % occurs % times, not once', f.signature, v_marker, v_hits;
                END IF;
            END LOOP;
            -- The bounds, before the body is hashed.
            v_before := replace(replace(replace(replace(replace($check$
@I@IF (octet_length(@B@) <= 4194304 AND length(@K@) <= 320 AND length(p_principal) BETWEEN 1 AND 256
@I@    AND coalesce(length(@C@), 0) <= 256) IS NOT TRUE THEN
@I@    PERFORM verdict._refuse_bounds('@T@', p_principal, @K@, @B@, @C@, NULL, NULL);
@I@END IF;
$check$, '@T@', t.name), '@K@', f.k), '@B@', f.b), '@C@', f.c), '@I@', f.ind);
            -- The one parse of the body, its form and its key, after the digest.
            v_after := replace(replace(replace(replace(replace(replace($check$@I@v_doc := @B@::jsonb;
@I@IF verdict._canonical(v_doc, @B@) IS DISTINCT FROM @B@ THEN
@I@    RAISE EXCEPTION '@T@ %: the body is not in canonical form (RFC 8785: no whitespace, members in order, no member named twice, numbers as written by verdict)',
@I@        @K@ USING ERRCODE = '22023';
@I@END IF;
@I@IF (@KEY@) IS DISTINCT FROM @K@ THEN
@I@    RAISE EXCEPTION '@T@ %: the body is stored under key %, not under this one', @K@,
@I@        coalesce(@KEY@, 'none (it names no key)') USING ERRCODE = '22023';
@I@END IF;
$check$, '@KEY@', replace(t.key_sql, '@DIGEST@', f.d)), '@T@', t.name), '@K@', f.k), '@B@', f.b),
                '@D@', f.d), '@I@', f.ind);
            v_def := replace(v_def, f.ind || 'v_doc := ' || f.b || '::jsonb;' || E'\n', '');
            v_def := replace(v_def, f.before_marker, ltrim(v_before, E'\n') || f.before_marker);
            v_def := replace(v_def, f.after_marker, f.after_marker || v_after);
            EXECUTE v_def;
        END LOOP;
    END LOOP;

    -- Compare-and-set: every cas_<pointer> routine hands its change to _cas, which now takes
    -- the bounds before it parses anything and checks the change's form, key and new value
    -- after its digest.
    v_def := pg_get_functiondef('verdict._cas(text, text[], text, text, text, bigint, text, text, text, text, text)'::regprocedure);
    FOREACH v_marker IN ARRAY ARRAY[
        E'    v_doc jsonb := p_body::jsonb;\n',
        E'    IF p_digest IS DISTINCT FROM verdict.row_digest(''store.pointer-change'', p_body) THEN\n',
        E'digest does not match the body'', p_key USING ERRCODE = ''22023'';\n    END IF;\n'
    ] LOOP
        v_hits := (length(v_def) - length(replace(v_def, v_marker, ''))) / length(v_marker);
        IF v_hits <> 1 THEN
            RAISE EXCEPTION '_cas: % occurs % times, not once', v_marker, v_hits;
        END IF;
    END LOOP;
    v_def := replace(v_def, E'    v_doc jsonb := p_body::jsonb;\n', E'    v_doc jsonb;\n');
    v_def := replace(v_def,
        E'    IF p_digest IS DISTINCT FROM verdict.row_digest(''store.pointer-change'', p_body) THEN\n',
        $check$    IF (octet_length(p_body) <= 4194304 AND length(p_key) <= 320
        AND length(p_principal) BETWEEN 1 AND 256 AND length(p_name) BETWEEN 1 AND 256
        AND coalesce(octet_length(p_new), 0) <= 4096 AND coalesce(octet_length(p_expected), 0) <= 4096) IS NOT TRUE THEN
        PERFORM verdict._refuse_bounds('pointer_changes', p_principal, p_key, p_body, NULL, p_name,
            CASE WHEN octet_length(p_new) > 4096 THEN p_new ELSE p_expected END);
    END IF;
$check$ || E'    IF p_digest IS DISTINCT FROM verdict.row_digest(''store.pointer-change'', p_body) THEN\n');
    v_def := replace(v_def,
        E'digest does not match the body'', p_key USING ERRCODE = ''22023'';\n    END IF;\n',
        E'digest does not match the body'', p_key USING ERRCODE = ''22023'';\n    END IF;\n' || $check$    v_doc := p_body::jsonb;
    IF verdict._canonical(v_doc, p_body) IS DISTINCT FROM p_body THEN
        RAISE EXCEPTION 'pointer_changes %: the body is not in canonical form (RFC 8785: no whitespace, members in order, no member named twice, numbers as written by verdict)',
            p_key USING ERRCODE = '22023';
    END IF;
    IF (CASE WHEN jsonb_typeof(v_doc -> 'pointer') = 'string' AND jsonb_typeof(v_doc -> 'revision') = 'number'
            AND jsonb_typeof(v_doc -> 'name') = 'string'
        THEN (v_doc ->> 'pointer') || ':' || (v_doc ->> 'revision') || ':' || (v_doc ->> 'name') END)
        IS DISTINCT FROM p_key THEN
        RAISE EXCEPTION 'pointer_changes %: the body is stored under key %, not under this one', p_key,
            coalesce((v_doc ->> 'pointer') || ':' || (v_doc ->> 'revision') || ':' || (v_doc ->> 'name'),
                'none (it names no key)') USING ERRCODE = '22023';
    END IF;
    -- The pointer keeps the value's text: it must be the canonical text of the change's `new`.
    IF p_new IS DISTINCT FROM (CASE WHEN jsonb_typeof(v_doc -> 'new') IS DISTINCT FROM 'null'
            THEN verdict._canonical(v_doc -> 'new', p_body) END) THEN
        RAISE EXCEPTION 'pointer_changes %: the new value is not the canonical text of the change''s new value',
            p_key USING ERRCODE = '22023';
    END IF;
$check$);
    EXECUTE v_def;
END $make$;

RESET ROLE;
