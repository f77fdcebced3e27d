//! The table-changing messages: flow-mod, group-mod and meter-mod (and the buckets, bands and
//! flag words that group-desc and meter-config replies share with them).

use pipeline::model::{
    Bucket, FlowFlags, FlowMod, FlowModCommand, Group, GroupMod, GroupModCommand, GroupType, Meter,
    MeterBand, MeterMod, MeterModCommand,
};

use crate::action::{decode_actions, encode_actions};
use crate::as_sent::{instructions_form, write_instructions};
use crate::error::{DecodeError, EncodeError, ErrorCode};
use crate::instruction::decode_instructions;
use crate::oxm::{read_match_as_sent, write_match_as_sent};
use crate::wire::{patch_len, Put, Reader};

/// `ofp_flow_mod_flags` bits.
pub mod flow_mod_flags {
    /// Send flow-removed when the entry leaves.
    pub const SEND_FLOW_REM: u16 = 1 << 0;
    /// Check for overlapping entries first.
    pub const CHECK_OVERLAP: u16 = 1 << 1;
    /// Reset counters.
    pub const RESET_COUNTS: u16 = 1 << 2;
    /// Do not count packets.
    pub const NO_PKT_COUNTS: u16 = 1 << 3;
    /// Do not count bytes.
    pub const NO_BYT_COUNTS: u16 = 1 << 4;
}

/// [`FlowFlags`] as the wire's bits.
pub fn flow_flags_to_wire(f: FlowFlags) -> u16 {
    use flow_mod_flags::*;
    let bit = |b: bool, v: u16| if b { v } else { 0 };
    bit(f.send_flow_rem, SEND_FLOW_REM)
        | bit(f.check_overlap, CHECK_OVERLAP)
        | bit(f.reset_counts, RESET_COUNTS)
        | bit(f.no_pkt_counts, NO_PKT_COUNTS)
        | bit(f.no_byte_counts, NO_BYT_COUNTS)
}

/// The wire's flow-mod flag bits as [`FlowFlags`]; `None` when an unknown bit is set.
pub fn flow_flags_from_wire(v: u16) -> Option<FlowFlags> {
    use flow_mod_flags::*;
    if v & !0x1f != 0 {
        return None;
    }
    Some(FlowFlags {
        send_flow_rem: v & SEND_FLOW_REM != 0,
        check_overlap: v & CHECK_OVERLAP != 0,
        reset_counts: v & RESET_COUNTS != 0,
        no_pkt_counts: v & NO_PKT_COUNTS != 0,
        no_byte_counts: v & NO_BYT_COUNTS != 0,
    })
}

/// `OFPT_FLOW_MOD`: the model's flow-mod plus the buffer to apply it to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FlowModMsg {
    /// The modification.
    pub flow_mod: FlowMod,
    /// A buffered packet to run through the new entry ([`super::packet::NO_BUFFER`]: none).
    pub buffer_id: u32,
}

