//! Requests a conforming controller may send that Hayate cannot carry out get the error the
//! OpenFlow 1.3.5 specification names, never a silent acceptance; a table-features set
//! request too big for one message is taken in parts.

use openflow::SwitchConfig;

use super::*;

fn multipart(flags: u16, body: R) -> Message {
    Message::MultipartRequest(MultipartRequest { flags, body })
}

#[test]
fn fragment_handling_other_than_normal_is_refused() {
    let b = bridge(FailMode::Secure);
    for flags in [1, 2, 3, 0x10] {
        let r = ask(
            &b,
            1,
            &Message::SetConfig(SwitchConfig {
                flags,
                miss_send_len: 100,
            }),
        );
        assert_eq!(error_code(&r), Some(ErrorCode::SCFC_BAD_FLAGS), "{flags}");
    }
    match &ask(&b, 2, &Message::GetConfigRequest)[..] {
        [(2, Message::GetConfigReply(c))] => assert_eq!((c.flags, c.miss_send_len), (0, 128)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_port_cannot_be_told_what_to_advertise() {
    let b = bridge(FailMode::Secure);
    let pm = |advertise| {
        Message::PortMod(PortMod {
            port_no: 2,
            hw_addr: mac_from_name("p2"),
            config: 0,
            mask: 0,
            advertise,
        })
    };
    assert_eq!(
        error_code(&ask(&b, 1, &pm(0x20))),
        Some(ErrorCode::PMFC_BAD_ADVERTISE)
    );
    assert!(ask(&b, 2, &pm(0)).is_empty());
}

#[test]
fn queue_statistics_name_a_missing_port_or_queue() {
    let b = bridge(FailMode::Secure);
    let q = |port_no, queue_id| multipart(0, R::Queue { port_no, queue_id });
    let all = openflow::multipart::QUEUE_ALL;
    for (port, queue, want) in [
        (9, all, Some(ErrorCode::QOFC_BAD_PORT)),
        (1, 0, Some(ErrorCode::QOFC_BAD_QUEUE)),
        (ports::ANY, 3, Some(ErrorCode::QOFC_BAD_QUEUE)),
        (1, all, None),
        (ports::ANY, all, None),
    ] {
        let r = ask(&b, 1, &q(port, queue));
        assert_eq!(error_code(&r), want, "port {port} queue {queue}");
        if want.is_none() {
            assert!(
                matches!(&r[..], [(1, Message::MultipartReply(m))] if m.body == B::Queue(vec![]))
            );
        }
    }
}

/// The tables of a set request in two messages, the first flagged MORE: nothing is answered
/// until the last, and then the layout covers both parts.
#[test]
fn a_table_features_set_request_in_parts() {
    let b = bridge(FailMode::Secure);
    let tables = super::faucet_like_tables();
    let first = ask(
        &b,
        8,
        &multipart(MORE, R::TableFeatures(tables[..2].to_vec())),
    );
    assert!(first.is_empty(), "{first:?}");
    let r = ask(&b, 8, &multipart(0, R::TableFeatures(tables[2..].to_vec())));
    assert_eq!(error_code(&r), None, "{r:?}");
    let got = super::table_features_reply(&r);
    assert_eq!(got.len(), 255);
    assert_eq!(&got[..4], &tables[..]);
    // A part of another kind under the xid being gathered.
    assert!(ask(
        &b,
        9,
        &multipart(MORE, R::TableFeatures(tables[..1].to_vec()))
    )
    .is_empty());
    assert_eq!(
        error_code(&ask(&b, 9, &multipart(0, R::Desc))),
        Some(ErrorCode::BRC_BAD_MULTIPART)
    );
}

#[test]
fn table_mod_takes_the_deprecated_bits_only() {
    let b = bridge(FailMode::Secure);
    let tm = |table_id, config| Message::TableMod(openflow::TableMod { table_id, config });
    assert!(ask(&b, 1, &tm(0, 3)).is_empty());
    assert!(ask(&b, 1, &tm(0xff, 0)).is_empty());
    assert_eq!(
        error_code(&ask(&b, 2, &tm(0, 4))),
        Some(ErrorCode::TMFC_BAD_CONFIG)
    );
    assert_eq!(
        error_code(&ask(&b, 3, &tm(254, 0x10))),
        Some(ErrorCode::TMFC_BAD_CONFIG)
    );
}
