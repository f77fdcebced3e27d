//! `OFPT_ERROR`.

use crate::error::{error_type, DecodeError, ErrorCode};
use crate::wire::{Put, Reader};

/// How many bytes of an offending request an error carries.
pub const ERROR_DATA_MAX: usize = 64;

/// An error message. For [`error_type::EXPERIMENTER`] errors, `code.code` is the
/// experimenter's type and `experimenter` its id; otherwise `experimenter` is 0.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ErrorMsg {
    /// Type and code.
    pub code: ErrorCode,
    /// Experimenter id (experimenter errors only).
    pub experimenter: u32,
    /// The first bytes of the offending request, or (hello failures) an ASCII explanation.
    pub data: Vec<u8>,
}

impl ErrorMsg {
    /// The error answering `request` (the whole offending message as received): carries its
    /// first [`ERROR_DATA_MAX`] bytes, as OpenFlow asks.
    pub fn for_request(code: ErrorCode, request: &[u8]) -> ErrorMsg {
        ErrorMsg {
            code,
            experimenter: 0,
            data: request[..request.len().min(ERROR_DATA_MAX)].to_vec(),
        }
    }

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<ErrorMsg, DecodeError> {
        let kind = r.u16()?;
        let code = r.u16()?;
        let experimenter = if kind == error_type::EXPERIMENTER {
            r.u32()?
        } else {
            0
        };
        Ok(ErrorMsg {
            code: ErrorCode { kind, code },
            experimenter,
            data: r.rest().to_vec(),
        })
    }

    pub(crate) fn write(&self, buf: &mut Vec<u8>) {
        buf.put_u16(self.code.kind);
        buf.put_u16(self.code.code);
        if self.code.kind == error_type::EXPERIMENTER {
            buf.put_u32(self.experimenter);
        }
        buf.extend_from_slice(&self.data);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn carries_64_bytes() {
        let req = vec![7u8; 100];
        let e = ErrorMsg::for_request(ErrorCode::BRC_BAD_TYPE, &req);
        assert_eq!(e.data.len(), 64);
        let mut b = Vec::new();
        e.write(&mut b);
        assert_eq!(&b[..4], &[0, 1, 0, 1]);
        let mut r = Reader::new(&b, ErrorCode::BRC_BAD_LEN, "t");
        assert_eq!(ErrorMsg::read(&mut r).unwrap(), e);
    }
}
