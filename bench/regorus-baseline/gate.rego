# The Gate decision of docs/spec/gate.md, written in Rego.
#
# Input: a gate bundle (`verdict.gate-bundle/v1`) plus `subject_digest` and `policy_digest`,
# the digests of its subject and policy computed by the host: Rego cannot compute verdict's
# digests, so the host does it before evaluation, as verdict's own Gate does before deciding.
# README.md lists what is left out.
#
# Output: `data.verdict.gate.decision` = {outcome, reasons (sorted codes), criteria}.
package verdict.gate

# ---------------------------------------------------------------- inputs and policy defaults

policy := input.policy

subject := input.subject

subject_digest := input.subject_digest

policy_digest := input.policy_digest

generation := subject.execution.generation

producer := subject.producer

now_ns := time.parse_rfc3339_ns(input.now)

# Nanoseconds an observation may be dated after `now` before it is from the future.
future_tolerance_ns := 300000000000

evidence_roles := {r | some r in object.get(policy, "check_evidence_from", ["runner"])}

on_inconclusive := object.get(policy, "on_inconclusive", "human_required")

on_contradiction := object.get(policy, "on_contradiction", "human_required")

require_refs := object.get(policy, "require_evidence_refs", true)

required_checks := {k | some k in object.get(policy, "required_checks", [])}

optional_criteria := {c | some c in object.get(policy, "optional_criteria", [])}

risk_rule := object.get(object.get(policy, "risk", {}), subject.risk.class, {})

required_classes contains c if some c in object.get(policy, "required_verifiers", [])

required_classes contains c if some c in object.get(risk_rule, "required_verifiers", [])

# ---------------------------------------------------------------- criteria

# Criterion id -> whether it is required under this policy.
required := {c.id: criterion_required(c) | some c in subject.criteria.items}

criterion_required(c) := false if {
	optional_criteria[c.id]
} else := object.get(c, "required", true)

required_criteria := {id | some id, r in required; r == true}

# Check id -> the subject's pin: its definition digest and the criteria it bears on.
pinned := {k.id: k | some k in subject.checks}

# ---------------------------------------------------------------- check evidence

# Check evidence about this subject for a check it pins; anything else is ignored.
pinned_evidence := {e.id: e |
	some e in input.evidence
	e.kind == "check"
	e.subject_digest == subject_digest
	pinned[e.check]
}

# Evidence id -> why it cannot be trusted; each is also a reason, required check or not.
evidence_problem[id] contains "evidence_definition_mismatch" if {
	some id, e in pinned_evidence
	e.definition_digest != pinned[e.check].definition_digest
}

evidence_problem[id] contains "self_verification_denied" if {
	some id, e in pinned_evidence
	not evidence_roles.producer
	e.produced_by.principal == producer.principal
}

evidence_problem[id] contains "evidence_from_future" if {
	some id, e in pinned_evidence
	time.parse_rfc3339_ns(e.observed_at) - now_ns > future_tolerance_ns
}

evidence_problem[id] contains "evidence_stale" if {
	some id, e in pinned_evidence
	e.freshness.kind == "time"
	now_ns >= time.parse_rfc3339_ns(e.observed_at) + (e.freshness.max_age_s * 1000000000)
}

# Evidence that counts: trusted and from a role the policy accepts check evidence from.
untrusted := {id | some id, _ in evidence_problem}

counted_evidence := {id: e |
	some id, e in pinned_evidence
	evidence_roles[e.produced_by.role]
	not untrusted[id]
}

# Check id -> the outcomes of its counted evidence.
check_outcomes[e.check] contains e.outcome if some e in counted_evidence

# `error` proves nothing and is no source.
source_status := {"pass": "passed", "fail": "failed"}

check_sources[cid] contains {"kind": "check", "ref": id, "status": s} if {
	some id, e in counted_evidence
	s := source_status[e.outcome]
	some cid in pinned[e.check].criteria
}

hard_failed contains cid if {
	some e in counted_evidence
	e.outcome == "fail"
	object.get(e, "hard", true) == true
	some cid in pinned[e.check].criteria
}

# ---------------------------------------------------------------- verification results

known_criteria := {c.id | some c in subject.criteria.items}

row_statuses := {"passed", "failed", "inconclusive", "not_tested"}

results := {v.id: v | some v in input.verifications; v.subject_digest == subject_digest}

result_problem[id] contains "self_verification_denied" if {
	some id, v in results
	v.verifier.principal == producer.principal
}

result_problem[id] contains "self_verification_denied" if {
	some id, v in results
	v.verifier.run == producer.run
}

# Admitted for a newer generation than the subject's.
result_problem[id] contains "verifier_output_invalid" if {
	some id, v in results
	v.generation > generation
}

# Result id -> the criterion ids of its rows, and the statuses they use.
row_ids := {id: {row.id | some row in v.criteria} | some id, v in results}

row_status_set := {id: {row.status | some row in v.criteria} | some id, v in results}

# A row for an unknown criterion, a status outside the four, or a repeated row.
result_problem[id] contains "verifier_output_invalid" if {
	some id, ids in row_ids
	count(ids - known_criteria) > 0
}

