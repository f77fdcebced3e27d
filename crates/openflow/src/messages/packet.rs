//! Messages about packets and flows the switch reports or is handed: packet-in, packet-out,
//! flow-removed and port-status.

use pipeline::model::{Action, Match};
use pipeline::{PacketInReason, RemovedReason};

use crate::action::{decode_actions, encode_actions};
use crate::error::{DecodeError, EncodeError, ErrorCode};
use crate::oxm::{read_match, write_match};
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
        Ok(FlowRemoved {
            cookie,
            priority,
            reason,
            table_id: r.u8()?,
            duration_sec: r.u32()?,
            duration_nsec: r.u32()?,
            idle_timeout: r.u16()?,
            hard_timeout: r.u16()?,
            packet_count: r.u64()?,
            byte_count: r.u64()?,
            matcher: read_match(r)?,
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
        write_match(&self.matcher, buf)
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
