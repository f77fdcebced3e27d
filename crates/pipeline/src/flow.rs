//! Flow entries and their validation: match prerequisites, instruction and action checks.
//!
//! Everything a flow-mod can get wrong is found here, before any table changes, so that
//! applying a validated flow-mod cannot fail half-way.

use std::sync::Arc;

use packet::{Field, FlowKey};

use crate::classifier::Rule;
use crate::dpaction::FlowCounters;
use crate::error::FlowModError;
use crate::model::{ports, Action, FlowFlags, Instruction, Match, MAX_TABLE};

/// One installed flow entry. Immutable once in a table: a modify installs a new entry that
/// shares the old one's counters.
#[derive(Debug)]
pub struct FlowEntry {
    /// Installation order (unique; breaks ties between overlapping equal-priority entries).
    pub seq: u64,
    /// The table holding the entry.
    pub table_id: u8,
    /// Priority.
    pub priority: u16,
    /// Match.
    pub matcher: Match,
    /// Instructions in OpenFlow execution order (meter, apply, clear, write, metadata, goto).
    pub instructions: Vec<Instruction>,
    /// The order the instructions were given in (0: execution order).
    pub given_order: crate::as_sent::GivenOrder,
    /// How the controller wrote the match, when not as the codec writes it back (shared).
    pub matcher_as_sent: Option<crate::model::WireForm>,
    /// The instructions' bytes as the controller wrote them, when the codec would write them
    /// otherwise (rare; per flow).
    pub instructions_as_sent: Option<crate::model::WireForm>,
    /// Cookie.
    pub cookie: u64,
    /// Flags.
    pub flags: FlowFlags,
    /// Idle timeout in seconds (0 = none).
    pub idle_timeout: u16,
    /// Hard timeout in seconds (0 = none).
    pub hard_timeout: u16,
    /// When the entry was installed, in [`now_ms`](crate::dpaction::now_ms) milliseconds.
    pub install_ms: u64,
    /// Packet and byte counters, shared with the fast path.
    pub counters: Arc<FlowCounters>,
}

impl Rule for FlowEntry {
    #[inline(always)]
    fn priority(&self) -> u16 {
        self.priority
    }
    #[inline(always)]
    fn matcher(&self) -> &Match {
        &self.matcher
    }
    #[inline(always)]
    fn seq(&self) -> u64 {
        self.seq
    }
}

/// Why a flow entry left its table (OpenFlow `ofp_flow_removed_reason` plus the causes of a
/// delete).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RemovedReason {
    /// The idle timeout passed.
    IdleTimeout,
    /// The hard timeout passed.
    HardTimeout,
    /// A delete flow-mod.
    Delete,
    /// Its group was deleted.
    GroupDelete,
    /// Its meter was deleted.
    MeterDelete,
}

impl FlowEntry {
    /// Whether this is a table-miss entry (priority 0, matches everything).
    pub fn is_table_miss(&self) -> bool {
        self.priority == 0 && self.matcher.mask == FlowKey::ZERO
    }

    /// Whether the entry has an idle or hard timeout.
    pub fn has_timeout(&self) -> bool {
        self.idle_timeout != 0 || self.hard_timeout != 0
    }

    /// Which timeout (if any) has passed at `now_ms`.
    pub fn expired(&self, now_ms: u64) -> Option<RemovedReason> {
        let age = now_ms.saturating_sub(self.install_ms);
        if self.hard_timeout != 0 && age >= u64::from(self.hard_timeout) * 1000 {
            return Some(RemovedReason::HardTimeout);
        }
        if self.idle_timeout != 0 {
            let used = self
                .counters
                .last_used_ms
                .load(std::sync::atomic::Ordering::Relaxed)
                .max(self.install_ms);
            if now_ms.saturating_sub(used) >= u64::from(self.idle_timeout) * 1000 {
                return Some(RemovedReason::IdleTimeout);
            }
        }
        None
    }

