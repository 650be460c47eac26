-- verdict store, PostgreSQL schema version 34: an approval names the human_required reasons it
-- clears.
--
-- Until now a human decision bound a subject and a policy, not what the person saw: a
-- human_required reason that appeared after an approval (a later verifier run answering
-- inconclusive, a contradiction between two sources, a disposition asking for a person) was
-- cleared by it too, and the Gate said pass on something no person reviewed. A human decision
-- now has an optional member `clears`, the reasons the person reviewed, each {code, criterion?,
-- check?, finding?}; an approval that has it clears exactly those. What changes here:
-- - An approval written in the human role (a human's own login, through put_human_decisions or
--   put_one_human_decisions) without `clears`, or with a `clears` that is not an array, is
--   refused (42501, as the other checks of the trigger human_decisions_on_what_is_current) and
--   nothing is appended: every approval written from now on names what it clears, as the
--   engine writes them. Decisions already stored are not touched; an approval without the
--   member still clears every human_required reason, so every stored decision replays as it is.
-- - The bundle schema the database holds is the one the code generates now: $defs/HumanDecision
--   has the member `clears` (its entries unique, and refused on a rejection) and $defs holds
--   ClearedReason and ReasonCode. A human decision that breaks it is refused (22023) like any
--   other body that breaks its schema.
--
-- How: _contract_schema of version 33 is renamed _contract_schema_33 and wrapped: the new
-- function answers the names whose schema changed with _contract_schema_changed_34, version
-- 33's schema with what changed in it (held as literals, each exactly as `verdict schema NAME`
-- prints it at this version), and every other name with the old one, so nothing that did not
-- change is copied again. The store's tests compare what it answers with what the code
-- generates, so a change the patch missed fails them.
-- The checks made from the bundle schema are made again from it as versions 24 and 29 made
-- them (by _remake_schema_checks of version 33): _body_conforms_findings and _body_conforms_human_decisions (the tables checked against
-- a definition of the bundle schema), and _body_nonconformity, which holds every table's schema
-- to say what is wrong with a refused body. The routines call them by name, so nothing else
-- changes. The trigger function is made again with its checks of version 21 and the new one.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

ALTER FUNCTION verdict._contract_schema(text) RENAME TO _contract_schema_33;

-- A human decision written in the human role: as the engine records one. As in version 21, and
-- an approval names what it clears.
CREATE OR REPLACE FUNCTION verdict._human_decision_on_what_is_current() RETURNS trigger
LANGUAGE plpgsql SET search_path = verdict, pg_temp AS $$
DECLARE
    v_doc jsonb := NEW.body::jsonb;
    v_role text;
BEGIN
    IF verdict._unbound_superuser() THEN
        RETURN NEW;
    END IF;
    SELECT a.role INTO v_role FROM verdict.audit_events a WHERE a.seq = NEW.seq;
    IF v_role IS DISTINCT FROM 'human' THEN
        RETURN NEW;
    END IF;
    IF (v_doc ->> 'role') IS DISTINCT FROM 'human' THEN
        RAISE EXCEPTION 'human_decisions %: a decision names role human, not %', NEW.key,
            coalesce(v_doc ->> 'role', 'none') USING ERRCODE = '42501';
    END IF;
    IF (v_doc ->> 'decision') = 'approve' AND jsonb_typeof(v_doc -> 'clears') IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'human_decisions %: an approval names the human_required reasons it clears', NEW.key
            USING ERRCODE = '42501';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM verdict.pointers g WHERE g.pointer = 'gate'
            AND (g.value::jsonb ->> 'policy_digest') = (v_doc ->> 'policy_digest')) THEN
        RAISE EXCEPTION 'human_decisions %: policy % is no gate''s current policy', NEW.key,
            coalesce(v_doc ->> 'policy_digest', 'none') USING ERRCODE = '42501';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM verdict.subjects s JOIN verdict.pointers x
                ON x.pointer = 'execution' AND x.name = s.execution_id
            WHERE s.key = (v_doc ->> 'subject_digest')
              AND (x.value::jsonb ->> 'subject_digest') = s.key) THEN
        RAISE EXCEPTION 'human_decisions %: subject % is not its execution''s current subject', NEW.key,
            coalesce(v_doc ->> 'subject_digest', 'none') USING ERRCODE = '42501';
    END IF;
    RETURN NEW;
END $$;

-- The schemas changed in version 34, as `verdict schema NAME` prints them, made from version
-- 33's by what changed: the bundle's definition of a human decision gains the member `clears`
-- and the rule refusing it on a rejection, and the bundle's definitions gain ClearedReason and
-- ReasonCode (the decision's, as version 33 holds it). Null for every other name.
CREATE FUNCTION verdict._contract_schema_changed_34(p_name text) RETURNS jsonb
LANGUAGE sql IMMUTABLE STRICT SET search_path = verdict, pg_temp AS $schemas$
    SELECT CASE p_name
        WHEN 'bundle' THEN jsonb_set(jsonb_set(jsonb_set(jsonb_set(
                verdict._contract_schema_33('bundle'),
                '{$defs,HumanDecision,properties,clears}', $clears${
  "description": "On an approval only: the `human_required` reasons the person reviewed, each once. An\napproval that names them clears exactly those; one without this member clears every\n`human_required` reason (what every approval did before the member existed).",
  "items": {
    "$ref": "#/$defs/ClearedReason"
  },
  "type": [
    "array",
    "null"
  ],
  "uniqueItems": true
}$clears$::jsonb),
            '{$defs,HumanDecision,not}', $not${
  "description": "clears is allowed only on an approval",
  "properties": {
    "clears": {
      "type": "array"
    },
    "decision": {
      "const": "reject"
    }
  },
  "required": [
    "clears",
    "decision"
  ]
}$not$::jsonb),
            '{$defs,ClearedReason}', $cleared${
  "additionalProperties": false,
  "description": "One `human_required` reason an approval clears, by the identifying part of a decision's\nreason: its code and the criterion, check and finding it names. Members left out match\nonly a reason that names none.",
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
      "description": "The reason's code."
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
    }
  },
  "required": [
    "code"
  ],
  "type": "object"
}$cleared$::jsonb),
            '{$defs,ReasonCode}', verdict._contract_schema_33('decision') #> '{$defs,ReasonCode}')
    END
$schemas$;
REVOKE ALL ON FUNCTION verdict._contract_schema_changed_34(text) FROM PUBLIC;

-- The schemas as the code generates them now: the ones changed in this version from
-- _contract_schema_changed_34, every other one as version 33 held it.
CREATE FUNCTION verdict._contract_schema(p_name text) RETURNS jsonb
LANGUAGE sql IMMUTABLE STRICT SET search_path = verdict, pg_temp AS $schemas$
    SELECT coalesce(verdict._contract_schema_changed_34(p_name), verdict._contract_schema_33(p_name))
$schemas$;
REVOKE ALL ON FUNCTION verdict._contract_schema(text) FROM PUBLIC;

-- The bundle's definitions are checked by findings and human decisions; as schema 33 made it.
SELECT verdict._remake_schema_checks(ARRAY['bundle']);

RESET ROLE;