result_problem[id] contains "verifier_output_invalid" if {
	some id, statuses in row_status_set
	count(statuses - row_statuses) > 0
}

result_problem[id] contains "verifier_output_invalid" if {
	some id, ids in row_ids
	count(results[id].criteria) != count(ids)
}

# Well-formed results of the current generation, completed or not.
invalid_results := {id | some id, _ in result_problem}

current_results := {id: v |
	some id, v in results
	v.generation == generation
	not invalid_results[id]
}

counted_results := {id: v | some id, v in current_results; v.status == "completed"}

counted_classes := {v.verifier.class | some v in counted_results}

unavailable_classes := {v.verifier.class | some v in current_results; v.status == "unavailable"}

older_classes := {v.verifier.class |
	some id, v in results
	v.generation < generation
	not invalid_results[id]
}

# Refs a verifier may cite: resources, items about this subject and prior findings.
resource_names := {r.name | some r in subject.resources}

evidence_ids := {e.id | some e in input.evidence; e.subject_digest == subject_digest}

finding_ids := {f.id | some v in results; some f in v.findings} | {f.id | some f in input.prior_findings}

known_refs := ((resource_names | evidence_ids) | object.keys(results)) | finding_ids

# Rows whose `passed` cites no ref or a foreign ref: inconclusive, and `unsupported_pass`.
unsupported_rows contains [id, i] if {
	require_refs == true
	some id, v in counted_results
	some i, row in v.criteria
	row.status == "passed"
	count(row.evidence_refs) == 0
}

# Refs cited that name nothing in the bundle; usually none, so the rule below rarely walks rows.
foreign_refs := {r |
	some v in counted_results
	some row in v.criteria
	some r in row.evidence_refs
} - known_refs

unsupported_rows contains [id, i] if {
	require_refs == true
	count(foreign_refs) > 0
	some id, v in counted_results
	some i, row in v.criteria
	row.status == "passed"
	some r in row.evidence_refs
	foreign_refs[r]
}

unsupported_criteria contains counted_results[id].criteria[i].id if some [id, i] in unsupported_rows

# A verifier cannot pass what it did not see: a `passed` from an incomplete context.
incomplete_rows contains [id, i] if {
	some id, v in counted_results
	v.context.complete == false
	some i, row in v.criteria
	row.status == "passed"
}

# Rows whose `passed` counts as inconclusive.
downgraded := unsupported_rows | incomplete_rows

row_sources[row.id] contains {"kind": "verification", "ref": id, "status": row.status} if {
	some id, v in counted_results
	some i, row in v.criteria
	not downgraded[[id, i]]
}

row_sources[row.id] contains {"kind": "verification", "ref": id, "status": "inconclusive"} if {
	some [id, i] in downgraded
	row := counted_results[id].criteria[i]
}

# ---------------------------------------------------------------- criterion status

sources[cid] := {s | some s in check_sources[cid]} | {s | some s in row_sources[cid]} if {
	some cid in known_criteria
}

source_statuses[cid] := {s.status | some s in srcs} if some cid, srcs in sources

# Section 6.3, rules 1 to 5, without voting: every counted source stays counted. Rules 1 and 2
# give the same status; a hard failure only comes first.
status_of(cid) := "failed" if {
	hard_failed[cid]
} else := "failed" if {
	source_statuses[cid].failed
} else := "inconclusive" if {
	source_statuses[cid].inconclusive
} else := "passed" if {
	source_statuses[cid].passed
} else := "not_tested"

status := {cid: status_of(cid) | some cid in known_criteria}

contradictions contains cid if {
	status[cid] == "failed"
	source_statuses[cid].passed
}

# ---------------------------------------------------------------- prior blockers

# Counted dispositions of prior findings, as [finding id, version, disposition]. `resolved`
# counts only with refs that all exist in the bundle, `superseded_by_subject_change` only
# with a reason.
dispositions contains [d.finding, d.version, d.disposition] if {
	some v in counted_results
	some d in v.dispositions
	d.disposition in {"still_present", "human_required"}
}

dispositions contains [d.finding, d.version, "resolved"] if {
	some v in counted_results
	some d in v.dispositions
	d.disposition == "resolved"
	count(d.evidence_refs) > 0
	every r in d.evidence_refs {
		known_refs[r]
	}
}

dispositions contains [d.finding, d.version, "superseded_by_subject_change"] if {
	some v in counted_results
	some d in v.dispositions
	d.disposition == "superseded_by_subject_change"
	object.get(d, "reason", "") != ""
}

# The strictest counted disposition of one exact finding version stands.
prior_state(f) := "still_present" if {
	dispositions[[f.id, f.version, "still_present"]]
} else := "human_required" if {
	dispositions[[f.id, f.version, "human_required"]]
} else := "resolved" if {
	some d in {"resolved", "superseded_by_subject_change"}
	dispositions[[f.id, f.version, d]]
} else := "unaddressed"

