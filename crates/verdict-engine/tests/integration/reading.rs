//! Reading the store as the authenticated caller (list and show of principals, grants,
//! policies, executions and runs), the documents built for the hand flow (a subject from
//! specs, a result template), and the refusals around them; each on SQLite and PostgreSQL.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use serde_json::json;
use std::collections::BTreeMap;
use verdict_core::contracts::{CriterionStatus, DispositionKind, Role};
use verdict_engine::scaffold::{self, SubjectInput};
use verdict_engine::{Engine, Principal};
use verdict_store::{Access, DocKind, ScopeKind};

fn code(e: &verdict_engine::EngineError) -> &'static str {
    e.code()
}

async fn denials_of(w: &World, who: &str) -> usize {
    w.engine.store().denials_of(who).await.unwrap().len()
}

async fn outsider(w: &World) -> Principal {
    let role = serde_json::from_value(json!("verifier")).unwrap();
    let t = w
        .engine
        .add_principal(&w.ops, "outsider", role)
        .await
        .unwrap();
    w.engine.authenticate(&t).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_that_has_already_lapsed_is_refused_and_nothing_is_stored() {
    on_both(|store| async move {
        let w = world(store).await;
        for expires in ["2020-01-01T00:00:00Z", "2026-11-30T12:00:00Z"] {
            let e = w
                .engine
                .grant(
                    &w.ops,
                    "g-late",
                    "rev",
                    ScopeKind::Execution,
                    EXEC,
                    Access::Read,
                    &ts(expires),
                )
                .await
                .unwrap_err();
            assert_eq!(code(&e), "invalid_input", "{expires}: {e}");
            assert!(e.to_string().contains("not after now"), "{e}");
        }
        let grants = w.engine.store().grants_for("rev").await.unwrap();
        assert!(
            grants
                .iter()
                .all(|g| g.record.grant_id.as_str() != "g-late")
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_and_history_of_a_gate_that_does_not_exist_say_so() {
    on_both(|store| async move {
        let w = world(store.clone()).await;
        subject_with_evidence(&w, 1, "a", "pass").await;
        let other = Engine::new(store, "mreg");
        let e = other.status(&w.ops, EXEC).await.unwrap_err();
        assert_eq!(code(&e), "not_found");
        assert!(
            e.to_string().contains("gate \"mreg\" does not exist"),
            "{e}"
        );
        let e = other.history(&w.ops, EXEC).await.unwrap_err();
        assert_eq!(code(&e), "not_found");
        w.engine.status(&w.ops, EXEC).await.unwrap();
    })
    .await;
}

/// A misspelt execution id is not read as an execution with no decision yet: its status and
/// history are not found, as the execution is, and once a subject is put both answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_and_history_of_an_execution_no_subject_has_are_not_found() {
    on_both(|store| async move {
        let w = world(store).await;
        let e = w.engine.status(&w.ops, EXEC).await.unwrap_err();
        assert_eq!(code(&e), "not_found");
        assert!(
            e.to_string().contains(&format!("execution {EXEC:?}")),
            "{e}"
        );
        let e = w.engine.history(&w.ops, EXEC).await.unwrap_err();
        assert_eq!(code(&e), "not_found");
        assert!(
            e.to_string().contains(&format!("execution {EXEC:?}")),
            "{e}"
        );
        w.engine
            .put_subject(&w.coder, &subject(1, "a"))
            .await
            .unwrap();
        let status = w.engine.status(&w.ops, EXEC).await.unwrap();
        assert!(status.applicable.is_none() && status.latest.is_none());
        assert_eq!(status.head.unwrap().generation, 1);
        assert!(
            w.engine
                .history(&w.ops, EXEC)
                .await
                .unwrap()
                .decisions
                .is_empty()
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_reads_everything_and_anyone_else_only_what_is_theirs() {
    on_both(|store| async move {
        let w = world(store).await;
        subject_with_evidence(&w, 1, "a", "pass").await;
        let out = outsider(&w).await;

        let all = w.engine.list_principals(&w.ops).await.unwrap();
        assert_eq!(all.len(), 7);
        let text = serde_json::to_string(&all).unwrap();
        assert!(!text.contains("token"), "{text}");
        assert!(!text.contains("sha256:"), "a token hash is shown: {text}");
        let mine = w.engine.list_principals(&w.coder).await.unwrap();
        assert_eq!(
            mine.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
            ["coder"]
        );
        let (me, grants) = w.engine.show_principal(&w.coder, "coder").await.unwrap();
        assert_eq!(me.role, Role::Producer);
        assert_eq!(grants.len(), 1);
        assert!(grants[0].in_force);

        // Reading someone else is refused, and the refusal is on record.
        let before = denials_of(&w, "coder").await;
        let e = w.engine.show_principal(&w.coder, "rev").await.unwrap_err();
        assert_eq!(code(&e), "permission_denied");
        let e = w
            .engine
            .list_grants(&w.coder, Some("rev"))
            .await
            .unwrap_err();
        assert_eq!(code(&e), "permission_denied");
        assert_eq!(denials_of(&w, "coder").await, before + 2);

        assert_eq!(w.engine.list_grants(&w.ops, None).await.unwrap().len(), 5);
        let own = w.engine.list_grants(&w.rev, None).await.unwrap();
        assert_eq!(own.len(), 1);
        assert_eq!(own[0].grant_id.as_str(), "g-rev");
        w.engine.revoke(&w.ops, "g-rev2", "rotated").await.unwrap();
        w.engine
            .store()
            .set_manual_time(&ts("2026-11-30T12:00:01Z"))
            .await
            .unwrap();
        let g = w.engine.show_grant(&w.ops, "g-rev2").await.unwrap();
        assert!(!g.in_force);
        assert_eq!(g.revoked_because.as_deref(), Some("rotated"));
        let e = w.engine.show_grant(&w.rev, "g-coder").await.unwrap_err();
        assert_eq!(code(&e), "not_found");

        // Policies are what work is held to: everyone may read them.
        let gates = w.engine.list_gates(&out).await.unwrap();
        assert_eq!(gates.len(), 1);
        assert_eq!(gates[0].gate, "merge");
        let (d, policy) = w.engine.show_policy(&w.coder, None).await.unwrap();
        assert_eq!(d, gates[0].policy_digest);
        assert_eq!(policy.name.as_str(), "merge");

        // Executions and runs: only with a grant in force on them.
        let listed = w.engine.list_executions(&w.rev).await.unwrap();
        assert_eq!(listed.len(), 1);
        assert!(w.engine.list_executions(&out).await.unwrap().is_empty());
        let before = denials_of(&w, "outsider").await;
        let e = w.engine.show_execution(&out, EXEC).await.unwrap_err();
        assert_eq!(code(&e), "permission_denied");
        let shown = w.engine.show_execution(&w.ops, EXEC).await.unwrap();
        assert_eq!(shown.subjects.len(), 1);
        assert_eq!(shown.subjects[0].producer.as_str(), "coder");

        let req = w
            .engine
            .create_request(&w.coder, EXEC, &json!({}))
            .await
            .unwrap();
        w.engine
            .admit(&w.ops, &req, "rev", "reviewer", "run-1")
            .await
            .unwrap();
        let runs = w.engine.list_runs(&w.alice, EXEC).await.unwrap();
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].request_digest, req);
        let e = w.engine.show_run(&out, "run-1").await.unwrap_err();
        assert_eq!(code(&e), "permission_denied");
        let e = w.engine.list_runs(&out, EXEC).await.unwrap_err();
        assert_eq!(code(&e), "permission_denied");
        assert_eq!(denials_of(&w, "outsider").await, before + 3);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_template_has_every_criterion_and_only_the_runs_verifier_gets_it() {
    on_both(|store| async move {
        let w = world(store).await;
        let (d, _) = subject_with_evidence(&w, 1, "a", "pass").await;
        let req = w
            .engine
            .create_request(&w.coder, EXEC, &json!({}))
            .await
            .unwrap();
        w.engine
            .admit(&w.ops, &req, "rev", "reviewer", "run-1")
            .await
            .unwrap();
        let t = w
            .engine
            .result_template(&w.rev, &req, "run-1")
            .await
            .unwrap();
        assert_eq!(t.subject_digest, d);
        assert_eq!(t.verifier.run.as_str(), "run-1");
        assert_eq!(t.criteria.len(), 1);
        assert!(
            t.criteria
                .iter()
                .all(|c| c.status == CriterionStatus::NotTested)
        );
        assert!(
            t.dispositions
                .iter()
                .all(|x| x.disposition == DispositionKind::StillPresent)
        );

        for (who, expected) in [
            (&w.rev2, "permission_denied"),
            (&w.coder, "permission_denied"),
        ] {
            let e = w
                .engine
                .result_template(who, &req, "run-1")
                .await
                .unwrap_err();
            assert_eq!(code(&e), expected, "{}", who.name());
        }
        let e = w
            .engine
            .result_template(&w.rev, &req, "run-none")
            .await
            .unwrap_err();
        assert_eq!(code(&e), "not_found");

        // It is a result the engine accepts as it stands: every field is filled in but the
        // rows' verdicts.
        let doc = serde_json::to_value(&t).unwrap();
        w.engine.submit_result(&w.rev, &doc).await.unwrap();
    })
    .await;
}

const SPEC: &str = "version: 1\ncriteria:\n  - id: unit-tests\n    description: the unit tests pass\n    probe: {kind: command, argv: [sh, -c, 'exit 0']}\n  - id: no-crash\n    role: safety\n    weight: 2\n    probe: {kind: command, argv: [sh, -c, 'exit 0']}\n";

fn input(specs: &[&str], criteria: Vec<verdict_core::contracts::Criterion>) -> SubjectInput {
    SubjectInput {
        execution: EXEC.into(),
        generation: 1,
        mission: None,
        producer: "coder".into(),
        producer_run: "run-coder".into(),
        work_items: vec![("work_package".into(), "wp-1".into(), "1".into())],
        objective_revision: "1".into(),
        objective_digest: verdict_core::digest::raw(b"add a flag"),
        criteria_revision: "1".into(),
        criteria,
        resources: vec![scaffold::ResourceInput {
            name: "diff".into(),
            kind: "git_diff".into(),
            digest: verdict_core::digest::raw(b"+flag"),
            uri: None,
        }],
        specs: specs
            .iter()
            .map(|s| {
                verdict_probes::load::load_bytes(
                    s.as_bytes(),
                    verdict_probes::load::Format::Yaml,
                    &BTreeMap::new(),
                )
                .unwrap()
            })
            .collect(),
        workflow_revision: "1".into(),
        risk: serde_json::from_value(json!("low")).unwrap(),
        risk_revision: "1".into(),
        capabilities: vec![],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subject_built_from_specs_pins_their_digests_and_is_accepted() {
    on_both(|store| async move {
        let w = world(store).await;
        let docs = verdict_core::contracts::Criterion {
            id: "docs".parse().unwrap(),
            text: "the README documents the flag".into(),
            required: true,
            role: Default::default(),
            weight: None,
        };
        let (subject, digest) = scaffold::subject(input(&[SPEC], vec![docs.clone()])).unwrap();
        let spec = &input(&[SPEC], vec![]).specs[0];
        assert_eq!(subject.checks.len(), 2);
        for (pin, check) in subject.checks.iter().zip(&spec.checks) {
            assert_eq!(pin.definition_digest, check.definition_digest);
            assert_eq!(pin.criteria, vec![check.id.clone()]);
        }
        let ids: Vec<&str> = subject
            .criteria
            .items
            .iter()
            .map(|c| c.id.as_str())
            .collect();
        assert_eq!(ids, ["unit-tests", "no-crash", "docs"]);
        assert_eq!(subject.criteria.items[0].text, "the unit tests pass");
        assert_eq!(subject.criteria.items[1].weight, Some(2.0));
        let value = serde_json::to_value(&subject).unwrap();
        assert_eq!(
            w.engine.put_subject(&w.coder, &value).await.unwrap(),
            digest
        );
        assert!(
            w.engine
                .store()
                .get(DocKind::Subject, &digest)
                .await
                .unwrap()
                .is_some()
        );

        // A criterion given twice, or none at all, is refused.
        let e = scaffold::subject(input(&[SPEC, SPEC], vec![])).unwrap_err();
        assert!(e.to_string().contains("given twice"), "{e}");
        let mut twice = docs.clone();
        twice.id = "unit-tests".parse().unwrap();
        assert!(scaffold::subject(input(&[SPEC], vec![twice])).is_err());
        let e = scaffold::subject(input(&[], vec![])).unwrap_err();
        assert!(e.to_string().contains("no criteria"), "{e}");
    })
    .await;
}
