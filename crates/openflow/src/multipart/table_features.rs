//! `ofp_table_features` and its properties (instructions, next tables, actions, match,
//! wildcards, set-field; each with its table-miss variant).

use crate::error::{DecodeError, EncodeError, ErrorCode};
use crate::wire::{patch_len, Put, Reader};

/// `ofp_table_feature_prop_type` values.
pub mod prop_type {
    /// `OFPTFPT_INSTRUCTIONS`.
    pub const INSTRUCTIONS: u16 = 0;
    /// `OFPTFPT_INSTRUCTIONS_MISS`.
    pub const INSTRUCTIONS_MISS: u16 = 1;
    /// `OFPTFPT_NEXT_TABLES`.
    pub const NEXT_TABLES: u16 = 2;
    /// `OFPTFPT_NEXT_TABLES_MISS`.
    pub const NEXT_TABLES_MISS: u16 = 3;
    /// `OFPTFPT_WRITE_ACTIONS`.
    pub const WRITE_ACTIONS: u16 = 4;
    /// `OFPTFPT_WRITE_ACTIONS_MISS`.
    pub const WRITE_ACTIONS_MISS: u16 = 5;
    /// `OFPTFPT_APPLY_ACTIONS`.
    pub const APPLY_ACTIONS: u16 = 6;
    /// `OFPTFPT_APPLY_ACTIONS_MISS`.
    pub const APPLY_ACTIONS_MISS: u16 = 7;
    /// `OFPTFPT_MATCH`.
    pub const MATCH: u16 = 8;
    /// `OFPTFPT_WILDCARDS`.
    pub const WILDCARDS: u16 = 10;
    /// `OFPTFPT_WRITE_SETFIELD`.
    pub const WRITE_SETFIELD: u16 = 12;
    /// `OFPTFPT_WRITE_SETFIELD_MISS`.
    pub const WRITE_SETFIELD_MISS: u16 = 13;
    /// `OFPTFPT_APPLY_SETFIELD`.
    pub const APPLY_SETFIELD: u16 = 14;
    /// `OFPTFPT_APPLY_SETFIELD_MISS`.
    pub const APPLY_SETFIELD_MISS: u16 = 15;
    /// `OFPTFPT_EXPERIMENTER`.
    pub const EXPERIMENTER: u16 = 0xfffe;
    /// `OFPTFPT_EXPERIMENTER_MISS`.
    pub const EXPERIMENTER_MISS: u16 = 0xffff;
}

/// The value of one table-features property; which kind a `prop_type` holds is fixed
/// ([`TableFeatureProp::new`] refuses a mismatch).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PropValue {
    /// Instruction types (INSTRUCTIONS, INSTRUCTIONS_MISS).
    Instructions(Vec<u16>),
    /// Table ids (NEXT_TABLES, NEXT_TABLES_MISS).
    Tables(Vec<u8>),
    /// Action types (WRITE/APPLY_ACTIONS and their MISS forms).
    Actions(Vec<u16>),
    /// OXM headers (MATCH, WILDCARDS, WRITE/APPLY_SETFIELD and MISS forms); 32-bit headers
    /// of non-experimenter classes.
    Oxms(Vec<u32>),
    /// Experimenter property.
    Experimenter {
        /// Experimenter id.
        experimenter: u32,
        /// Experimenter type.
        exp_type: u32,
        /// Data.
        data: Vec<u32>,
    },
}

/// One table-features property.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TableFeatureProp {
    /// The property type ([`prop_type`]).
    pub prop_type: u16,
    /// Its value.
    pub value: PropValue,
}

/// What kind of value a property type holds.
fn kind_of(t: u16) -> Option<u8> {
    use prop_type::*;
    Some(match t {
        INSTRUCTIONS | INSTRUCTIONS_MISS => 0,
        NEXT_TABLES | NEXT_TABLES_MISS => 1,
        WRITE_ACTIONS | WRITE_ACTIONS_MISS | APPLY_ACTIONS | APPLY_ACTIONS_MISS => 2,
        MATCH | WILDCARDS | WRITE_SETFIELD | WRITE_SETFIELD_MISS | APPLY_SETFIELD
        | APPLY_SETFIELD_MISS => 3,
        EXPERIMENTER | EXPERIMENTER_MISS => 4,
        _ => return None,
    })
}

fn kind_of_value(v: &PropValue) -> u8 {
    match v {
        PropValue::Instructions(_) => 0,
        PropValue::Tables(_) => 1,
        PropValue::Actions(_) => 2,
        PropValue::Oxms(_) => 3,
        PropValue::Experimenter { .. } => 4,
    }
}

impl TableFeatureProp {
    /// A property, or `None` when `value` is not what `prop_type` holds.
    pub fn new(prop_type: u16, value: PropValue) -> Option<Self> {
        (kind_of(prop_type) == Some(kind_of_value(&value)))
            .then_some(TableFeatureProp { prop_type, value })
    }
}

fn tf_err(code: ErrorCode, reason: String) -> DecodeError {
    DecodeError::new(code, reason)
}

