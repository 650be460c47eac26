-- verdict store, PostgreSQL schema version 33: a policy pins the risk floor, the criteria it
-- requires and the definitions of checks; a decision may name two new reasons.
--
-- The producer writes its subject: its risk class, which criteria are required and which
-- definition each check runs. A policy could only take those at the producer's word. The policy
-- (`verdict.policy/v1`) now has three optional members, each only ever making a decision
-- stricter and each left out of a policy that does not set it, so every policy stored so far
-- keeps its body and digest:
--
-- - `risk_floor`: the lowest risk class the Gate treats a subject as;
-- - `required_criteria`: criterion ids required whatever the subject says (each once, which the
--   schema says with uniqueItems); a subject without one is `criterion_absent` (blocked);
-- - `check_definitions`: check id (an identifier, the schema's propertyNames) to definition
--   digest; a subject pinning another definition is `check_definition_unpinned` (blocked).
--
-- So the JSON Schemas of the policy, of the bundle (which holds a policy) and of the decision
-- (whose reason codes are an enum) change. The database holds each schema the code generates
-- (schema 24), and checks each stored body against it:
--
-- - _contract_schema, as schema 24 made it, is renamed _contract_schema_32 and kept; the new
--   _contract_schema answers `policy`, `bundle` and `decision` with schema 24's schema of that
--   name and what changed in it (the three members, two definitions and two codes, held below
--   as literals, each exactly as `verdict schema <name>` prints it at this version), and asks
--   _contract_schema_32 for every other name. The store's tests compare what it answers with
--   what the code generates, so a patch that missed a change fails them.
-- - The conformance functions of the tables checked against a changed schema are made again
--   from it, as schema 24 made them with _conforms_plsql (and its pattern test of schema 29):
--   _body_conforms_policies, _body_conforms_gate_decisions, and _body_conforms_findings and
--   _body_conforms_human_decisions (checked against definitions in the bundle's schema, which
--   are the same; made again so that every function reads the schema the database holds).
--   _body_nonconformity, which names what is wrong in a refused body and holds every table's
--   schema, is made again for all seven tables. The write routines call them by name, so they
--   change nothing else. _remake_schema_checks does this for the schemas it is given, so that a
--   later migration changing a contract schema calls it instead of writing the steps again.
-- - As in schema 24, a schema using a keyword the checks do not know is refused here.
--
-- Every function below is owned by the owner and executable by nobody else; none is SECURITY
-- DEFINER. What is stored and what is refused stays the same for every body without the new
-- members and codes; a policy or decision using them, refused until now as having a member its
-- type does not have, is stored.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

ALTER FUNCTION verdict._contract_schema(text) RENAME TO _contract_schema_32;

-- The schemas that changed at this version, as `verdict schema <name>` prints them, made from
-- schema 24's by what changed: the policy's three members (in the policy's schema, with the two
-- definitions they refer to, which the bundle's schema holds already, and in the bundle's
-- definition of a policy) and the two reason codes the decision's enumeration gains, each at
-- its place in the order the code lists them. Every other schema is schema 24's.
CREATE FUNCTION verdict._contract_schema(p_name text) RETURNS jsonb
LANGUAGE sql IMMUTABLE STRICT SET search_path = verdict, pg_temp AS $schemas$
    SELECT CASE p_name
        WHEN 'policy' THEN jsonb_set(jsonb_set(held.s, '{properties}',
                (held.s -> 'properties') || added.members),
            '{$defs}', (held.s -> '$defs') || jsonb_build_object(
                'Digest', held.bundle #> '{$defs,Digest}',
                'RiskClass', held.bundle #> '{$defs,RiskClass}'))
        WHEN 'bundle' THEN jsonb_set(held.s, '{$defs,Policy,properties}',
            (held.s #> '{$defs,Policy,properties}') || added.members)
        WHEN 'decision' THEN jsonb_insert(jsonb_insert(held.s,
                '{$defs,ReasonCode,oneOf,3}', added.absent),
            '{$defs,ReasonCode,oneOf,9}', added.unpinned)
        ELSE held.s
    END
    FROM (SELECT verdict._contract_schema_32(p_name) AS s,
                 verdict._contract_schema_32('bundle') AS bundle) AS held,
         (SELECT $members${
  "check_definitions": {
    "additionalProperties": {
      "$ref": "#/$defs/Digest"
    },
    "description": "The definition each named check must run, by digest: a subject that pins another\ndefinition for one of them is blocked and that check's evidence never counts.",
    "propertyNames": {
      "$ref": "#/$defs/Id"
    },
    "type": "object"
  },
  "required_criteria": {
    "description": "Criteria required whatever the subject says of them; a subject without one of them\ncannot pass. None may also be in `optional_criteria`, and none may be listed twice.",
    "items": {
      "$ref": "#/$defs/Id"
    },
    "type": "array",
    "uniqueItems": true
  },
  "risk_floor": {
    "$ref": "#/$defs/RiskClass",
    "description": "The lowest risk class the Gate treats a subject as, whatever class the subject states:\nthe producer writes its own class, so a policy can refuse to take `low` on its word.\nLeft out when `low`, so a policy without it keeps its digest."
  }
}$members$::jsonb AS members,
                 $code${
  "const": "criterion_absent",
  "description": "A criterion the policy requires is not in the subject.",
  "type": "string"
}$code$::jsonb AS absent,
                 $code${
  "const": "check_definition_unpinned",
  "description": "The subject pins another definition of a check than the policy does.",
  "type": "string"
}$code$::jsonb AS unpinned) AS added
$schemas$;

REVOKE ALL ON FUNCTION verdict._contract_schema(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION verdict._contract_schema_32(text) FROM PUBLIC;

-- Makes the schema checks again from the schemas the database holds now, for a migration that
-- changed some of them: refuses a schema using a keyword the checks do not know, writes out
-- again (as schemas 24 and 29 made them) the check of every table whose schema is named in
-- p_changed, and makes _body_nonconformity, which holds every table's schema, again. Schema 33
-- and every later migration that changes a contract schema call it.
CREATE FUNCTION verdict._remake_schema_checks(p_changed text[]) RETURNS void
LANGUAGE plpgsql SET search_path = verdict, pg_temp AS $make$
DECLARE
    v_name text;
    v_unknown text[];
    v_cases text := '';
    v_code text;
    t record;
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
        -- Every table, for the function that names what is wrong, as schema 24 wrote it.
        v_cases := v_cases || format(E'\n        WHEN %L THEN verdict._conforms(p_doc, %L::jsonb, %L::jsonb, %L)',
            t.tbl,
            CASE WHEN t.def IS NULL THEN verdict._stored_form(verdict._contract_schema(t.schema_name))
                ELSE jsonb_build_object('$ref', '#/$defs/' || t.def) END,
            verdict._stored_form(verdict._contract_schema(t.schema_name)), '');
        CONTINUE WHEN NOT t.schema_name = ANY (p_changed);
        -- As schemas 24 and 29 made them.
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
    EXECUTE format($f$CREATE OR REPLACE FUNCTION verdict._body_nonconformity(p_table text, p_doc jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT SET search_path = verdict, pg_temp AS $body$
BEGIN
    RETURN CASE p_table%s
        ELSE 'no schema is known for table ' || p_table END;
END $body$$f$, v_cases);
END $make$;
REVOKE ALL ON FUNCTION verdict._remake_schema_checks(text[]) FROM PUBLIC;

-- The policy's schema is checked by policies, the bundle's definitions by findings and human
-- decisions, the decision's by gate decisions.
SELECT verdict._remake_schema_checks(ARRAY['policy', 'bundle', 'decision']);

RESET ROLE;