impl FlowModMsg {
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let cookie = r.u64()?;
        let cookie_mask = r.u64()?;
        let table_id = r.u8()?;
        let command = match r.u8()? {
            0 => FlowModCommand::Add,
            1 => FlowModCommand::Modify,
            2 => FlowModCommand::ModifyStrict,
            3 => FlowModCommand::Delete,
            4 => FlowModCommand::DeleteStrict,
            x => {
                return Err(DecodeError::new(
                    ErrorCode::FMFC_BAD_COMMAND,
                    format!("flow-mod command {x} is not add (0), modify (1), modify-strict (2), delete (3) or delete-strict (4)"),
                ))
            }
        };
        let idle_timeout = r.u16()?;
        let hard_timeout = r.u16()?;
        let priority = r.u16()?;
        let buffer_id = r.u32()?;
        let out_port = r.u32()?;
        let out_group = r.u32()?;
        let raw_flags = r.u16()?;
        let flags = flow_flags_from_wire(raw_flags).ok_or_else(|| {
            DecodeError::new(
                ErrorCode::FMFC_BAD_FLAGS,
                format!("flow-mod flags {raw_flags:#x} set bits OpenFlow 1.3 does not define (only 0x1f)"),
            )
        })?;
        r.skip(2)?;
        let (matcher, matcher_as_sent) = read_match_as_sent(r)?;
        let bytes = r.rest();
        let instructions = decode_instructions(bytes)?;
        let instructions_as_sent = instructions_form(bytes, &instructions, &matcher);
        Ok(FlowModMsg {
            flow_mod: FlowMod {
                command,
                table_id,
                priority,
                matcher,
                instructions,
                cookie,
                cookie_mask,
                idle_timeout,
                hard_timeout,
                out_port,
                out_group,
                flags,
                matcher_as_sent,
                instructions_as_sent,
            },
            buffer_id,
        })
    }

    pub(crate) fn write(&self, buf: &mut Vec<u8>) -> Result<(), EncodeError> {
        let f = &self.flow_mod;
        buf.put_u64(f.cookie);
        buf.put_u64(f.cookie_mask);
        buf.put_u8(f.table_id);
        buf.put_u8(match f.command {
            FlowModCommand::Add => 0,
            FlowModCommand::Modify => 1,
            FlowModCommand::ModifyStrict => 2,
            FlowModCommand::Delete => 3,
            FlowModCommand::DeleteStrict => 4,
        });
        buf.put_u16(f.idle_timeout);
        buf.put_u16(f.hard_timeout);
        buf.put_u16(f.priority);
        buf.put_u32(self.buffer_id);
        buf.put_u32(f.out_port);
        buf.put_u32(f.out_group);
        buf.put_u16(flow_flags_to_wire(f.flags));
        buf.put_zeros(2);
        write_match_as_sent(&f.matcher, f.matcher_as_sent.as_ref(), buf)?;
        write_instructions(
            &f.instructions,
            &f.matcher,
            f.instructions_as_sent.as_ref(),
            buf,
        )
    }
}

pub(crate) fn group_type_from_wire(v: u8) -> Result<GroupType, DecodeError> {
    Ok(match v {
        0 => GroupType::All,
        1 => GroupType::Select,
        2 => GroupType::Indirect,
        3 => GroupType::FastFailover,
        x => {
            return Err(DecodeError::new(
                ErrorCode::GMFC_BAD_TYPE,
                format!(
                    "group type {x} is not all (0), select (1), indirect (2) or fast-failover (3)"
                ),
            ))
        }
    })
}

pub(crate) fn group_type_to_wire(t: GroupType) -> u8 {
    match t {
        GroupType::All => 0,
        GroupType::Select => 1,
        GroupType::Indirect => 2,
        GroupType::FastFailover => 3,
    }
}

/// Reads buckets filling `r`.
pub(crate) fn read_buckets(r: &mut Reader<'_>) -> Result<Vec<Bucket>, DecodeError> {
    let mut out = Vec::new();
    while !r.is_empty() {
        let mut hr = r.clone();
        let len = hr.u16().map_err(|_| bucket_len(r.remaining()))? as usize;
        if len < 16 || len & 7 != 0 || len > r.remaining() {
            return Err(bucket_len(len));
        }
        let mut b = r.sub(len, ErrorCode::GMFC_BAD_BUCKET, "bucket")?;
        b.skip(2)?;
        let weight = b.u16()?;
        let watch_port = b.u32()?;
        let watch_group = b.u32()?;
        b.skip(4)?;
        let bytes = b.rest();
        let actions = decode_actions(bytes)?;
        out.push(Bucket {
            weight,
            watch_port,
            watch_group,
            actions_as_sent: crate::as_sent::actions_form(bytes, &actions),
            actions,
        });
    }
    Ok(out)
}

