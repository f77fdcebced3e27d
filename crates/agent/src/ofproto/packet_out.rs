//! PACKET_OUT: the controller's actions resolved into datapath actions on the control side,
//! then the packet is injected into the datapath (run by poll thread 0).
//!
//! Resolution follows the packet's key as the actions change it: output:TABLE translates the
//! key as it is at that point through the published pipeline (with the packet-out's in_port,
//! and the matched entries' counters count the packet); FLOOD and ALL expand to every port but
//! in_port (FLOOD also skips ports that are down or excluded from flooding); IN_PORT sends
//! back; CONTROLLER makes a packet-in (reason ACTION). Groups run their buckets: indirect its
//! one bucket, all every bucket (each on the packet as it was before the group: header
//! changes of a bucket are undone after it), select its first bucket with a weight,
//! fast-failover its first live bucket; chains deeper than [`MAX_DEPTH`] are cut. NORMAL and
//! LOCAL are refused (OFPBAC_BAD_OUT_PORT), as are unknown ports and groups.

use packet::{Field, FlowKey};
use pipeline::dpaction::now_ms;
use pipeline::model::{ports, Action, GroupType};
use pipeline::{DpAction, PacketInReason, Pipeline, PortInfo, Translation};

use openflow::{ErrorCode, PacketOut, NO_BUFFER};

use super::OfBridge;
use datapath::InjectError;

const VLAN_PRESENT: u128 = 0x1000;

/// Deepest group chain followed.
pub const MAX_DEPTH: usize = 8;

/// Header fields a group bucket may change and that are restored after it.
const RESTORED: &[Field] = &[
    Field::EthDst,
    Field::EthSrc,
    Field::Ipv4Src,
    Field::Ipv4Dst,
    Field::IpDscp,
    Field::IpEcn,
    Field::IpTtl,
    Field::TpSrc,
    Field::TpDst,
    Field::Ipv6Src,
    Field::Ipv6Dst,
    Field::TunnelId,
];

/// Everything resolution reads and writes.
struct Resolver<'a> {
    pipeline: &'a Pipeline,
    ports: &'a [PortInfo],
    in_port: u32,
    len: usize,
    key: FlowKey,
    out: Vec<DpAction>,
    tr: Translation,
}

