//! The 8-byte OpenFlow header (`ofp_header`), the message type numbers and framing of a byte
//! stream into messages.

use crate::error::{DecodeError, ErrorCode};

/// The OpenFlow 1.3 wire version.
pub const OFP_VERSION: u8 = 0x04;
/// Length of `ofp_header`.
pub const HEADER_LEN: usize = 8;

/// `ofp_type` values.
pub mod msg_type {
    /// `OFPT_HELLO`.
    pub const HELLO: u8 = 0;
    /// `OFPT_ERROR`.
    pub const ERROR: u8 = 1;
    /// `OFPT_ECHO_REQUEST`.
    pub const ECHO_REQUEST: u8 = 2;
    /// `OFPT_ECHO_REPLY`.
    pub const ECHO_REPLY: u8 = 3;
    /// `OFPT_EXPERIMENTER`.
    pub const EXPERIMENTER: u8 = 4;
    /// `OFPT_FEATURES_REQUEST`.
    pub const FEATURES_REQUEST: u8 = 5;
    /// `OFPT_FEATURES_REPLY`.
    pub const FEATURES_REPLY: u8 = 6;
    /// `OFPT_GET_CONFIG_REQUEST`.
    pub const GET_CONFIG_REQUEST: u8 = 7;
    /// `OFPT_GET_CONFIG_REPLY`.
    pub const GET_CONFIG_REPLY: u8 = 8;
    /// `OFPT_SET_CONFIG`.
    pub const SET_CONFIG: u8 = 9;
    /// `OFPT_PACKET_IN`.
    pub const PACKET_IN: u8 = 10;
    /// `OFPT_FLOW_REMOVED`.
    pub const FLOW_REMOVED: u8 = 11;
    /// `OFPT_PORT_STATUS`.
    pub const PORT_STATUS: u8 = 12;
    /// `OFPT_PACKET_OUT`.
    pub const PACKET_OUT: u8 = 13;
    /// `OFPT_FLOW_MOD`.
    pub const FLOW_MOD: u8 = 14;
    /// `OFPT_GROUP_MOD`.
    pub const GROUP_MOD: u8 = 15;
    /// `OFPT_PORT_MOD`.
    pub const PORT_MOD: u8 = 16;
    /// `OFPT_TABLE_MOD`.
    pub const TABLE_MOD: u8 = 17;
    /// `OFPT_MULTIPART_REQUEST`.
    pub const MULTIPART_REQUEST: u8 = 18;
    /// `OFPT_MULTIPART_REPLY`.
    pub const MULTIPART_REPLY: u8 = 19;
    /// `OFPT_BARRIER_REQUEST`.
    pub const BARRIER_REQUEST: u8 = 20;
    /// `OFPT_BARRIER_REPLY`.
    pub const BARRIER_REPLY: u8 = 21;
    /// `OFPT_QUEUE_GET_CONFIG_REQUEST`.
    pub const QUEUE_GET_CONFIG_REQUEST: u8 = 22;
    /// `OFPT_QUEUE_GET_CONFIG_REPLY`.
    pub const QUEUE_GET_CONFIG_REPLY: u8 = 23;
    /// `OFPT_ROLE_REQUEST`.
    pub const ROLE_REQUEST: u8 = 24;
    /// `OFPT_ROLE_REPLY`.
    pub const ROLE_REPLY: u8 = 25;
    /// `OFPT_GET_ASYNC_REQUEST`.
    pub const GET_ASYNC_REQUEST: u8 = 26;
    /// `OFPT_GET_ASYNC_REPLY`.
    pub const GET_ASYNC_REPLY: u8 = 27;
    /// `OFPT_SET_ASYNC`.
    pub const SET_ASYNC: u8 = 28;
    /// `OFPT_METER_MOD`.
    pub const METER_MOD: u8 = 29;
}

/// `ofp_header`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Header {
    /// Wire version (0x04 for OpenFlow 1.3).
    pub version: u8,
    /// Message type (see [`msg_type`]).
    pub kind: u8,
    /// Length of the whole message, header included.
    pub length: u16,
    /// Transaction id.
    pub xid: u32,
}

impl Header {
    /// Reads the header at the start of `buf` (no check beyond its 8 bytes being present).
    pub fn parse(buf: &[u8]) -> Result<Header, DecodeError> {
        if buf.len() < HEADER_LEN {
            return Err(DecodeError::new(
                ErrorCode::BRC_BAD_LEN,
                format!(
                    "an OpenFlow header is 8 bytes, only {} were given",
                    buf.len()
                ),
            ));
        }
        Ok(Header {
            version: buf[0],
            kind: buf[1],
            length: u16::from_be_bytes([buf[2], buf[3]]),
            xid: u32::from_be_bytes([buf[4], buf[5], buf[6], buf[7]]),
        })
    }

    /// Appends the header.
    pub fn write(&self, buf: &mut Vec<u8>) {
        buf.push(self.version);
        buf.push(self.kind);
        buf.extend_from_slice(&self.length.to_be_bytes());
        buf.extend_from_slice(&self.xid.to_be_bytes());
    }
}

/// The length of the message at the start of a byte stream: `Ok(None)` while fewer than 8
/// bytes are there, `Ok(Some(len))` once the header is (the message is complete when
/// `buf.len() >= len`), and an error when the header's length is below 8 (the stream cannot
/// be framed any more; close the connection).
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>, DecodeError> {
    if buf.len() < HEADER_LEN {
        return Ok(None);
    }
    let len = u16::from_be_bytes([buf[2], buf[3]]) as usize;
    if len < HEADER_LEN {
        return Err(DecodeError::new(
            ErrorCode::BRC_BAD_LEN,
            format!("message length {len} is below the 8-byte header; the stream is corrupt"),
        ));
    }
    Ok(Some(len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing() {
        assert_eq!(frame_len(&[4, 0, 0]).unwrap(), None);
        assert_eq!(frame_len(&[4, 0, 0, 16, 0, 0, 0, 1]).unwrap(), Some(16));
        let e = frame_len(&[4, 0, 0, 7, 0, 0, 0, 1]).unwrap_err();
        assert_eq!(e.code, ErrorCode::BRC_BAD_LEN);
    }

    #[test]
    fn header_roundtrip() {
        let h = Header {
            version: 4,
            kind: msg_type::ECHO_REQUEST,
            length: 8,
            xid: 0xdead_beef,
        };
        let mut b = Vec::new();
        h.write(&mut b);
        assert_eq!(b, [4, 2, 0, 8, 0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(Header::parse(&b).unwrap(), h);
        assert!(Header::parse(&b[..7]).is_err());
    }
}
