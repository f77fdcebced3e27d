//! PACKET_OUT: the controller's actions resolved into datapath actions on the control side,
//! then the packet is injected into the datapath (run by poll thread 0).
//!
//! Resolution follows the packet's key as the actions change it: output:TABLE translates the
//! key as it is at that point through the published pipeline (with the packet-out's in_port,
//! and the matched entries' counters count the packet); FLOOD and ALL expand to every port but
//! in_port (FLOOD also skips ports that are down or excluded from flooding); IN_PORT sends
//! back; CONTROLLER makes a packet-in (reason ACTION). Groups, NORMAL and LOCAL are refused
//! in packet-outs (OFPBAC_BAD_TYPE / OFPBAC_BAD_OUT_PORT).

use packet::{Field, FlowKey};
use pipeline::dpaction::now_ms;
use pipeline::model::{ports, Action};
use pipeline::{DpAction, PacketInReason, PortInfo, Translation};

use openflow::{ErrorCode, PacketOut, NO_BUFFER};

use super::OfBridge;
use datapath::InjectError;

const VLAN_PRESENT: u128 = 0x1000;

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
    let known = |no: u32| port_infos.iter().any(|p| p.no == no);
    if po.in_port != ports::CONTROLLER && po.in_port != ports::ANY && !known(po.in_port) {
        return Err(ErrorCode::BRC_BAD_PORT);
    }
    let mut key = FlowKey::ZERO;
    packet::extract::extract(&po.data, po.in_port, &mut key);
    let mut out = Vec::with_capacity(po.actions.len());
    let mut tr = Translation::default();
    for a in &po.actions {
        match *a {
            Action::Output { port, max_len } => match port {
                ports::TABLE => {
                    pipeline.translate(&key, &mut tr);
                    let now = now_ms();
                    for f in &tr.flows {
                        f.add(1, po.data.len() as u64, now);
                    }
                    out.append(&mut tr.actions);
                }
                ports::IN_PORT if known(po.in_port) => out.push(DpAction::Output(po.in_port)),
                ports::FLOOD | ports::ALL => {
                    flood(&port_infos, po.in_port, port == ports::ALL, &mut out)
                }
                ports::CONTROLLER => out.push(DpAction::Controller {
                    reason: PacketInReason::Action,
                    max_len,
                    table_id: 0xff,
                    cookie: u64::MAX,
                }),
                p if p <= ports::MAX && known(p) => out.push(DpAction::Output(p)),
                _ => return Err(ErrorCode::BAC_BAD_OUT_PORT),
            },
            Action::Group(_) => return Err(ErrorCode::BAC_BAD_TYPE),
            Action::SetQueue(q) => out.push(DpAction::SetQueue(q)),
            Action::SetField { field, value } => {
                key.set(field, value);
                out.push(DpAction::SetField { field, value });
            }
            Action::PushVlan(tpid) => {
                let vid = key.get(Field::VlanVid);
                let tci = if vid & VLAN_PRESENT != 0 {
                    ((vid & 0xfff) | (key.get(Field::VlanPcp) << 13)) as u16
                } else {
                    0
                };
                key.set(Field::VlanVid, VLAN_PRESENT | u128::from(tci & 0xfff));
                out.push(DpAction::PushVlan { tpid, tci });
            }
            Action::PopVlan => {
                key.set(Field::VlanVid, 0);
                key.set(Field::VlanPcp, 0);
                out.push(DpAction::PopVlan);
            }
            Action::DecNwTtl => out.push(DpAction::DecTtl),
            Action::SetNwTtl(t) => {
                key.set(Field::IpTtl, u128::from(t));
                out.push(DpAction::SetField {
                    field: Field::IpTtl,
                    value: u128::from(t),
                });
            }
        }
    }
    injector.inject(&po.data, po.in_port, out).map_err(|e| {
        tracing::debug!("packet-out not injected: {e}");
        match e {
            InjectError::NoFrame => ErrorCode::BRC_BAD_PACKET,
            InjectError::QueueFull | InjectError::Stopped => ErrorCode::BRC_EPERM,
        }
    })
}

fn flood(infos: &[PortInfo], in_port: u32, all: bool, out: &mut Vec<DpAction>) {
    for p in infos {
        if p.no == in_port || p.no_fwd {
            continue;
        }
        if !all && (p.no_flood || p.down) {
            continue;
        }
        out.push(DpAction::Output(p.no));
    }
}
