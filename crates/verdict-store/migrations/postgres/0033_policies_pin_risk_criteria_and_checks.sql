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
--   _contract_schema answers `policy`, `bundle` and `decision` with the literals below, exactly
--   as `verdict schema <name>` prints them at this version, and asks _contract_schema_32 for
--   every other name. The store's tests compare what it answers with what the code generates.
-- - The conformance functions of the tables checked against a changed schema are made again
--   from it, as schema 24 made them with _conforms_plsql (and its pattern test of schema 29):
--   _body_conforms_policies, _body_conforms_gate_decisions, and _body_conforms_findings and
--   _body_conforms_human_decisions (checked against definitions in the bundle's schema, which
--   are the same; made again so that every function reads the schema the database holds).
--   _body_nonconformity, which names what is wrong in a refused body and holds every table's
--   schema, is made again for all seven tables. The write routines call them by name, so they
--   change nothing else.
-- - As in schema 24, a schema using a keyword the checks do not know is refused here.
--
-- Every function below is owned by the owner and executable by nobody else; none is SECURITY
-- DEFINER. What is stored and what is refused stays the same for every body without the new
-- members and codes; a policy or decision using them, refused until now as having a member its
-- type does not have, is stored.

SET LOCAL ROLE __OWNER__;
SET LOCAL search_path = verdict, pg_temp;

ALTER FUNCTION verdict._contract_schema(text) RENAME TO _contract_schema_32;

-- The schemas that changed at this version, exactly as `verdict schema <name>` prints them;
-- every other one as schema 24 holds it.
CREATE FUNCTION verdict._contract_schema(p_name text) RETURNS jsonb
LANGUAGE sql IMMUTABLE STRICT SET search_path = verdict, pg_temp AS $schemas$
    SELECT CASE p_name
        WHEN 'policy' THEN $policy${
  "$defs": {
    "Digest": {
      "description": "sha256: followed by 64 lowercase hex digits",
      "pattern": "^sha256:[0-9a-f]{64}$",
      "type": "string"
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
    }
  },
  "$schema": "https://json-schema.org/draft/2020-12/schema",
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
  "title": "Policy",
  "type": "object"
}$policy$::jsonb
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
        ELSE verdict._contract_schema_32(p_name)
    END
$schemas$;

REVOKE ALL ON FUNCTION verdict._contract_schema(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION verdict._contract_schema_32(text) FROM PUBLIC;

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
        ('subjects', 'subject', NULL, false),
        ('policies', 'policy', NULL, true),
        ('check_evidence', 'evidence', NULL, false),
        ('verification_results', 'verification', NULL, false),
        ('findings', 'bundle', 'Finding', true),
        ('human_decisions', 'bundle', 'HumanDecision', true),
        ('gate_decisions', 'decision', NULL, true)
    ) AS v(tbl, schema_name, def, changed) LOOP
        IF t.def IS NOT NULL AND NOT (verdict._contract_schema(t.schema_name) -> '$defs') ? t.def THEN
            RAISE EXCEPTION 'the schema of % defines no %', t.schema_name, t.def;
        END IF;
        -- Every table, for the function that names what is wrong, as schema 24 wrote it.
        v_cases := v_cases || format(E'\n        WHEN %L THEN verdict._conforms(p_doc, %L::jsonb, %L::jsonb, %L)',
            t.tbl,
            CASE WHEN t.def IS NULL THEN verdict._stored_form(verdict._contract_schema(t.schema_name))
                ELSE jsonb_build_object('$ref', '#/$defs/' || t.def) END,
            verdict._stored_form(verdict._contract_schema(t.schema_name)), '');
        CONTINUE WHEN NOT t.changed;
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

RESET ROLE;
