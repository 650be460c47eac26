-- verdict store, PostgreSQL schema version 24: every contract document conforms to its schema.
--
-- Until now the write routines checked a body's size, digest, canonical form, key and required
-- members (schemas 8 and 13), not the type or value of each member. A principal's own login
-- could append a human decision saying "maybe", or evidence with a member its type does not
-- have: the store's reader then refused the row, the Gate could not decide that execution, and
-- every reader of the audit log met a row it could not decode.
--
-- Now put_<table> and put_one_<table> of subjects, policies, check_evidence,
-- verification_results, findings, human_decisions and gate_decisions refuse (SQLSTATE 22023,
-- as for every other malformed body, with a message naming the table, the key, the member and
-- what is wrong) a body that does not conform to the JSON Schema of its contract type, right
-- after the required-member check of schema 13 and so before anything is written.
--
-- - The schemas are the ones `verdict schema` prints (draft 2020-12, derived from the Rust
--   types), held below as literals: _contract_schema returns each exactly as the code generated
--   it, which the store's tests compare with what the code generates now, so the two cannot
--   drift apart unnoticed. A finding and a human decision are checked against their
--   definitions in the bundle's schema.
-- - A stored body never carries its own digest (the store removes it before hashing), so the
--   schemas the routines use (_stored_form of those literals) have no `digest` member; the
--   strict reader refuses one too.
-- - Each table's check is its schema written out once, when this migration runs, as a PL/pgSQL
--   function _body_conforms_<table> (_conforms_plsql, _conforms_sql): what needs no loop is one
--   expression evaluated without a query, an array is walked by index. Walking the schema for
--   every body instead (_conforms) cost a function call per member, several times the rest of
--   an append; it is kept to name what is wrong once a body is refused (_body_nonconformity).
-- - Both check the keywords those schemas use: $ref into $defs, type (integer: a number
--   with no fraction), enum, const, not, allOf, anyOf, oneOf, properties, required,
--   additionalProperties, propertyNames, minProperties, maxProperties, items, prefixItems,
--   minItems, maxItems, uniqueItems, minLength and maxLength (in characters), pattern,
--   minimum, maximum, exclusiveMinimum, exclusiveMaximum, and the integer formats of the Rust
--   types (uint8 to uint64, int8 to int64) as the ranges those types hold. Annotations ($schema,
--   title, description, default, examples, other formats) change nothing. A schema using any
--   other keyword is refused when this migration runs, so no keyword is ever silently skipped.
-- - What the schemas cannot say is still the store's reader's alone: a principal name's
--   printable characters, a timestamp's calendar (the pattern holds its form), and the rules
--   across members (an unavailable result names its reason, a completed one none).
--
-- Not covered: the store's own records (principals, grants, revocations, verifier runs, run
-- events, requests and notes, denials, evaluation records) have no JSON Schema in the code, so
-- their routines still check only the members they require.
--
-- How: the check is spliced into each routine after the line ending its required-member check;
-- that line must occur exactly once. CREATE OR REPLACE keeps each routine's grants, owner and
-- settings. The functions below are owned by the owner and executable by nobody else.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

-- NULL when `p_doc` conforms to `p_schema` (a schema inside `p_root`, which holds the $defs its
-- references name); otherwise where it does not (a JSON pointer from `p_at`) and why.
CREATE FUNCTION verdict._conforms(p_doc jsonb, p_schema jsonb, p_root jsonb, p_at text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT SET search_path = verdict, pg_temp AS $$
DECLARE
    v_type text := jsonb_typeof(p_doc);
    v_at text := CASE WHEN p_at = '' THEN '/' ELSE p_at END;
    v_kw jsonb;
    v_sub jsonb;
    v_why text;
    v_ok boolean;
    v_n integer;
    v_num numeric;
    v_str text;
    v_name text;
    v_val jsonb;
    v_i bigint;
BEGIN
    IF jsonb_typeof(p_schema) = 'boolean' THEN
        RETURN CASE WHEN p_schema = 'true' THEN NULL ELSE v_at || ': no value is allowed here' END;
    END IF;
    v_kw := p_schema -> '$ref';
    IF v_kw IS NOT NULL THEN
        v_str := v_kw #>> '{}';
        v_sub := CASE WHEN v_str = '#' THEN p_root
            WHEN left(v_str, 2) = '#/' THEN p_root #> (SELECT array_agg(replace(replace(s, '~1', '/'), '~0', '~') ORDER BY i)
                FROM unnest(string_to_array(substr(v_str, 3), '/')) WITH ORDINALITY AS u(s, i)) END;
        IF v_sub IS NULL THEN
            RETURN v_at || ': the schema refers to ' || v_str || ', which it does not hold';
        END IF;
        v_why := verdict._conforms(p_doc, v_sub, p_root, p_at);
        IF v_why IS NOT NULL THEN
            RETURN v_why;
        END IF;
    END IF;

    v_kw := p_schema -> 'type';
    IF v_kw IS NOT NULL THEN
        v_ok := false;
        FOR v_name IN SELECT t FROM jsonb_array_elements_text(CASE jsonb_typeof(v_kw)
                WHEN 'array' THEN v_kw ELSE jsonb_build_array(v_kw) END) AS t LOOP
            IF v_name = v_type OR (v_name = 'integer' AND v_type = 'number'
                    AND (p_doc::numeric) = trunc(p_doc::numeric)) THEN
                v_ok := true;
                EXIT;
            END IF;
        END LOOP;
        IF NOT v_ok THEN
            RETURN v_at || ': ' || CASE WHEN v_type = 'number' AND v_kw ? 'integer'
                THEN 'a number with a fraction' ELSE 'a ' || v_type END
                || ' where the schema asks for ' || CASE jsonb_typeof(v_kw) WHEN 'array'
                    THEN array_to_string(ARRAY(SELECT jsonb_array_elements_text(v_kw)), ' or ')
                    ELSE v_kw #>> '{}' END;
        END IF;
    END IF;

    v_kw := p_schema -> 'enum';
    IF v_kw IS NOT NULL THEN
        IF v_type IN ('object', 'array') THEN
            v_ok := EXISTS (SELECT 1 FROM jsonb_array_elements(v_kw) AS e(v) WHERE e.v = p_doc);
        ELSE
            v_ok := v_kw @> jsonb_build_array(p_doc);
        END IF;
        IF NOT v_ok THEN
            RETURN v_at || ': ' || left(p_doc::text, 80) || ' is not one of ' || v_kw::text;
        END IF;
    END IF;
    v_kw := p_schema -> 'const';
    IF v_kw IS NOT NULL AND p_doc IS DISTINCT FROM v_kw THEN
        RETURN v_at || ': ' || left(p_doc::text, 80) || ' is not ' || v_kw::text;
    END IF;
    v_kw := p_schema -> 'not';
    IF v_kw IS NOT NULL AND verdict._conforms(p_doc, v_kw, p_root, p_at) IS NULL THEN
        RETURN v_at || ': ' || left(p_doc::text, 80) || ' is a value the schema excludes here';
    END IF;
    v_kw := p_schema -> 'allOf';
    IF v_kw IS NOT NULL THEN
        FOR v_sub IN SELECT e FROM jsonb_array_elements(v_kw) AS e LOOP
            v_why := verdict._conforms(p_doc, v_sub, p_root, p_at);
            IF v_why IS NOT NULL THEN
                RETURN v_why;
            END IF;
        END LOOP;
    END IF;
    v_kw := p_schema -> 'anyOf';
    IF v_kw IS NOT NULL THEN
        v_ok := false;
        v_why := NULL;
        FOR v_sub IN SELECT e FROM jsonb_array_elements(v_kw) AS e LOOP
            v_str := verdict._conforms(p_doc, v_sub, p_root, p_at);
            IF v_str IS NULL THEN
                v_ok := true;
                EXIT;
            END IF;
            v_why := coalesce(v_why, v_str);
        END LOOP;
        IF NOT v_ok THEN
            RETURN v_at || ': matches none of the forms allowed here (first: ' || coalesce(v_why, 'none') || ')';
        END IF;
    END IF;
    v_kw := p_schema -> 'oneOf';
    IF v_kw IS NOT NULL THEN
        v_n := 0;
        v_why := NULL;
        FOR v_sub IN SELECT e FROM jsonb_array_elements(v_kw) AS e LOOP
            v_str := verdict._conforms(p_doc, v_sub, p_root, p_at);
            IF v_str IS NULL THEN
                v_n := v_n + 1;
            ELSE
                v_why := coalesce(v_why, v_str);
            END IF;
        END LOOP;
        IF v_n = 0 THEN
            RETURN v_at || ': matches none of the forms allowed here (first: ' || coalesce(v_why, 'none') || ')';
        ELSIF v_n > 1 THEN
            RETURN v_at || ': matches ' || v_n || ' of the forms allowed here, not exactly one';
        END IF;
    END IF;

    IF v_type = 'number' THEN
        v_num := p_doc::numeric;
        IF (p_schema ? 'minimum' AND v_num < (p_schema ->> 'minimum')::numeric)
            OR (p_schema ? 'exclusiveMinimum' AND v_num <= (p_schema ->> 'exclusiveMinimum')::numeric) THEN
            RETURN v_at || ': ' || v_num || ' is below the least value allowed';
        END IF;
        IF (p_schema ? 'maximum' AND v_num > (p_schema ->> 'maximum')::numeric)
            OR (p_schema ? 'exclusiveMaximum' AND v_num >= (p_schema ->> 'exclusiveMaximum')::numeric) THEN
            RETURN v_at || ': ' || v_num || ' is above the greatest value allowed';
        END IF;
        -- The integer formats are the ranges of the Rust types the store reads them as.
        v_str := p_schema ->> 'format';
        IF v_str ~ '^u?int(8|16|32|64)$' THEN
            v_n := substring(v_str FROM '[0-9]+$')::integer;
            IF v_num <> trunc(v_num) OR (CASE WHEN left(v_str, 1) = 'u'
                    THEN v_num < 0 OR v_num >= 2::numeric ^ v_n
                    ELSE v_num < -(2::numeric ^ (v_n - 1)) OR v_num >= 2::numeric ^ (v_n - 1) END) THEN
                RETURN v_at || ': ' || v_num || ' is not ' || CASE WHEN left(v_str, 1) = 'u'
                    THEN 'an unsigned' ELSE 'a signed' END || ' integer of ' || v_n || ' bits';
            END IF;
        END IF;
    ELSIF v_type = 'string' THEN
        v_str := p_doc #>> '{}';
        IF p_schema ? 'minLength' AND length(v_str) < (p_schema ->> 'minLength')::integer THEN
            RETURN v_at || ': a string of ' || length(v_str) || ' characters is shorter than '
                || (p_schema ->> 'minLength');
        END IF;
        IF p_schema ? 'maxLength' AND length(v_str) > (p_schema ->> 'maxLength')::integer THEN
            RETURN v_at || ': a string of ' || length(v_str) || ' characters is longer than '
                || (p_schema ->> 'maxLength');
        END IF;
        IF p_schema ? 'pattern' AND NOT (v_str ~ (p_schema ->> 'pattern')) THEN
            RETURN v_at || ': ' || left(to_json(v_str)::text, 80) || ' does not match '
                || (p_schema ->> 'pattern');
        END IF;
    ELSIF v_type = 'array' THEN
        v_n := jsonb_array_length(p_doc);
        IF p_schema ? 'minItems' AND v_n < (p_schema ->> 'minItems')::integer THEN
            RETURN v_at || ': ' || v_n || ' items, fewer than ' || (p_schema ->> 'minItems');
        END IF;
        IF p_schema ? 'maxItems' AND v_n > (p_schema ->> 'maxItems')::integer THEN
            RETURN v_at || ': ' || v_n || ' items, more than ' || (p_schema ->> 'maxItems');
        END IF;
        IF p_schema -> 'uniqueItems' = 'true'
            AND (SELECT count(DISTINCT e) FROM jsonb_array_elements(p_doc) AS e) <> v_n THEN
            RETURN v_at || ': an item occurs twice';
        END IF;
        IF p_schema ? 'prefixItems' OR p_schema ? 'items' THEN
            FOR v_val, v_i IN SELECT e, i - 1 FROM jsonb_array_elements(p_doc) WITH ORDINALITY AS a(e, i) LOOP
                v_sub := coalesce(p_schema -> 'prefixItems' -> v_i::integer, p_schema -> 'items');
                IF v_sub IS NOT NULL THEN
                    v_why := verdict._conforms(v_val, v_sub, p_root, p_at || '/' || v_i);
                    IF v_why IS NOT NULL THEN
                        RETURN v_why;
                    END IF;
                END IF;
            END LOOP;
        END IF;
    ELSIF v_type = 'object' THEN
        v_kw := p_schema -> 'required';
        IF v_kw IS NOT NULL THEN
            SELECT min(r) INTO v_name FROM jsonb_array_elements_text(v_kw) AS r WHERE NOT p_doc ? r;
            IF v_name IS NOT NULL THEN
                RETURN v_at || ': the member ' || to_json(v_name)::text || ' is missing';
            END IF;
        END IF;
        SELECT count(*) INTO v_n FROM jsonb_object_keys(p_doc);
        IF p_schema ? 'minProperties' AND v_n < (p_schema ->> 'minProperties')::integer THEN
            RETURN v_at || ': ' || v_n || ' members, fewer than ' || (p_schema ->> 'minProperties');
        END IF;
        IF p_schema ? 'maxProperties' AND v_n > (p_schema ->> 'maxProperties')::integer THEN
            RETURN v_at || ': ' || v_n || ' members, more than ' || (p_schema ->> 'maxProperties');
        END IF;
        FOR v_name, v_val IN SELECT m.key, m.value FROM jsonb_each(p_doc) AS m ORDER BY m.key COLLATE "C" LOOP
            v_str := p_at || '/' || replace(replace(v_name, '~', '~0'), '/', '~1');
            IF p_schema ? 'propertyNames' THEN
                v_why := verdict._conforms(to_jsonb(v_name), p_schema -> 'propertyNames', p_root, v_str);
                IF v_why IS NOT NULL THEN
                    RETURN v_why;
                END IF;
            END IF;
            v_sub := coalesce(p_schema -> 'properties' -> v_name, p_schema -> 'additionalProperties');
            IF v_sub IS NOT NULL THEN
                IF v_sub = 'false' THEN
                    RETURN v_str || ': the member ' || left(to_json(v_name)::text, 80) || ' is not one the schema allows here';
                END IF;
                v_why := verdict._conforms(v_val, v_sub, p_root, v_str);
                IF v_why IS NOT NULL THEN
                    RETURN v_why;
                END IF;
            END IF;
        END LOOP;
    END IF;
    RETURN NULL;
END $$;