    /// Every action of the apply- and write-actions instructions.
    pub fn actions(&self) -> impl Iterator<Item = &Action> + '_ {
        self.instructions.iter().flat_map(|i| match i {
            Instruction::ApplyActions(a) | Instruction::WriteActions(a) => a.as_slice(),
            _ => &[],
        })
    }

    /// Whether an action outputs to `port` (the `out_port` filter).
    pub fn outputs_to(&self, port: u32) -> bool {
        self.actions()
            .any(|a| matches!(a, Action::Output { port: p, .. } if *p == port))
    }

    /// Whether an action applies group `group` (the `out_group` filter).
    pub fn uses_group(&self, group: u32) -> bool {
        self.actions()
            .any(|a| matches!(a, Action::Group(g) if *g == group))
    }

    /// Whether the entry passes through meter `meter`.
    pub fn uses_meter(&self, meter: u32) -> bool {
        self.instructions
            .iter()
            .any(|i| matches!(i, Instruction::Meter(m) if *m == meter))
    }
}

const ETH_IPV4: u128 = 0x0800;
const ETH_IPV6: u128 = 0x86dd;
const ETH_ARP: u128 = 0x0806;
const ETH_MPLS: u128 = 0x8847;
const ETH_MPLS_MC: u128 = 0x8848;
const NEEDS_MPLS: &str = "eth_type=0x8847 or eth_type=0x8848";

/// The exact value a match pins `field` to, if its mask covers the whole field.
fn exact(m: &Match, field: Field) -> Option<u128> {
    let (v, mask) = m.get(field);
    (mask == field.max_value()).then_some(v)
}

fn eth_is(m: &Match, types: &[u128]) -> bool {
    exact(m, Field::EthType).is_some_and(|t| types.contains(&t))
}

fn proto_is(m: &Match, protos: &[u128]) -> bool {
    exact(m, Field::IpProto).is_some_and(|p| protos.contains(&p))
}

fn vlan_present(m: &Match) -> bool {
    let (v, mask) = m.get(Field::VlanTci);
    v & mask & 0x1000 != 0
}

/// Checks what `field` needs from the match (OpenFlow 1.3 OXM prerequisites). `vlan_pushed`:
/// a push_vlan earlier in the action list provides a tag. Returns what is missing.
fn prerequisite(field: Field, m: &Match, vlan_pushed: bool) -> Result<(), &'static str> {
    use Field::*;
    let ok = match field {
        InPort | EthType | Parsed | Metadata | TunnelId | EthDst | EthSrc | VlanTci | VlanVid => {
            true
        }
        TunSrc | TunDst | TunIpv6Src | TunIpv6Dst => true,
        VlanPcp | CvlanTci => vlan_pushed || vlan_present(m),
        Ipv4Src | Ipv4Dst => eth_is(m, &[ETH_IPV4, ETH_ARP]),
        IpProto | IpDscp | IpEcn | IpTtl | IpFrag => eth_is(m, &[ETH_IPV4, ETH_IPV6]),
        TpSrc | TpDst | IcmpType | IcmpCode => {
            eth_is(m, &[ETH_IPV4, ETH_IPV6]) && proto_is(m, &[1, 6, 17, 58, 132])
        }
        Ipv6Src | Ipv6Dst | Ipv6Label => eth_is(m, &[ETH_IPV6]),
        ArpOp => eth_is(m, &[ETH_ARP]),
        ArpSha | ArpTha => eth_is(m, &[ETH_ARP]) || (eth_is(m, &[ETH_IPV6]) && proto_is(m, &[58])),
        TcpFlags => eth_is(m, &[ETH_IPV4, ETH_IPV6]) && proto_is(m, &[6]),
        NdTarget => eth_is(m, &[ETH_IPV6]) && proto_is(m, &[58]),
        Ipv6Exthdr => eth_is(m, &[ETH_IPV6]),
        MplsLse | MplsLabel | MplsTc | MplsBos | MplsTtl => eth_is(m, &[ETH_MPLS, ETH_MPLS_MC]),
    };
    if ok {
        return Ok(());
    }
    Err(match field {
        VlanPcp | CvlanTci => "a VLAN tag (vlan_tci with the present bit 0x1000 set)",
        Ipv4Src | Ipv4Dst => "eth_type=0x0800 (or 0x0806 for ARP addresses)",
        IpProto | IpDscp | IpEcn | IpTtl | IpFrag => "eth_type=0x0800 or eth_type=0x86dd",
        TpSrc | TpDst | IcmpType | IcmpCode => {
            "eth_type=0x0800 or 0x86dd and ip_proto=6, 17, 132 (ports) or 1, 58 (ICMP)"
        }
        Ipv6Src | Ipv6Dst | Ipv6Label | Ipv6Exthdr => "eth_type=0x86dd",
        MplsLse | MplsLabel | MplsTc | MplsBos | MplsTtl => NEEDS_MPLS,
        ArpOp => "eth_type=0x0806",
        ArpSha | ArpTha => "eth_type=0x0806 (or eth_type=0x86dd,ip_proto=58 for ND)",
        TcpFlags => "eth_type=0x0800 or 0x86dd and ip_proto=6",
        NdTarget => "eth_type=0x86dd and ip_proto=58",
        _ => "its prerequisites",
    })
}