fn bucket_len(len: usize) -> DecodeError {
    DecodeError::new(
        ErrorCode::GMFC_BAD_BUCKET,
        format!("bucket length {len} is invalid; a bucket is 16 bytes plus its actions, within the message"),
    )
}

/// Appends buckets.
pub(crate) fn write_buckets(buckets: &[Bucket], buf: &mut Vec<u8>) -> Result<(), EncodeError> {
    for b in buckets {
        let start = buf.len();
        buf.put_u16(0);
        buf.put_u16(b.weight);
        buf.put_u32(b.watch_port);
        buf.put_u32(b.watch_group);
        buf.put_zeros(4);
        match &b.actions_as_sent {
            Some(bytes) => buf.extend_from_slice(bytes),
            None => encode_actions(&b.actions, &pipeline::model::Match::ANY, buf)?,
        }
        patch_len(buf, start, start, "group bucket")?;
    }
    Ok(())
}

/// Reads a group-mod body.
pub(crate) fn read_group_mod(r: &mut Reader<'_>) -> Result<GroupMod, DecodeError> {
    let command = match r.u16()? {
        0 => GroupModCommand::Add,
        1 => GroupModCommand::Modify,
        2 => GroupModCommand::Delete,
        x => {
            return Err(DecodeError::new(
                ErrorCode::GMFC_BAD_COMMAND,
                format!("group-mod command {x} is not add (0), modify (1) or delete (2)"),
            ))
        }
    };
    let kind = group_type_from_wire(r.u8()?)?;
    r.skip(1)?;
    let id = r.u32()?;
    let buckets = read_buckets(r)?;
    Ok(GroupMod {
        command,
        group: Group { id, kind, buckets },
    })
}

/// Appends a group-mod body.
pub(crate) fn write_group_mod(g: &GroupMod, buf: &mut Vec<u8>) -> Result<(), EncodeError> {
    buf.put_u16(match g.command {
        GroupModCommand::Add => 0,
        GroupModCommand::Modify => 1,
        GroupModCommand::Delete => 2,
    });
    buf.put_u8(group_type_to_wire(g.group.kind));
    buf.put_zeros(1);
    buf.put_u32(g.group.id);
    write_buckets(&g.group.buckets, buf)
}

/// `ofp_meter_flags` bits.
pub mod meter_flags {
    /// Rates in kbit/s.
    pub const KBPS: u16 = 1 << 0;
    /// Rates in packets/s.
    pub const PKTPS: u16 = 1 << 1;
    /// Bands use their burst size.
    pub const BURST: u16 = 1 << 2;
    /// Collect statistics.
    pub const STATS: u16 = 1 << 3;
}

/// `ofp_meter_band_type` values.
pub mod meter_band_type {
    /// Drop packets.
    pub const DROP: u16 = 1;
    /// Remark the DSCP.
    pub const DSCP_REMARK: u16 = 2;
    /// Experimenter band.
    pub const EXPERIMENTER: u16 = 0xffff;
}

/// A meter's flags: (pktps, burst, stats, kbps).
pub(crate) fn meter_flags_from_wire(v: u16) -> Result<(bool, bool, bool, bool), DecodeError> {
    use meter_flags::*;
    if v & !0xf != 0 || (v & KBPS != 0 && v & PKTPS != 0) {
        return Err(DecodeError::new(
            ErrorCode::MMFC_BAD_FLAGS,
            format!("meter flags {v:#x}: only kbps (1) or pktps (2), burst (4) and stats (8) exist, and kbps and pktps exclude each other"),
        ));
    }
    Ok((
        v & PKTPS != 0,
        v & BURST != 0,
        v & STATS != 0,
        v & KBPS != 0,
    ))
}

pub(crate) fn meter_flags_to_wire(m: &Meter) -> u16 {
    use meter_flags::*;
    (if m.pktps { PKTPS } else { 0 })
        | if m.kbps { KBPS } else { 0 }
        | if m.burst { BURST } else { 0 }
        | if m.stats { STATS } else { 0 }
}