-- The condition, as SQL over the JSON value `p_v` (an expression), that holds exactly when that
-- value conforms to `p_schema`: the check _conforms makes, written out once for a schema so
-- that checking a body runs one expression (a subquery only for each array or map) instead of
-- a function call for every member. Run when this migration builds _body_conforms, never by a
-- write. `p_depth` names each level's aliases and bounds the nesting (a schema that refers to
-- itself would never end).
CREATE FUNCTION verdict._conforms_sql(p_schema jsonb, p_root jsonb, p_v text, p_depth integer)
RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT SET search_path = verdict, pg_temp AS $$
DECLARE
    c text[] := '{}';
    t text[];
    v_kw jsonb;
    v_sub jsonb;
    v_str text;
    v_name text;
    v_props text[];
    v_n integer;
    v_a text := 'a' || p_depth;
BEGIN
    IF p_depth > 48 THEN
        RAISE EXCEPTION 'the schema nests deeper than 48 levels (does it refer to itself?)';
    END IF;
    IF jsonb_typeof(p_schema) = 'boolean' THEN
        RETURN CASE WHEN p_schema = 'true' THEN 'true' ELSE 'false' END;
    END IF;
    IF jsonb_typeof(p_schema) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'a schema is an object or a boolean, not %', p_schema;
    END IF;
    v_kw := p_schema -> '$ref';
    IF v_kw IS NOT NULL THEN
        v_str := v_kw #>> '{}';
        v_sub := CASE WHEN v_str = '#' THEN p_root
            WHEN left(v_str, 2) = '#/' THEN p_root #> (SELECT array_agg(replace(replace(s, '~1', '/'), '~0', '~') ORDER BY i)
                FROM unnest(string_to_array(substr(v_str, 3), '/')) WITH ORDINALITY AS u(s, i)) END;
        IF v_sub IS NULL THEN
            RAISE EXCEPTION 'the schema refers to %, which it does not hold', v_str;
        END IF;
        c := c || verdict._conforms_sql(v_sub, p_root, p_v, p_depth + 1);
    END IF;
    v_kw := p_schema -> 'type';
    IF v_kw IS NOT NULL THEN
        t := '{}';
        FOR v_name IN SELECT x FROM jsonb_array_elements_text(CASE jsonb_typeof(v_kw)
                WHEN 'array' THEN v_kw ELSE jsonb_build_array(v_kw) END) AS x LOOP
            t := t || CASE WHEN v_name = 'integer'
                THEN format('CASE WHEN jsonb_typeof(%1$s) = ''number'' THEN (%1$s)::numeric = trunc((%1$s)::numeric) ELSE false END', p_v)
                ELSE format('jsonb_typeof(%s) = %L', p_v, v_name) END;
        END LOOP;
        c := c || ('(' || array_to_string(t, ' OR ') || ')');
    END IF;
    v_kw := p_schema -> 'enum';
    IF v_kw IS NOT NULL THEN
        c := c || format('(%s) IN (%s)', p_v, (SELECT string_agg(format('%L::jsonb', e::text), ', ')
            FROM jsonb_array_elements(v_kw) AS e));
    END IF;
    IF p_schema ? 'const' THEN
        c := c || format('(%s) = %L::jsonb', p_v, (p_schema -> 'const')::text);
    END IF;
    IF p_schema ? 'not' THEN
        c := c || format('NOT (%s)', verdict._conforms_sql(p_schema -> 'not', p_root, p_v, p_depth + 1));
    END IF;
    FOR v_sub IN SELECT e FROM jsonb_array_elements(coalesce(p_schema -> 'allOf', '[]')) AS e LOOP
        c := c || verdict._conforms_sql(v_sub, p_root, p_v, p_depth + 1);
    END LOOP;
    IF p_schema ? 'anyOf' THEN
        c := c || ('(' || (SELECT string_agg('(' || verdict._conforms_sql(e, p_root, p_v, p_depth + 1) || ')', ' OR ')
            FROM jsonb_array_elements(p_schema -> 'anyOf') AS e) || ')');
    END IF;
    IF p_schema ? 'oneOf' THEN
        c := c || ('((' || (SELECT string_agg('(' || verdict._conforms_sql(e, p_root, p_v, p_depth + 1) || ')::integer', ' + ')
            FROM jsonb_array_elements(p_schema -> 'oneOf') AS e) || ') = 1)');
    END IF;

    -- Numbers.
    t := '{}';
    IF p_schema ? 'minimum' THEN
        t := t || format('(%s)::numeric >= %s', p_v, (p_schema ->> 'minimum')::numeric);
    END IF;
    IF p_schema ? 'exclusiveMinimum' THEN
        t := t || format('(%s)::numeric > %s', p_v, (p_schema ->> 'exclusiveMinimum')::numeric);
    END IF;
    IF p_schema ? 'maximum' THEN
        t := t || format('(%s)::numeric <= %s', p_v, (p_schema ->> 'maximum')::numeric);
    END IF;
    IF p_schema ? 'exclusiveMaximum' THEN
        t := t || format('(%s)::numeric < %s', p_v, (p_schema ->> 'exclusiveMaximum')::numeric);
    END IF;
    v_str := p_schema ->> 'format';
    IF v_str ~ '^u?int(8|16|32|64)$' THEN
        v_n := substring(v_str FROM '[0-9]+$')::integer;
        t := t || format('(%1$s)::numeric = trunc((%1$s)::numeric)', p_v) || CASE WHEN left(v_str, 1) = 'u'
            THEN format('(%s)::numeric BETWEEN 0 AND %s', p_v, 2::numeric ^ v_n - 1)
            ELSE format('(%s)::numeric BETWEEN %s AND %s', p_v, -(2::numeric ^ (v_n - 1)), 2::numeric ^ (v_n - 1) - 1) END;
    END IF;
    IF cardinality(t) > 0 THEN
        c := c || format('CASE WHEN jsonb_typeof(%s) = ''number'' THEN %s ELSE true END', p_v, array_to_string(t, ' AND '));
    END IF;

    -- Strings.
    t := '{}';
    IF p_schema ? 'minLength' THEN
        t := t || format('length(%s #>> ''{}'') >= %s', p_v, (p_schema ->> 'minLength')::integer);
    END IF;
    IF p_schema ? 'maxLength' THEN
        t := t || format('length(%s #>> ''{}'') <= %s', p_v, (p_schema ->> 'maxLength')::integer);
    END IF;
    IF p_schema ? 'pattern' THEN
        t := t || format('(%s #>> ''{}'') ~ %L', p_v, p_schema ->> 'pattern');
    END IF;
    IF cardinality(t) > 0 THEN
        c := c || format('CASE WHEN jsonb_typeof(%s) = ''string'' THEN %s ELSE true END', p_v, array_to_string(t, ' AND '));
    END IF;

    -- Arrays.
    t := '{}';
    IF p_schema ? 'minItems' THEN
        t := t || format('jsonb_array_length(%s) >= %s', p_v, (p_schema ->> 'minItems')::integer);
    END IF;
    IF p_schema ? 'maxItems' THEN
        t := t || format('jsonb_array_length(%s) <= %s', p_v, (p_schema ->> 'maxItems')::integer);
    END IF;
    IF p_schema -> 'uniqueItems' = 'true' THEN
        t := t || format('(SELECT count(DISTINCT %1$s.e) = count(*) FROM jsonb_array_elements(%2$s) AS %1$s(e))', v_a, p_v);
    END IF;
    v_n := coalesce(jsonb_array_length(p_schema -> 'prefixItems'), 0);
    FOR i IN 0 .. v_n - 1 LOOP
        t := t || format('(jsonb_array_length(%1$s) <= %2$s OR %3$s)', p_v, i,
            verdict._conforms_sql(p_schema -> 'prefixItems' -> i, p_root, format('(%s -> %s)', p_v, i), p_depth + 1));
    END LOOP;
    IF p_schema ? 'items' THEN
        t := t || format('NOT EXISTS (SELECT 1 FROM jsonb_array_elements(%2$s) WITH ORDINALITY AS %1$s(e, i) WHERE %1$s.i > %3$s AND NOT (%4$s))',
            v_a, p_v, v_n, verdict._conforms_sql(p_schema -> 'items', p_root, v_a || '.e', p_depth + 1));
    END IF;
    IF cardinality(t) > 0 THEN
        c := c || format('CASE WHEN jsonb_typeof(%s) = ''array'' THEN %s ELSE true END', p_v, array_to_string(t, ' AND '));
    END IF;

    -- Objects.
    t := '{}';
    IF p_schema ? 'required' THEN
        t := t || format('%s ?& %L::text[]', p_v, ARRAY(SELECT jsonb_array_elements_text(p_schema -> 'required')));
    END IF;
    IF p_schema ? 'minProperties' THEN
        t := t || format('(SELECT count(*) FROM jsonb_object_keys(%s)) >= %s', p_v, (p_schema ->> 'minProperties')::integer);
    END IF;
    IF p_schema ? 'maxProperties' THEN
        t := t || format('(SELECT count(*) FROM jsonb_object_keys(%s)) <= %s', p_v, (p_schema ->> 'maxProperties')::integer);
    END IF;
    v_props := ARRAY(SELECT jsonb_object_keys(coalesce(p_schema -> 'properties', '{}')) ORDER BY 1);
    FOREACH v_name IN ARRAY v_props LOOP
        t := t || format('(NOT %1$s ? %2$L OR %3$s)', p_v, v_name,
            verdict._conforms_sql(p_schema -> 'properties' -> v_name, p_root, format('(%s -> %L)', p_v, v_name), p_depth + 1));
    END LOOP;
    IF p_schema ? 'propertyNames' THEN
        t := t || format('NOT EXISTS (SELECT 1 FROM jsonb_object_keys(%2$s) AS %1$s(k) WHERE NOT (%3$s))', v_a, p_v,
            verdict._conforms_sql(p_schema -> 'propertyNames', p_root, format('to_jsonb(%s.k)', v_a), p_depth + 1));
    END IF;
    v_kw := p_schema -> 'additionalProperties';
    IF v_kw = 'false' THEN
        t := t || format('(%s - %L::text[]) = ''{}''::jsonb', p_v, v_props);
    ELSIF v_kw IS NOT NULL AND v_kw <> 'true' THEN
        t := t || format('NOT EXISTS (SELECT 1 FROM jsonb_each(%2$s - %3$L::text[]) AS %1$s(k, e) WHERE NOT (%4$s))',
            v_a, p_v, v_props, verdict._conforms_sql(v_kw, p_root, v_a || '.e', p_depth + 1));
    END IF;
    IF cardinality(t) > 0 THEN
        c := c || format('CASE WHEN jsonb_typeof(%s) = ''object'' THEN %s ELSE true END', p_v, array_to_string(t, ' AND '));
    END IF;

    IF cardinality(c) = 0 THEN
        RETURN 'true';
    END IF;
    RETURN '(' || array_to_string(c, E'\n    AND ') || ')';
END $$;

-- Whether checking a value against `p_schema` walks an array or a map: such a schema becomes
-- statements with loops (_conforms_plsql), any other one expression without a subquery.
CREATE FUNCTION verdict._schema_walks(p_schema jsonb, p_root jsonb, p_depth integer) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE STRICT SET search_path = verdict, pg_temp AS $$
DECLARE
    v_str text;
    v_sub jsonb;