/// Checks a match: no value bits outside the mask, and every field's prerequisites present.
pub fn check_match(m: &Match) -> Result<(), FlowModError> {
    for &f in Field::ALL {
        let (v, mask) = (m.value.get(f), m.mask.get(f));
        if v & !mask != 0 {
            return Err(FlowModError::BadWildcards(f.name()));
        }
        if mask != 0 {
            prerequisite(f, m, false).map_err(|needs| FlowModError::BadPrerequisite {
                field: f.name(),
                needs,
            })?;
        }
    }
    Ok(())
}

/// Whether set-field may write `f`. `mpls_bos` is read-only, as in Open vSwitch (which
/// refuses `set_field:1->mpls_bos`): the bottom-of-stack bit follows from push and pop.
pub fn writable(f: Field) -> bool {
    !matches!(
        f,
        Field::InPort
            | Field::Parsed
            | Field::Metadata
            | Field::IpFrag
            | Field::TcpFlags
            | Field::CvlanTci
            | Field::Ipv6Exthdr
            | Field::MplsBos
            | Field::MplsLse
    )
}

/// Checks an action list. `m`: the flow's match, for set-field prerequisites (`None` in a
/// group bucket, where no match is known). `group_exists` answers for group actions.
/// push_mpls and pop_mpls change the Ethernet type later actions see (as Open vSwitch
/// tracks it): after `pop_mpls:0x0800`, IPv4 fields may be set; MPLS actions need MPLS.
pub fn check_actions(
    actions: &[Action],
    m: Option<&Match>,
    group_exists: &dyn Fn(u32) -> bool,
) -> Result<(), FlowModError> {
    let mut vlan_pushed = false;
    let mut cur = m.copied();
    let m = &mut cur;
    let mpls_needed = |m: &Option<Match>, action: &'static str| match m {
        Some(m) if !eth_is(m, &[ETH_MPLS, ETH_MPLS_MC]) => Err(FlowModError::ActionInconsistent {
            action,
            needs: NEEDS_MPLS,
        }),
        _ => Ok(()),
    };
    for a in actions {
        match *a {
            Action::Output { port, .. } => {
                let reserved = matches!(
                    port,
                    ports::IN_PORT
                        | ports::NORMAL
                        | ports::FLOOD
                        | ports::ALL
                        | ports::CONTROLLER
                        | ports::LOCAL
                );
                if port == 0 || (port > ports::MAX && !reserved) {
                    return Err(FlowModError::BadOutPort(port));
                }
            }
            Action::Group(g) => {
                if !group_exists(g) {
                    return Err(FlowModError::UnknownGroup(g));
                }
            }
            Action::SetField { field, value } => {
                if !writable(field) {
                    return Err(FlowModError::FieldNotWritable(field.name()));
                }
                if value > field.max_value() {
                    return Err(FlowModError::BadSetFieldValue {
                        field: field.name(),
                        value,
                        bits: field.spec().bits,
                    });
                }
                if let Some(m) = m.as_ref() {
                    prerequisite(field, m, vlan_pushed).map_err(|needs| {
                        FlowModError::SetFieldInconsistent {
                            field: field.name(),
                            needs,
                        }
                    })?;
                }
            }
            Action::PushVlan(tpid) => {
                if tpid != 0x8100 && tpid != 0x88a8 {
                    return Err(FlowModError::BadPushVlanEthertype(tpid));
                }
                vlan_pushed = true;
            }
            Action::PushMpls(t) => {
                if t as u128 != ETH_MPLS && t as u128 != ETH_MPLS_MC {
                    return Err(FlowModError::BadPushMplsEthertype(t));
                }
                if let Some(m) = m.as_mut() {
                    m.set_exact(Field::EthType, t as u128);
                }
            }
            Action::PopMpls(t) => {
                mpls_needed(m, "pop_mpls")?;
                if let Some(m) = m.as_mut() {
                    m.set_exact(Field::EthType, t as u128);
                }
            }
            Action::SetMplsTtl(_) => mpls_needed(m, "set_mpls_ttl")?,
            Action::DecMplsTtl => mpls_needed(m, "dec_mpls_ttl")?,
            Action::CopyTtlOut => mpls_needed(m, "copy_ttl_out")?,
            Action::CopyTtlIn => mpls_needed(m, "copy_ttl_in")?,
            Action::PopVlan | Action::DecNwTtl | Action::SetNwTtl(_) | Action::SetQueue(_) => {}
        }
    }
    Ok(())
}

