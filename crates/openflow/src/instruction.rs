//! Instructions (`ofp_instruction_*`): decode into the model's [`Instruction`], encode back.

use pipeline::model::{Instruction, Match, MAX_TABLE};

use crate::action::{decode_actions, encode_actions};
use crate::error::{DecodeError, EncodeError, ErrorCode};
use crate::wire::{patch_len, Put, Reader};

/// `ofp_instruction_type` values.
pub mod instruction_type {
    /// `OFPIT_GOTO_TABLE`.
    pub const GOTO_TABLE: u16 = 1;
    /// `OFPIT_WRITE_METADATA`.
    pub const WRITE_METADATA: u16 = 2;
    /// `OFPIT_WRITE_ACTIONS`.
    pub const WRITE_ACTIONS: u16 = 3;
    /// `OFPIT_APPLY_ACTIONS`.
    pub const APPLY_ACTIONS: u16 = 4;
    /// `OFPIT_CLEAR_ACTIONS`.
    pub const CLEAR_ACTIONS: u16 = 5;
    /// `OFPIT_METER`.
    pub const METER: u16 = 6;
    /// `OFPIT_EXPERIMENTER`.
    pub const EXPERIMENTER: u16 = 0xffff;
}

use instruction_type as it;

/// The instruction types this codec decodes (for table-features replies).
pub const SUPPORTED_INSTRUCTIONS: &[u16] = &[
    it::GOTO_TABLE,
    it::WRITE_METADATA,
    it::WRITE_ACTIONS,
    it::APPLY_ACTIONS,
    it::CLEAR_ACTIONS,
    it::METER,
];

fn read_instruction(r: &mut Reader<'_>) -> Result<Instruction, DecodeError> {
    let mut hr = Reader::new(
        r.bytes(r.remaining().min(4))?,
        ErrorCode::BIC_BAD_LEN,
        "instruction header",
    );
    let kind = hr.u16()?;
    let len = hr.u16()? as usize;
    if len < 8 || len & 7 != 0 {
        return Err(DecodeError::new(
            ErrorCode::BIC_BAD_LEN,
            format!("instruction type {kind} has length {len}; instructions are at least 8 bytes, in multiples of 8"),
        ));
    }
    let mut b = r.sub(len - 4, ErrorCode::BIC_BAD_LEN, "instruction")?;
    let fixed = |want: usize| -> Result<(), DecodeError> {
        if len != want {
            return Err(DecodeError::new(
                ErrorCode::BIC_BAD_LEN,
                format!("instruction type {kind} has length {len}; it must be {want}"),
            ));
        }
        Ok(())
    };
    Ok(match kind {
        it::GOTO_TABLE => {
            fixed(8)?;
            let t = b.u8()?;
            if t > MAX_TABLE {
                return Err(DecodeError::new(
                    ErrorCode::BIC_BAD_TABLE_ID,
                    format!("goto_table:{t} names no table; tables are 0..=254"),
                ));
            }
            Instruction::GotoTable(t)
        }
        it::WRITE_METADATA => {
            fixed(24)?;
            b.skip(4)?;
            let value = b.u64()?;
            let mask = b.u64()?;
            Instruction::WriteMetadata { value, mask }
        }
        it::WRITE_ACTIONS | it::APPLY_ACTIONS => {
            b.skip(4)?;
            let actions = decode_actions(b.rest())?;
            if kind == it::WRITE_ACTIONS {
                Instruction::WriteActions(actions)
            } else {
                Instruction::ApplyActions(actions)
            }
        }
        it::CLEAR_ACTIONS => {
            fixed(8)?;
            Instruction::ClearActions
        }
        it::METER => {
            fixed(8)?;
            Instruction::Meter(b.u32()?)
        }
        it::EXPERIMENTER => {
            let e = b.u32().unwrap_or(0);
            return Err(DecodeError::new(
                ErrorCode::BIC_BAD_EXPERIMENTER,
                format!("experimenter instruction {e:#010x} is not supported by this switch"),
            ));
        }
        _ => {
            return Err(DecodeError::new(
                ErrorCode::BIC_UNKNOWN_INST,
                format!("instruction type {kind} is unknown"),
            ))
        }
    })
}