BEGIN
    IF p_depth > 48 THEN
        RAISE EXCEPTION 'the schema nests deeper than 48 levels (does it refer to itself?)';
    END IF;
    IF jsonb_typeof(p_schema) IS DISTINCT FROM 'object' THEN
        RETURN false;
    END IF;
    IF p_schema ?| ARRAY['items', 'prefixItems', 'propertyNames', 'uniqueItems', 'minProperties',
            'maxProperties'] OR (p_schema ? 'additionalProperties'
            AND jsonb_typeof(p_schema -> 'additionalProperties') <> 'boolean') THEN
        RETURN true;
    END IF;
    v_str := p_schema ->> '$ref';
    IF v_str IS NOT NULL AND verdict._schema_walks(CASE WHEN v_str = '#' THEN p_root
            ELSE p_root #> string_to_array(substr(v_str, 3), '/') END, p_root, p_depth + 1) THEN
        RETURN true;
    END IF;
    FOR v_sub IN SELECT e FROM jsonb_each(coalesce(p_schema -> 'properties', '{}')) AS m(k, e)
        UNION ALL SELECT e FROM jsonb_array_elements(coalesce(p_schema -> 'allOf', '[]')) AS e
        UNION ALL SELECT e FROM jsonb_array_elements(coalesce(p_schema -> 'anyOf', '[]')) AS e
        UNION ALL SELECT e FROM jsonb_array_elements(coalesce(p_schema -> 'oneOf', '[]')) AS e
        UNION ALL SELECT p_schema -> 'not' WHERE p_schema ? 'not' LOOP
        IF verdict._schema_walks(v_sub, p_root, p_depth + 1) THEN
            RETURN true;
        END IF;
    END LOOP;
    RETURN false;
END $$;

-- PL/pgSQL statements that return false unless the value `p_v` conforms to `p_schema`: what
-- needs no loop is one expression (_conforms_sql), evaluated without a query; an array's items
-- and a map's members are walked by loops. Run when this migration builds the checks.
CREATE FUNCTION verdict._conforms_plsql(p_schema jsonb, p_root jsonb, p_v text, p_depth integer)
RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT SET search_path = verdict, pg_temp AS $$
DECLARE
    v_out text := '';
    v_shallow jsonb;
    v_str text;
    v_sub jsonb;
    v_name text;
    v_props text[];
    v_n integer;
    v_i text := 'i' || p_depth;
    v_k text := 'k' || p_depth;
    v_deep text := '';
BEGIN
    IF NOT verdict._schema_walks(p_schema, p_root, p_depth) THEN
        RETURN format(E'IF NOT coalesce(%s, false) THEN\n    RETURN false;\nEND IF;\n',
            verdict._conforms_sql(p_schema, p_root, p_v, p_depth));
    END IF;
    -- What applies to the value itself; the members, items, references and allOf follow.
    v_shallow := p_schema - ARRAY['$ref', 'allOf', 'properties', 'additionalProperties', 'items',
        'prefixItems', 'propertyNames', 'uniqueItems', 'minProperties', 'maxProperties'];
    IF v_shallow - ARRAY['$schema', '$defs', 'title', 'description', 'default', 'examples'] <> '{}' THEN
        v_out := v_out || format(E'IF NOT coalesce(%s, false) THEN\n    RETURN false;\nEND IF;\n',
            verdict._conforms_sql(v_shallow, p_root, p_v, p_depth));
    END IF;
    v_str := p_schema ->> '$ref';
    IF v_str IS NOT NULL THEN
        v_sub := CASE WHEN v_str = '#' THEN p_root WHEN left(v_str, 2) = '#/'
            THEN p_root #> string_to_array(substr(v_str, 3), '/') END;
        IF v_sub IS NULL THEN
            RAISE EXCEPTION 'the schema refers to %, which it does not hold', v_str;
        END IF;
        v_out := v_out || verdict._conforms_plsql(v_sub, p_root, p_v, p_depth + 1);
    END IF;
    FOR v_sub IN SELECT e FROM jsonb_array_elements(coalesce(p_schema -> 'allOf', '[]')) AS e LOOP
        v_out := v_out || verdict._conforms_plsql(v_sub, p_root, p_v, p_depth + 1);
    END LOOP;

    -- Objects.
    v_props := ARRAY(SELECT jsonb_object_keys(coalesce(p_schema -> 'properties', '{}')) ORDER BY 1);
    FOREACH v_name IN ARRAY v_props LOOP
        v_deep := v_deep || format(E'IF %s ? %L THEN\n%sEND IF;\n', p_v, v_name,
            verdict._conforms_plsql(p_schema -> 'properties' -> v_name, p_root,
                format('(%s -> %L)', p_v, v_name), p_depth + 1));
    END LOOP;
    IF p_schema -> 'additionalProperties' = 'false' THEN
        v_deep := v_deep || format(E'IF (%s - %L::text[]) <> ''{}''::jsonb THEN\n    RETURN false;\nEND IF;\n',
            p_v, v_props);
    ELSIF jsonb_typeof(p_schema -> 'additionalProperties') = 'object' THEN
        v_deep := v_deep || format(E'FOR %s IN SELECT jsonb_object_keys(%s - %L::text[]) LOOP\n%sEND LOOP;\n',
            v_k, p_v, v_props, verdict._conforms_plsql(p_schema -> 'additionalProperties', p_root,
                format('(%s -> %s)', p_v, v_k), p_depth + 1));
    END IF;
    IF p_schema ? 'propertyNames' THEN
        v_deep := v_deep || format(E'FOR %s IN SELECT jsonb_object_keys(%s) LOOP\n%sEND LOOP;\n',
            v_k, p_v, verdict._conforms_plsql(p_schema -> 'propertyNames', p_root,
                format('to_jsonb(%s)', v_k), p_depth + 1));
    END IF;
    IF p_schema ?| ARRAY['minProperties', 'maxProperties'] THEN
        v_deep := v_deep || format(E'IF NOT coalesce(%s, false) THEN\n    RETURN false;\nEND IF;\n',
            verdict._conforms_sql(jsonb_strip_nulls(jsonb_build_object('minProperties',
                p_schema -> 'minProperties', 'maxProperties', p_schema -> 'maxProperties')), p_root, p_v, p_depth));
    END IF;
    IF v_deep <> '' THEN
        v_out := v_out || format(E'IF jsonb_typeof(%s) = ''object'' THEN\n%sEND IF;\n', p_v, v_deep);
    END IF;

    -- Arrays.
    v_deep := '';
    v_n := coalesce(jsonb_array_length(p_schema -> 'prefixItems'), 0);
    FOR i IN 0 .. v_n - 1 LOOP
        v_deep := v_deep || format(E'IF jsonb_array_length(%s) > %s THEN\n%sEND IF;\n', p_v, i,
            verdict._conforms_plsql(p_schema -> 'prefixItems' -> i, p_root, format('(%s -> %s)', p_v, i), p_depth + 1));
    END LOOP;
    IF p_schema ? 'items' THEN
        v_deep := v_deep || format(E'FOR %s IN %s .. jsonb_array_length(%s) - 1 LOOP\n%sEND LOOP;\n',
            v_i, v_n, p_v, verdict._conforms_plsql(p_schema -> 'items', p_root, format('(%s -> %s)', p_v, v_i), p_depth + 1));
    END IF;
    IF p_schema -> 'uniqueItems' = 'true' THEN
        v_deep := v_deep || format(E'IF NOT coalesce(%s, false) THEN\n    RETURN false;\nEND IF;\n',
            verdict._conforms_sql('{"uniqueItems": true}', p_root, p_v, p_depth));
    END IF;
    IF v_deep <> '' THEN
        v_out := v_out || format(E'IF jsonb_typeof(%s) = ''array'' THEN\n%sEND IF;\n', p_v, v_deep);
    END IF;
    RETURN v_out;
END $$;

-- The keywords _conforms reads and the ones that change nothing: a schema holding any other is
-- refused when this migration runs.
CREATE FUNCTION verdict._schema_keywords_unknown(p_schema jsonb) RETURNS text[]
LANGUAGE sql IMMUTABLE STRICT SET search_path = verdict, pg_temp AS $$
    WITH RECURSIVE walk(s, kind) AS (
        SELECT p_schema, 'schema'
        UNION ALL
        SELECT c.s, c.kind FROM walk w, LATERAL (
            -- A schema's keywords hold schemas, lists of schemas or maps of schemas.
            SELECT m.value AS s, 'schema' AS kind FROM jsonb_each(w.s) AS m
                WHERE w.kind = 'schema' AND jsonb_typeof(w.s) = 'object'
                  AND m.key IN ('not', 'items', 'additionalProperties', 'propertyNames')
            UNION ALL
            SELECT m.value, 'map' FROM jsonb_each(w.s) AS m
                WHERE w.kind = 'schema' AND jsonb_typeof(w.s) = 'object'
                  AND m.key IN ('properties', '$defs')
            UNION ALL
            SELECT m.value, 'list' FROM jsonb_each(w.s) AS m
                WHERE w.kind = 'schema' AND jsonb_typeof(w.s) = 'object'
                  AND m.key IN ('allOf', 'anyOf', 'oneOf', 'prefixItems')
            UNION ALL
            SELECT e.value, 'schema' FROM jsonb_each(w.s) AS e
                WHERE w.kind = 'map' AND jsonb_typeof(w.s) = 'object'
            UNION ALL
            SELECT e.value, 'schema' FROM jsonb_array_elements(
                CASE WHEN w.kind = 'list' AND jsonb_typeof(w.s) = 'array' THEN w.s ELSE '[]' END) AS e
        ) AS c
    )
    SELECT coalesce(array_agg(DISTINCT k.key ORDER BY k.key), '{}')
    FROM walk w, jsonb_object_keys(CASE WHEN w.kind = 'schema' AND jsonb_typeof(w.s) = 'object'
        THEN w.s ELSE '{}' END) AS k(key)
    WHERE k.key NOT IN ('$ref', 'type', 'enum', 'const', 'not', 'allOf', 'anyOf', 'oneOf',
        'properties', 'required', 'additionalProperties', 'propertyNames', 'minProperties',
        'maxProperties', 'items', 'prefixItems', 'minItems', 'maxItems', 'uniqueItems',
        'minLength', 'maxLength', 'pattern', 'minimum', 'maximum', 'exclusiveMinimum',
        'exclusiveMaximum', 'format', '$schema', '$defs', 'title', 'description', 'default',
        'examples')
$$;

-- The schemas, exactly as `verdict schema <name>` prints them at this version.
CREATE FUNCTION verdict._contract_schema(p_name text) RETURNS jsonb
LANGUAGE sql IMMUTABLE STRICT SET search_path = verdict, pg_temp AS $schemas$
    SELECT CASE p_name
        WHEN 'subject' THEN $subject${
  "$defs": {
    "CheckPin": {
      "additionalProperties": false,
      "description": "A deterministic check the subject pins, by exact definition.",
      "properties": {
        "criteria": {
          "description": "Criteria the check bears on.",
          "items": {
            "$ref": "#/$defs/Id"
          },
          "type": "array"
        },
        "definition_digest": {
          "$ref": "#/$defs/Digest",
          "description": "Digest of the exact check definition."
        },
        "id": {
          "$ref": "#/$defs/Id",
          "description": "Check id."
        }
      },
      "required": [
        "id",
        "definition_digest",
        "criteria"
      ],
      "type": "object"
    },
    "Criteria": {
      "additionalProperties": false,
      "description": "The acceptance criteria at one revision.",
      "properties": {
        "items": {
          "description": "The criteria, in their stated order.",
          "items": {
            "$ref": "#/$defs/Criterion"
          },
          "type": "array"
        },
        "revision": {
          "$ref": "#/$defs/Name",
          "description": "Revision label."
        }
      },
      "required": [
        "revision",
        "items"
      ],
      "type": "object"
    },
    "Criterion": {
      "additionalProperties": false,
      "description": "One acceptance criterion.",
      "properties": {
        "id": {
          "$ref": "#/$defs/Id",
          "description": "Identifier."
        },
        "required": {
          "default": true,
          "description": "Whether the Gate requires it (default true).",
          "type": "boolean"
        },
        "role": {
          "$ref": "#/$defs/CriterionRole",
          "default": "correctness",
          "description": "Score role (default correctness)."
        },
        "text": {
          "description": "What must be true.",
          "type": "string"
        },
        "weight": {
          "description": "Score weight, finite and > 0 (default 1).",
          "exclusiveMinimum": 0,
          "format": "double",
          "type": [
            "number",
            "null"
          ]
        }
      },
      "required": [
        "id",
        "text"
      ],
      "type": "object"
    },
    "CriterionRole": {
      "description": "How a criterion feeds the advisory scores.",
      "oneOf": [
        {
          "const": "correctness",
          "description": "Did the work do what was asked (`c`).",
          "type": "string"
        },
        {
          "const": "safety",
          "description": "Did it keep what must keep working (`rec_v`).",
          "type": "string"
        },
        {
          "const": "catastrophic",
          "description": "Did it avoid disaster (`cat_v`).",
          "type": "string"
        }
      ]
    },
    "Digest": {
      "description": "sha256: followed by 64 lowercase hex digits",
      "pattern": "^sha256:[0-9a-f]{64}$",
      "type": "string"
    },
    "Execution": {
      "additionalProperties": false,
      "description": "An execution and its generation (state revision).",
      "properties": {
        "generation": {
          "description": "State revision; a retry is a new generation.",
          "format": "uint64",
          "minimum": 0,
          "type": "integer"
        },
        "id": {
          "$ref": "#/$defs/Name",
          "description": "Execution id."
        }
      },
      "required": [
        "id",
        "generation"
      ],
      "type": "object"
    },
    "Id": {
      "pattern": "^[a-z0-9][a-z0-9._-]{0,127}$",
      "type": "string"
    },
    "Name": {
      "maxLength": 256,
      "minLength": 1,
      "type": "string"
    },
    "Objective": {
      "additionalProperties": false,
      "description": "The objective's revision and digest.",
      "properties": {
        "digest": {
          "$ref": "#/$defs/Digest",
          "description": "Digest of the objective text."
        },
        "revision": {
          "$ref": "#/$defs/Name",
          "description": "Revision label."
        }
      },
      "required": [
        "revision",
        "digest"
      ],
      "type": "object"
    },
    "Producer": {
      "additionalProperties": false,
      "description": "The principal and run that produced the work.",
      "properties": {
        "principal": {
          "$ref": "#/$defs/Name",
          "description": "Producer principal."
        },
        "run": {
          "$ref": "#/$defs/Name",
          "description": "Producer run."
        }
      },
      "required": [
        "principal",
        "run"
      ],
      "type": "object"
    },
    "Resource": {
      "additionalProperties": false,
      "description": "An exact resource version (diff, artifact, ...).",
      "properties": {
        "digest": {
          "$ref": "#/$defs/Digest",
          "description": "Content digest."
        },
        "kind": {
          "$ref": "#/$defs/Name",
          "description": "Kind of resource."
        },
        "name": {
          "$ref": "#/$defs/Name",
          "description": "Name, usable as an evidence ref."
        },
        "uri": {
          "description": "Where to find it.",
          "type": [
            "string",
            "null"
          ]
        }
      },
      "required": [
        "name",
        "kind",
        "digest"
      ],
      "type": "object"
    },
    "Risk": {
      "additionalProperties": false,
      "description": "Risk classification of a subject.",
      "properties": {
        "capabilities": {
          "description": "Capabilities the work touches.",
          "items": {
            "type": "string"
          },
          "type": "array"
        },
        "class": {
          "$ref": "#/$defs/RiskClass",
          "description": "Class."
        },
        "revision": {
          "$ref": "#/$defs/Name",
          "description": "Revision of the classification."
        }
      },
      "required": [
        "class",
        "revision",
        "capabilities"
      ],
      "type": "object"
    },
    "RiskClass": {
      "description": "Risk class, lowest to highest.",
      "oneOf": [
        {
          "const": "low",
          "description": "Low.",
          "type": "string"
        },
        {
          "const": "medium",
          "description": "Medium.",
          "type": "string"
        },
        {
          "const": "high",
          "description": "High.",
          "type": "string"
        },
        {
          "const": "critical",
          "description": "Critical.",
          "type": "string"
        }
      ]
    },
    "SubjectSchema": {
      "description": "The schema tag of a subject.",
      "oneOf": [
        {
          "const": "verdict.subject/v1",
          "description": "Version 1.",
          "type": "string"
        }
      ]
    },
    "WorkItem": {
      "additionalProperties": false,
      "description": "A work package, operation or result identity.",
      "properties": {
        "id": {
          "$ref": "#/$defs/Name",
          "description": "Its id."
        },
        "kind": {
          "$ref": "#/$defs/Name",
          "description": "What kind of item."
        },
        "version": {
          "$ref": "#/$defs/Name",
          "description": "Its version."
        }
      },
      "required": [
        "kind",
        "id",
        "version"
      ],
      "type": "object"
    }
  },
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "additionalProperties": false,
  "description": "One exact, immutable unit of work to grade. Its digest is its identity.",
  "properties": {
    "checks": {
      "description": "Deterministic checks that apply, and the criteria each bears on.",
      "items": {
        "$ref": "#/$defs/CheckPin"
      },
      "type": "array"
    },
    "criteria": {
      "$ref": "#/$defs/Criteria",
      "description": "The acceptance criteria."
    },
    "digest": {
      "description": "the document's own digest, computed without this field; a mismatch is tampering",
      "pattern": "^sha256:[0-9a-f]{64}$",
      "type": "string"
    },
    "execution": {
      "$ref": "#/$defs/Execution",
      "description": "The execution and its state revision."
    },
    "mission": {
      "anyOf": [
        {
          "$ref": "#/$defs/Name"
        },
        {
          "type": "null"
        }
      ],
      "description": "The mission this work belongs to."
    },
    "objective": {
      "$ref": "#/$defs/Objective",
      "description": "The objective's revision and digest."
    },
    "producer": {
      "$ref": "#/$defs/Producer",
      "description": "Who produced the work."
    },
    "resources": {
      "description": "Exact diff / artifact / resource versions.",
      "items": {
        "$ref": "#/$defs/Resource"
      },
      "type": "array"
    },
    "risk": {
      "$ref": "#/$defs/Risk",
      "description": "Risk classification."
    },
    "schema": {
      "$ref": "#/$defs/SubjectSchema",
      "description": "`verdict.subject/v1`."
    },
    "work_items": {
      "description": "Work package / operation / result identities and versions.",
      "items": {
        "$ref": "#/$defs/WorkItem"
      },
      "type": "array"
    },
    "workflow_revision": {
      "$ref": "#/$defs/Name",
      "description": "The workflow revision."
    }
  },
  "required": [
    "schema",
    "execution",
    "work_items",
    "producer",
    "objective",
    "criteria",
    "resources",
    "checks",
    "workflow_revision",
    "risk"
  ],
  "title": "Subject",
  "type": "object"
}$subject$::jsonb
        WHEN 'policy' THEN $policy${
  "$defs": {
    "Id": {
      "pattern": "^[a-z0-9][a-z0-9._-]{0,127}$",
      "type": "string"
    },
    "Outcome": {
      "description": "A decision's outcome. The order is the precedence: `Blocked` is the strongest.",
      "oneOf": [
        {
          "const": "pass",
          "description": "Everything required was shown.",
          "type": "string"
        },
        {
          "const": "human_required",
          "description": "A person must look.",
          "type": "string"
        },
        {
          "const": "rework",
          "description": "The work must change.",
          "type": "string"
        },
        {
          "const": "blocked",
          "description": "The evidence cannot be trusted or is incomplete.",
          "type": "string"
        }
      ]
    },
    "PolicySchema": {
      "description": "The schema tag of a policy.",
      "oneOf": [
        {
          "const": "verdict.policy/v1",
          "description": "Version 1.",
          "type": "string"
        }
      ]
    },
    "RiskRequirement": {
      "additionalProperties": false,
      "description": "Requirements added on top for one risk class.",
      "properties": {
        "human": {
          "default": false,
          "description": "Whether a human approval bound to subject and policy is needed.",
          "type": "boolean"
        },
        "required_verifiers": {
          "default": [],
          "description": "Extra verifier classes.",
          "items": {
            "$ref": "#/$defs/Id"
          },
          "type": "array"
        }
      },
      "type": "object"
    },
    "Role": {
      "description": "A principal's role (docs/spec/authority.md).",
      "oneOf": [
        {
          "const": "operator",
          "description": "Runs the system; manages principals and grants.",
          "type": "string"
        },
        {
          "const": "producer",
          "description": "Produces the work being graded.",
          "type": "string"
        },
        {
          "const": "runner",
          "description": "Runs deterministic checks.",
          "type": "string"
        },
        {
          "const": "verifier",
          "description": "Reviews the work independently.",
          "type": "string"
        },
        {
          "const": "human",
          "description": "A person who approves or rejects.",
          "type": "string"
        }
      ]
    },
    "Rule": {
      "additionalProperties": false,
      "description": "A policy rule: when the CEL expression holds, add a reason with this outcome.",
      "properties": {
        "id": {
          "$ref": "#/$defs/Id",
          "description": "Rule id."
        },
        "outcome": {
          "$ref": "#/$defs/Outcome",
          "description": "Outcome when it fires (`rework`, `human_required` or `blocked`).",
          "not": {
            "const": "pass"
          }
        },
        "reason": {
          "description": "Why, in words.",
          "type": "string"
        },
        "when": {
          "description": "CEL expression over the decision context; must evaluate to a bool.",
          "type": "string"
        }
      },
      "required": [
        "id",
        "when",
        "outcome",
        "reason"
      ],
      "type": "object"
    }
  },
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "additionalProperties": false,
  "description": "A versioned gate policy. Unknown fields are refused: a typo must not weaken it.",
  "properties": {
    "check_evidence_from": {
      "default": [
        "runner"
      ],
      "description": "Roles whose check evidence counts.",
      "items": {
        "$ref": "#/$defs/Role"
      },
      "type": "array"
    },
    "digest": {
      "description": "the document's own digest, computed without this field; a mismatch is tampering",
      "pattern": "^sha256:[0-9a-f]{64}$",
      "type": "string"
    },
    "evidence_refs_waived": {
      "default": [],
      "description": "Criteria for which the model verifier accepts a `passed` row that cites no ref. Without\na waiver every `passed` row must cite one (the verifier's own rule, whatever\n`require_evidence_refs` says). The Gate does not read it: with `require_evidence_refs`\nit still treats an uncited pass as `unsupported_pass`.",
      "items": {
        "$ref": "#/$defs/Id"
      },
      "type": "array"
    },
    "name": {
      "$ref": "#/$defs/Id",
      "description": "Policy name."
    },
    "on_contradiction": {
      "$ref": "#/$defs/Outcome",
      "default": "human_required",
      "description": "Outcome when sources disagree on a required criterion (never `pass`).",
      "not": {
        "const": "pass"
      }
    },
    "on_inconclusive": {
      "$ref": "#/$defs/Outcome",
      "default": "human_required",
      "description": "Outcome for an inconclusive required criterion (never `pass`).",
      "not": {
        "const": "pass"
      }
    },
    "optional_criteria": {
      "default": [],
      "description": "Criteria declared non-required for this policy.",
      "items": {
        "$ref": "#/$defs/Id"
      },
      "type": "array"
    },
    "require_evidence_refs": {
      "default": true,
      "description": "Whether a verifier's `passed` must cite refs that exist in the bundle.",
      "type": "boolean"
    },
    "required_checks": {
      "default": [],
      "description": "Checks that must have fresh, intact, independent evidence.",
      "items": {
        "$ref": "#/$defs/Id"
      },
      "type": "array"
    },
    "required_verifiers": {
      "default": [],
      "description": "Verifier classes that must each return a completed result.",
      "items": {
        "$ref": "#/$defs/Id"
      },
      "type": "array"
    },
    "revision": {
      "description": "Policy revision.",
      "format": "uint64",
      "minimum": 0,
      "type": "integer"
    },
    "risk": {
      "additionalProperties": {
        "$ref": "#/$defs/RiskRequirement"
      },
      "default": {},
      "description": "Extra requirements per risk class.",
      "type": "object"
    },
    "rules": {
      "default": [],
      "description": "Extra CEL rules; they only make a decision stricter.",
      "items": {
        "$ref": "#/$defs/Rule"
      },
      "type": "array"
    },
    "schema": {
      "$ref": "#/$defs/PolicySchema",
      "description": "`verdict.policy/v1`."
    }
  },
  "required": [
    "schema",
    "name",
    "revision"
  ],
  "title": "Policy",
  "type": "object"
}$policy$::jsonb
        WHEN 'evidence' THEN $evidence${
  "$defs": {
    "CheckOutcome": {
      "description": "What a check observed.",
      "oneOf": [
        {
          "const": "pass",
          "description": "The expectation held.",
          "type": "string"
        },
        {
          "const": "fail",
          "description": "The expectation did not hold.",
          "type": "string"
        },
        {
          "const": "error",
          "description": "The check could not observe (infrastructure); proves nothing.",
          "type": "string"
        }
      ]
    },
    "Digest": {
      "description": "sha256: followed by 64 lowercase hex digits",
      "pattern": "^sha256:[0-9a-f]{64}$",
      "type": "string"
    },
    "EvidenceKind": {
      "description": "The `kind` tag of check evidence.",
      "oneOf": [
        {
          "const": "check",
          "description": "Deterministic check evidence.",
          "type": "string"
        }
      ]
    },
    "Freshness": {
      "description": "How long an observation stays true.\n\nRead by hand rather than by serde's tagged-enum support, which buffers the whole object\nfirst and lets `{\"kind\": \"content\"}` carry a `max_age_s` it then ignores: here each kind\ntakes exactly its own fields (docs/spec/evidence.md).",
      "oneOf": [
        {
          "additionalProperties": false,
          "description": "An immutable fact about content: no age limit.",
          "properties": {
            "kind": {
              "const": "content",
              "type": "string"
            }
          },
          "required": [
            "kind"
          ],
          "type": "object"
        },
        {
          "additionalProperties": false,
          "description": "An observation of a live system that goes stale after `max_age_s` seconds.",
          "properties": {
            "kind": {
              "const": "time",
              "type": "string"
            },
            "max_age_s": {
              "description": "Seconds after `observed_at` at which it is stale.",
              "format": "uint64",
              "minimum": 0,
              "type": "integer"
            }
          },
          "required": [
            "kind",
            "max_age_s"
          ],
          "type": "object"
        }
      ]
    },
    "Id": {
      "pattern": "^[a-z0-9][a-z0-9._-]{0,127}$",
      "type": "string"
    },
    "Name": {
      "maxLength": 256,
      "minLength": 1,
      "type": "string"
    },
    "ProducedBy": {
      "additionalProperties": false,
      "description": "Who produced a piece of evidence.",
      "properties": {
        "principal": {
          "$ref": "#/$defs/Name",
          "description": "Principal."
        },
        "role": {
          "$ref": "#/$defs/Role",
          "description": "The role it acted in."
        }
      },
      "required": [
        "principal",
        "role"
      ],
      "type": "object"
    },
    "Role": {
      "description": "A principal's role (docs/spec/authority.md).",
      "oneOf": [
        {
          "const": "operator",
          "description": "Runs the system; manages principals and grants.",
          "type": "string"
        },
        {
          "const": "producer",
          "description": "Produces the work being graded.",
          "type": "string"
        },
        {
          "const": "runner",
          "description": "Runs deterministic checks.",
          "type": "string"
        },
        {
          "const": "verifier",
          "description": "Reviews the work independently.",
          "type": "string"
        },
        {
          "const": "human",
          "description": "A person who approves or rejects.",
          "type": "string"
        }
      ]
    },
    "Timestamp": {
      "format": "date-time",
      "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,9})?Z$",
      "type": "string"
    }
  },
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "additionalProperties": false,
  "description": "Check evidence (`kind: \"check\"`).",
  "properties": {
    "check": {
      "$ref": "#/$defs/Id",
      "description": "The check it ran."
    },
    "content_digest": {
      "$ref": "#/$defs/Digest",
      "description": "Digest of what was observed."
    },
    "definition_digest": {
      "$ref": "#/$defs/Digest",
      "description": "The exact definition it ran."
    },
    "digest": {
      "description": "the document's own digest, computed without this field; a mismatch is tampering",
      "pattern": "^sha256:[0-9a-f]{64}$",
      "type": "string"
    },
    "freshness": {
      "$ref": "#/$defs/Freshness",
      "description": "How long it stays true."
    },
    "hard": {
      "default": true,
      "description": "A hard failure dominates any other source (default true).",
      "type": "boolean"
    },
    "id": {
      "$ref": "#/$defs/Id",
      "description": "Evidence id."
    },
    "kind": {
      "$ref": "#/$defs/EvidenceKind",
      "description": "`check`."
    },
    "observed_at": {
      "$ref": "#/$defs/Timestamp",
      "description": "When it was observed."
    },
    "outcome": {
      "$ref": "#/$defs/CheckOutcome",
      "description": "What it found."
    },
    "produced_by": {
      "$ref": "#/$defs/ProducedBy",
      "description": "Who produced it."
    },
    "subject_digest": {
      "$ref": "#/$defs/Digest",
      "description": "The subject it is about."
    }
  },
  "required": [
    "id",
    "kind",
    "check",
    "subject_digest",
    "definition_digest",
    "produced_by",
    "outcome",
    "content_digest",
    "observed_at",
    "freshness"
  ],
  "title": "CheckEvidence",
  "type": "object"
}$evidence$::jsonb
        WHEN 'verification' THEN $verification${
  "$defs": {
    "ContextRef": {
      "additionalProperties": false,
      "description": "The context a verifier saw.",
      "properties": {
        "complete": {
          "description": "Whether every required item fit.",
          "type": "boolean"
        },
        "digest": {
          "$ref": "#/$defs/Digest",
          "description": "Digest of the context manifest."
        }
      },
      "required": [
        "digest",
        "complete"
      ],
      "type": "object"
    },
    "CriterionRow": {
      "additionalProperties": false,
      "description": "One criterion row of a verification result.",
      "properties": {
        "evidence_refs": {
          "description": "Refs to items in the bundle that support the row.",
          "items": {
            "type": "string"
          },
          "type": "array"
        },
        "id": {
          "$ref": "#/$defs/Id",
          "description": "Criterion id."
        },
        "method": {
          "description": "How it looked.",
          "type": "string"
        },
        "status": {
          "$ref": "#/$defs/CriterionStatus",
          "description": "What the verifier found."
        }
      },
      "required": [
        "id",
        "status",
        "method",
        "evidence_refs"
      ],
      "type": "object"
    },
    "CriterionStatus": {
      "description": "A criterion's status, as a source reports it or as the Gate derives it.",
      "oneOf": [
        {
          "const": "passed",
          "description": "Shown to hold.",
          "type": "string"
        },
        {
          "const": "failed",
          "description": "Shown not to hold.",
          "type": "string"
        },
        {
          "const": "inconclusive",
          "description": "Looked at, could not tell.",
          "type": "string"
        },
        {
          "const": "not_tested",
          "description": "Not looked at.",
          "type": "string"
        }
      ]
    },
    "Digest": {
      "description": "sha256: followed by 64 lowercase hex digits",
      "pattern": "^sha256:[0-9a-f]{64}$",
      "type": "string"
    },
    "Disposition": {
      "additionalProperties": false,
      "description": "A verifier's disposition of a prior blocking finding.",
      "properties": {
        "disposition": {
          "$ref": "#/$defs/DispositionKind",
          "description": "What became of it."
        },
        "evidence_refs": {
          "description": "Supporting refs.",
          "items": {
            "type": "string"
          },
          "type": "array"
        },
        "finding": {
          "$ref": "#/$defs/Id",
          "description": "Finding id."
        },
        "reason": {
          "description": "Why (required for `superseded_by_subject_change`).",
          "type": [
            "string",
            "null"
          ]
        },
        "version": {
          "description": "Finding version.",
          "format": "uint64",
          "minimum": 0,
          "type": "integer"
        }
      },
      "required": [
        "finding",
        "version",
        "disposition",
        "evidence_refs"
      ],
      "type": "object"
    },
    "DispositionKind": {
      "description": "What became of a prior blocking finding.",
      "oneOf": [
        {
          "const": "resolved",
          "description": "Fixed; needs evidence refs that exist in the bundle.",
          "type": "string"
        },
        {
          "const": "still_present",
          "description": "Still there.",
          "type": "string"
        },
        {
          "const": "superseded_by_subject_change",
          "description": "No longer applies because the subject changed; needs a reason.",
          "type": "string"
        },
        {
          "const": "human_required",
          "description": "Needs a person.",
          "type": "string"
        }
      ]
    },
    "Finding": {
      "additionalProperties": false,
      "description": "An immutable finding; a change is a new version.",
      "properties": {
        "confidence": {
          "description": "Advisory only; never read by the Gate.",
          "format": "double",
          "type": [
            "number",
            "null"
          ]
        },
        "criterion": {
          "$ref": "#/$defs/Id",
          "description": "The criterion it bears on."
        },
        "digest": {
          "description": "the document's own digest, computed without this field; a mismatch is tampering",
          "pattern": "^sha256:[0-9a-f]{64}$",
          "type": "string"
        },
        "evidence_refs": {
          "description": "Supporting refs.",
          "items": {
            "type": "string"
          },
          "type": "array"
        },
        "id": {
          "$ref": "#/$defs/Id",
          "description": "Stable finding id."
        },
        "location": {
          "anyOf": [
            {
              "$ref": "#/$defs/Location"
            },
            {
              "type": "null"
            }
          ],
          "description": "Where."
        },
        "method": {
          "description": "How it was found.",
          "type": "string"
        },
        "remediation": {
          "description": "What to do about it.",
          "type": [
            "string",
            "null"
          ]
        },
        "scope": {
          "$ref": "#/$defs/Scope",
          "description": "Change scope."
        },
        "severity": {
          "$ref": "#/$defs/Severity",
          "description": "Severity."
        },
        "subject_digest": {
          "$ref": "#/$defs/Digest",
          "description": "The subject it was found on."
        },
        "type": {
          "description": "Kind of problem.",
          "type": "string"
        },
        "version": {
          "description": "Version (≥ 1).",
          "format": "uint64",
          "minimum": 0,
          "type": "integer"
        }
      },
      "required": [
        "id",
        "version",
        "criterion",
        "type",
        "severity",
        "scope",
        "subject_digest",
        "evidence_refs",
        "method"
      ],
      "type": "object"
    },
    "Id": {
      "pattern": "^[a-z0-9][a-z0-9._-]{0,127}$",
      "type": "string"
    },
    "Location": {
      "additionalProperties": false,
      "description": "Where a finding is.",
      "properties": {
        "line": {
          "description": "Line.",
          "format": "uint64",
          "minimum": 0,
          "type": [
            "integer",
            "null"
          ]
        },
        "path": {
          "description": "Path inside it.",
          "type": [
            "string",
            "null"
          ]
        },
        "resource": {
          "description": "Resource name.",
          "type": "string"
        }
      },
      "required": [
        "resource"
      ],
      "type": "object"
    },
    "Name": {
      "maxLength": 256,
      "minLength": 1,
      "type": "string"
    },
    "Runtime": {
      "additionalProperties": false,
      "description": "The runtime a verifier ran on.",
      "properties": {
        "model": {
          "$ref": "#/$defs/Name",
          "description": "Model name."
        },
        "provider": {
          "$ref": "#/$defs/Name",
          "description": "Provider name."
        },
        "snapshot": {
          "$ref": "#/$defs/Name",
          "description": "The provider's model snapshot or fingerprint."
        }
      },
      "required": [
        "provider",
        "model",
        "snapshot"
      ],
      "type": "object"
    },
    "Scope": {
      "description": "Whether the change caused a finding.",
      "oneOf": [
        {
          "const": "change",
          "description": "Caused, exposed or materially worsened by this change.",
          "type": "string"
        },
        {
          "const": "adjacent",
          "description": "Near the change but not caused by it.",
          "type": "string"
        },
        {
          "const": "pre_existing",
          "description": "There before the change.",
          "type": "string"
        }
      ]
    },
    "Severity": {
      "description": "How bad a finding is.",
      "oneOf": [
        {
          "const": "blocker",
          "description": "Must be fixed before passing.",
          "type": "string"
        },
        {
          "const": "major",
          "description": "Major.",
          "type": "string"
        },
        {
          "const": "minor",
          "description": "Minor.",
          "type": "string"
        },
        {
          "const": "info",
          "description": "For information.",
          "type": "string"
        }
      ]
    },
    "UnavailableReason": {
      "description": "Why a verification run is unavailable.",
      "oneOf": [
        {
          "const": "timeout",
          "description": "The call ran out of time.",
          "type": "string"
        },
        {
          "const": "provider_error",
          "description": "The provider failed.",
          "type": "string"
        },
        {
          "const": "budget_exhausted",
          "description": "The budget ran out.",
          "type": "string"
        },
        {
          "const": "context_incomplete",
          "description": "A required context item did not fit.",
          "type": "string"
        },
        {
          "const": "grant_revoked",
          "description": "The verifier's grant was revoked mid-run.",
          "type": "string"
        },
        {
          "const": "cancelled",
          "description": "The run was cancelled.",
          "type": "string"
        },
        {
          "const": "invalid_output",
          "description": "The verifier's output did not validate.",
          "type": "string"
        }
      ]
    },
    "VerificationStatus": {
      "description": "Whether a verification run completed.",
      "oneOf": [
        {
          "const": "completed",
          "description": "The verifier returned a result.",
          "type": "string"
        },
        {
          "const": "unavailable",
          "description": "It did not; `unavailable_reason` says why.",
          "type": "string"
        }
      ]
    },
    "Verifier": {
      "additionalProperties": false,
      "description": "The verifier that produced a result.",
      "properties": {
        "class": {
          "$ref": "#/$defs/Id",
          "description": "Verifier class (`reviewer`, `security`, ...)."
        },
        "principal": {
          "$ref": "#/$defs/Name",
          "description": "Verifier principal."
        },
        "run": {
          "$ref": "#/$defs/Name",
          "description": "Verifier run."
        },
        "runtime": {
          "anyOf": [
            {
              "$ref": "#/$defs/Runtime"
            },
            {
              "type": "null"
            }
          ],
          "description": "Model runtime, when a model verified."
        }
      },
      "required": [
        "principal",
        "class",
        "run"
      ],
      "type": "object"
    }
  },
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "additionalProperties": false,
  "description": "A verification result (the verifier's evidence; never a decision).",
  "properties": {
    "context": {
      "anyOf": [
        {
          "$ref": "#/$defs/ContextRef"
        },
        {
          "type": "null"
        }
      ],
      "description": "The context the verifier saw."
    },
    "criteria": {
      "description": "One row per criterion looked at.",
      "items": {
        "$ref": "#/$defs/CriterionRow"
      },
      "type": "array"
    },
    "digest": {
      "description": "the document's own digest, computed without this field; a mismatch is tampering",
      "pattern": "^sha256:[0-9a-f]{64}$",
      "type": "string"
    },
    "dispositions": {
      "description": "Dispositions of prior blocking findings.",
      "items": {
        "$ref": "#/$defs/Disposition"
      },
      "type": "array"
    },
    "findings": {
      "description": "Findings.",
      "items": {
        "$ref": "#/$defs/Finding"
      },
      "type": "array"
    },
    "generation": {
      "description": "The execution generation the run was admitted for.",
      "format": "uint64",
      "minimum": 0,
      "type": "integer"
    },
    "id": {
      "$ref": "#/$defs/Id",
      "description": "Result id."
    },
    "status": {
      "$ref": "#/$defs/VerificationStatus",
      "description": "Completed or unavailable."
    },
    "subject_digest": {
      "$ref": "#/$defs/Digest",
      "description": "The subject it is about."
    },
    "unavailable_reason": {
      "anyOf": [
        {
          "$ref": "#/$defs/UnavailableReason"
        },
        {
          "type": "null"
        }
      ],
      "description": "Why unavailable (required when `status` is `unavailable`, refused otherwise)."
    },
    "verifier": {
      "$ref": "#/$defs/Verifier",
      "description": "Who verified."
    }
  },
  "required": [
    "id",
    "verifier",
    "subject_digest",
    "generation",
    "status",
    "criteria",
    "findings",
    "dispositions"
  ],
  "title": "VerificationResult",
  "type": "object"
}$verification$::jsonb
        WHEN 'decision' THEN $decision${
  "$defs": {
    "CriterionDecision": {
      "additionalProperties": false,
      "description": "The Gate's view of one criterion.",
      "properties": {
        "id": {
          "$ref": "#/$defs/Id",
          "description": "Criterion id."
        },
        "required": {
          "description": "Whether it is required under this policy.",
          "type": "boolean"
        },
        "sources": {
          "description": "Counted sources, sorted.",
          "items": {
            "$ref": "#/$defs/Source"
          },
          "type": "array"
        },
        "status": {
          "$ref": "#/$defs/CriterionStatus",
          "description": "Derived status."
        }
      },
      "required": [
        "id",
        "required",
        "status",
        "sources"
      ],
      "type": "object"
    },
    "CriterionStatus": {
      "description": "A criterion's status, as a source reports it or as the Gate derives it.",
      "oneOf": [
        {
          "const": "passed",
          "description": "Shown to hold.",
          "type": "string"
        },
        {
          "const": "failed",
          "description": "Shown not to hold.",
          "type": "string"
        },
        {
          "const": "inconclusive",
          "description": "Looked at, could not tell.",
          "type": "string"
        },
        {
          "const": "not_tested",
          "description": "Not looked at.",
          "type": "string"
        }
      ]
    },
    "DecisionSchema": {
      "description": "The schema tag of a decision.",
      "oneOf": [
        {
          "const": "verdict.gate-decision/v1",
          "description": "Version 1.",
          "type": "string"
        }
      ]
    },
    "Digest": {
      "description": "sha256: followed by 64 lowercase hex digits",
      "pattern": "^sha256:[0-9a-f]{64}$",
      "type": "string"
    },
    "FindingRef": {
      "additionalProperties": false,
      "description": "A reference to one version of a finding.",
      "properties": {
        "criterion": {
          "$ref": "#/$defs/Id",
          "description": "The criterion it bears on."
        },
        "id": {
          "$ref": "#/$defs/Id",
          "description": "Finding id."
        },
        "version": {
          "description": "Finding version.",
          "format": "uint64",
          "minimum": 0,
          "type": "integer"
        }
      },
      "required": [
        "id",
        "version",
        "criterion"
      ],
      "type": "object"
    },
    "Id": {
      "pattern": "^[a-z0-9][a-z0-9._-]{0,127}$",
      "type": "string"
    },
    "Outcome": {
      "description": "A decision's outcome. The order is the precedence: `Blocked` is the strongest.",
      "oneOf": [
        {
          "const": "pass",
          "description": "Everything required was shown.",
          "type": "string"
        },
        {
          "const": "human_required",
          "description": "A person must look.",
          "type": "string"
        },
        {
          "const": "rework",
          "description": "The work must change.",
          "type": "string"
        },
        {
          "const": "blocked",
          "description": "The evidence cannot be trusted or is incomplete.",
          "type": "string"
        }
      ]
    },
    "Reason": {
      "additionalProperties": false,
      "description": "One reason found by the Gate.",
      "properties": {
        "check": {
          "anyOf": [
            {
              "$ref": "#/$defs/Id"
            },
            {
              "type": "null"
            }
          ],
          "description": "The check it is about."
        },
        "code": {
          "$ref": "#/$defs/ReasonCode",
          "description": "Stable code."
        },
        "criterion": {
          "anyOf": [
            {
              "$ref": "#/$defs/Id"
            },
            {
              "type": "null"
            }
          ],
          "description": "The criterion it is about."
        },
        "detail": {
          "description": "What exactly, in words (ids and digests, never document text).",
          "type": "string"
        },
        "finding": {
          "anyOf": [
            {
              "$ref": "#/$defs/Id"
            },
            {
              "type": "null"
            }
          ],
          "description": "The finding it is about."
        },
        "outcome": {
          "$ref": "#/$defs/Outcome",
          "description": "The outcome this reason asks for."
        }
      },
      "required": [
        "code",
        "outcome",
        "detail"
      ],
      "type": "object"
    },
    "ReasonCode": {
      "description": "The stable reason codes (docs/spec/gate.md, \"Reason codes\"). Exhaustive on purpose: a new code breaks every `match`.",
      "oneOf": [
        {
          "const": "invalid_input",
          "description": "The bundle breaks the contract.",
          "type": "string"
        },
        {
          "const": "gate_error",
          "description": "An internal fault, or a policy rule that failed to evaluate.",
          "type": "string"
        },
        {
          "const": "nothing_to_verify",
          "description": "No required criterion and no required check.",
          "type": "string"
        },
        {
          "const": "evidence_missing",
          "description": "A required check has no counted evidence for this subject.",
          "type": "string"
        },
        {
          "const": "evidence_stale",
          "description": "Time-sensitive evidence older than its `max_age_s`.",
          "type": "string"
        },
        {
          "const": "evidence_from_future",
          "description": "`observed_at` more than 300 s after `now`.",
          "type": "string"
        },
        {
          "const": "evidence_tampered",
          "description": "A carried digest does not match its document.",
          "type": "string"
        },
        {
          "const": "evidence_definition_mismatch",
          "description": "Evidence ran another definition than the subject pins.",
          "type": "string"
        },
        {
          "const": "self_verification_denied",
          "description": "A verifier or evidence principal/run is the producer's.",
          "type": "string"
        },
        {
          "const": "verifier_missing",
          "description": "A required verifier class has no completed, counted result.",
          "type": "string"
        },
        {
          "const": "verifier_unavailable",
          "description": "The only results of a required class are unavailable.",
          "type": "string"
        },
        {
          "const": "verifier_output_invalid",
          "description": "A result names an unknown criterion, repeats a row, or breaks the schema.",
          "type": "string"
        },
        {
          "const": "stale_generation",
          "description": "A result was admitted for an older generation and is the only one of its class.",
          "type": "string"
        },
        {
          "const": "criterion_row_missing",
          "description": "A completed result of a required class has no row for a required criterion.",
          "type": "string"
        },
        {
          "const": "criterion_not_tested",
          "description": "No source tested a required criterion.",
          "type": "string"
        },
        {
          "const": "check_error",
          "description": "A required check errored.",
          "type": "string"
        },
        {
          "const": "prior_blocker_unaddressed",
          "description": "A prior blocking finding is not addressed by any counted result.",
          "type": "string"
        },
        {
          "const": "check_failed",
          "description": "A required deterministic check failed.",
          "type": "string"
        },
        {
          "const": "criterion_failed",
          "description": "A required criterion failed.",
          "type": "string"
        },
        {
          "const": "blocking_finding",
          "description": "A change-scoped blocker on a required criterion.",
          "type": "string"
        },
        {
          "const": "prior_blocker_still_present",
          "description": "A prior blocker is reported still present.",
          "type": "string"
        },
        {
          "const": "human_rejected",
          "description": "A human rejected this subject under this policy.",
          "type": "string"
        },
        {
          "const": "criterion_inconclusive",
          "description": "A required criterion is inconclusive.",
          "type": "string"
        },
        {
          "const": "contradiction",
          "description": "Sources disagree on a required criterion.",
          "type": "string"
        },
        {
          "const": "unsupported_pass",
          "description": "A `passed` cites no ref, or a ref not in the bundle.",
          "type": "string"
        },
        {
          "const": "human_review_required",
          "description": "Risk policy or a disposition requires a human, and no approval binds.",
          "type": "string"
        },
        {
          "const": "policy_rule",
          "description": "A policy rule fired.",
          "type": "string"
        }
      ]
    },
    "Scores": {
      "additionalProperties": false,
      "description": "Advisory score rollup over required criteria; `null` where a class has no criteria.",
      "properties": {
        "c": {
          "description": "Weighted share of correctness criteria passed.",
          "format": "double",
          "type": [
            "number",
            "null"
          ]
        },
        "cat_v": {
          "description": "0 if a catastrophic criterion failed, null if one is not passed, else 1.",
          "format": "double",
          "type": [
            "number",
            "null"
          ]
        },
        "rec_v": {
          "description": "Weighted share of safety criteria passed.",
          "format": "double",
          "type": [
            "number",
            "null"
          ]
        }
      },
      "type": "object"
    },
    "Source": {
      "additionalProperties": false,
      "description": "One counted source of a criterion's status.",
      "properties": {
        "kind": {
          "$ref": "#/$defs/SourceKind",
          "description": "Check evidence or verification row."
        },
        "ref": {
          "$ref": "#/$defs/Id",
          "description": "The evidence id or verification id."
        },
        "status": {
          "$ref": "#/$defs/CriterionStatus",
          "description": "What it says, as counted (an unsupported `passed` counts as `inconclusive`)."
        }
      },
      "required": [
        "kind",
        "ref",
        "status"
      ],
      "type": "object"
    },
    "SourceKind": {
      "description": "What kind of item a criterion source is.",
      "oneOf": [
        {
          "const": "check",
          "description": "Check evidence.",
          "type": "string"
        },
        {
          "const": "verification",
          "description": "A row of a verification result.",
          "type": "string"
        }
      ]
    },
    "Timestamp": {
      "format": "date-time",
      "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,9})?Z$",
      "type": "string"
    }
  },
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "additionalProperties": false,
  "description": "The Gate's decision for one exact subject, policy and evidence set.",
  "properties": {
    "criteria": {
      "description": "Every criterion of the subject, in the subject's order.",
      "items": {
        "$ref": "#/$defs/CriterionDecision"
      },
      "type": "array"
    },
    "evaluation_key": {
      "anyOf": [
        {
          "$ref": "#/$defs/Digest"
        },
        {
          "type": "null"
        }
      ],
      "description": "Equal keys mean equal decisions; `null` only for `invalid_input`."
    },
    "evidence_set_digest": {
      "anyOf": [
        {
          "$ref": "#/$defs/Digest"
        },
        {
          "type": "null"
        }
      ],
      "description": "Digest of the set of items in the bundle; `null` when it could not be read."
    },
    "follow_ups": {
      "description": "Findings kept for separate triage; they never change the outcome.",
      "items": {
        "$ref": "#/$defs/FindingRef"
      },
      "type": "array"
    },
    "outcome": {
      "$ref": "#/$defs/Outcome",
      "description": "The strongest outcome of any reason; `pass` when there is none."
    },
    "policy_digest": {
      "anyOf": [
        {
          "$ref": "#/$defs/Digest"
        },
        {
          "type": "null"
        }
      ],
      "description": "The policy applied; `null` when it could not be read."
    },
    "reasons": {
      "description": "Every reason found, sorted by precedence then code.",
      "items": {
        "$ref": "#/$defs/Reason"
      },
      "type": "array"
    },
    "rework": {
      "description": "Findings that require rework.",
      "items": {
        "$ref": "#/$defs/FindingRef"
      },
      "type": "array"
    },
    "schema": {
      "$ref": "#/$defs/DecisionSchema",
      "description": "`verdict.gate-decision/v1`."
    },
    "scores": {
      "$ref": "#/$defs/Scores",
      "description": "Advisory scores."
    },
    "subject_digest": {
      "anyOf": [
        {
          "$ref": "#/$defs/Digest"
        },
        {
          "type": "null"
        }
      ],
      "description": "The subject decided on; `null` when it could not be read."
    },
    "unresolved_prior_blockers": {
      "description": "Prior blockers not resolved by a counted result.",
      "items": {
        "$ref": "#/$defs/FindingRef"
      },
      "type": "array"
    },
    "valid_until": {
      "anyOf": [
        {
          "$ref": "#/$defs/Timestamp"
        },
        {
          "type": "null"
        }
      ],
      "description": "On a pass: when the earliest time-sensitive evidence it used goes stale."
    }
  },
  "required": [
    "schema",
    "outcome",
    "criteria",
    "reasons",
    "rework",
    "follow_ups",
    "unresolved_prior_blockers",
    "scores"
  ],
  "title": "GateDecision",
  "type": "object"
}$decision$::jsonb
        WHEN 'bundle' THEN $bundle${
  "$defs": {
    "BundleSchema": {
      "description": "The schema tag of a bundle.",
      "oneOf": [
        {
          "const": "verdict.gate-bundle/v1",
          "description": "Version 1.",
          "type": "string"
        }
      ]
    },
    "CheckEvidence": {
      "additionalProperties": false,
      "description": "Check evidence (`kind: \"check\"`).",
      "properties": {
        "check": {
          "$ref": "#/$defs/Id",
          "description": "The check it ran."
        },
        "content_digest": {
          "$ref": "#/$defs/Digest",
          "description": "Digest of what was observed."
        },
        "definition_digest": {
          "$ref": "#/$defs/Digest",
          "description": "The exact definition it ran."
        },
        "digest": {
          "description": "the document's own digest, computed without this field; a mismatch is tampering",
          "pattern": "^sha256:[0-9a-f]{64}$",
          "type": "string"
        },
        "freshness": {
          "$ref": "#/$defs/Freshness",
          "description": "How long it stays true."
        },
        "hard": {
          "default": true,
          "description": "A hard failure dominates any other source (default true).",
          "type": "boolean"
        },
        "id": {
          "$ref": "#/$defs/Id",
          "description": "Evidence id."
        },
        "kind": {
          "$ref": "#/$defs/EvidenceKind",
          "description": "`check`."
        },
        "observed_at": {
          "$ref": "#/$defs/Timestamp",
          "description": "When it was observed."
        },
        "outcome": {
          "$ref": "#/$defs/CheckOutcome",
          "description": "What it found."
        },
        "produced_by": {
          "$ref": "#/$defs/ProducedBy",
          "description": "Who produced it."
        },
        "subject_digest": {
          "$ref": "#/$defs/Digest",
          "description": "The subject it is about."
        }
      },
      "required": [
        "id",
        "kind",
        "check",
        "subject_digest",
        "definition_digest",
        "produced_by",
        "outcome",
        "content_digest",
        "observed_at",
        "freshness"
      ],
      "type": "object"
    },
    "CheckOutcome": {
      "description": "What a check observed.",
      "oneOf": [
        {
          "const": "pass",
          "description": "The expectation held.",
          "type": "string"
        },
        {
          "const": "fail",
          "description": "The expectation did not hold.",
          "type": "string"
        },
        {
          "const": "error",
          "description": "The check could not observe (infrastructure); proves nothing.",
          "type": "string"
        }
      ]
    },
    "CheckPin": {
      "additionalProperties": false,
      "description": "A deterministic check the subject pins, by exact definition.",
      "properties": {
        "criteria": {
          "description": "Criteria the check bears on.",
          "items": {
            "$ref": "#/$defs/Id"
          },
          "type": "array"
        },
        "definition_digest": {
          "$ref": "#/$defs/Digest",
          "description": "Digest of the exact check definition."
        },
        "id": {
          "$ref": "#/$defs/Id",
          "description": "Check id."
        }
      },
      "required": [
        "id",
        "definition_digest",
        "criteria"
      ],
      "type": "object"
    },
    "ContextRef": {
      "additionalProperties": false,
      "description": "The context a verifier saw.",
      "properties": {
        "complete": {
          "description": "Whether every required item fit.",
          "type": "boolean"
        },
        "digest": {
          "$ref": "#/$defs/Digest",
          "description": "Digest of the context manifest."
        }
      },
      "required": [
        "digest",
        "complete"
      ],
      "type": "object"
    },
    "Criteria": {
      "additionalProperties": false,
      "description": "The acceptance criteria at one revision.",
      "properties": {
        "items": {
          "description": "The criteria, in their stated order.",
          "items": {
            "$ref": "#/$defs/Criterion"
          },
          "type": "array"
        },
        "revision": {
          "$ref": "#/$defs/Name",
          "description": "Revision label."
        }
      },
      "required": [
        "revision",
        "items"
      ],
      "type": "object"
    },
    "Criterion": {
      "additionalProperties": false,
      "description": "One acceptance criterion.",
      "properties": {
        "id": {
          "$ref": "#/$defs/Id",
          "description": "Identifier."
        },
        "required": {
          "default": true,
          "description": "Whether the Gate requires it (default true).",
          "type": "boolean"
        },
        "role": {
          "$ref": "#/$defs/CriterionRole",
          "default": "correctness",
          "description": "Score role (default correctness)."
        },
        "text": {
          "description": "What must be true.",
          "type": "string"
        },
        "weight": {
          "description": "Score weight, finite and > 0 (default 1).",
          "exclusiveMinimum": 0,
          "format": "double",
          "type": [
            "number",
            "null"
          ]
        }
      },
      "required": [
        "id",
        "text"
      ],
      "type": "object"
    },
    "CriterionRole": {
      "description": "How a criterion feeds the advisory scores.",
      "oneOf": [
        {
          "const": "correctness",
          "description": "Did the work do what was asked (`c`).",
          "type": "string"
        },
        {
          "const": "safety",
          "description": "Did it keep what must keep working (`rec_v`).",
          "type": "string"
        },
        {
          "const": "catastrophic",
          "description": "Did it avoid disaster (`cat_v`).",
          "type": "string"
        }
      ]
    },
    "CriterionRow": {
      "additionalProperties": false,
      "description": "One criterion row of a verification result.",
      "properties": {
        "evidence_refs": {
          "description": "Refs to items in the bundle that support the row.",
          "items": {
            "type": "string"
          },
          "type": "array"
        },
        "id": {
          "$ref": "#/$defs/Id",
          "description": "Criterion id."
        },
        "method": {
          "description": "How it looked.",
          "type": "string"
        },
        "status": {
          "$ref": "#/$defs/CriterionStatus",
          "description": "What the verifier found."
        }
      },
      "required": [
        "id",
        "status",
        "method",
        "evidence_refs"
      ],
      "type": "object"
    },
    "CriterionStatus": {
      "description": "A criterion's status, as a source reports it or as the Gate derives it.",
      "oneOf": [
        {
          "const": "passed",
          "description": "Shown to hold.",
          "type": "string"
        },
        {
          "const": "failed",
          "description": "Shown not to hold.",
          "type": "string"
        },
        {
          "const": "inconclusive",
          "description": "Looked at, could not tell.",
          "type": "string"
        },
        {
          "const": "not_tested",
          "description": "Not looked at.",
          "type": "string"
        }
      ]
    },
    "Digest": {
      "description": "sha256: followed by 64 lowercase hex digits",
      "pattern": "^sha256:[0-9a-f]{64}$",
      "type": "string"
    },
    "Disposition": {
      "additionalProperties": false,
      "description": "A verifier's disposition of a prior blocking finding.",
      "properties": {
        "disposition": {
          "$ref": "#/$defs/DispositionKind",
          "description": "What became of it."
        },
        "evidence_refs": {
          "description": "Supporting refs.",
          "items": {
            "type": "string"
          },
          "type": "array"
        },
        "finding": {
          "$ref": "#/$defs/Id",
          "description": "Finding id."
        },
        "reason": {
          "description": "Why (required for `superseded_by_subject_change`).",
          "type": [
            "string",
            "null"
          ]
        },
        "version": {
          "description": "Finding version.",
          "format": "uint64",
          "minimum": 0,
          "type": "integer"
        }
      },
      "required": [
        "finding",
        "version",
        "disposition",
        "evidence_refs"
      ],
      "type": "object"
    },
    "DispositionKind": {
      "description": "What became of a prior blocking finding.",
      "oneOf": [
        {
          "const": "resolved",
          "description": "Fixed; needs evidence refs that exist in the bundle.",
          "type": "string"
        },
        {
          "const": "still_present",
          "description": "Still there.",
          "type": "string"
        },
        {
          "const": "superseded_by_subject_change",
          "description": "No longer applies because the subject changed; needs a reason.",
          "type": "string"
        },
        {
          "const": "human_required",
          "description": "Needs a person.",
          "type": "string"
        }
      ]
    },
    "EvidenceKind": {
      "description": "The `kind` tag of check evidence.",
      "oneOf": [
        {
          "const": "check",
          "description": "Deterministic check evidence.",
          "type": "string"
        }
      ]
    },
    "Execution": {
      "additionalProperties": false,
      "description": "An execution and its generation (state revision).",
      "properties": {
        "generation": {
          "description": "State revision; a retry is a new generation.",
          "format": "uint64",
          "minimum": 0,
          "type": "integer"
        },
        "id": {
          "$ref": "#/$defs/Name",
          "description": "Execution id."
        }
      },
      "required": [
        "id",
        "generation"
      ],
      "type": "object"
    },
    "Finding": {
      "additionalProperties": false,
      "description": "An immutable finding; a change is a new version.",
      "properties": {
        "confidence": {
          "description": "Advisory only; never read by the Gate.",
          "format": "double",
          "type": [
            "number",
            "null"
          ]
        },
        "criterion": {
          "$ref": "#/$defs/Id",
          "description": "The criterion it bears on."
        },
        "digest": {
          "description": "the document's own digest, computed without this field; a mismatch is tampering",
          "pattern": "^sha256:[0-9a-f]{64}$",
          "type": "string"
        },
        "evidence_refs": {
          "description": "Supporting refs.",
          "items": {
            "type": "string"
          },
          "type": "array"
        },
        "id": {
          "$ref": "#/$defs/Id",
          "description": "Stable finding id."
        },
        "location": {
          "anyOf": [
            {
              "$ref": "#/$defs/Location"
            },
            {
              "type": "null"
            }
          ],
          "description": "Where."
        },
        "method": {
          "description": "How it was found.",
          "type": "string"
        },
        "remediation": {
          "description": "What to do about it.",
          "type": [
            "string",
            "null"
          ]
        },
        "scope": {
          "$ref": "#/$defs/Scope",
          "description": "Change scope."
        },
        "severity": {
          "$ref": "#/$defs/Severity",
          "description": "Severity."
        },
        "subject_digest": {
          "$ref": "#/$defs/Digest",
          "description": "The subject it was found on."
        },
        "type": {
          "description": "Kind of problem.",
          "type": "string"
        },
        "version": {
          "description": "Version (≥ 1).",
          "format": "uint64",
          "minimum": 0,
          "type": "integer"
        }
      },
      "required": [
        "id",
        "version",
        "criterion",
        "type",
        "severity",
        "scope",
        "subject_digest",
        "evidence_refs",
        "method"
      ],
      "type": "object"
    },
    "Freshness": {
      "description": "How long an observation stays true.\n\nRead by hand rather than by serde's tagged-enum support, which buffers the whole object\nfirst and lets `{\"kind\": \"content\"}` carry a `max_age_s` it then ignores: here each kind\ntakes exactly its own fields (docs/spec/evidence.md).",
      "oneOf": [
        {
          "additionalProperties": false,
          "description": "An immutable fact about content: no age limit.",
          "properties": {
            "kind": {
              "const": "content",
              "type": "string"
            }
          },
          "required": [
            "kind"
          ],
          "type": "object"
        },
        {
          "additionalProperties": false,
          "description": "An observation of a live system that goes stale after `max_age_s` seconds.",
          "properties": {
            "kind": {
              "const": "time",
              "type": "string"
            },
            "max_age_s": {
              "description": "Seconds after `observed_at` at which it is stale.",
              "format": "uint64",
              "minimum": 0,
              "type": "integer"
            }
          },
          "required": [
            "kind",
            "max_age_s"
          ],
          "type": "object"
        }
      ]
    },
    "HumanDecision": {
      "additionalProperties": false,
      "description": "A person's decision, bound to one subject and one policy.",
      "properties": {
        "decided_at": {
          "$ref": "#/$defs/Timestamp",
          "description": "When."
        },
        "decision": {
          "$ref": "#/$defs/HumanVerdict",
          "description": "Approve or reject."
        },
        "digest": {
          "description": "the document's own digest, computed without this field; a mismatch is tampering",
          "pattern": "^sha256:[0-9a-f]{64}$",
          "type": "string"
        },
        "id": {
          "$ref": "#/$defs/Id",
          "description": "Decision id."
        },
        "policy_digest": {
          "$ref": "#/$defs/Digest",
          "description": "The policy it binds."
        },
        "principal": {
          "$ref": "#/$defs/Name",
          "description": "Who decided."
        },
        "reason": {
          "description": "Why.",
          "type": "string"
        },
        "role": {
          "$ref": "#/$defs/HumanRole",
          "description": "`human`."
        },
        "subject_digest": {
          "$ref": "#/$defs/Digest",
          "description": "The subject it binds."
        }
      },
      "required": [
        "id",
        "principal",
        "role",
        "subject_digest",
        "policy_digest",
        "decision",
        "reason",
        "decided_at"
      ],
      "type": "object"
    },
    "HumanRole": {
      "description": "The `role` tag of a human decision.",
      "oneOf": [
        {
          "const": "human",
          "description": "A person.",
          "type": "string"
        }
      ]
    },
    "HumanVerdict": {
      "description": "Approve or reject.",
      "oneOf": [
        {
          "const": "approve",
          "description": "Approve: clears `human_required` reasons only.",
          "type": "string"
        },
        {
          "const": "reject",
          "description": "Reject: rework.",
          "type": "string"
        }
      ]
    },
    "Id": {
      "pattern": "^[a-z0-9][a-z0-9._-]{0,127}$",
      "type": "string"
    },
    "Location": {
      "additionalProperties": false,
      "description": "Where a finding is.",
      "properties": {
        "line": {
          "description": "Line.",
          "format": "uint64",
          "minimum": 0,
          "type": [
            "integer",
            "null"
          ]
        },
        "path": {
          "description": "Path inside it.",
          "type": [
            "string",
            "null"
          ]
        },
        "resource": {
          "description": "Resource name.",
          "type": "string"
        }
      },
      "required": [
        "resource"
      ],
      "type": "object"
    },
    "Name": {
      "maxLength": 256,
      "minLength": 1,
      "type": "string"
    },
    "Objective": {
      "additionalProperties": false,
      "description": "The objective's revision and digest.",
      "properties": {
        "digest": {
          "$ref": "#/$defs/Digest",
          "description": "Digest of the objective text."
        },
        "revision": {
          "$ref": "#/$defs/Name",
          "description": "Revision label."
        }
      },
      "required": [
        "revision",
        "digest"
      ],
      "type": "object"
    },
    "Outcome": {
      "description": "A decision's outcome. The order is the precedence: `Blocked` is the strongest.",
      "oneOf": [
        {
          "const": "pass",
          "description": "Everything required was shown.",
          "type": "string"
        },
        {
          "const": "human_required",
          "description": "A person must look.",
          "type": "string"
        },
        {
          "const": "rework",
          "description": "The work must change.",
          "type": "string"
        },
        {
          "const": "blocked",
          "description": "The evidence cannot be trusted or is incomplete.",
          "type": "string"
        }
      ]
    },
    "Policy": {
      "additionalProperties": false,
      "description": "A versioned gate policy. Unknown fields are refused: a typo must not weaken it.",
      "properties": {
        "check_evidence_from": {
          "default": [
            "runner"
          ],
          "description": "Roles whose check evidence counts.",
          "items": {
            "$ref": "#/$defs/Role"
          },
          "type": "array"
        },
        "digest": {
          "description": "the document's own digest, computed without this field; a mismatch is tampering",
          "pattern": "^sha256:[0-9a-f]{64}$",
          "type": "string"
        },
        "evidence_refs_waived": {
          "default": [],
          "description": "Criteria for which the model verifier accepts a `passed` row that cites no ref. Without\na waiver every `passed` row must cite one (the verifier's own rule, whatever\n`require_evidence_refs` says). The Gate does not read it: with `require_evidence_refs`\nit still treats an uncited pass as `unsupported_pass`.",
          "items": {
            "$ref": "#/$defs/Id"
          },
          "type": "array"
        },
        "name": {
          "$ref": "#/$defs/Id",
          "description": "Policy name."
        },
        "on_contradiction": {
          "$ref": "#/$defs/Outcome",
          "default": "human_required",
          "description": "Outcome when sources disagree on a required criterion (never `pass`).",
          "not": {
            "const": "pass"
          }
        },
        "on_inconclusive": {
          "$ref": "#/$defs/Outcome",
          "default": "human_required",
          "description": "Outcome for an inconclusive required criterion (never `pass`).",
          "not": {
            "const": "pass"
          }
        },
        "optional_criteria": {
          "default": [],
          "description": "Criteria declared non-required for this policy.",
          "items": {
            "$ref": "#/$defs/Id"
          },
          "type": "array"
        },
        "require_evidence_refs": {
          "default": true,
          "description": "Whether a verifier's `passed` must cite refs that exist in the bundle.",
          "type": "boolean"
        },
        "required_checks": {
          "default": [],
          "description": "Checks that must have fresh, intact, independent evidence.",
          "items": {
            "$ref": "#/$defs/Id"
          },
          "type": "array"
        },
        "required_verifiers": {
          "default": [],
          "description": "Verifier classes that must each return a completed result.",
          "items": {
            "$ref": "#/$defs/Id"
          },
          "type": "array"
        },
        "revision": {
          "description": "Policy revision.",
          "format": "uint64",
          "minimum": 0,
          "type": "integer"
        },
        "risk": {
          "additionalProperties": {
            "$ref": "#/$defs/RiskRequirement"
          },
          "default": {},
          "description": "Extra requirements per risk class.",
          "type": "object"
        },
        "rules": {
          "default": [],
          "description": "Extra CEL rules; they only make a decision stricter.",
          "items": {
            "$ref": "#/$defs/Rule"
          },
          "type": "array"
        },
        "schema": {
          "$ref": "#/$defs/PolicySchema",
          "description": "`verdict.policy/v1`."
        }
      },
      "required": [
        "schema",
        "name",
        "revision"
      ],
      "type": "object"
    },
    "PolicySchema": {
      "description": "The schema tag of a policy.",
      "oneOf": [
        {
          "const": "verdict.policy/v1",
          "description": "Version 1.",
          "type": "string"
        }
      ]
    },
    "ProducedBy": {
      "additionalProperties": false,
      "description": "Who produced a piece of evidence.",
      "properties": {
        "principal": {
          "$ref": "#/$defs/Name",
          "description": "Principal."
        },
        "role": {
          "$ref": "#/$defs/Role",
          "description": "The role it acted in."
        }
      },
      "required": [
        "principal",
        "role"
      ],
      "type": "object"
    },
    "Producer": {
      "additionalProperties": false,
      "description": "The principal and run that produced the work.",
      "properties": {
        "principal": {
          "$ref": "#/$defs/Name",
          "description": "Producer principal."
        },
        "run": {
          "$ref": "#/$defs/Name",
          "description": "Producer run."
        }
      },
      "required": [
        "principal",
        "run"
      ],
      "type": "object"
    },
    "Resource": {
      "additionalProperties": false,
      "description": "An exact resource version (diff, artifact, ...).",
      "properties": {
        "digest": {
          "$ref": "#/$defs/Digest",
          "description": "Content digest."
        },
        "kind": {
          "$ref": "#/$defs/Name",
          "description": "Kind of resource."
        },
        "name": {
          "$ref": "#/$defs/Name",
          "description": "Name, usable as an evidence ref."
        },
        "uri": {
          "description": "Where to find it.",
          "type": [
            "string",
            "null"
          ]
        }
      },
      "required": [
        "name",
        "kind",
        "digest"
      ],
      "type": "object"
    },
    "Risk": {
      "additionalProperties": false,
      "description": "Risk classification of a subject.",
      "properties": {
        "capabilities": {
          "description": "Capabilities the work touches.",
          "items": {
            "type": "string"
          },
          "type": "array"
        },
        "class": {
          "$ref": "#/$defs/RiskClass",
          "description": "Class."
        },
        "revision": {
          "$ref": "#/$defs/Name",
          "description": "Revision of the classification."
        }
      },
      "required": [
        "class",
        "revision",
        "capabilities"
      ],
      "type": "object"
    },
    "RiskClass": {
      "description": "Risk class, lowest to highest.",
      "oneOf": [
        {
          "const": "low",
          "description": "Low.",
          "type": "string"
        },
        {
          "const": "medium",
          "description": "Medium.",
          "type": "string"
        },
        {
          "const": "high",
          "description": "High.",
          "type": "string"
        },
        {
          "const": "critical",
          "description": "Critical.",
          "type": "string"
        }
      ]
    },
    "RiskRequirement": {
      "additionalProperties": false,
      "description": "Requirements added on top for one risk class.",
      "properties": {
        "human": {
          "default": false,
          "description": "Whether a human approval bound to subject and policy is needed.",
          "type": "boolean"
        },
        "required_verifiers": {
          "default": [],
          "description": "Extra verifier classes.",
          "items": {
            "$ref": "#/$defs/Id"
          },
          "type": "array"
        }
      },
      "type": "object"
    },
    "Role": {
      "description": "A principal's role (docs/spec/authority.md).",
      "oneOf": [
        {
          "const": "operator",
          "description": "Runs the system; manages principals and grants.",
          "type": "string"
        },
        {
          "const": "producer",
          "description": "Produces the work being graded.",
          "type": "string"
        },
        {
          "const": "runner",
          "description": "Runs deterministic checks.",
          "type": "string"
        },
        {
          "const": "verifier",
          "description": "Reviews the work independently.",
          "type": "string"
        },
        {
          "const": "human",
          "description": "A person who approves or rejects.",
          "type": "string"
        }
      ]
    },
    "Rule": {
      "additionalProperties": false,
      "description": "A policy rule: when the CEL expression holds, add a reason with this outcome.",
      "properties": {
        "id": {
          "$ref": "#/$defs/Id",
          "description": "Rule id."
        },
        "outcome": {
          "$ref": "#/$defs/Outcome",
          "description": "Outcome when it fires (`rework`, `human_required` or `blocked`).",
          "not": {
            "const": "pass"
          }
        },
        "reason": {
          "description": "Why, in words.",
          "type": "string"
        },
        "when": {
          "description": "CEL expression over the decision context; must evaluate to a bool.",
          "type": "string"
        }
      },
      "required": [
        "id",
        "when",
        "outcome",
        "reason"
      ],
      "type": "object"
    },
    "Runtime": {
      "additionalProperties": false,
      "description": "The runtime a verifier ran on.",
      "properties": {
        "model": {
          "$ref": "#/$defs/Name",
          "description": "Model name."
        },
        "provider": {
          "$ref": "#/$defs/Name",
          "description": "Provider name."
        },
        "snapshot": {
          "$ref": "#/$defs/Name",
          "description": "The provider's model snapshot or fingerprint."
        }
      },
      "required": [
        "provider",
        "model",
        "snapshot"
      ],
      "type": "object"
    },
    "Scope": {
      "description": "Whether the change caused a finding.",
      "oneOf": [
        {
          "const": "change",
          "description": "Caused, exposed or materially worsened by this change.",
          "type": "string"
        },
        {
          "const": "adjacent",
          "description": "Near the change but not caused by it.",
          "type": "string"
        },
        {
          "const": "pre_existing",
          "description": "There before the change.",
          "type": "string"
        }
      ]
    },
    "Severity": {
      "description": "How bad a finding is.",
      "oneOf": [
        {
          "const": "blocker",
          "description": "Must be fixed before passing.",
          "type": "string"
        },
        {
          "const": "major",
          "description": "Major.",
          "type": "string"
        },
        {
          "const": "minor",
          "description": "Minor.",
          "type": "string"
        },
        {
          "const": "info",
          "description": "For information.",
          "type": "string"
        }
      ]
    },
    "Subject": {
      "additionalProperties": false,
      "description": "One exact, immutable unit of work to grade. Its digest is its identity.",
      "properties": {
        "checks": {
          "description": "Deterministic checks that apply, and the criteria each bears on.",
          "items": {
            "$ref": "#/$defs/CheckPin"
          },
          "type": "array"
        },
        "criteria": {
          "$ref": "#/$defs/Criteria",
          "description": "The acceptance criteria."
        },
        "digest": {
          "description": "the document's own digest, computed without this field; a mismatch is tampering",
          "pattern": "^sha256:[0-9a-f]{64}$",
          "type": "string"
        },
        "execution": {
          "$ref": "#/$defs/Execution",
          "description": "The execution and its state revision."
        },
        "mission": {
          "anyOf": [
            {
              "$ref": "#/$defs/Name"
            },
            {
              "type": "null"
            }
          ],
          "description": "The mission this work belongs to."
        },
        "objective": {
          "$ref": "#/$defs/Objective",
          "description": "The objective's revision and digest."
        },
        "producer": {
          "$ref": "#/$defs/Producer",
          "description": "Who produced the work."
        },
        "resources": {
          "description": "Exact diff / artifact / resource versions.",
          "items": {
            "$ref": "#/$defs/Resource"
          },
          "type": "array"
        },
        "risk": {
          "$ref": "#/$defs/Risk",
          "description": "Risk classification."
        },
        "schema": {
          "$ref": "#/$defs/SubjectSchema",
          "description": "`verdict.subject/v1`."
        },
        "work_items": {
          "description": "Work package / operation / result identities and versions.",
          "items": {
            "$ref": "#/$defs/WorkItem"
          },
          "type": "array"
        },
        "workflow_revision": {
          "$ref": "#/$defs/Name",
          "description": "The workflow revision."
        }
      },
      "required": [
        "schema",
        "execution",
        "work_items",
        "producer",
        "objective",
        "criteria",
        "resources",
        "checks",
        "workflow_revision",
        "risk"
      ],
      "type": "object"
    },
    "SubjectSchema": {
      "description": "The schema tag of a subject.",
      "oneOf": [
        {
          "const": "verdict.subject/v1",
          "description": "Version 1.",
          "type": "string"
        }
      ]
    },
    "Timestamp": {
      "format": "date-time",
      "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,9})?Z$",
      "type": "string"
    },
    "UnavailableReason": {
      "description": "Why a verification run is unavailable.",
      "oneOf": [
        {
          "const": "timeout",
          "description": "The call ran out of time.",
          "type": "string"
        },
        {
          "const": "provider_error",
          "description": "The provider failed.",
          "type": "string"
        },
        {
          "const": "budget_exhausted",
          "description": "The budget ran out.",
          "type": "string"
        },
        {
          "const": "context_incomplete",
          "description": "A required context item did not fit.",
          "type": "string"
        },
        {
          "const": "grant_revoked",
          "description": "The verifier's grant was revoked mid-run.",
          "type": "string"
        },
        {
          "const": "cancelled",
          "description": "The run was cancelled.",
          "type": "string"
        },
        {
          "const": "invalid_output",
          "description": "The verifier's output did not validate.",
          "type": "string"
        }
      ]
    },
    "VerificationResult": {
      "additionalProperties": false,
      "description": "A verification result (the verifier's evidence; never a decision).",
      "properties": {
        "context": {
          "anyOf": [
            {
              "$ref": "#/$defs/ContextRef"
            },
            {
              "type": "null"
            }
          ],
          "description": "The context the verifier saw."
        },
        "criteria": {
          "description": "One row per criterion looked at.",
          "items": {
            "$ref": "#/$defs/CriterionRow"
          },
          "type": "array"
        },
        "digest": {
          "description": "the document's own digest, computed without this field; a mismatch is tampering",
          "pattern": "^sha256:[0-9a-f]{64}$",
          "type": "string"
        },
        "dispositions": {
          "description": "Dispositions of prior blocking findings.",
          "items": {
            "$ref": "#/$defs/Disposition"
          },
          "type": "array"
        },
        "findings": {
          "description": "Findings.",
          "items": {
            "$ref": "#/$defs/Finding"
          },
          "type": "array"
        },
        "generation": {
          "description": "The execution generation the run was admitted for.",
          "format": "uint64",
          "minimum": 0,
          "type": "integer"
        },
        "id": {
          "$ref": "#/$defs/Id",
          "description": "Result id."
        },
        "status": {
          "$ref": "#/$defs/VerificationStatus",
          "description": "Completed or unavailable."
        },
        "subject_digest": {
          "$ref": "#/$defs/Digest",
          "description": "The subject it is about."
        },
        "unavailable_reason": {
          "anyOf": [
            {
              "$ref": "#/$defs/UnavailableReason"
            },
            {
              "type": "null"
            }
          ],
          "description": "Why unavailable (required when `status` is `unavailable`, refused otherwise)."
        },
        "verifier": {
          "$ref": "#/$defs/Verifier",
          "description": "Who verified."
        }
      },
      "required": [
        "id",
        "verifier",
        "subject_digest",
        "generation",
        "status",
        "criteria",
        "findings",
        "dispositions"
      ],
      "type": "object"
    },
    "VerificationStatus": {
      "description": "Whether a verification run completed.",
      "oneOf": [
        {
          "const": "completed",
          "description": "The verifier returned a result.",
          "type": "string"
        },
        {
          "const": "unavailable",
          "description": "It did not; `unavailable_reason` says why.",
          "type": "string"
        }
      ]
    },
    "Verifier": {
      "additionalProperties": false,
      "description": "The verifier that produced a result.",
      "properties": {
        "class": {
          "$ref": "#/$defs/Id",
          "description": "Verifier class (`reviewer`, `security`, ...)."
        },
        "principal": {
          "$ref": "#/$defs/Name",
          "description": "Verifier principal."
        },
        "run": {
          "$ref": "#/$defs/Name",
          "description": "Verifier run."
        },
        "runtime": {
          "anyOf": [
            {
              "$ref": "#/$defs/Runtime"
            },
            {
              "type": "null"
            }
          ],
          "description": "Model runtime, when a model verified."
        }
      },
      "required": [
        "principal",
        "class",
        "run"
      ],
      "type": "object"
    },
    "WorkItem": {
      "additionalProperties": false,
      "description": "A work package, operation or result identity.",
      "properties": {
        "id": {
          "$ref": "#/$defs/Name",
          "description": "Its id."
        },
        "kind": {
          "$ref": "#/$defs/Name",
          "description": "What kind of item."
        },
        "version": {
          "$ref": "#/$defs/Name",
          "description": "Its version."
        }
      },
      "required": [
        "kind",
        "id",
        "version"
      ],
      "type": "object"
    }
  },
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "additionalProperties": false,
  "description": "One evaluation's input. The order of its arrays is irrelevant.\n\nEvery document in it may carry its own `\"digest\"`; the Gate checks and strips it before\nreading the document (a mismatch is `evidence_tampered`).",
  "properties": {
    "evidence": {
      "description": "Check evidence.",
      "items": {
        "$ref": "#/$defs/CheckEvidence"
      },
      "type": "array"
    },
    "human_decisions": {
      "description": "Human decisions.",
      "items": {
        "$ref": "#/$defs/HumanDecision"
      },
      "type": "array"
    },
    "now": {
      "$ref": "#/$defs/Timestamp",
      "description": "The instant the decision is made at (the Gate reads no clock)."
    },
    "policy": {
      "$ref": "#/$defs/Policy",
      "description": "The policy."
    },
    "prior_findings": {
      "description": "Open blocking findings from earlier subjects of the same execution lineage.",
      "items": {
        "$ref": "#/$defs/Finding"
      },
      "type": "array"
    },
    "schema": {
      "$ref": "#/$defs/BundleSchema",
      "description": "`verdict.gate-bundle/v1`."
    },
    "subject": {
      "$ref": "#/$defs/Subject",
      "description": "The subject."
    },
    "verifications": {
      "description": "Verification results.",
      "items": {
        "$ref": "#/$defs/VerificationResult"
      },
      "type": "array"
    }
  },
  "required": [
    "schema",
    "policy",
    "subject",
    "evidence",
    "verifications",
    "human_decisions",
    "prior_findings",
    "now"
  ],
  "title": "GateBundle",
  "type": "object"
}$bundle$::jsonb
    END
$schemas$;

-- A schema as stored bodies are held to it: without the member `digest` of the documents that
-- may carry their own digest, which the store removes before it stores one.
CREATE FUNCTION verdict._stored_form(p_schema jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE STRICT SET search_path = verdict, pg_temp AS $$
    SELECT (CASE WHEN p_schema ->> 'title' = ANY (c.carriers) THEN p_schema #- '{properties,digest}'
            ELSE p_schema END)
        || CASE WHEN p_schema ? '$defs' THEN jsonb_build_object('$defs', (
            SELECT jsonb_object_agg(d.key, CASE WHEN d.key = ANY (c.carriers)
                THEN d.value #- '{properties,digest}' ELSE d.value END)
            FROM jsonb_each(p_schema -> '$defs') AS d)) ELSE '{}' END
    FROM (SELECT ARRAY['Subject', 'Policy', 'CheckEvidence', 'VerificationResult', 'Finding',
        'HumanDecision'] AS carriers) AS c
$$;

REVOKE ALL ON FUNCTION verdict._conforms(jsonb, jsonb, jsonb, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION verdict._schema_keywords_unknown(jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION verdict._conforms_sql(jsonb, jsonb, text, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION verdict._schema_walks(jsonb, jsonb, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION verdict._conforms_plsql(jsonb, jsonb, text, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION verdict._contract_schema(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION verdict._stored_form(jsonb) FROM PUBLIC;

DO $make$
DECLARE
    v_name text;
    v_unknown text[];
    v_cases text := '';
    v_checks text := '';
    v_code text;
    t record;
    f record;
    v_def text;
    v_hits integer;
    v_at integer;
    v_end integer;
    v_line_start integer;
    v_indent text;
    v_marker constant text := ': it is not an object holding each of ';
BEGIN
    FOREACH v_name IN ARRAY ARRAY['subject', 'policy', 'evidence', 'verification', 'decision', 'bundle'] LOOP
        IF verdict._contract_schema(v_name) IS NULL THEN
            RAISE EXCEPTION 'no schema of %', v_name;
        END IF;
        v_unknown := verdict._schema_keywords_unknown(verdict._contract_schema(v_name));
        IF cardinality(v_unknown) > 0 THEN
            RAISE EXCEPTION 'the schema of % uses keywords the database does not check: %', v_name, v_unknown;
        END IF;
    END LOOP;

    -- Each table's schema (its root and the definitions its references name), built once here
    -- and held as literals in the function, so a call reads no table and parses no schema.
    FOR t IN SELECT * FROM (VALUES
        ('subjects', 'subject', NULL),
        ('policies', 'policy', NULL),
        ('check_evidence', 'evidence', NULL),
        ('verification_results', 'verification', NULL),
        ('findings', 'bundle', 'Finding'),
        ('human_decisions', 'bundle', 'HumanDecision'),
        ('gate_decisions', 'decision', NULL)
    ) AS v(tbl, schema_name, def) LOOP
        IF t.def IS NOT NULL AND NOT (verdict._contract_schema(t.schema_name) -> '$defs') ? t.def THEN
            RAISE EXCEPTION 'the schema of % defines no %', t.schema_name, t.def;
        END IF;
        v_cases := v_cases || format(E'\n        WHEN %L THEN verdict._conforms(p_doc, %L::jsonb, %L::jsonb, %L)',
            t.tbl,
            CASE WHEN t.def IS NULL THEN verdict._stored_form(verdict._contract_schema(t.schema_name))
                ELSE jsonb_build_object('$ref', '#/$defs/' || t.def) END,
            verdict._stored_form(verdict._contract_schema(t.schema_name)), '');
        v_code := verdict._conforms_plsql(CASE WHEN t.def IS NULL
                THEN verdict._stored_form(verdict._contract_schema(t.schema_name))
                ELSE jsonb_build_object('$ref', '#/$defs/' || t.def) END,
            verdict._stored_form(verdict._contract_schema(t.schema_name)), 'p_doc', 1);
        EXECUTE format($f$CREATE FUNCTION verdict.%I(p_doc jsonb) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE STRICT SET search_path = verdict, pg_temp AS $body$
DECLARE%s
BEGIN
%sRETURN true;
END $body$$f$, '_body_conforms_' || t.tbl,
            (SELECT coalesce(string_agg(format(E'\n    %s text;', k), '' ORDER BY k), '')
                FROM (SELECT DISTINCT m[1] AS k FROM regexp_matches(v_code, 'FOR (k[0-9]+) IN SELECT', 'g') AS m) AS ks),
            v_code);
        EXECUTE format('REVOKE ALL ON FUNCTION verdict.%I(jsonb) FROM PUBLIC', '_body_conforms_' || t.tbl);
        v_checks := v_checks || format(E'\n        WHEN %L THEN verdict.%I(p_doc)', t.tbl, '_body_conforms_' || t.tbl);
    END LOOP;
    EXECUTE format($f$CREATE FUNCTION verdict._body_nonconformity(p_table text, p_doc jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT SET search_path = verdict, pg_temp AS $body$
BEGIN
    RETURN CASE p_table%s
        ELSE 'no schema is known for table ' || p_table END;
END $body$$f$, v_cases);
    REVOKE ALL ON FUNCTION verdict._body_nonconformity(text, jsonb) FROM PUBLIC;
    EXECUTE format($f$CREATE FUNCTION verdict._body_conforms(p_table text, p_doc jsonb) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE STRICT SET search_path = verdict, pg_temp AS $body$
BEGIN
    RETURN CASE p_table%s
        ELSE false END;
END $body$$f$, v_checks);
    REVOKE ALL ON FUNCTION verdict._body_conforms(text, jsonb) FROM PUBLIC;

    -- Right after the required-member check of each routine that stores a contract document.
    FOR t IN SELECT * FROM (VALUES ('subjects'), ('policies'), ('check_evidence'),
        ('verification_results'), ('findings'), ('human_decisions'), ('gate_decisions')) AS v(tbl) LOOP
        FOR f IN SELECT * FROM (VALUES
            (format('verdict.put_%s(text, text, text[], text[], text[], text[])', t.tbl), 'p_keys[i]'),
            (format('verdict.put_one_%s(text, text, text, text, text, text)', t.tbl), 'p_key')
        ) AS r(signature, key_expr) LOOP
            v_def := pg_get_functiondef(f.signature::regprocedure);
            v_hits := (length(v_def) - length(replace(v_def, v_marker, ''))) / length(v_marker);
            IF v_hits <> 1 THEN
                RAISE EXCEPTION '%: the required-member check occurs % times, not once', f.signature, v_hits;
            END IF;
            v_at := position(v_marker IN v_def);
            v_end := v_at + position(E'END IF;\n' IN substr(v_def, v_at)) - 1;
            IF v_end < v_at THEN
                RAISE EXCEPTION '%: the required-member check does not end', f.signature;
            END IF;
            v_line_start := v_end;
            WHILE v_line_start > 1 AND substr(v_def, v_line_start - 1, 1) = ' ' LOOP
                v_line_start := v_line_start - 1;
            END LOOP;
            v_indent := substr(v_def, v_line_start, v_end - v_line_start);
            v_end := v_end + length(E'END IF;\n');
            EXECUTE left(v_def, v_end - 1)
                || format(E'%sIF NOT verdict._body_conforms(%L, v_doc) THEN\n'
                    || E'%s    RAISE EXCEPTION ''%s %%: the body does not conform to its schema: %%'', %s,\n'
                    || E'%s        coalesce(verdict._body_nonconformity(%L, v_doc), ''it does not'') USING ERRCODE = ''22023'';\n'
                    || E'%sEND IF;\n', v_indent, t.tbl, v_indent, t.tbl, f.key_expr, v_indent, t.tbl, v_indent)
                || substr(v_def, v_end);
        END LOOP;
    END LOOP;
END $make$;

RESET ROLE;
