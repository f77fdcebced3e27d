//! Replies printed the way `ovs-ofctl -O OpenFlow13` prints them.

use std::fmt::Write as _;

use openflow::multipart::{FlowStats, PortStats, TableStats};
use openflow::port::{port_config, port_features, port_state};
use openflow::PortDesc;
use pipeline::FlowView;

/// `dump-flows`: one line per flow, counters included.
pub fn flows(flows: &[FlowStats]) -> String {
    let mut s = String::from("OFPST_FLOW reply (OF1.3):\n");
    for f in flows {
        let v = FlowView {
            table_id: f.table_id,
            priority: f.priority,
            matcher: f.matcher,
            cookie: f.cookie,
            instructions: f.instructions.clone(),
            packets: f.packet_count,
            bytes: f.byte_count,
            duration_ms: u64::from(f.duration_sec) * 1000 + u64::from(f.duration_nsec) / 1_000_000,
            idle_timeout: f.idle_timeout,
            hard_timeout: f.hard_timeout,
            flags: f.flags,
            matcher_as_sent: f.matcher_as_sent.clone(),
            instructions_as_sent: f.instructions_as_sent.clone(),
        };
        let _ = writeln!(s, " {}", pipeline::ofctl::format_flow_stats(&v));
    }
    s
}

/// `dump-ports`.
pub fn port_stats(stats: &[PortStats]) -> String {
    let mut s = format!("OFPST_PORT reply (OF1.3): {} ports\n", stats.len());
    for p in stats {
        let _ = writeln!(
            s,
            "  port {:>2}: rx pkts={}, bytes={}, drop={}, errs={}, frame={}, over={}, crc={}",
            p.port_no,
            p.rx_packets,
            p.rx_bytes,
            p.rx_dropped,
            p.rx_errors,
            p.rx_frame_err,
            p.rx_over_err,
            p.rx_crc_err
        );
        let _ = writeln!(
            s,
            "           tx pkts={}, bytes={}, drop={}, errs={}, coll={}",
            p.tx_packets, p.tx_bytes, p.tx_dropped, p.tx_errors, p.collisions
        );
        let _ = writeln!(
            s,
            "           duration={}.{:09}s",
            p.duration_sec, p.duration_nsec
        );
    }
    s
}

fn names(bits: u32, table: &[(u32, &str)]) -> String {
    let v: Vec<&str> = table
        .iter()
        .filter(|(b, _)| bits & b != 0)
        .map(|(_, n)| *n)
        .collect();
    if v.is_empty() {
        "0".into()
    } else {
        v.join(" ")
    }
}

/// `dump-ports-desc`.
pub fn port_descs(descs: &[PortDesc]) -> String {
    let mut s = String::from("OFPST_PORT_DESC reply (OF1.3):\n");
    for p in descs {
        let mac: Vec<String> = p.hw_addr.iter().map(|b| format!("{b:02x}")).collect();
        let _ = writeln!(s, " {}({}): addr:{}", p.port_no, p.name, mac.join(":"));
        let config = names(
            p.config,
            &[
                (port_config::PORT_DOWN, "PORT_DOWN"),
                (port_config::NO_RECV, "NO_RECV"),
                (port_config::NO_FWD, "NO_FWD"),
                (port_config::NO_PACKET_IN, "NO_PACKET_IN"),
            ],
        );
        let state = names(
            p.state,
            &[
                (port_state::LINK_DOWN, "LINK_DOWN"),
                (port_state::BLOCKED, "BLOCKED"),
                (port_state::LIVE, "LIVE"),
            ],
        );
        let curr = names(
            p.curr,
            &[
                (port_features::RATE_10GB_FD, "10GB-FD"),
                (port_features::RATE_1GB_FD, "1GB-FD"),
                (port_features::COPPER, "COPPER"),
                (port_features::FIBER, "FIBER"),
            ],
        );
        let _ = writeln!(s, "     config:     {config}");
        let _ = writeln!(s, "     state:      {state}");
        let _ = writeln!(s, "     current:    {curr}");
        let _ = writeln!(
            s,
            "     speed: {} Mbps now, {} Mbps max",
            p.curr_speed / 1000,
            p.max_speed / 1000
        );
    }
    s
}

/// `dump-tables`: runs of tables with the same counters collapse into one "ditto" line.
pub fn tables(tables: &[TableStats]) -> String {
    let mut s = String::from("OFPST_TABLE reply (OF1.3):\n");
    let same = |a: &TableStats, b: &TableStats| {
        (a.active_count, a.lookup_count, a.matched_count)
            == (b.active_count, b.lookup_count, b.matched_count)
    };
    let mut i = 0;
    while i < tables.len() {
        let t = &tables[i];
        let _ = writeln!(
            s,
            "  table {}:\n    active={}, lookup={}, matched={}\n",
            t.table_id, t.active_count, t.lookup_count, t.matched_count
        );
        let mut j = i + 1;
        while j < tables.len() && same(&tables[j], t) {
            j += 1;
        }
        match j - (i + 1) {
            0 => {}
            1 => {
                let _ = writeln!(s, "  table {}: ditto", tables[i + 1].table_id);
            }
            _ => {
                let _ = writeln!(
                    s,
                    "  tables {}...{}: ditto",
                    tables[i + 1].table_id,
                    tables[j - 1].table_id
                );
            }
        }
        i = j;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_collapse_like_ovs_ofctl() {
        let t = |id, active| TableStats {
            table_id: id,
            active_count: active,
            lookup_count: 0,
            matched_count: 0,
        };
        let out = tables(&[t(0, 1), t(1, 0), t(2, 0), t(3, 0)]);
        assert_eq!(
            out,
            "OFPST_TABLE reply (OF1.3):\n  table 0:\n    active=1, lookup=0, matched=0\n\n  \
             table 1:\n    active=0, lookup=0, matched=0\n\n  tables 2...3: ditto\n"
        );
    }

    #[test]
    fn ports_print_like_ovs_ofctl() {
        let p = PortStats {
            port_no: 1,
            rx_packets: 50,
            rx_bytes: 3200,
            ..PortStats::default()
        };
        let out = port_stats(&[p]);
        assert!(out.starts_with(
            "OFPST_PORT reply (OF1.3): 1 ports\n  port  1: rx pkts=50, bytes=3200, drop=0"
        ));
    }
}