/// Decodes a list of instructions filling `bytes` exactly.
pub fn decode_instructions(bytes: &[u8]) -> Result<Vec<Instruction>, DecodeError> {
    let mut r = Reader::new(bytes, ErrorCode::BIC_BAD_LEN, "instruction list");
    let mut out = Vec::new();
    while !r.is_empty() {
        out.push(read_instruction(&mut r)?);
    }
    Ok(out)
}

/// Appends one instruction; `ctx` is the flow's match (names of set-fields).
pub fn encode_instruction(
    i: &Instruction,
    ctx: &Match,
    buf: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    match i {
        Instruction::GotoTable(t) => {
            buf.put_u16(it::GOTO_TABLE);
            buf.put_u16(8);
            buf.put_u8(*t);
            buf.put_zeros(3);
        }
        Instruction::WriteMetadata { value, mask } => {
            buf.put_u16(it::WRITE_METADATA);
            buf.put_u16(24);
            buf.put_zeros(4);
            buf.put_u64(*value);
            buf.put_u64(*mask);
        }
        Instruction::WriteActions(a) | Instruction::ApplyActions(a) => {
            let start = buf.len();
            let kind = if matches!(i, Instruction::WriteActions(_)) {
                it::WRITE_ACTIONS
            } else {
                it::APPLY_ACTIONS
            };
            buf.put_u16(kind);
            buf.put_u16(0);
            buf.put_zeros(4);
            encode_actions(a, ctx, buf)?;
            patch_len(buf, start + 2, start, "actions instruction")?;
        }
        Instruction::ClearActions => {
            buf.put_u16(it::CLEAR_ACTIONS);
            buf.put_u16(8);
            buf.put_zeros(4);
        }
        Instruction::Meter(m) => {
            buf.put_u16(it::METER);
            buf.put_u16(8);
            buf.put_u32(*m);
        }
    }
    Ok(())
}

/// Appends a list of instructions.
pub fn encode_instructions(
    list: &[Instruction],
    ctx: &Match,
    buf: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    list.iter()
        .try_for_each(|i| encode_instruction(i, ctx, buf))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipeline::model::Action;

    #[test]
    fn roundtrip_and_golden() {
        let list = vec![
            Instruction::Meter(3),
            Instruction::ApplyActions(vec![Action::PopVlan]),
            Instruction::ClearActions,
            Instruction::WriteActions(vec![]),
            Instruction::WriteMetadata {
                value: 1,
                mask: 0xff,
            },
            Instruction::GotoTable(4),
        ];
        let mut b = Vec::new();
        encode_instructions(&list, &Match::ANY, &mut b).unwrap();
        assert_eq!(&b[..8], &[0, 6, 0, 8, 0, 0, 0, 3]);
        assert_eq!(
            &b[8..24],
            &[0, 4, 0, 16, 0, 0, 0, 0, 0, 18, 0, 8, 0, 0, 0, 0]
        );
        assert_eq!(decode_instructions(&b).unwrap(), list);
    }

    #[test]
    fn errors() {
        let code = |b: &[u8]| decode_instructions(b).unwrap_err().code;
        assert_eq!(code(&[0, 9, 0, 8, 0, 0, 0, 0]), ErrorCode::BIC_UNKNOWN_INST);
        assert_eq!(
            code(&[0, 1, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            ErrorCode::BIC_BAD_LEN
        );
        assert_eq!(
            code(&[0, 1, 0, 8, 255, 0, 0, 0]),
            ErrorCode::BIC_BAD_TABLE_ID
        );
        assert_eq!(code(&[0, 1, 0, 6, 1, 0]), ErrorCode::BIC_BAD_LEN);
        assert_eq!(
            code(&[0xff, 0xff, 0, 8, 0, 0, 0, 1]),
            ErrorCode::BIC_BAD_EXPERIMENTER
        );
        // An error inside an action keeps the action's code.
        assert_eq!(
            code(&[0, 4, 0, 16, 0, 0, 0, 0, 0, 99, 0, 8, 0, 0, 0, 0]),
            ErrorCode::BAC_BAD_TYPE
        );
    }
}
