//! Flow and aggregate statistics: `ofp_flow_stats_request`, `ofp_flow_stats`,
//! `ofp_aggregate_stats_reply`.

use pipeline::model::{ports, FlowFlags, Instruction, Match, WireForm, ALL_TABLES, GROUP_ANY};
use pipeline::FlowView;

use crate::as_sent::{instructions_form, write_instructions};
use crate::error::{DecodeError, EncodeError, ErrorCode};
use crate::instruction::decode_instructions;
use crate::messages::mods::{flow_flags_from_wire, flow_flags_to_wire};
use crate::oxm::{read_match, read_match_as_sent, write_match, write_match_as_sent};
use crate::wire::{patch_len, Put, Reader};

/// The body of a flow or aggregate statistics request: which entries to report.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FlowStatsRequest {
    /// Table ([`ALL_TABLES`]: every table).
    pub table_id: u8,
    /// Only entries outputting to this port ([`ports::ANY`]: no filter).
    pub out_port: u32,
    /// Only entries using this group ([`GROUP_ANY`]: no filter).
    pub out_group: u32,
    /// Cookie to filter by, under `cookie_mask`.
    pub cookie: u64,
    /// Cookie bits to filter on (0: none).
    pub cookie_mask: u64,
    /// Only entries whose match is within this one (non-strict).
    pub matcher: Match,
}

impl Default for FlowStatsRequest {
    /// Every flow of every table.
    fn default() -> Self {
        FlowStatsRequest {
            table_id: ALL_TABLES,
            out_port: ports::ANY,
            out_group: GROUP_ANY,
            cookie: 0,
            cookie_mask: 0,
            matcher: Match::ANY,
        }
    }
}

impl FlowStatsRequest {
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let table_id = r.u8()?;
        r.skip(3)?;
        let out_port = r.u32()?;
        let out_group = r.u32()?;
        r.skip(4)?;
        Ok(FlowStatsRequest {
            table_id,
            out_port,
            out_group,
            cookie: r.u64()?,
            cookie_mask: r.u64()?,
            matcher: read_match(r)?,
        })
    }

    pub(crate) fn write(&self, buf: &mut Vec<u8>) -> Result<(), EncodeError> {
        buf.put_u8(self.table_id);
        buf.put_zeros(3);
        buf.put_u32(self.out_port);
        buf.put_u32(self.out_group);
        buf.put_zeros(4);
        buf.put_u64(self.cookie);
        buf.put_u64(self.cookie_mask);
        write_match(&self.matcher, buf)
    }
}

/// One entry of a flow statistics reply (`ofp_flow_stats`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FlowStats {
    /// Table.
    pub table_id: u8,
    /// Seconds installed.
    pub duration_sec: u32,
    /// Nanoseconds beyond `duration_sec`.
    pub duration_nsec: u32,
    /// Priority.
    pub priority: u16,
    /// Idle timeout.
    pub idle_timeout: u16,
    /// Hard timeout.
    pub hard_timeout: u16,
    /// Flags.
    pub flags: FlowFlags,
    /// Cookie.
    pub cookie: u64,
    /// Packets matched.
    pub packet_count: u64,
    /// Bytes matched.
    pub byte_count: u64,
    /// Match.
    pub matcher: Match,
    /// Instructions, in the order the controller gave them.
    pub instructions: Vec<Instruction>,
    /// How the controller wrote the match, when not as the codec writes it back
    /// ([`WireForm`]): the entry's match is written that way.
    pub matcher_as_sent: Option<WireForm>,
    /// The instructions' bytes as the controller wrote them, when the codec would write them
    /// otherwise: written as they are.
    pub instructions_as_sent: Option<WireForm>,
}

