-- verdict store, PostgreSQL schema version 18: the canonical-form check reads the body's text
-- before it rebuilds anything.
--
-- Since schema version 8 every write routine asks verdict._canonical for the canonical text
-- (RFC 8785) of the body it parsed, and refuses the body unless that is the body's own text.
-- _canonical rebuilt the text from the parsed jsonb every time: one expression of nested
-- subqueries whose set-up alone cost more than the rest of an append's checks, and which then
-- sorted every object's members again. It now reads the text first and returns it as it is
-- when the text is canonical, which is what the store always sends:
-- - One anchored regular expression over the whole text admits only the tokens a canonical
--   text is made of, with nothing between them: the punctuation, true, false, null, numbers,
--   and strings escaped exactly as RFC 8785 escapes them (\" \\ \b \f \n \r \t, \u00xx in
--   lower-case hex for the other characters below U+0020, every other character as it is).
--   Whitespace, any other escape (\/, \u0041, upper-case hex) and a character below U+0020 as
--   it is all fail it. Its first form admits numbers only as integers written as ECMAScript
--   writes them with at most 15 digits (so below 2^53 - 1), never "-0". When only the second
--   form (any JSON number) matches, the pass below compares every number with the text the
--   rebuild writes for it (_jcs_number, or the integer's digits); a stretch between two strings
--   holding such a number among other tokens (an array of numbers, say) is then left to the
--   rebuild.
-- - One pass over the text cut at its quotes (once \\ and \" are set aside, the quotes left are
--   exactly the strings' ends) keeps the depth and, for each depth, the last member name met
--   there. A name that is not the first of its object (the text before it does not end with
--   `{`) must sort strictly after the last name at its depth, which is the one before it in the
--   same object: strictly, so a name given twice fails. Names holding an escape are compared
--   as the characters they stand for. In a text without characters U+E000 to U+FFFF the order
--   of the names' bytes (COLLATE "C") is their order by UTF-16 code units.
-- Whatever this reading does not accept (a text holding a character U+E000 to U+FFFF, tokens
-- the expressions refuse, names out of order or repeated, a number written otherwise or among
-- others as just said, nesting deeper than the 128 levels verdict's reader takes) is rebuilt
-- as before by _jcs, the same expression _canonical held (built by the same code in version 8),
-- with the order chosen the same way. So _canonical returns exactly what it returned before,
-- and a body is refused exactly when, and with the error with which, it was refused before.
--
-- What _canonical now assumes of its caller: `p` is `p_text` parsed (once the text reads as
-- canonical, it returns `p_text` itself). Every write routine calls it so. _cas also asked it
-- for the canonical text of a change's `new`, giving the whole change as the text; that call
-- now asks _jcs directly, with the order chosen from the change's text exactly as _canonical
-- chose it.
--
-- _canonical runs with the routines' search_path only; the settings the rebuild needs (no JIT,
-- a generic plan) are _jcs's own. Redefined: _canonical (CREATE OR REPLACE: its grants and
-- owner are kept) and _cas (spliced at a marker that must occur exactly once; CREATE OR
-- REPLACE keeps its grants, owner and settings).

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

-- The canonical text of `p`, which must be `p_text` parsed: `p_text` itself once read as
-- canonical, else the rebuild.
CREATE OR REPLACE FUNCTION verdict._canonical(p jsonb, p_text text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT SET search_path = verdict, pg_temp AS $$
DECLARE
    -- Any name that could need the slower order holds a character U+E000 to U+FFFF, which a
    -- canonical text holds as it is.
    v_remap boolean := octet_length(p_text) <> length(p_text) AND p_text ~ '[\uE000-\uFFFF]';
    v_numbers boolean;
    v_escapes boolean;
    v_parts text[];
    v_name text;
    v_depth integer := 0;
    v_last text[] := '{}';
BEGIN
    IF v_remap THEN
        RETURN verdict._jcs(p, true);
    END IF;
    -- The tokens of a canonical text and nothing between them; numbers as plain integers only,
    -- or as any number.
    IF p_text ~ '^(?:[][{}:,]|true|false|null|(?:0|-?[1-9][0-9]{0,14})(?![0-9])|"(?:[^"\\\x01-\x1f]|\\["\\bfnrt]|\\u00(?:0[0-7bef]|1[0-9a-f]))*")*$' THEN
        v_numbers := false;
    ELSIF p_text ~ '^(?:[][{}:,]|true|false|null|-?[0-9][-+.eE0-9]*|"(?:[^"\\\x01-\x1f]|\\["\\bfnrt]|\\u00(?:0[0-7bef]|1[0-9a-f]))*")*$' THEN
        v_numbers := true;
    ELSE
        RETURN verdict._jcs(p, false);
    END IF;
    -- With \\ and \" set aside (as characters no token above holds as they are), the text cut
    -- at its quotes alternates: what lies between strings at the odd places, the strings'
    -- contents at the even ones.
    v_escapes := strpos(p_text, '\') > 0;
    v_parts := string_to_array(CASE WHEN v_escapes
        THEN replace(replace(p_text, '\\', chr(1)), '\"', chr(2)) ELSE p_text END, '"');
    FOR i IN 1 .. cardinality(v_parts) BY 2 LOOP
        -- The string before a colon is a member name, at the current depth. Unless it is the
        -- first of its object, the last name seen at that depth is the one before it in the
        -- same object, and must sort strictly before it.
        IF left(v_parts[i], 1) = ':' THEN
            v_name := CASE WHEN v_escapes AND v_parts[i - 1] ~ '[\\\x01\x02]'
                THEN ('"' || replace(replace(v_parts[i - 1], chr(1), '\\'), chr(2), '\"') || '"')::json #>> '{}'
                ELSE v_parts[i - 1] END;
            IF right(v_parts[i - 2], 1) <> '{' AND (v_last[v_depth] < v_name COLLATE "C") IS NOT TRUE THEN
                RETURN verdict._jcs(p, false);
            END IF;
            v_last[v_depth] := v_name;
        END IF;
        -- The depth after this part. Two things set it to 1000 or more instead, where it stays,
        -- so that the text goes to the rebuild below: nesting deeper than the 128 levels
        -- verdict's reader takes; and, when some number is not a plain integer, a part holding
        -- a number that is not written as the rebuild writes it (_jcs_number, or an integer's
        -- digits), or holding other tokens besides a number that is not a plain integer
        -- (between strings, digits are numbers' only).
        v_depth := CASE WHEN v_depth >= 1000 THEN 1000 ELSE v_depth + CASE v_parts[i]
            WHEN ':' THEN 0 WHEN ',' THEN 0 WHEN '},' THEN -1 WHEN '],' THEN -1
            WHEN ':{' THEN CASE WHEN v_depth < 128 THEN 1 ELSE 1000 END
            WHEN ':[' THEN CASE WHEN v_depth < 128 THEN 1 ELSE 1000 END
            ELSE CASE
                WHEN v_depth + length(v_parts[i]) - length(replace(replace(v_parts[i], '{', ''), '[', '')) > 128
                    THEN 1000
                WHEN v_numbers AND v_parts[i] ~ '[0-9]' AND NOT CASE
                    WHEN btrim(v_parts[i], ':,[]{}') ~ '^-?[0-9][-+.eE0-9]*$'
                        THEN btrim(v_parts[i], ':,[]{}') IS NOT DISTINCT FROM CASE
                            WHEN scale(btrim(v_parts[i], ':,[]{}')::numeric) = 0
                                AND abs(btrim(v_parts[i], ':,[]{}')::numeric) <= 9007199254740991
                            THEN btrim(v_parts[i], ':,[]{}')::numeric::text
                            ELSE verdict._jcs_number(btrim(v_parts[i], ':,[]{}')::numeric) END
                    ELSE v_parts[i] ~ '^(?:[][{}:,]|true|false|null|(?:0|-?[1-9][0-9]{0,14})(?![0-9]))*$' END
                    THEN 1000
                ELSE length(replace(replace(v_parts[i], '}', ''), ']', ''))
                    - length(replace(replace(v_parts[i], '{', ''), '[', '')) END END END;
    END LOOP;
    IF v_depth <> 0 THEN
        RETURN verdict._jcs(p, false);
    END IF;
    RETURN p_text;
END $$;

DO $make$
DECLARE
    v_sig text;
    v_def text;
    v_marker text;
    v_hits integer;
BEGIN
    -- The canonical text of a change's `new`: the rebuild itself, since the body is no text of it.
    v_sig := 'verdict._cas(text, text[], text, text, text, bigint, text, text, text, text, text)';
    v_def := pg_get_functiondef(v_sig::regprocedure);
    v_marker := 'verdict._canonical(v_doc -> ''new'', p_body)';
    v_hits := (length(v_def) - length(replace(v_def, v_marker, ''))) / length(v_marker);
    IF v_hits <> 1 THEN
        RAISE EXCEPTION '%: % occurs % times, not once', v_sig, v_marker, v_hits;
    END IF;
    v_def := replace(v_def, v_marker,
        'verdict._jcs(v_doc -> ''new'', octet_length(p_body) <> length(p_body) AND p_body ~ ''[\uE000-\uFFFF]'')');
    EXECUTE v_def;
END $make$;

RESET ROLE;
