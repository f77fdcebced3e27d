use super::*;
use crate::metrics::sample::PoolSample;
use datapath::{Snapshot, ThreadStats};

fn bridge() -> BridgeSample {
    BridgeSample {
        bridge: "br0".into(),
        fail_open: true,
        ports: vec![PortSample {
            ofport: 1,
            name: "p1".into(),
            link_up: true,
            stats: port::PortStats {
                rx_packets: 10,
                rx_bytes: 640,
                rx_dropped: 2,
                tx_packets: 7,
                ..Default::default()
            },
            drops: Snapshot {
                upcall_shed: 2,
                drop_no_action: 3,
                drop_policed: 4,
                ..Default::default()
            },
            queues: vec![datapath::EgressQueue {
                queue: 1,
                rates: port::QueueRates {
                    min_kbps: 1000,
                    max_kbps: 2000,
                    burst_kbit: 0,
                },
                counts: datapath::QueueCounts {
                    tx_packets: 5,
                    tx_bytes: 320,
                    dropped: 2,
                    backlog: 3,
                },
            }],
            queue_unknown: 1,
            tunnel_drops: vec![("tunnel_no_port", 5)],
        }],
        threads: Vec::new(),
        megaflows: Vec::new(),
        rx_queues: Vec::new(),
        tables: vec![pipeline::TableStatsView {
            table_id: 0,
            active: 4,
            lookups: 9,
            matched: 8,
        }],
        controllers: vec![ControllerSample {
            target: "ptcp:6653:127.0.0.1".into(),
            peer: "127.0.0.1:40000".into(),
            role: "equal",
            rx_messages: 5,
            async_queued: 6,
            rate_limited: 1,
            queue_full: 0,
            probes: 2,
        }],
        pools: vec![PoolSample {
            pool: "packet",
            frames: 65536,
            shared_free: 60000,
            exhaustions: 3,
        }],
    }
}

#[test]
fn golden_exposition_of_a_small_bridge() {
    let text = render(vec![bridge()]);
    let want = include_str!("golden.prom");
    assert_eq!(text, want, "got:\n{text}");
}

#[test]
fn every_poll_thread_counter_is_a_family_with_one_series_per_thread() {
    let mut b = bridge();
    let stats = |rx, busy| Snapshot {
        rx_packets: rx,
        busy_cycles: busy,
        emc_hits: rx,
        ..Default::default()
    };
    b.threads = vec![
        ThreadStats {
            index: 0,
            core: Some(3),
            lane: false,
            stats: stats(100, 5000),
        },
        ThreadStats {
            index: 1,
            core: None,
            lane: true,
            stats: stats(1, 50),
        },
    ];
    let text = render(vec![b]);
    let labels0 = r#"{bridge="br0",thread="0",core="3",lane="false"}"#;
    let labels1 = r#"{bridge="br0",thread="1",core="-",lane="true"}"#;
    for line in [
        format!("hayate_pmd_rx_packets_total{labels0} 100"),
        format!("hayate_pmd_busy_cycles_total{labels0} 5000"),
        format!("hayate_pmd_emc_hits_total{labels1} 1"),
        format!("hayate_pmd_megaflow_installs_total{labels1} 0"),
    ] {
        assert!(text.lines().any(|l| l == line), "no {line} in\n{text}");
    }
    for c in Counter::ALL {
        let name = format!("hayate_pmd_{}_total", c.name());
        let typ = format!("# TYPE {name} counter");
        assert_eq!(text.lines().filter(|l| **l == typ).count(), 1, "{typ}");
        let series = text
            .lines()
            .filter(|l| l.starts_with(&format!("{name}{{")))
            .count();
        assert_eq!(series, 2, "{name}: one series per thread");
    }
}

#[test]
fn rx_queues_and_live_megaflows_have_their_series() {
    let mut b = bridge();
    b.megaflows = vec![7, 0];
    b.rx_queues = vec![RxqSample {
        thread: 1,
        ofport: 1,
        port: "p1".into(),
        queue: 0,
        packets: 10,
        busy_cycles: 999,
    }];
    let text = render(vec![b]);
    let q = r#"{bridge="br0",thread="1",ofport="1",port="p1",queue="0"}"#;
    for line in [
        r#"hayate_pmd_megaflows{bridge="br0",thread="0"} 7"#.to_string(),
        r#"hayate_pmd_megaflows{bridge="br0",thread="1"} 0"#.to_string(),
        format!("hayate_rxq_packets_total{q} 10"),
        format!("hayate_rxq_busy_cycles_total{q} 999"),
    ] {
        assert!(text.lines().any(|l| l == line), "no {line} in\n{text}");
    }
    assert!(text.contains("# TYPE hayate_pmd_megaflows gauge"), "{text}");
}

#[test]
fn label_values_are_escaped() {
    let mut b = bridge();
    b.ports[0].name = "a\"b\\c".into();
    let text = render(vec![b]);
    assert!(
        text.contains(r#"port="a\"b\\c""#),
        "quotes and backslashes escaped:\n{text}"
    );
}

#[test]
fn an_empty_switch_exposes_no_series() {
    assert_eq!(render(Vec::new()), "");
}