prior_reason := {
	"still_present": ["prior_blocker_still_present", "rework"],
	"human_required": ["human_review_required", "human_required"],
	"unaddressed": ["prior_blocker_unaddressed", "blocked"],
}

# ---------------------------------------------------------------- human decisions

# Human decisions bound to this subject and this policy.
humans := {h.id: h |
	some h in input.human_decisions
	h.subject_digest == subject_digest
	h.policy_digest == policy_digest
}

human_problem[id] contains "self_verification_denied" if {
	some id, h in humans
	h.principal == producer.principal
}

human_problem[id] contains "evidence_from_future" if {
	some id, h in humans
	time.parse_rfc3339_ns(h.decided_at) - now_ns > future_tolerance_ns
}

untrusted_humans := {id | some id, _ in human_problem}

human_verdicts := {h.decision | some id, h in humans; not untrusted_humans[id]}

# ---------------------------------------------------------------- reasons

reasons contains {"code": "nothing_to_verify", "outcome": "blocked"} if {
	count(required_criteria) == 0
	count(required_checks) == 0
}

reasons contains {"code": code, "outcome": "blocked", "check": e.check} if {
	some id, codes in evidence_problem
	some code in codes
	e := pinned_evidence[id]
}

reasons contains {"code": "evidence_missing", "outcome": "blocked", "check": k} if {
	some k in required_checks
	not check_outcomes[k]
}

reasons contains {"code": "check_error", "outcome": "blocked", "check": k} if {
	some k in required_checks
	check_outcomes[k]["error"]
}

reasons contains {"code": "check_failed", "outcome": "rework", "check": k} if {
	some k in required_checks
	check_outcomes[k].fail
}

reasons contains {"code": code, "outcome": "blocked"} if {
	some codes in result_problem
	some code in codes
}

# Any class whose only results are from an older generation, and a required class with no
# counted result, whatever else it has.
reasons contains {"code": "stale_generation", "outcome": "blocked", "class": c} if {
	some c in older_classes
	not counted_classes[c]
	not unavailable_classes[c]
}

reasons contains {"code": "stale_generation", "outcome": "blocked", "class": c} if {
	some c in required_classes
	older_classes[c]
	not counted_classes[c]
}

reasons contains {"code": "verifier_unavailable", "outcome": "blocked", "class": c} if {
	some c in required_classes
	unavailable_classes[c]
	not counted_classes[c]
}

reasons contains {"code": "verifier_missing", "outcome": "blocked", "class": c} if {
	some c in required_classes
	not counted_classes[c]
	not unavailable_classes[c]
	not older_classes[c]
}

reasons contains {"code": "criterion_row_missing", "outcome": "blocked", "criterion": cid} if {
	some v in counted_results
	required_classes[v.verifier.class]
	some cid in required_criteria - row_ids[v.id]
}

reasons contains {"code": code, "outcome": out, "criterion": cid} if {
	some cid in required_criteria
	[code, out] := criterion_reason[status[cid]]
}

criterion_reason := {
	"failed": ["criterion_failed", "rework"],
	"inconclusive": ["criterion_inconclusive", on_inconclusive],
	"not_tested": ["criterion_not_tested", "blocked"],
}

reasons contains {"code": "contradiction", "outcome": on_contradiction, "criterion": cid} if {
	some cid in contradictions
	required_criteria[cid]
}

reasons contains {"code": "unsupported_pass", "outcome": on_inconclusive, "criterion": cid} if {
	some cid in unsupported_criteria
	required_criteria[cid]
}

reasons contains {"code": "blocking_finding", "outcome": "rework", "criterion": f.criterion} if {
	some v in counted_results
	some f in v.findings
	f.scope == "change"
	f.severity == "blocker"
	required_criteria[f.criterion]
}

reasons contains {"code": "human_review_required", "outcome": "human_required"} if {
	object.get(risk_rule, "human", false) == true
}

reasons contains {"code": code, "outcome": out, "finding": f.id} if {
	some f in input.prior_findings
	[code, out] := prior_reason[prior_state(f)]
}

reasons contains {"code": code, "outcome": "blocked"} if {
	some codes in human_problem
	some code in codes
}

reasons contains {"code": "human_rejected", "outcome": "rework"} if human_verdicts.reject

# A counted approval clears exactly the reasons whose outcome is human_required.
final_reasons := {r | some r in reasons; r.outcome != "human_required"} if {
	human_verdicts.approve
} else := reasons

# ---------------------------------------------------------------- the decision

rank := {"pass": 0, "human_required": 1, "rework": 2, "blocked": 3}

by_rank := ["pass", "human_required", "rework", "blocked"]

# An outcome no rank knows (a policy naming an unknown one) blocks; no reason at all passes.
outcome := by_rank[max({object.get(rank, r.outcome, 3) | some r in final_reasons} | {0})]

decision := {
	"outcome": outcome,
	"reasons": sort({r.code | some r in final_reasons}),
	"criteria": [{
		"id": c.id,
		"required": required[c.id],
		"status": status[c.id],
		"sources": sort(sources[c.id]),
	} |
		some c in subject.criteria.items
	],
}
