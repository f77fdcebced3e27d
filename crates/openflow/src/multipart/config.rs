//! Group and meter configuration bodies: group descriptions, group features, meter
//! configurations and meter features.

use pipeline::model::{Group, Meter};

use crate::error::{DecodeError, EncodeError};
use crate::messages::mods::{
    group_type_from_wire, group_type_to_wire, meter_flags_from_wire, meter_flags_to_wire,
    read_bands, read_buckets, write_bands, write_buckets,
};
use crate::multipart::stats::sized_entry;
use crate::wire::{patch_len, Put, Reader};

/// Reads one `ofp_group_desc` into the model's group.
pub(crate) fn read_group_desc(r: &mut Reader<'_>) -> Result<Group, DecodeError> {
    let mut b = sized_entry(r, 8, "group description", 0)?;
    b.skip(2)?;
    let kind = group_type_from_wire(b.u8()?)?;
    b.skip(1)?;
    let id = b.u32()?;
    Ok(Group {
        id,
        kind,
        buckets: read_buckets(&mut b)?,
    })
}

/// Appends one `ofp_group_desc`.
pub(crate) fn write_group_desc(g: &Group, buf: &mut Vec<u8>) -> Result<(), EncodeError> {
    let start = buf.len();
    buf.put_u16(0);
    buf.put_u8(group_type_to_wire(g.kind));
    buf.put_zeros(1);
    buf.put_u32(g.id);
    write_buckets(&g.buckets, buf)?;
    patch_len(buf, start, start, "group description")
}

/// `ofp_group_features`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct GroupFeatures {
    /// Bit `t` set: group type `t` is supported.
    pub types: u32,
    /// `ofp_group_capabilities` bits (1 select-weight, 2 select-liveness, 4 chaining, 8
    /// chaining-checks).
    pub capabilities: u32,
    /// Maximum groups per type.
    pub max_groups: [u32; 4],
    /// Bit `a` set: action type `a` is supported, per group type.
    pub actions: [u32; 4],
}

impl GroupFeatures {
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let types = r.u32()?;
        let capabilities = r.u32()?;
        let mut w = [0u32; 8];
        for x in &mut w {
            *x = r.u32()?;
        }
        Ok(GroupFeatures {
            types,
            capabilities,
            max_groups: [w[0], w[1], w[2], w[3]],
            actions: [w[4], w[5], w[6], w[7]],
        })
    }

    pub(crate) fn write(&self, buf: &mut Vec<u8>) {
        buf.put_u32(self.types);
        buf.put_u32(self.capabilities);
        for v in self.max_groups.iter().chain(&self.actions) {
            buf.put_u32(*v);
        }
    }
}

/// `ofp_meter_config`: a meter as the model holds it plus its stats flag.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MeterConfig {
    /// The meter (its flags as installed, `OFPMF_STATS` included).
    pub meter: Meter,
}

impl MeterConfig {
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let mut b = sized_entry(r, 8, "meter configuration", 0)?;
        b.skip(2)?;
        let (pktps, burst, stats, kbps) = meter_flags_from_wire(b.u16()?)?;
        let id = b.u32()?;
        Ok(MeterConfig {
            meter: Meter {
                id,
                pktps,
                burst,
                stats,
                bands: read_bands(&mut b)?,
                kbps,
            },
        })
    }

    pub(crate) fn write(&self, buf: &mut Vec<u8>) -> Result<(), EncodeError> {
        let start = buf.len();
        buf.put_u16(0);
        buf.put_u16(meter_flags_to_wire(&self.meter));
        buf.put_u32(self.meter.id);
        write_bands(&self.meter.bands, buf);
        patch_len(buf, start, start, "meter configuration")
    }
}

/// `ofp_meter_features`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MeterFeatures {
    /// Maximum number of meters.
    pub max_meter: u32,
    /// Bit `t` set: band type `t` is supported.
    pub band_types: u32,
    /// `ofp_meter_flags` supported.
    pub capabilities: u32,
    /// Maximum bands per meter.
    pub max_bands: u8,
    /// Maximum color value.
    pub max_color: u8,
}

impl MeterFeatures {
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let f = MeterFeatures {
            max_meter: r.u32()?,
            band_types: r.u32()?,
            capabilities: r.u32()?,
            max_bands: r.u8()?,
            max_color: r.u8()?,
        };
        r.skip(2)?;
        Ok(f)
    }

    pub(crate) fn write(&self, buf: &mut Vec<u8>) {
        buf.put_u32(self.max_meter);
        buf.put_u32(self.band_types);
        buf.put_u32(self.capabilities);
        buf.put_u8(self.max_bands);
        buf.put_u8(self.max_color);
        buf.put_zeros(2);
    }
}
