//! decode ∘ encode is the identity on every message built from random model values.

use proptest::prelude::*;

use crate::arb::{arb_match, arb_message};
use crate::oxm::{decode_oxm_fields, encode_oxm_fields};
use crate::{decode, encode};

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn messages_roundtrip(msg in arb_message(), xid in any::<u32>()) {
        let mut buf = vec![0xa5];
        encode(xid, &msg, &mut buf).map_err(|e| TestCaseError::fail(format!("{e}: {msg:?}")))?;
        let (h, back) = decode(&buf[1..]).map_err(|e| TestCaseError::fail(format!("{e}: {msg:?}")))?;
        prop_assert_eq!(h.xid, xid);
        prop_assert_eq!(h.length as usize, buf.len() - 1);
        prop_assert_eq!(back, msg);
    }

    #[test]
    fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..300)) {
        crate::fuzzing::fuzz_decode(&data);
    }

    #[test]
    fn mutated_messages_never_panic(
        msg in arb_message(),
        edits in proptest::collection::vec((any::<usize>(), any::<u8>(), 0u8..3), 1..6),
    ) {
        let mut b = Vec::new();
        encode(1, &msg, &mut b).map_err(|e| TestCaseError::fail(e.to_string()))?;
        for (at, byte, how) in edits {
            let i = at % (b.len() + 1);
            match how {
                0 if i < b.len() => b[i] = byte,
                1 => b.insert(i, byte),
                _ => b.truncate(i.max(8)),
            }
        }
        crate::fuzzing::fuzz_decode(&b);
    }

    #[test]
    fn matches_roundtrip(m in arb_match()) {
        let mut buf = Vec::new();
        encode_oxm_fields(&m, &mut buf).map_err(|e| TestCaseError::fail(format!("{e}: {m:?}")))?;
        prop_assert_eq!(decode_oxm_fields(&buf).map_err(|e| TestCaseError::fail(format!("{e}: {m:?}")))?, m);
    }
}

/// The match generator reaches every OXM field the encoder writes (so the round trip above
/// covers them all).
#[test]
fn generated_matches_cover_every_field() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = arb_match();
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..5000 {
        let m = strategy.new_tree(&mut runner).expect("tree").current();
        let mut buf = Vec::new();
        encode_oxm_fields(&m, &mut buf).expect("encodes");
        let mut i = 0;
        while i + 4 <= buf.len() {
            let h = u32::from_be_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
            seen.insert(h >> 9); // class and field, without has-mask and length
            i += 4 + (h & 0xff) as usize;
        }
    }
    for def in crate::oxm::OXM_FIELDS {
        if def.name == "NXM_NX_TCP_FLAGS" {
            continue; // written as ONFOXM_ET_TCP_FLAGS
        }
        assert!(
            seen.contains(&(def.header() >> 9)),
            "{} never generated",
            def.name
        );
    }
}
