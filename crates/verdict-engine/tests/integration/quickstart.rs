//! The quickstart walks a real change through the flow, on both backends, and can run again.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use verdict_core::contracts::Outcome;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quickstart_reworks_then_passes_and_runs_again_as_a_new_execution() {
    common::on_both(|store| async move {
        let mut lines = Vec::new();
        let first = verdict_engine::quickstart::run(store.clone(), None, &mut |l: &str| {
            lines.push(l.to_owned())
        })
        .await
        .unwrap();
        // It initialised the store; running again needs that operator's token.
        let token = first.operator_token.clone().unwrap();
        let again = verdict_engine::quickstart::run(store.clone(), None, &mut |_: &str| {})
            .await
            .unwrap_err();
        assert_eq!(
            again.code(),
            "conflict",
            "a second init is refused: {again}"
        );
        assert!(
            again.to_string().contains("--token or VERDICT_TOKEN"),
            "{again}"
        );
        let outcomes: Vec<Outcome> = first.decisions.iter().map(|d| d.outcome).collect();
        assert_eq!(outcomes, vec![Outcome::Rework, Outcome::Pass], "{lines:#?}");
        assert!(
            first.decisions[0]
                .rework
                .iter()
                .any(|f| f.id.as_str().starts_with("f-unescaped-name-"))
        );
        let second =
            verdict_engine::quickstart::run(store.clone(), Some(&token), &mut |_: &str| {})
                .await
                .unwrap();
        assert!(second.operator_token.is_none());
        assert_ne!(first.execution, second.execution);
        let engine = verdict_engine::Engine::new(store, "quickstart");
        let ops = engine.authenticate(&token).await.unwrap();
        for ex in [&first.execution, &second.execution] {
            let status = engine.status(&ops, ex).await.unwrap();
            assert_eq!(status.applicable.unwrap().decision.outcome, Outcome::Pass);
            for d in engine.history(&ops, ex).await.unwrap().decisions {
                engine
                    .gate_replay(&ops, d.decision.evaluation_key.as_ref().unwrap())
                    .await
                    .unwrap();
            }
        }
    })
    .await;
}