/// Reads meter bands filling `r`.
pub(crate) fn read_bands(r: &mut Reader<'_>) -> Result<Vec<MeterBand>, DecodeError> {
    let mut out = Vec::new();
    while !r.is_empty() {
        let mut b = r.sub(
            r.remaining().min(16),
            ErrorCode::MMFC_BAD_BAND,
            "meter band",
        )?;
        let kind = b.u16()?;
        let len = b.u16()?;
        if len != 16 || b.remaining() != 12 {
            return Err(DecodeError::new(
                ErrorCode::MMFC_BAD_BAND,
                format!("meter band length {len} (with {} bytes left): drop and dscp_remark bands are 16 bytes", b.remaining() + 4),
            ));
        }
        let rate = b.u32()?;
        let burst = b.u32()?;
        out.push(match kind {
            meter_band_type::DROP => MeterBand::Drop { rate, burst },
            meter_band_type::DSCP_REMARK => MeterBand::DscpRemark {
                rate,
                burst,
                prec_level: b.u8()?,
            },
            x => {
                return Err(DecodeError::new(
                    ErrorCode::MMFC_BAD_BAND,
                    format!(
                        "meter band type {x} is not supported; use drop (1) or dscp_remark (2)"
                    ),
                ))
            }
        });
    }
    Ok(out)
}

/// Appends meter bands.
pub(crate) fn write_bands(bands: &[MeterBand], buf: &mut Vec<u8>) {
    for band in bands {
        match *band {
            MeterBand::Drop { rate, burst } => {
                buf.put_u16(meter_band_type::DROP);
                buf.put_u16(16);
                buf.put_u32(rate);
                buf.put_u32(burst);
                buf.put_zeros(4);
            }
            MeterBand::DscpRemark {
                rate,
                burst,
                prec_level,
            } => {
                buf.put_u16(meter_band_type::DSCP_REMARK);
                buf.put_u16(16);
                buf.put_u32(rate);
                buf.put_u32(burst);
                buf.put_u8(prec_level);
                buf.put_zeros(3);
            }
        }
    }
}

/// `OFPT_METER_MOD`: the model's meter-mod plus the stats flag it does not keep. A delete's
/// flags mean nothing: they decode as kbps without burst or stats and encode as 0 (what
/// `ovs-ofctl del-meter` sends).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MeterModMsg {
    /// The modification.
    pub meter_mod: MeterMod,
}

impl MeterModMsg {
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let command = match r.u16()? {
            0 => MeterModCommand::Add,
            1 => MeterModCommand::Modify,
            2 => MeterModCommand::Delete,
            x => {
                return Err(DecodeError::new(
                    ErrorCode::MMFC_BAD_COMMAND,
                    format!("meter-mod command {x} is not add (0), modify (1) or delete (2)"),
                ))
            }
        };
        let (mut pktps, mut burst, mut stats, mut kbps) = meter_flags_from_wire(r.u16()?)?;
        if command == MeterModCommand::Delete {
            (pktps, burst, stats, kbps) = (false, false, false, false);
        }
        let id = r.u32()?;
        let bands = read_bands(r)?;
        Ok(MeterModMsg {
            meter_mod: MeterMod {
                command,
                meter: Meter {
                    id,
                    pktps,
                    burst,
                    stats,
                    bands,
                    kbps,
                },
            },
        })
    }

    pub(crate) fn write(&self, buf: &mut Vec<u8>) {
        let m = &self.meter_mod;
        buf.put_u16(match m.command {
            MeterModCommand::Add => 0,
            MeterModCommand::Modify => 1,
            MeterModCommand::Delete => 2,
        });
        let flags = match m.command {
            MeterModCommand::Delete => 0,
            _ => meter_flags_to_wire(&m.meter),
        };
        buf.put_u16(flags);
        buf.put_u32(m.meter.id);
        write_bands(&m.meter.bands, buf);
    }
}