impl Resolver<'_> {
    fn known(&self, no: u32) -> bool {
        self.ports.iter().any(|p| p.no == no)
    }

    fn actions(&mut self, actions: &[Action], depth: usize) -> Result<(), ErrorCode> {
        for a in actions {
            self.action(a, depth)?;
        }
        Ok(())
    }

    fn action(&mut self, a: &Action, depth: usize) -> Result<(), ErrorCode> {
        match *a {
            Action::Output { port, max_len } => self.output(port, max_len)?,
            Action::Group(g) => self.group(g, depth)?,
            Action::SetQueue(q) => self.out.push(DpAction::SetQueue(q)),
            Action::SetField { field, value } => {
                self.key.set(field, value);
                self.out.push(DpAction::SetField { field, value });
            }
            Action::PushVlan(tpid) => {
                let vid = self.key.get(Field::VlanVid);
                let tci = if vid & VLAN_PRESENT != 0 {
                    ((vid & 0xfff) | (self.key.get(Field::VlanPcp) << 13)) as u16
                } else {
                    0
                };
                self.key
                    .set(Field::VlanVid, VLAN_PRESENT | u128::from(tci & 0xfff));
                self.out.push(DpAction::PushVlan { tpid, tci });
            }
            Action::PopVlan => {
                self.key.set(Field::VlanVid, 0);
                self.key.set(Field::VlanPcp, 0);
                self.out.push(DpAction::PopVlan);
            }
            Action::DecNwTtl => self.out.push(DpAction::DecTtl),
            Action::PushMpls(ethertype) => {
                let lse = packet::mpls::push_entry(&self.key);
                self.key.set(Field::EthType, u128::from(ethertype));
                self.key.set(Field::MplsLse, u128::from(lse));
                self.out.push(DpAction::PushMpls { ethertype, lse });
            }
            Action::PopMpls(t) => {
                self.key.set(Field::EthType, u128::from(t));
                self.key.set(Field::MplsLse, 0);
                self.out.push(DpAction::PopMpls(t));
            }
            Action::SetMplsTtl(t) => {
                self.key.set(Field::MplsTtl, u128::from(t));
                self.out.push(DpAction::SetField {
                    field: Field::MplsTtl,
                    value: u128::from(t),
                });
            }
            Action::DecMplsTtl => self.out.push(DpAction::DecMplsTtl),
            Action::CopyTtlOut => self.out.push(DpAction::CopyTtlOut),
            Action::CopyTtlIn => self.out.push(DpAction::CopyTtlIn),
            Action::SetNwTtl(t) => {
                self.key.set(Field::IpTtl, u128::from(t));
                self.out.push(DpAction::SetField {
                    field: Field::IpTtl,
                    value: u128::from(t),
                });
            }
        }
        Ok(())
    }

    fn output(&mut self, port: u32, max_len: u16) -> Result<(), ErrorCode> {
        match port {
            ports::TABLE => {
                self.pipeline.translate(&self.key, &mut self.tr);
                let now = now_ms();
                for f in &self.tr.flows {
                    f.add(1, self.len as u64, now);
                }
                self.out.append(&mut self.tr.actions);
            }
            ports::IN_PORT if self.known(self.in_port) => {
                self.out.push(DpAction::Output(self.in_port))
            }
            ports::FLOOD | ports::ALL => {
                let all = port == ports::ALL;
                for p in self.ports {
                    if p.no == self.in_port || p.no_fwd || (!all && (p.no_flood || p.down)) {
                        continue;
                    }
                    self.out.push(DpAction::Output(p.no));
                }
            }
            ports::CONTROLLER => self.out.push(DpAction::Controller {
                reason: PacketInReason::Action,
                max_len,
                table_id: 0xff,
                cookie: u64::MAX,
            }),
            p if p <= ports::MAX && self.known(p) => self.out.push(DpAction::Output(p)),
            _ => return Err(ErrorCode::BAC_BAD_OUT_PORT),
        }
        Ok(())
    }

    fn group(&mut self, id: u32, depth: usize) -> Result<(), ErrorCode> {
        if depth >= MAX_DEPTH {
            return Ok(());
        }
        let Some(g) = self.pipeline.groups().get(id).cloned() else {
            return Err(ErrorCode::BAC_BAD_OUT_GROUP);
        };
        let pipeline = self.pipeline;
        let live = |p: u32| pipeline.port_live(p);
        match g.kind {
            GroupType::Indirect | GroupType::Select => {
                let pick = g
                    .buckets
                    .iter()
                    .find(|b| g.kind == GroupType::Indirect || b.weight > 0);
                if let Some(b) = pick {
                    self.actions(&b.actions, depth + 1)?;
                }
            }
            GroupType::FastFailover => {
                let pick = g
                    .buckets
                    .iter()
                    .find(|b| pipeline.groups().bucket_live(b, &live, 0));
                if let Some(b) = pick {
                    self.actions(&b.actions, depth + 1)?;
                }
            }
            GroupType::All => {
                for b in &g.buckets {
                    let before = self.key;
                    self.actions(&b.actions, depth + 1)?;
                    self.restore(&before);
                }
            }
        }
        Ok(())
    }

    /// Undoes a bucket's header changes so the next bucket sees the packet as it was.
    fn restore(&mut self, before: &FlowKey) {
        let had = before.get(Field::VlanVid) & VLAN_PRESENT != 0;
        let has = self.key.get(Field::VlanVid) & VLAN_PRESENT != 0;
        match (had, has) {
            (false, true) => self.out.push(DpAction::PopVlan),
            (true, false) => {
                let tci = ((before.get(Field::VlanVid) & 0xfff)
                    | (before.get(Field::VlanPcp) << 13)) as u16;
                self.out.push(DpAction::PushVlan { tpid: 0x8100, tci });
            }
            (true, true) => {
                for f in [Field::VlanVid, Field::VlanPcp] {
                    if before.get(f) != self.key.get(f) {
                        self.out.push(DpAction::SetField {
                            field: f,
                            value: before.get(f),
                        });
                    }
                }
            }
            (false, false) => {}
        }
        for &f in RESTORED {
            if before.get(f) != self.key.get(f) {
                self.out.push(DpAction::SetField {
                    field: f,
                    value: before.get(f),
                });
            }
        }
        self.key = *before;
    }
}

/// The datapath actions of a packet-out (see the module docs).
fn resolve(
    pipeline: &Pipeline,
    ports: &[PortInfo],
    po: &PacketOut,
) -> Result<Vec<DpAction>, ErrorCode> {
    let mut r = Resolver {
        pipeline,
        ports,
        in_port: po.in_port,
        len: po.data.len(),
        key: FlowKey::ZERO,
        out: Vec::with_capacity(po.actions.len()),
        tr: Translation::default(),
    };
    packet::extract::extract(&po.data, po.in_port, &mut r.key);
    r.actions(&po.actions, 0)?;
    Ok(r.out)
}

