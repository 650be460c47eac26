//! Contract rules a type cannot express: unique ids, weights, references between documents,
//! and a policy that could only ever make a decision looser. Any breach is `invalid_input`.

use super::load::Loaded;
use super::reasons::{Reasons, fixed};
use super::rules::CompiledRule;
use crate::contracts::{HumanDecision, HumanVerdict, Outcome, Policy, ReasonCode};
use std::collections::{BTreeMap, BTreeSet};

/// The policy's rules compiled, and every way the policy breaks the contract (a `pass` where
/// only a doubt or a stricter outcome may stand, a repeated rule id, a rule that does not
/// compile, a required criterion repeated or also optional), each located by its JSON pointer
/// in a bundle.
fn policy_rules(p: &Policy) -> (Vec<CompiledRule>, Vec<String>) {
    let mut problems = Vec::new();
    for (field, o) in [
        ("on_inconclusive", p.on_inconclusive),
        ("on_contradiction", p.on_contradiction),
    ] {
        if o == Outcome::Pass {
            problems.push(format!(
                "/policy/{field}: pass is refused; a doubt can never pass"
            ));
        }
    }
    // A criterion cannot be both required and optional: whichever won, the policy would say
    // something it does not mean. A repeated id is refused as a repeated rule id is.
    let mut required = BTreeSet::new();
    for id in &p.required_criteria {
        if !required.insert(id.as_str()) {
            problems.push(format!(
                "/policy/required_criteria: criterion id {:?} is repeated",
                id.as_str()
            ));
        }
    }
    for id in &p.optional_criteria {
        if required.contains(id.as_str()) {
            problems.push(format!(
                "/policy/required_criteria: criterion {:?} is also in optional_criteria",
                id.as_str()
            ));
        }
    }
    let mut rule_ids = BTreeSet::new();
    let mut rules = Vec::new();
    for r in &p.rules {
        if !rule_ids.insert(r.id.as_str()) {
            problems.push(format!(
                "/policy/rules: rule id {:?} is repeated",
                r.id.as_str()
            ));
        }
        if r.outcome == Outcome::Pass {
            problems.push(format!(
                "/policy/rules: rule {:?} has outcome pass; rules may only make a decision stricter",
                r.id.as_str()
            ));
        }
        match CompiledRule::compile(r) {
            Ok(c) => rules.push(c),
            Err(e) => problems.push(format!(
                "/policy/rules: rule {:?} does not compile: {e}",
                r.id.as_str()
            )),
        }
    }
    (rules, problems)
}

/// Reads a policy as the Gate will: the problems that would make every bundle under it
/// `invalid_input`, none when the Gate can decide with it.
#[must_use]
pub fn policy_problems(p: &Policy) -> Vec<String> {
    policy_rules(p).1
}

