//! The rule tables of issue 20 and the flow-mods that churn them, as [`Flow`]s that print in
//! ovs-ofctl's syntax (to install a table with `ovs-ofctl add-flows`) and encode as OpenFlow
//! ([`super::openflow`], to churn over one connection). Ports: 1 the traffic's source, 2 the
//! out-port, 3 a second out-port the effect test redirects to.
//!
//! The tables and churn are the ones of `hayate bench churn-*` (in-process), so that the two
//! benches measure the same thing.

use std::fmt::Write as _;

use crate::frame::flow_src;

/// A match field (besides `udp`, which sets the Ethernet type and IP protocol).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// `in_port=N`.
    InPort(u32),
    /// `nw_src=A`.
    Ipv4Src([u8; 4]),
    /// `nw_dst=A`.
    Ipv4Dst([u8; 4]),
    /// `nw_src=A/M` with any mask.
    Ipv4SrcMasked([u8; 4], [u8; 4]),
    /// `tp_src=N` (with `udp`).
    UdpSrc(u16),
}

/// A flow entry of table 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flow {
    /// Priority.
    pub priority: u16,
    /// Whether it matches UDP over IPv4.
    pub udp: bool,
    /// The other fields.
    pub fields: Vec<Field>,
    /// Where it sends; `None`: drop.
    pub output: Option<u32>,
}

fn dotted(a: &[u8; 4]) -> String {
    format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3])
}

impl Flow {
    /// The entry in ovs-ofctl's syntax (`priority=100,udp,nw_src=10.0.0.1,actions=output:2`).
    pub fn text(&self) -> String {
        let mut s = format!("priority={}", self.priority);
        if self.udp {
            s.push_str(",udp");
        }
        for f in &self.fields {
            let _ = match f {
                Field::InPort(p) => write!(s, ",in_port={p}"),
                Field::Ipv4Src(a) => write!(s, ",nw_src={}", dotted(a)),
                Field::Ipv4Dst(a) => write!(s, ",nw_dst={}", dotted(a)),
                Field::Ipv4SrcMasked(a, m) => write!(s, ",nw_src={}/{}", dotted(a), dotted(m)),
                Field::UdpSrc(p) => write!(s, ",tp_src={p}"),
            };
        }
        match self.output {
            Some(p) => write!(s, ",actions=output:{p}"),
            None => write!(s, ",actions=drop"),
        }
        .expect("writing to a String");
        s
    }
}

/// A rule table of the bench.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    /// A rule per source the traffic uses (`priority=100,udp,nw_src=10.0.X.Y,actions=output:2`)
    /// and a catch-all that drops: every switch needs a megaflow per flow.
    PerFlow,
    /// `priority=100,udp,nw_src=11.1.1.1,actions=drop` above
    /// `priority=10,in_port=1,actions=output:2`: no packet meets the drop rule.
    Drop,
}

impl Table {
    /// Its name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Table::PerFlow => "per-flow",
            Table::Drop => "drop",
        }
    }

    /// Looks a table up by name.
    pub fn from_name(n: &str) -> anyhow::Result<Table> {
        match n {
            "per-flow" => Ok(Table::PerFlow),
            "drop" => Ok(Table::Drop),
            _ => anyhow::bail!("unknown table '{n}'; use per-flow or drop"),
        }
    }

    /// Its entries for traffic of `flows` sources.
    pub fn flows(self, flows: u32) -> Vec<Flow> {
        match self {
            Table::PerFlow => (0..flows)
                .map(source_rule)
                .chain([Flow {
                    priority: 0,
                    udp: false,
                    fields: vec![],
                    output: None,
                }])
                .collect(),
            Table::Drop => vec![
                Flow {
                    priority: 100,
                    udp: true,
                    fields: vec![Field::Ipv4Src([11, 1, 1, 1])],
                    output: None,
                },
                Flow {
                    priority: 10,
                    udp: false,
                    fields: vec![Field::InPort(1)],
                    output: Some(2),
                },
            ],
        }
    }
}

/// The per-flow table's rule of source `i`.
fn source_rule(i: u32) -> Flow {
    Flow {
        priority: 100,
        udp: true,
        fields: vec![Field::Ipv4Src(flow_src(i))],
        output: Some(2),
    }
}

/// Rules a churn cycle adds and then deletes.
pub const CYCLE: u32 = 1000;

