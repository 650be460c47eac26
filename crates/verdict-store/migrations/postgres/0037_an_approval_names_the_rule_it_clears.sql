-- verdict store, PostgreSQL schema version 37: an approval names the rule of a policy_rule
-- reason it clears.
--
-- A `policy_rule` reason names no criterion, check or finding: the rule is named only in its
-- detail (`rule "ID": ...`). So an entry of an approval's `clears` (schema 34) naming a
-- `policy_rule` reason named every rule's, and an approval given while one rule asked for a
-- person also cleared another rule that asked later. An entry now has an optional member
-- `rule`, the id of the rule whose reason it clears; the engine writes it for every
-- `policy_rule` reason, and the Gate clears with such an entry that rule's reason only. An entry
-- without it still names every rule's reason, so stored decisions replay as they are.
--
-- The bundle schema the database holds is the one the code generates now: $defs/ClearedReason
-- has the member `rule` and says so in its description. As in version 34, _contract_schema is
-- renamed (_contract_schema_36) and wrapped, the new function answering `bundle` with the old
-- schema and what changed in it, every other name with the old one; the checks of the tables
-- checked against the bundle's definitions (findings, human decisions) are made again by
-- _remake_schema_checks (version 33). The store's tests compare what the database holds with
-- what the code generates. Nothing else changes.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

ALTER FUNCTION verdict._contract_schema(text) RENAME TO _contract_schema_36;

CREATE FUNCTION verdict._contract_schema(p_name text) RETURNS jsonb
LANGUAGE sql IMMUTABLE STRICT SET search_path = verdict, pg_temp AS $schemas$
    SELECT CASE p_name
        WHEN 'bundle' THEN jsonb_set(jsonb_set(verdict._contract_schema_36('bundle'),
                '{$defs,ClearedReason,properties,rule}', $rule${
  "anyOf": [
    {
      "$ref": "#/$defs/Id"
    },
    {
      "type": "null"
    }
  ],
  "description": "For a `policy_rule` reason, the rule whose reason it is (the id its detail names, as\n`rule \"ID\": ...`); only on that code."
}$rule$::jsonb),
            '{$defs,ClearedReason,description}', to_jsonb($description$One `human_required` reason an approval clears, by the identifying part of a decision's
reason: its code and the criterion, check and finding it names, and for a `policy_rule`
reason the rule. Criterion, check and finding left out match only a reason that names none;
`rule` left out matches every rule, as entries written before it existed do.$description$::text))
        ELSE verdict._contract_schema_36(p_name)
    END
$schemas$;
REVOKE ALL ON FUNCTION verdict._contract_schema(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION verdict._contract_schema_36(text) FROM PUBLIC;

-- The bundle's definitions are checked by findings and human decisions.
SELECT verdict._remake_schema_checks(ARRAY['bundle']);

RESET ROLE;