fn rank(i: &Instruction) -> (u8, &'static str) {
    let name = match i {
        Instruction::Meter(_) => "meter",
        Instruction::ApplyActions(_) => "apply_actions",
        Instruction::ClearActions => "clear_actions",
        Instruction::WriteActions(_) => "write_actions",
        Instruction::WriteMetadata { .. } => "write_metadata",
        Instruction::GotoTable(_) => "goto_table",
    };
    (crate::as_sent::rank(i), name)
}

/// Checks the instructions of a flow in `table` with match `m` and returns them in execution
/// order.
pub fn check_instructions(
    table: u8,
    m: &Match,
    instructions: &[Instruction],
    group_exists: &dyn Fn(u32) -> bool,
    meter_exists: &dyn Fn(u32) -> bool,
) -> Result<Vec<Instruction>, FlowModError> {
    let mut seen = [false; 6];
    for i in instructions {
        let (r, name) = rank(i);
        if std::mem::replace(&mut seen[r as usize], true) {
            return Err(FlowModError::DuplicateInstruction(name));
        }
        match i {
            Instruction::Meter(id) => {
                if !meter_exists(*id) {
                    return Err(FlowModError::UnknownMeter(*id));
                }
            }
            Instruction::ApplyActions(a) | Instruction::WriteActions(a) => {
                check_actions(a, Some(m), group_exists)?;
            }
            Instruction::GotoTable(to) => {
                if *to > MAX_TABLE {
                    return Err(FlowModError::GotoBadTable(*to));
                }
                if *to <= table {
                    return Err(FlowModError::GotoBackwards {
                        from: table,
                        to: *to,
                    });
                }
            }
            Instruction::ClearActions | Instruction::WriteMetadata { .. } => {}
        }
    }
    let mut out = instructions.to_vec();
    out.sort_by_key(|i| rank(i).0);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok_group(_: u32) -> bool {
        true
    }

    #[test]
    fn tp_dst_needs_ip_proto() {
        let mut m = Match::ANY;
        m.set_exact(Field::TpDst, 80);
        let e = check_match(&m).unwrap_err();
        assert!(
            matches!(
                e,
                FlowModError::BadPrerequisite {
                    field: "tp_dst",
                    ..
                }
            ),
            "{e}"
        );
        m.set_exact(Field::EthType, 0x0800);
        m.set_exact(Field::IpProto, 6);
        check_match(&m).unwrap();
    }

    #[test]
    fn ip_fields_need_eth_type_and_pcp_needs_vlan() {
        let mut m = Match::ANY;
        m.set_masked(Field::Ipv4Src, 0x0a00_0000, 0xff00_0000);
        assert!(check_match(&m).is_err());
        m.set_exact(Field::EthType, 0x86dd);
        assert!(
            check_match(&m).is_err(),
            "IPv4 address with an IPv6 eth_type"
        );
        m.set_exact(Field::EthType, 0x0800);
        check_match(&m).unwrap();

        let mut v = Match::ANY;
        v.set_exact(Field::VlanPcp, 3);
        assert!(check_match(&v).is_err());
        v.set_masked(Field::VlanTci, 0x1000, 0x1000);
        v.set_exact(Field::VlanPcp, 3);
        check_match(&v).unwrap();
    }

    #[test]
    fn value_outside_mask_is_refused() {
        let mut m = Match::ANY;
        m.value.set(Field::InPort, 3);
        assert_eq!(check_match(&m), Err(FlowModError::BadWildcards("in_port")));
    }

    #[test]
    fn goto_backwards_message() {
        let e = check_instructions(
            1,
            &Match::ANY,
            &[Instruction::GotoTable(0)],
            &ok_group,
            &ok_group,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "goto_table:0 in table 1 goes backwards; a flow may only go to a later table"
        );
        assert_eq!(e.ofp_error(), (3, 2));
    }

    #[test]
    fn instructions_are_sorted_and_duplicates_refused() {
        let ins = vec![
            Instruction::GotoTable(3),
            Instruction::ApplyActions(vec![]),
            Instruction::Meter(1),
        ];
        let out = check_instructions(0, &Match::ANY, &ins, &ok_group, &ok_group).unwrap();
        assert_eq!(out[0], Instruction::Meter(1));
        assert_eq!(out[2], Instruction::GotoTable(3));
        let dup = vec![Instruction::ClearActions, Instruction::ClearActions];
        assert_eq!(
            check_instructions(0, &Match::ANY, &dup, &ok_group, &ok_group),
            Err(FlowModError::DuplicateInstruction("clear_actions"))
        );
        let no_meter = |_| false;
        assert_eq!(
            check_instructions(
                0,
                &Match::ANY,
                &[Instruction::Meter(9)],
                &ok_group,
                &no_meter
            ),
            Err(FlowModError::UnknownMeter(9))
        );
    }

    #[test]
    fn set_field_prerequisites_and_writability() {
        let set = |f, v| vec![Action::SetField { field: f, value: v }];
        assert!(matches!(
            check_actions(&set(Field::Ipv4Dst, 1), Some(&Match::ANY), &ok_group),
            Err(FlowModError::SetFieldInconsistent {
                field: "ipv4_dst",
                ..
            })
        ));
        let mut ip = Match::ANY;
        ip.set_exact(Field::EthType, 0x0800);
        check_actions(&set(Field::Ipv4Dst, 1), Some(&ip), &ok_group).unwrap();
        assert_eq!(
            check_actions(&set(Field::InPort, 1), None, &ok_group),
            Err(FlowModError::FieldNotWritable("in_port"))
        );
        assert!(matches!(
            check_actions(&set(Field::IpDscp, 64), Some(&ip), &ok_group),
            Err(FlowModError::BadSetFieldValue { .. })
        ));
        // push_vlan provides the tag vlan_pcp needs.
        let a = vec![
            Action::PushVlan(0x8100),
            Action::SetField {
                field: Field::VlanPcp,
                value: 5,
            },
        ];
        check_actions(&a, Some(&Match::ANY), &ok_group).unwrap();
        assert_eq!(
            check_actions(&[Action::PushVlan(0x0800)], None, &ok_group),
            Err(FlowModError::BadPushVlanEthertype(0x0800))
        );
    }

    #[test]
    fn out_ports_and_groups() {
        let out = |p| {
            vec![Action::Output {
                port: p,
                max_len: 0,
            }]
        };
        for p in [
            1,
            ports::MAX,
            ports::IN_PORT,
            ports::FLOOD,
            ports::CONTROLLER,
            ports::NORMAL,
        ] {
            check_actions(&out(p), None, &ok_group).unwrap();
        }
        for p in [0, ports::TABLE, ports::ANY, ports::MAX + 1] {
            assert_eq!(
                check_actions(&out(p), None, &ok_group),
                Err(FlowModError::BadOutPort(p))
            );
        }
        let none = |_| false;
        assert_eq!(
            check_actions(&[Action::Group(4)], None, &none),
            Err(FlowModError::UnknownGroup(4))
        );
    }
}
