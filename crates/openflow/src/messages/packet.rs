//! Messages about packets and flows the switch reports or is handed: packet-in, packet-out,
//! flow-removed and port-status.

use packet::{Field, FlowKey};
use pipeline::model::{Action, Match, WireForm};
use pipeline::{PacketInReason, RemovedFlow, RemovedReason};

use crate::action::{decode_actions, encode_actions};
use crate::error::{DecodeError, EncodeError, ErrorCode};
use crate::oxm::{read_match, read_match_as_sent, write_match, write_match_as_sent};
use crate::port::PortDesc;
use crate::wire::{Put, Reader};

/// `OFP_NO_BUFFER`: the packet is not buffered; the data is all there is.
pub const NO_BUFFER: u32 = 0xffff_ffff;

fn bad(reason: String) -> DecodeError {
    DecodeError::new(ErrorCode::BRC_BAD_TYPE, reason)
}

/// `OFPT_PACKET_IN`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PacketIn {
    /// Buffer id ([`NO_BUFFER`] when the data is the whole packet).
    pub buffer_id: u32,
    /// Length of the frame as received.
    pub total_len: u16,
    /// Why the packet is sent.
    pub reason: PacketInReason,
    /// Table the packet was in.
    pub table_id: u8,
    /// Cookie of the flow entry that sent it (all ones on a miss without entry).
    pub cookie: u64,
    /// The packet's pipeline fields (in_port, metadata, tunnel id, …).
    pub matcher: Match,
    /// The packet (or its first bytes).
    pub data: Vec<u8>,
}

fn reason_to_wire(r: PacketInReason) -> u8 {
    match r {
        PacketInReason::NoMatch => 0,
        PacketInReason::Action => 1,
        PacketInReason::InvalidTtl => 2,
    }
}

impl PacketIn {
    /// The match a packet-in carries for a packet with flow key `key`: the OpenFlow 1.3
    /// pipeline fields, `in_port` always, `metadata` and `tunnel_id` when not zero (as Open
    /// vSwitch sends them). Header fields are left to the controller to read from the data.
    pub fn pipeline_match(key: &FlowKey) -> Match {
        let mut m = Match::ANY;
        m.set_exact(Field::InPort, key.get(Field::InPort));
        for f in [Field::Metadata, Field::TunnelId] {
            let v = key.get(f);
            if v != 0 {
                m.set_exact(f, v);
            }
        }
        m
    }

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let buffer_id = r.u32()?;
        let total_len = r.u16()?;
        let reason = match r.u8()? {
            0 => PacketInReason::NoMatch,
            1 => PacketInReason::Action,
            2 => PacketInReason::InvalidTtl,
            x => return Err(bad(format!("packet-in reason {x} is not 0, 1 or 2"))),
        };
        let table_id = r.u8()?;
        let cookie = r.u64()?;
        let matcher = read_match(r)?;
        r.skip(2)?;
        Ok(PacketIn {
            buffer_id,
            total_len,
            reason,
            table_id,
            cookie,
            matcher,
            data: r.rest().to_vec(),
        })
    }

    pub(crate) fn write(&self, buf: &mut Vec<u8>) -> Result<(), EncodeError> {
        buf.put_u32(self.buffer_id);
        buf.put_u16(self.total_len);
        buf.put_u8(reason_to_wire(self.reason));
        buf.put_u8(self.table_id);
        buf.put_u64(self.cookie);
        write_match(&self.matcher, buf)?;
        buf.put_zeros(2);
        buf.extend_from_slice(&self.data);
        Ok(())
    }
}

/// `OFPT_PACKET_OUT`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PacketOut {
    /// Buffer id, or [`NO_BUFFER`] (then `data` is the packet).
    pub buffer_id: u32,
    /// The packet's ingress port (or CONTROLLER).
    pub in_port: u32,
    /// Actions to apply (output to TABLE runs the packet through the tables).
    pub actions: Vec<Action>,
    /// The packet when not buffered.
    pub data: Vec<u8>,
}