/// Flow-mod `i` of the churn (the sequence repeats every 2 × [`CYCLE`]): adds of rules no
/// packet matches (`priority=50,udp,nw_dst=192.168.X.Y,actions=drop`), then their strict
/// deletes; with `matching_every` > 0 every `matching_every`-th is instead an add that
/// rewrites a used source's rule of the per-flow table (the same actions: its megaflow must be
/// checked, and goes) — one of the `flows` sources, spread over them.
pub fn churn_mod(i: u64, matching_every: u32, flows: u32) -> (Flow, super::openflow::Command) {
    use super::openflow::Command::{Add, DeleteStrict};
    let j = (i % (2 * CYCLE as u64)) as u32;
    if matching_every > 0 && i % matching_every as u64 == matching_every as u64 - 1 {
        return (source_rule(((i * 7919) % flows.max(1) as u64) as u32), Add);
    }
    let k = j % CYCLE;
    let flow = Flow {
        priority: 50,
        udp: true,
        fields: vec![Field::Ipv4Dst([192, 168, (k >> 8) as u8, (k & 255) as u8])],
        output: None,
    };
    (flow, if j < CYCLE { Add } else { DeleteStrict })
}

/// An effect test's rule: it moves the flows of sources 10.0.0.0 + 4096·k (UDP source port
/// 1024; one frame in 4,096, spread through the traffic) to port 3, above every rule of both
/// tables. Two ways to name them:
///
/// - `nw_src`: `nw_src=10.0.0.0/255.0.15.255` — in the per-flow table it overlaps only the
///   megaflows of the flows it moves (theirs are exact on the source);
/// - `tp_src`: `tp_src=1024` — it overlaps every megaflow (they leave the UDP ports out), so
///   a switch must check them all.
///
/// In the drop table every flow shares one megaflow, which both overlap.
pub fn redirects() -> [(&'static str, Flow); 2] {
    let flow = |f: Field| Flow {
        priority: 200,
        udp: true,
        fields: vec![f],
        output: Some(3),
    };
    [
        (
            "nw_src",
            flow(Field::Ipv4SrcMasked([10, 0, 0, 0], [255, 0, 15, 255])),
        ),
        ("tp_src", flow(Field::UdpSrc(1024))),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::churn::openflow::Command::{Add, DeleteStrict};

    #[test]
    fn tables_print_in_ofctl_syntax() {
        let t = Table::PerFlow.flows(300);
        assert_eq!(t.len(), 301);
        assert_eq!(
            t[0].text(),
            "priority=100,udp,nw_src=10.0.0.0,actions=output:2"
        );
        assert_eq!(
            t[257].text(),
            "priority=100,udp,nw_src=10.0.1.1,actions=output:2"
        );
        assert_eq!(t[300].text(), "priority=0,actions=drop");
        let d: Vec<String> = Table::Drop.flows(100_000).iter().map(Flow::text).collect();
        assert_eq!(
            d,
            [
                "priority=100,udp,nw_src=11.1.1.1,actions=drop",
                "priority=10,in_port=1,actions=output:2"
            ]
        );
        let r: Vec<String> = redirects().iter().map(|(_, f)| f.text()).collect();
        assert_eq!(
            r,
            [
                "priority=200,udp,nw_src=10.0.0.0/255.0.15.255,actions=output:3",
                "priority=200,udp,tp_src=1024,actions=output:3"
            ]
        );
        // Both name the same sources: 10.0.0.0 + 4096·k, the frames of UDP source port 1024.
        for i in [0u32, 4096, 98_304, 1, 4095, 4097, 65_536 + 256] {
            let src = u32::from_be_bytes(flow_src(i));
            let by_src = src & 0xff00_0fff == 0x0a00_0000;
            assert_eq!(by_src, i % 4096 == 0, "source {i}");
        }
        assert_eq!(Table::from_name("drop").unwrap(), Table::Drop);
        assert!(Table::from_name("acl").is_err());
    }

    #[test]
    fn churn_adds_then_deletes_and_sometimes_rewrites_a_used_rule() {
        let (f, c) = churn_mod(1, 0, 100_000);
        assert_eq!(
            (f.text().as_str(), c),
            ("priority=50,udp,nw_dst=192.168.0.1,actions=drop", Add)
        );
        let (f, c) = churn_mod(CYCLE as u64 + 1, 0, 100_000);
        assert_eq!(f.fields, vec![Field::Ipv4Dst([192, 168, 0, 1])]);
        assert_eq!(c, DeleteStrict);
        let (f, _) = churn_mod(2 * CYCLE as u64 + 300, 0, 100_000);
        assert_eq!(f.fields, vec![Field::Ipv4Dst([192, 168, 1, 44])]);
        // 1 %: every 100th rewrites a source's rule, which the table has.
        let used: Vec<Flow> = (0..1000)
            .map(|i| churn_mod(i, 100, 100_000))
            .filter(|(f, _)| f.priority == 100)
            .map(|(f, c)| {
                assert_eq!(c, Add);
                f
            })
            .collect();
        assert_eq!(used.len(), 10);
        let table = Table::PerFlow.flows(100_000);
        assert!(used.iter().all(|f| table.contains(f)));
    }
}
