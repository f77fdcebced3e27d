//! Switch-wide messages: features reply, switch configuration, table-mod and port-mod.

use crate::error::DecodeError;
use crate::wire::{Put, Reader};

/// `ofp_capabilities` bits of a features reply.
pub mod capabilities {
    /// Flow statistics.
    pub const FLOW_STATS: u32 = 1 << 0;
    /// Table statistics.
    pub const TABLE_STATS: u32 = 1 << 1;
    /// Port statistics.
    pub const PORT_STATS: u32 = 1 << 2;
    /// Group statistics.
    pub const GROUP_STATS: u32 = 1 << 3;
    /// Can reassemble IP fragments.
    pub const IP_REASM: u32 = 1 << 5;
    /// Queue statistics.
    pub const QUEUE_STATS: u32 = 1 << 6;
    /// Switch will block looping ports.
    pub const PORT_BLOCKED: u32 = 1 << 8;
}

/// `OFPT_FEATURES_REPLY` (`ofp_switch_features`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FeaturesReply {
    /// Datapath id (low 48 bits: a MAC address by convention).
    pub datapath_id: u64,
    /// Packets the switch can buffer for packet-in (0: none).
    pub n_buffers: u32,
    /// Number of flow tables.
    pub n_tables: u8,
    /// Auxiliary connection id (0: main connection).
    pub auxiliary_id: u8,
    /// [`capabilities`] bits.
    pub capabilities: u32,
    /// Reserved word.
    pub reserved: u32,
}

impl FeaturesReply {
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let datapath_id = r.u64()?;
        let n_buffers = r.u32()?;
        let n_tables = r.u8()?;
        let auxiliary_id = r.u8()?;
        r.skip(2)?;
        Ok(FeaturesReply {
            datapath_id,
            n_buffers,
            n_tables,
            auxiliary_id,
            capabilities: r.u32()?,
            reserved: r.u32()?,
        })
    }

    pub(crate) fn write(&self, buf: &mut Vec<u8>) {
        buf.put_u64(self.datapath_id);
        buf.put_u32(self.n_buffers);
        buf.put_u8(self.n_tables);
        buf.put_u8(self.auxiliary_id);
        buf.put_zeros(2);
        buf.put_u32(self.capabilities);
        buf.put_u32(self.reserved);
    }
}

/// `ofp_config_flags` values (the fragment handling in [`SwitchConfig::flags`]).
pub mod config_flags {
    /// No special handling for fragments.
    pub const FRAG_NORMAL: u16 = 0;
    /// Drop fragments.
    pub const FRAG_DROP: u16 = 1;
    /// Reassemble (only if `IP_REASM` is a capability).
    pub const FRAG_REASM: u16 = 2;
}

/// `OFPT_GET_CONFIG_REPLY` / `OFPT_SET_CONFIG` (`ofp_switch_config`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SwitchConfig {
    /// [`config_flags`].
    pub flags: u16,
    /// Bytes of a packet sent to the controller on a table miss (0xffff: all).
    pub miss_send_len: u16,
}

impl SwitchConfig {
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(SwitchConfig {
            flags: r.u16()?,
            miss_send_len: r.u16()?,
        })
    }

    pub(crate) fn write(&self, buf: &mut Vec<u8>) {
        buf.put_u16(self.flags);
        buf.put_u16(self.miss_send_len);
    }
}

/// `OFPT_TABLE_MOD`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TableMod {
    /// Table (0xff: all).
    pub table_id: u8,
    /// Configuration bits (deprecated in 1.3; must be 0 or 3 per table-miss rules).
    pub config: u32,
}

impl TableMod {
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let table_id = r.u8()?;
        r.skip(3)?;
        Ok(TableMod {
            table_id,
            config: r.u32()?,
        })
    }

    pub(crate) fn write(&self, buf: &mut Vec<u8>) {
        buf.put_u8(self.table_id);
        buf.put_zeros(3);
        buf.put_u32(self.config);
    }
}

/// `OFPT_PORT_MOD`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PortMod {
    /// Port.
    pub port_no: u32,
    /// The port's MAC address (a sanity check: must match the port's).
    pub hw_addr: [u8; 6],
    /// New config bits (see [`crate::port::port_config`]).
    pub config: u32,
    /// Which config bits to change.
    pub mask: u32,
    /// Features to advertise (0: leave unchanged).
    pub advertise: u32,
}

impl PortMod {
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let port_no = r.u32()?;
        r.skip(4)?;
        let hw_addr = r.array()?;
        r.skip(2)?;
        let m = PortMod {
            port_no,
            hw_addr,
            config: r.u32()?,
            mask: r.u32()?,
            advertise: r.u32()?,
        };
        r.skip(4)?;
        Ok(m)
    }

    pub(crate) fn write(&self, buf: &mut Vec<u8>) {
        buf.put_u32(self.port_no);
        buf.put_zeros(4);
        buf.extend_from_slice(&self.hw_addr);
        buf.put_zeros(2);
        buf.put_u32(self.config);
        buf.put_u32(self.mask);
        buf.put_u32(self.advertise);
        buf.put_zeros(4);
    }
}