/// Runs one packet-out. `Err` is the error to answer with.
pub(super) fn run(b: &OfBridge, po: &PacketOut) -> Result<(), ErrorCode> {
    if po.buffer_id != NO_BUFFER {
        return Err(ErrorCode::BRC_BUFFER_UNKNOWN);
    }
    if po.data.is_empty() {
        return Err(ErrorCode::BRC_BAD_PACKET);
    }
    let injector = b
        .injector
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
        .ok_or(ErrorCode::BRC_EPERM)?;
    let (pipeline, port_infos) = {
        let mut st = b.lock();
        // Earlier flow-mods apply to this packet (output:TABLE).
        st.publish();
        (st.control.published(), st.control.ports().to_vec())
    };
    let known = port_infos.iter().any(|p| p.no == po.in_port);
    if po.in_port != ports::CONTROLLER && po.in_port != ports::ANY && !known {
        return Err(ErrorCode::BRC_BAD_PORT);
    }
    let out = resolve(&pipeline, &port_infos, po)?;
    injector.inject(&po.data, po.in_port, out).map_err(|e| {
        tracing::debug!("packet-out not injected: {e}");
        match e {
            InjectError::NoFrame => ErrorCode::BRC_BAD_PACKET,
            InjectError::QueueFull | InjectError::Stopped => ErrorCode::BRC_EPERM,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipeline::model::{Bucket, Group, GroupMod, GroupModCommand, GROUP_ANY};
    use pipeline::{Control, PipelineConfig};

    fn setup(groups: Vec<Group>) -> (Control, Vec<PortInfo>) {
        let (mut c, _cell) = Control::new(PipelineConfig::default());
        let ports: Vec<PortInfo> = (1..=3)
            .map(|no| PortInfo {
                no,
                name: format!("p{no}"),
                live: no != 2,
                ..PortInfo::default()
            })
            .collect();
        c.set_ports(ports.clone());
        for group in groups {
            c.group_mod(&GroupMod {
                command: GroupModCommand::Add,
                group,
            })
            .unwrap();
        }
        c.publish();
        (c, ports)
    }

    fn bucket(watch_port: u32, actions: Vec<Action>) -> Bucket {
        Bucket {
            weight: 1,
            watch_port,
            watch_group: GROUP_ANY,
            actions,
            actions_as_sent: None,
        }
    }

    fn out(port: u32) -> Action {
        Action::Output { port, max_len: 0 }
    }

    fn po(actions: Vec<Action>) -> PacketOut {
        PacketOut {
            buffer_id: NO_BUFFER,
            in_port: ports::CONTROLLER,
            actions,
            data: packet::builder::PacketSpec::default().build(),
        }
    }

    #[test]
    fn all_group_buckets_see_the_packet_as_it_was() {
        let dst = Action::SetField {
            field: Field::TpDst,
            value: 99,
        };
        let (c, ports) = setup(vec![Group {
            id: 1,
            kind: GroupType::All,
            buckets: vec![
                bucket(ports::ANY, vec![dst.clone(), out(1)]),
                bucket(ports::ANY, vec![out(3)]),
            ],
        }]);
        let p = c.published();
        let acts = resolve(&p, &ports, &po(vec![Action::Group(1)])).unwrap();
        assert_eq!(
            acts[0],
            DpAction::SetField {
                field: Field::TpDst,
                value: 99
            }
        );
        assert_eq!(acts[1], DpAction::Output(1));
        assert!(
            matches!(
                acts[2],
                DpAction::SetField {
                    field: Field::TpDst,
                    ..
                }
            ),
            "restored: {acts:?}"
        );
        assert_eq!(acts[3], DpAction::Output(3));
    }

    #[test]
    fn fast_failover_takes_the_first_live_bucket() {
        let (c, ports) = setup(vec![Group {
            id: 2,
            kind: GroupType::FastFailover,
            buckets: vec![bucket(2, vec![out(2)]), bucket(3, vec![out(3)])],
        }]);
        let p = c.published();
        let acts = resolve(&p, &ports, &po(vec![Action::Group(2)])).unwrap();
        assert_eq!(acts, vec![DpAction::Output(3)], "port 2 is not live");
    }

    #[test]
    fn flood_unknown_ports_and_groups() {
        let (c, ports) = setup(Vec::new());
        let p = c.published();
        let mut flood = po(vec![out(ports::FLOOD)]);
        flood.in_port = 1;
        assert_eq!(
            resolve(&p, &ports, &flood).unwrap(),
            vec![DpAction::Output(2), DpAction::Output(3)]
        );
        assert_eq!(
            resolve(&p, &ports, &po(vec![out(7)])),
            Err(ErrorCode::BAC_BAD_OUT_PORT)
        );
        assert_eq!(
            resolve(&p, &ports, &po(vec![out(ports::NORMAL)])),
            Err(ErrorCode::BAC_BAD_OUT_PORT)
        );
        assert_eq!(
            resolve(&p, &ports, &po(vec![Action::Group(9)])),
            Err(ErrorCode::BAC_BAD_OUT_GROUP)
        );
    }
}