impl PacketOut {
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let buffer_id = r.u32()?;
        let in_port = r.u32()?;
        let actions_len = r.u16()? as usize;
        r.skip(6)?;
        let actions = decode_actions(r.bytes(actions_len)?)?;
        Ok(PacketOut {
            buffer_id,
            in_port,
            actions,
            data: r.rest().to_vec(),
        })
    }

    pub(crate) fn write(&self, buf: &mut Vec<u8>) -> Result<(), EncodeError> {
        buf.put_u32(self.buffer_id);
        buf.put_u32(self.in_port);
        let at = buf.len();
        buf.put_u16(0);
        buf.put_zeros(6);
        let start = buf.len();
        encode_actions(&self.actions, &Match::ANY, buf)?;
        let len = buf.len() - start;
        buf.patch_u16(
            at,
            u16::try_from(len).map_err(|_| EncodeError::TooLong {
                what: "packet-out actions",
                len,
            })?,
        );
        buf.extend_from_slice(&self.data);
        Ok(())
    }
}

/// Why a flow entry was removed (`ofp_flow_removed_reason` of OpenFlow 1.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FlowRemovedReason {
    /// Idle timeout.
    IdleTimeout,
    /// Hard timeout.
    HardTimeout,
    /// Deleted by a flow-mod (also: its meter was deleted, which 1.3 has no reason for).
    Delete,
    /// Its group was deleted.
    GroupDelete,
}

impl From<RemovedReason> for FlowRemovedReason {
    fn from(r: RemovedReason) -> Self {
        match r {
            RemovedReason::IdleTimeout => FlowRemovedReason::IdleTimeout,
            RemovedReason::HardTimeout => FlowRemovedReason::HardTimeout,
            RemovedReason::Delete | RemovedReason::MeterDelete => FlowRemovedReason::Delete,
            RemovedReason::GroupDelete => FlowRemovedReason::GroupDelete,
        }
    }
}

/// `OFPT_FLOW_REMOVED`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FlowRemoved {
    /// The entry's cookie.
    pub cookie: u64,
    /// Its priority.
    pub priority: u16,
    /// Why it left.
    pub reason: FlowRemovedReason,
    /// Its table.
    pub table_id: u8,
    /// Seconds it was installed.
    pub duration_sec: u32,
    /// Nanoseconds beyond `duration_sec`.
    pub duration_nsec: u32,
    /// Its idle timeout.
    pub idle_timeout: u16,
    /// Its hard timeout.
    pub hard_timeout: u16,
    /// Packets it matched.
    pub packet_count: u64,
    /// Bytes it matched.
    pub byte_count: u64,
    /// Its match.
    pub matcher: Match,
    /// How the controller wrote the match, when not as the codec writes it back
    /// ([`WireForm`]): the match is written that way.
    pub matcher_as_sent: Option<WireForm>,
}

impl From<&RemovedFlow> for FlowRemoved {
    fn from(r: &RemovedFlow) -> Self {
        let v = &r.flow;
        FlowRemoved {
            cookie: v.cookie,
            priority: v.priority,
            reason: r.reason.into(),
            table_id: v.table_id,
            duration_sec: (v.duration_ms / 1000).min(u32::MAX as u64) as u32,
            duration_nsec: (v.duration_ms % 1000) as u32 * 1_000_000,
            idle_timeout: v.idle_timeout,
            hard_timeout: v.hard_timeout,
            packet_count: v.packets,
            byte_count: v.bytes,
            matcher: v.matcher,
            matcher_as_sent: v.matcher_as_sent.clone(),
        }
    }
}