/// Checks the loaded bundle; returns the compiled policy rules when it is valid.
pub(crate) fn validate(l: &Loaded) -> Result<Vec<CompiledRule>, Reasons> {
    let mut bad = Reasons::default();
    let mut add = |detail: String| bad.add(fixed(ReasonCode::InvalidInput), detail);

    // Subject.
    let s = &l.subject;
    let mut criteria = BTreeSet::new();
    for c in &s.criteria.items {
        if !criteria.insert(c.id.as_str()) {
            add(format!(
                "/subject/criteria/items: criterion id {:?} is repeated",
                c.id.as_str()
            ));
        }
        if let Some(w) = c.weight.filter(|w| !(w.is_finite() && *w > 0.0)) {
            add(format!(
                "/subject/criteria/items: criterion {:?} has weight {w}, expected a finite number > 0",
                c.id.as_str()
            ));
        }
    }
    let mut checks = BTreeSet::new();
    for pin in &s.checks {
        if !checks.insert(pin.id.as_str()) {
            add(format!(
                "/subject/checks: check id {:?} is pinned twice",
                pin.id.as_str()
            ));
        }
        for c in &pin.criteria {
            if !criteria.contains(c.as_str()) {
                add(format!(
                    "/subject/checks: check {:?} bears on unknown criterion {:?}",
                    pin.id.as_str(),
                    c.as_str()
                ));
            }
        }
    }

    // Policy: nothing in it may turn a doubt into a pass.
    let (rules, problems) = policy_rules(&l.policy);
    for problem in problems {
        add(problem);
    }

    // One namespace for refs: every item id and resource name names one thing only.
    let mut names = Names::default();
    let mut claim =
        |name: &str, what: &'static str, identity: String, add: &mut dyn FnMut(String)| {
            if let Some(clash) = names.claim(name, what, identity) {
                add(clash);
            }
        };
    // A name may collide with itself only as the same document (or, for findings, as versions
    // of the same finding, which are checked separately below).
    for r in &s.resources {
        claim(
            r.name.as_str(),
            "resource",
            format!("{} {} {:?}", r.kind, r.digest, r.uri),
            &mut add,
        );
    }
    for e in &l.evidence {
        claim(
            e.doc.id.as_str(),
            "evidence",
            e.digest.to_string(),
            &mut add,
        );
    }
    for v in &l.verifications {
        claim(
            v.doc.id.as_str(),
            "verification",
            v.digest.to_string(),
            &mut add,
        );
    }
    for h in &l.human_decisions {
        claim(
            h.doc.id.as_str(),
            "human decision",
            h.digest.to_string(),
            &mut add,
        );
    }
    for h in &l.human_decisions {
        for problem in clears_problems(&h.doc) {
            add(problem);
        }
    }
    let mut versions: BTreeMap<(&str, u64), &crate::contracts::Finding> = BTreeMap::new();
    let nested = l.verifications.iter().flat_map(|v| v.doc.findings.iter());
    for f in l.prior_findings.iter().map(|i| &i.doc).chain(nested) {
        claim(f.id.as_str(), "finding", String::new(), &mut add);
        match versions.get(&(f.id.as_str(), f.version)) {
            Some(other) if *other != f => add(format!(
                "finding {:?} version {} appears with two different contents; a change is a new version",
                f.id.as_str(),
                f.version
            )),
            _ => {
                versions.insert((f.id.as_str(), f.version), f);
            }
        }
    }
    for f in &l.prior_findings {
        if f.doc.version == 0 {
            add(format!(
                "prior finding {:?}: version must be at least 1",
                f.doc.id.as_str()
            ));
        }
    }

    if bad.is_empty() { Ok(rules) } else { Err(bad) }
}

/// How a human decision's `clears` breaks the contract: present on a rejection (a rejection
/// clears nothing), or naming one reason twice. Empty when it does not.
#[must_use]
pub fn clears_problems(h: &HumanDecision) -> Vec<String> {
    let mut problems = Vec::new();
    let Some(clears) = &h.clears else {
        return problems;
    };
    if h.decision == HumanVerdict::Reject {
        problems.push(format!(
            "human decision {:?}: clears is allowed only on an approval",
            h.id.as_str()
        ));
    }
    let mut seen = BTreeSet::new();
    for c in clears {
        if c.rule.is_some() && c.code != ReasonCode::PolicyRule {
            problems.push(format!(
                "human decision {:?}: clears names a rule on reason {:?}; only a policy_rule reason has one",
                h.id.as_str(),
                c.code.as_str()
            ));
        }
        if !seen.insert(c) {
            problems.push(format!(
                "human decision {:?}: clears names reason {:?}{} twice",
                h.id.as_str(),
                c.code.as_str(),
                [
                    ("criterion", &c.criterion),
                    ("check", &c.check),
                    ("finding", &c.finding),
                    ("rule", &c.rule)
                ]
                .iter()
                .filter_map(|(k, v)| v.as_ref().map(|v| format!(" {k} {:?}", v.as_str())))
                .collect::<String>()
            ));
        }
    }
    problems
}

/// Who each name in the ref namespace belongs to.
#[derive(Default)]
struct Names {
    owners: BTreeMap<String, (&'static str, String)>,
}

impl Names {
    /// Records that `name` is a `what` with this `identity`; says so if it already names
    /// something else.
    fn claim(&mut self, name: &str, what: &'static str, identity: String) -> Option<String> {
        match self.owners.get(name) {
            Some((w, i)) if *w == what && *i == identity => None,
            Some((w, _)) => Some(format!("id {name:?} names both a {w} and a {what}")),
            None => {
                self.owners.insert(name.to_owned(), (what, identity));
                None
            }
        }
    }
}