impl From<&FlowView> for FlowStats {
    fn from(v: &FlowView) -> Self {
        FlowStats {
            table_id: v.table_id,
            duration_sec: (v.duration_ms / 1000).min(u32::MAX as u64) as u32,
            duration_nsec: (v.duration_ms % 1000) as u32 * 1_000_000,
            priority: v.priority,
            idle_timeout: v.idle_timeout,
            hard_timeout: v.hard_timeout,
            flags: v.flags,
            cookie: v.cookie,
            packet_count: v.packets,
            byte_count: v.bytes,
            matcher: v.matcher,
            instructions: v.instructions.clone(),
            matcher_as_sent: v.matcher_as_sent.clone(),
            instructions_as_sent: v.instructions_as_sent.clone(),
        }
    }
}

impl FlowStats {
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let len = r.clone().u16()? as usize;
        if len < 56 {
            return Err(DecodeError::new(
                ErrorCode::BRC_BAD_LEN,
                format!("flow stats entry length {len} is below 56"),
            ));
        }
        let mut b = r.sub(len, ErrorCode::BRC_BAD_LEN, "flow stats entry")?;
        b.skip(2)?;
        let table_id = b.u8()?;
        b.skip(1)?;
        let duration_sec = b.u32()?;
        let duration_nsec = b.u32()?;
        let priority = b.u16()?;
        let idle_timeout = b.u16()?;
        let hard_timeout = b.u16()?;
        let raw = b.u16()?;
        let flags = flow_flags_from_wire(raw).ok_or_else(|| {
            DecodeError::new(
                ErrorCode::BRC_BAD_LEN,
                format!("flow stats flags {raw:#x} are not defined"),
            )
        })?;
        b.skip(4)?;
        let cookie = b.u64()?;
        let packet_count = b.u64()?;
        let byte_count = b.u64()?;
        let (matcher, matcher_as_sent) = read_match_as_sent(&mut b)?;
        let bytes = b.rest();
        let instructions = decode_instructions(bytes)?;
        let instructions_as_sent = instructions_form(bytes, &instructions, &matcher);
        Ok(FlowStats {
            table_id,
            duration_sec,
            duration_nsec,
            priority,
            idle_timeout,
            hard_timeout,
            flags,
            cookie,
            packet_count,
            byte_count,
            matcher,
            instructions,
            matcher_as_sent,
            instructions_as_sent,
        })
    }

    pub(crate) fn write(&self, buf: &mut Vec<u8>) -> Result<(), EncodeError> {
        let start = buf.len();
        buf.put_u16(0);
        buf.put_u8(self.table_id);
        buf.put_zeros(1);
        buf.put_u32(self.duration_sec);
        buf.put_u32(self.duration_nsec);
        buf.put_u16(self.priority);
        buf.put_u16(self.idle_timeout);
        buf.put_u16(self.hard_timeout);
        buf.put_u16(flow_flags_to_wire(self.flags));
        buf.put_zeros(4);
        buf.put_u64(self.cookie);
        buf.put_u64(self.packet_count);
        buf.put_u64(self.byte_count);
        write_match_as_sent(&self.matcher, self.matcher_as_sent.as_ref(), buf)?;
        write_instructions(
            &self.instructions,
            &self.matcher,
            self.instructions_as_sent.as_ref(),
            buf,
        )?;
        patch_len(buf, start, start, "flow stats entry")
    }
}

/// `ofp_aggregate_stats_reply`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AggregateStats {
    /// Packets matched by the selected entries.
    pub packet_count: u64,
    /// Bytes matched.
    pub byte_count: u64,
    /// Number of entries.
    pub flow_count: u32,
}

impl AggregateStats {
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let s = AggregateStats {
            packet_count: r.u64()?,
            byte_count: r.u64()?,
            flow_count: r.u32()?,
        };
        r.skip(4)?;
        Ok(s)
    }

    pub(crate) fn write(&self, buf: &mut Vec<u8>) {
        buf.put_u64(self.packet_count);
        buf.put_u64(self.byte_count);
        buf.put_u32(self.flow_count);
        buf.put_zeros(4);
    }
}