impl FlowRemoved {
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let cookie = r.u64()?;
        let priority = r.u16()?;
        let reason = match r.u8()? {
            0 => FlowRemovedReason::IdleTimeout,
            1 => FlowRemovedReason::HardTimeout,
            2 => FlowRemovedReason::Delete,
            3 => FlowRemovedReason::GroupDelete,
            x => return Err(bad(format!("flow-removed reason {x} is not 0..=3"))),
        };
        let table_id = r.u8()?;
        let duration_sec = r.u32()?;
        let duration_nsec = r.u32()?;
        let idle_timeout = r.u16()?;
        let hard_timeout = r.u16()?;
        let packet_count = r.u64()?;
        let byte_count = r.u64()?;
        let (matcher, matcher_as_sent) = read_match_as_sent(r)?;
        Ok(FlowRemoved {
            cookie,
            priority,
            reason,
            table_id,
            duration_sec,
            duration_nsec,
            idle_timeout,
            hard_timeout,
            packet_count,
            byte_count,
            matcher,
            matcher_as_sent,
        })
    }

    pub(crate) fn write(&self, buf: &mut Vec<u8>) -> Result<(), EncodeError> {
        buf.put_u64(self.cookie);
        buf.put_u16(self.priority);
        buf.put_u8(match self.reason {
            FlowRemovedReason::IdleTimeout => 0,
            FlowRemovedReason::HardTimeout => 1,
            FlowRemovedReason::Delete => 2,
            FlowRemovedReason::GroupDelete => 3,
        });
        buf.put_u8(self.table_id);
        buf.put_u32(self.duration_sec);
        buf.put_u32(self.duration_nsec);
        buf.put_u16(self.idle_timeout);
        buf.put_u16(self.hard_timeout);
        buf.put_u64(self.packet_count);
        buf.put_u64(self.byte_count);
        write_match_as_sent(&self.matcher, self.matcher_as_sent.as_ref(), buf)
    }
}

/// Why a port-status is sent (`ofp_port_reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PortReason {
    /// The port was added.
    Add,
    /// The port was removed.
    Delete,
    /// Some attribute changed.
    Modify,
}

/// `OFPT_PORT_STATUS`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PortStatus {
    /// Why.
    pub reason: PortReason,
    /// The port.
    pub desc: PortDesc,
}

impl PortStatus {
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let reason = match r.u8()? {
            0 => PortReason::Add,
            1 => PortReason::Delete,
            2 => PortReason::Modify,
            x => return Err(bad(format!("port-status reason {x} is not 0..=2"))),
        };
        r.skip(7)?;
        Ok(PortStatus {
            reason,
            desc: PortDesc::read(r)?,
        })
    }

    pub(crate) fn write(&self, buf: &mut Vec<u8>) {
        buf.put_u8(match self.reason {
            PortReason::Add => 0,
            PortReason::Delete => 1,
            PortReason::Modify => 2,
        });
        buf.put_zeros(7);
        self.desc.write(buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipeline_match_keeps_pipeline_fields_only() {
        let mut k = FlowKey::ZERO;
        k.set(Field::InPort, 4);
        k.set(Field::EthType, 0x0800);
        k.set(Field::Parsed, 0xff);
        k.set(Field::TunnelId, 9);
        let m = PacketIn::pipeline_match(&k);
        assert_eq!(m.get(Field::InPort), (4, 0xffff_ffff));
        assert_eq!(m.get(Field::TunnelId), (9, u64::MAX as u128));
        assert_eq!(m.get(Field::Metadata), (0, 0));
        assert_eq!(m.get(Field::EthType), (0, 0));
        let mut b = Vec::new();
        crate::oxm::write_match(&m, &mut b).expect("encodes");
    }

    #[test]
    fn flow_removed_from_pipeline() {
        let r = RemovedFlow {
            reason: RemovedReason::MeterDelete,
            flow: pipeline::FlowView {
                table_id: 2,
                priority: 9,
                matcher: Match::ANY,
                cookie: 5,
                instructions: vec![],
                packets: 3,
                bytes: 300,
                duration_ms: 2_250,
                idle_timeout: 1,
                hard_timeout: 2,
                flags: Default::default(),
                matcher_as_sent: None,
                instructions_as_sent: None,
            },
        };
        let f = FlowRemoved::from(&r);
        assert_eq!(
            f.reason,
            FlowRemovedReason::Delete,
            "1.3 has no meter-delete reason"
        );
        assert_eq!((f.duration_sec, f.duration_nsec), (2, 250_000_000));
        assert_eq!(
            (
                f.table_id,
                f.priority,
                f.cookie,
                f.packet_count,
                f.byte_count
            ),
            (2, 9, 5, 3, 300)
        );
    }
}
