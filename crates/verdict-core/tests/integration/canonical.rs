//! The focused canonical writer and the strict reader, checked differentially: against
//! `serde_json_canonicalizer` for RFC 8785 output, and against `serde_json` for what a
//! well-formed document means.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use proptest::prelude::*;
use serde_json::{Value, json};
use verdict_core::{canonical, json as strict};

fn arb_string() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9 _.-]{0,12}",
        any::<String>(),
        prop::collection::vec(
            prop_oneof![
                Just('\u{0}'),
                Just('\u{1f}'),
                Just('"'),
                Just('\\'),
                Just('\u{7f}'),
                Just('\u{2028}'),
                Just('\u{e000}'),
                Just('\u{fb33}'),
                Just('\u{1f600}'),
                Just('\u{10ffff}'),
                Just('é')
            ],
            0..8
        )
        .prop_map(|v| v.into_iter().collect()),
    ]
}

fn arb_number() -> impl Strategy<Value = Value> {
    prop_oneof![
        (-9_007_199_254_740_991i64..=9_007_199_254_740_991).prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        prop::num::f64::NORMAL.prop_map(|f| json!(f)),
        prop::num::f64::SUBNORMAL.prop_map(|f| json!(f)),
        (-1e6f64..1e6).prop_map(|f| json!(f)),
    ]
}

/// Numbers the strict reader accepts: any notation, magnitude at most 2^53 - 1.
fn arb_safe_number() -> impl Strategy<Value = Value> {
    arb_number().prop_filter("within the safe range", |v| {
        v.as_f64()
            .is_some_and(|f| f.abs() <= 9_007_199_254_740_991.0)
    })
}

fn arb_json() -> impl Strategy<Value = Value> {
    json_of(arb_number().boxed())
}

fn arb_safe_json() -> impl Strategy<Value = Value> {
    json_of(arb_safe_number().boxed())
}

fn json_of(numbers: BoxedStrategy<Value>) -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        numbers,
        arb_string().prop_map(Value::String)
    ];
    leaf.prop_recursive(4, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(arb_string(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn canonical_form_matches_the_reference_implementation(v in arb_json()) {
        let ours = canonical::to_vec(&v);
        let reference = serde_json_canonicalizer::to_vec(&v).unwrap();
        prop_assert_eq!(String::from_utf8_lossy(&ours), String::from_utf8_lossy(&reference));
    }

    #[test]
    fn canonical_form_is_a_fixed_point_of_the_strict_reader(v in arb_safe_json()) {
        let bytes = canonical::to_vec(&v);
        let back = strict::parse(&bytes).unwrap();
        prop_assert_eq!(canonical::to_vec(&back), bytes);
    }

    #[test]
    fn strict_reader_agrees_with_serde_json_on_good_documents(v in arb_safe_json(), pretty in any::<bool>()) {
        let text = if pretty { serde_json::to_string_pretty(&v).unwrap() } else { serde_json::to_string(&v).unwrap() };
        let ours = strict::parse(text.as_bytes()).unwrap();
        let theirs: Value = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(canonical::to_vec(&ours), canonical::to_vec(&theirs));
    }

    #[test]
    fn strict_reader_refuses_every_number_beyond_the_safe_range(m in 1.0f64..1e250, neg in any::<bool>()) {
        let f = if neg { -9_007_199_254_740_992.0 * m } else { 9_007_199_254_740_992.0 * m };
        let text = serde_json::to_string(&json!([f])).unwrap();
        prop_assert!(strict::parse(text.as_bytes()).is_err(), "{text}");
    }

    #[test]
    fn strict_reader_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = strict::parse(&bytes);
    }
}