fn read_prop(r: &mut Reader<'_>) -> Result<TableFeatureProp, DecodeError> {
    let t = r.u16()?;
    let len = r.u16()? as usize;
    if len < 4 {
        return Err(tf_err(
            ErrorCode::TFFC_BAD_LEN,
            format!("table feature property length {len} is below 4"),
        ));
    }
    let mut b = r.sub(len - 4, ErrorCode::TFFC_BAD_LEN, "table feature property")?;
    r.skip(((8 - len % 8) % 8).min(r.remaining()))?;
    let kind = kind_of(t).ok_or_else(|| {
        tf_err(
            ErrorCode::TFFC_BAD_TYPE,
            format!("table feature property type {t} is unknown"),
        )
    })?;
    let ids = |b: &mut Reader<'_>| -> Result<Vec<u16>, DecodeError> {
        let mut v = Vec::new();
        while !b.is_empty() {
            let id = b.u16()?;
            let l = b.u16()?;
            if l != 4 {
                return Err(tf_err(
                    ErrorCode::TFFC_BAD_ARGUMENT,
                    format!(
                        "table feature id {id} has length {l}; experimenter ids are not supported"
                    ),
                ));
            }
            v.push(id);
        }
        Ok(v)
    };
    let value = match kind {
        0 => PropValue::Instructions(ids(&mut b)?),
        1 => PropValue::Tables(b.rest().to_vec()),
        2 => PropValue::Actions(ids(&mut b)?),
        3 => {
            let mut v = Vec::new();
            while !b.is_empty() {
                let h = b.u32()?;
                if h >> 16 == 0xffff {
                    return Err(tf_err(
                        ErrorCode::TFFC_BAD_ARGUMENT,
                        "experimenter OXM ids in table features are not supported".into(),
                    ));
                }
                v.push(h);
            }
            PropValue::Oxms(v)
        }
        _ => {
            let experimenter = b.u32()?;
            let exp_type = b.u32()?;
            let mut data = Vec::new();
            while !b.is_empty() {
                data.push(b.u32()?);
            }
            PropValue::Experimenter {
                experimenter,
                exp_type,
                data,
            }
        }
    };
    Ok(TableFeatureProp {
        prop_type: t,
        value,
    })
}

fn write_prop(p: &TableFeatureProp, buf: &mut Vec<u8>) -> Result<(), EncodeError> {
    let start = buf.len();
    buf.put_u16(p.prop_type);
    buf.put_u16(0);
    match &p.value {
        PropValue::Instructions(v) | PropValue::Actions(v) => {
            for id in v {
                buf.put_u16(*id);
                buf.put_u16(4);
            }
        }
        PropValue::Tables(t) => buf.extend_from_slice(t),
        PropValue::Oxms(v) => v.iter().for_each(|h| buf.put_u32(*h)),
        PropValue::Experimenter {
            experimenter,
            exp_type,
            data,
        } => {
            buf.put_u32(*experimenter);
            buf.put_u32(*exp_type);
            data.iter().for_each(|d| buf.put_u32(*d));
        }
    }
    patch_len(buf, start + 2, start, "table feature property")?;
    buf.pad_to_8(start);
    Ok(())
}

/// `ofp_table_features`: one table's capabilities.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct TableFeatures {
    /// Table.
    pub table_id: u8,
    /// Name (≤ 31 bytes).
    pub name: String,
    /// Metadata bits the table can match.
    pub metadata_match: u64,
    /// Metadata bits the table can write.
    pub metadata_write: u64,
    /// Config bits.
    pub config: u32,
    /// Maximum entries.
    pub max_entries: u32,
    /// Properties.
    pub properties: Vec<TableFeatureProp>,
}

impl TableFeatures {
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let len = r
            .clone()
            .u16()
            .map_err(|e| tf_err(ErrorCode::TFFC_BAD_LEN, e.reason))? as usize;
        if len < 64 {
            return Err(tf_err(
                ErrorCode::TFFC_BAD_LEN,
                format!("table features length {len} is below 64"),
            ));
        }
        let mut b = r.sub(len, ErrorCode::TFFC_BAD_LEN, "table features")?;
        b.skip(2)?;
        let table_id = b.u8()?;
        b.skip(5)?;
        let name = b.string(32)?;
        let metadata_match = b.u64()?;
        let metadata_write = b.u64()?;
        let config = b.u32()?;
        let max_entries = b.u32()?;
        let mut properties = Vec::new();
        while !b.is_empty() {
            properties.push(read_prop(&mut b)?);
        }
        Ok(TableFeatures {
            table_id,
            name,
            metadata_match,
            metadata_write,
            config,
            max_entries,
            properties,
        })
    }

    pub(crate) fn write(&self, buf: &mut Vec<u8>) -> Result<(), EncodeError> {
        let start = buf.len();
        buf.put_u16(0);
        buf.put_u8(self.table_id);
        buf.put_zeros(5);
        buf.put_string(&self.name, 32);
        buf.put_u64(self.metadata_match);
        buf.put_u64(self.metadata_write);
        buf.put_u32(self.config);
        buf.put_u32(self.max_entries);
        for p in &self.properties {
            if kind_of(p.prop_type) != Some(kind_of_value(&p.value)) {
                return Err(EncodeError::Unencodable(format!(
                    "table feature property type {} cannot hold {:?}",
                    p.prop_type, p.value
                )));
            }
            write_prop(p, buf)?;
        }
        patch_len(buf, start, start, "table features")
    }
}
