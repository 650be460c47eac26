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
-- function answers the names whose schema changed with the literals of
-- _contract_schema_changed_34 (one marked section below, the output of `verdict schema NAME`
-- for each name it answers, to be printed again rather than edited) and every other name with
-- the old one, so the literals that did not change are not copied again.
-- The checks made from the bundle schema are made again from it as versions 24 and 29 made
-- them: _body_conforms_findings and _body_conforms_human_decisions (the tables checked against
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

-- ---- Generated: the schemas changed in version 34, each exactly as
-- `verdict schema NAME` prints it: printed again, never edited by hand, whenever one of them
-- changes before this version is released.
CREATE FUNCTION verdict._contract_schema_changed_34(p_name text) RETURNS jsonb
LANGUAGE sql IMMUTABLE STRICT SET search_path = verdict, pg_temp AS $schemas$
    SELECT CASE p_name
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
    "ClearedReason": {
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
      "not": {
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
      },
      "properties": {
        "clears": {
          "description": "On an approval only: the `human_required` reasons the person reviewed, each once. An\napproval that names them clears exactly those; one without this member clears every\n`human_required` reason (what every approval did before the member existed).",
          "items": {
            "$ref": "#/$defs/ClearedReason"
          },
          "type": [
            "array",
            "null"
          ],
          "uniqueItems": true
        },
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
        "required_criteria": {
          "description": "Criteria required whatever the subject says of them; a subject without one of them\ncannot pass. None may also be in `optional_criteria`, and none may be listed twice.",
          "items": {
            "$ref": "#/$defs/Id"
          },
          "type": "array",
          "uniqueItems": true
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
        "risk_floor": {
          "$ref": "#/$defs/RiskClass",
          "description": "The lowest risk class the Gate treats a subject as, whatever class the subject states:\nthe producer writes its own class, so a policy can refuse to take `low` on its word.\nLeft out when `low`, so a policy without it keeps its digest."
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
          "const": "criterion_absent",
          "description": "A criterion the policy requires is not in the subject.",
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
          "const": "check_definition_unpinned",
          "description": "The subject pins another definition of a check than the policy does.",
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
REVOKE ALL ON FUNCTION verdict._contract_schema_changed_34(text) FROM PUBLIC;
-- ---- End of the generated schemas.

-- The schemas as the code generates them now: the ones changed in this version from the
-- literals of _contract_schema_changed_34, every other one as version 33 held it.
CREATE FUNCTION verdict._contract_schema(p_name text) RETURNS jsonb
LANGUAGE sql IMMUTABLE STRICT SET search_path = verdict, pg_temp AS $schemas$
    SELECT coalesce(verdict._contract_schema_changed_34(p_name), verdict._contract_schema_33(p_name))
$schemas$;
REVOKE ALL ON FUNCTION verdict._contract_schema(text) FROM PUBLIC;

DO $make$
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
        v_cases := v_cases || format(E'\n        WHEN %L THEN verdict._conforms(p_doc, %L::jsonb, %L::jsonb, %L)',
            t.tbl,
            CASE WHEN t.def IS NULL THEN verdict._stored_form(verdict._contract_schema(t.schema_name))
                ELSE jsonb_build_object('$ref', '#/$defs/' || t.def) END,
            verdict._stored_form(verdict._contract_schema(t.schema_name)), '');
        -- Only the tables checked against the bundle schema have a new check; the others' are
        -- the same code as before.
        CONTINUE WHEN t.schema_name <> 'bundle';
        v_code := verdict._conforms_plsql(jsonb_build_object('$ref', '#/$defs/' || t.def),
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

RESET ROLE;
