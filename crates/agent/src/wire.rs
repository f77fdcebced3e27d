//! The few OpenFlow messages the session layer speaks itself, hand-encoded.
//!
//! Every OpenFlow message starts with an 8-byte header: `version: u8`, `type: u8`,
//! `length: u16` (big endian, header included) and `xid: u32` (big endian). The session needs
//! HELLO (with a version-bitmap element), ECHO_REQUEST/ECHO_REPLY, ERROR and the role
//! request/reply pair; everything else passes through to the bridge as raw bytes, for the
//! codec in `crates/openflow` to decode.

/// The OpenFlow version Hayate speaks: 1.3.
pub const OFP_VERSION: u8 = 0x04;
/// Length of the OpenFlow header.
pub const HEADER_LEN: usize = 8;
/// How much of an offending request an ERROR message quotes (the spec asks for at least 64).
pub const ERROR_DATA_LEN: usize = 64;

/// Message types the session layer reads or writes (OpenFlow 1.3 `ofp_type`).
pub mod msg_type {
    /// OFPT_HELLO.
    pub const HELLO: u8 = 0;
    /// OFPT_ERROR.
    pub const ERROR: u8 = 1;
    /// OFPT_ECHO_REQUEST.
    pub const ECHO_REQUEST: u8 = 2;
    /// OFPT_ECHO_REPLY.
    pub const ECHO_REPLY: u8 = 3;
    /// OFPT_FLOW_REMOVED.
    pub const FLOW_REMOVED: u8 = 11;
    /// OFPT_PACKET_IN.
    pub const PACKET_IN: u8 = 10;
    /// OFPT_PORT_STATUS.
    pub const PORT_STATUS: u8 = 12;
    /// OFPT_PACKET_OUT.
    pub const PACKET_OUT: u8 = 13;
    /// OFPT_FLOW_MOD.
    pub const FLOW_MOD: u8 = 14;
    /// OFPT_GROUP_MOD.
    pub const GROUP_MOD: u8 = 15;
    /// OFPT_PORT_MOD.
    pub const PORT_MOD: u8 = 16;
    /// OFPT_TABLE_MOD.
    pub const TABLE_MOD: u8 = 17;
    /// OFPT_ROLE_REQUEST.
    pub const ROLE_REQUEST: u8 = 24;
    /// OFPT_ROLE_REPLY.
    pub const ROLE_REPLY: u8 = 25;
    /// OFPT_SET_ASYNC.
    pub const SET_ASYNC: u8 = 28;
    /// OFPT_METER_MOD.
    pub const METER_MOD: u8 = 29;
}

/// Error types and codes the session layer sends (OpenFlow 1.3 `ofp_error_type` and codes).
pub mod error_code {
    /// OFPET_HELLO_FAILED.
    pub const HELLO_FAILED: u16 = 0;
    /// OFPHFC_INCOMPATIBLE: no common version.
    pub const HELLO_FAILED_INCOMPATIBLE: u16 = 0;
    /// OFPHFC_EPERM: permissions error (used when the first message is not a HELLO).
    pub const HELLO_FAILED_EPERM: u16 = 1;
    /// OFPET_BAD_REQUEST.
    pub const BAD_REQUEST: u16 = 1;
    /// OFPBRC_BAD_VERSION.
    pub const BAD_REQUEST_BAD_VERSION: u16 = 0;
    /// OFPBRC_IS_SLAVE: a slave controller sent a state-changing message.
    pub const BAD_REQUEST_IS_SLAVE: u16 = 10;
    /// OFPBRC_BAD_LEN.
    pub const BAD_REQUEST_BAD_LEN: u16 = 6;
    /// OFPET_ROLE_REQUEST_FAILED.
    pub const ROLE_REQUEST_FAILED: u16 = 11;
    /// OFPRRFC_STALE: stale generation id.
    pub const ROLE_REQUEST_FAILED_STALE: u16 = 0;
    /// OFPRRFC_UNSUP: the controller role change is not supported.
    pub const ROLE_REQUEST_FAILED_UNSUP: u16 = 1;
    /// OFPRRFC_BAD_ROLE: invalid role.
    pub const ROLE_REQUEST_FAILED_BAD_ROLE: u16 = 2;
}

/// HELLO element type OFPHET_VERSIONBITMAP.
const HELLO_ELEM_VERSIONBITMAP: u16 = 1;

/// The fixed OpenFlow header of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Protocol version (0x04 for OpenFlow 1.3).
    pub version: u8,
    /// Message type (`ofp_type`).
    pub msg_type: u8,
    /// Total length in bytes, header included.
    pub length: u16,
    /// Transaction id.
    pub xid: u32,
}

impl Header {
    /// Reads the header at the start of `bytes`; `None` when fewer than 8 bytes are given.
    pub fn parse(bytes: &[u8]) -> Option<Header> {
        let h: &[u8; HEADER_LEN] = bytes.get(..HEADER_LEN)?.try_into().ok()?;
        Some(Header {
            version: h[0],
            msg_type: h[1],
            length: u16::from_be_bytes([h[2], h[3]]),
            xid: u32::from_be_bytes([h[4], h[5], h[6], h[7]]),
        })
    }

    /// Appends the 8 header bytes to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.push(self.version);
        out.push(self.msg_type);
        out.extend_from_slice(&self.length.to_be_bytes());
        out.extend_from_slice(&self.xid.to_be_bytes());
    }
}

/// Starts a message of `msg_type` in `out`; returns the offset to pass to [`finish`].
fn begin(out: &mut Vec<u8>, version: u8, msg_type: u8, xid: u32) -> usize {
    let start = out.len();
    Header {
        version,
        msg_type,
        length: 0,
        xid,
    }
    .write(out);
    start
}

/// Patches the length field of the message that starts at `start`.
fn finish(out: &mut [u8], start: usize) {
    // Every message built here is far below 64 KiB (ERROR data is truncated), so the cast holds.
    let len = (out.len() - start).min(usize::from(u16::MAX)) as u16;
    out[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
}

/// Appends a HELLO for OpenFlow 1.3 with a version bitmap that offers only 1.3.
pub fn hello(out: &mut Vec<u8>, xid: u32) {
    let start = begin(out, OFP_VERSION, msg_type::HELLO, xid);
    out.extend_from_slice(&HELLO_ELEM_VERSIONBITMAP.to_be_bytes());
    out.extend_from_slice(&8u16.to_be_bytes()); // element length: type + length + one bitmap word
    out.extend_from_slice(&(1u32 << OFP_VERSION).to_be_bytes());
    finish(out, start);
}

/// Appends an ECHO_REQUEST with an empty body.
pub fn echo_request(out: &mut Vec<u8>, xid: u32) {
    let start = begin(out, OFP_VERSION, msg_type::ECHO_REQUEST, xid);
    finish(out, start);
}

/// Appends the ECHO_REPLY to `request` (same version, xid and body).
pub fn echo_reply(out: &mut Vec<u8>, request: &[u8]) {
    let Some(h) = Header::parse(request) else {
        return;
    };
    let body_end = usize::from(h.length).clamp(HEADER_LEN, request.len());
    let start = begin(out, h.version, msg_type::ECHO_REPLY, h.xid);
    out.extend_from_slice(&request[HEADER_LEN..body_end]);
    finish(out, start);
}

/// Appends an ERROR message of `err_type`/`code` whose data is `data` truncated to what fits.
pub fn error(out: &mut Vec<u8>, version: u8, xid: u32, err_type: u16, code: u16, data: &[u8]) {
    let start = begin(out, version, msg_type::ERROR, xid);
    out.extend_from_slice(&err_type.to_be_bytes());
    out.extend_from_slice(&code.to_be_bytes());
    out.extend_from_slice(&data[..data.len().min(usize::from(u16::MAX) - 12)]);
    finish(out, start);
}

/// Appends an ERROR that answers `request`: same xid, quoting its first 64 bytes.
pub fn error_for(out: &mut Vec<u8>, request: &[u8], err_type: u16, code: u16) {
    let xid = Header::parse(request).map_or(0, |h| h.xid);
    let quoted = &request[..request.len().min(ERROR_DATA_LEN)];
    error(out, OFP_VERSION, xid, err_type, code, quoted);
}

/// What a peer's HELLO offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HelloOffer {
    /// The version in the HELLO's header (the highest the peer speaks).
    pub header_version: u8,
    /// The first word of the version bitmap element, when the HELLO carries one.
    pub bitmap: Option<u32>,
}

impl HelloOffer {
    /// Reads a HELLO message (header included). Unknown elements are skipped; a malformed
    /// element list ends the scan (the header version still counts, as OpenFlow asks).
    pub fn parse(msg: &[u8]) -> Option<HelloOffer> {
        let h = Header::parse(msg)?;
        if h.msg_type != msg_type::HELLO {
            return None;
        }
        let end = usize::from(h.length).min(msg.len());
        let mut elems = msg.get(HEADER_LEN..end).unwrap_or(&[]);
        let mut bitmap = None;
        while elems.len() >= 4 {
            let ty = u16::from_be_bytes([elems[0], elems[1]]);
            let len = usize::from(u16::from_be_bytes([elems[2], elems[3]]));
            if len < 4 || len > elems.len() {
                break;
            }
            if ty == HELLO_ELEM_VERSIONBITMAP && len >= 8 {
                bitmap = Some(u32::from_be_bytes([elems[4], elems[5], elems[6], elems[7]]));
            }
            // Elements are padded to a multiple of 8 bytes.
            let padded = len.div_ceil(8) * 8;
            elems = elems.get(padded..).unwrap_or(&[]);
        }
        Some(HelloOffer {
            header_version: h.version,
            bitmap,
        })
    }

    /// Whether OpenFlow 1.3 is common to both sides (OpenFlow 1.3 §6.3.1): with a bitmap,
    /// the bit for 0x04 must be set; without one, the peer's header version must be ≥ 0x04.
    pub fn accepts_1_3(&self) -> bool {
        match self.bitmap {
            Some(bits) => bits & (1 << OFP_VERSION) != 0,
            None => self.header_version >= OFP_VERSION,
        }
    }
}

/// A decoded OFPT_ROLE_REQUEST body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoleMessage {
    /// `ofp_controller_role` (0 no change, 1 equal, 2 master, 3 slave).
    pub role: u32,
    /// The generation id.
    pub generation_id: u64,
}

/// Length of ROLE_REQUEST / ROLE_REPLY: header, role, 4 pad bytes, generation id.
pub const ROLE_MSG_LEN: usize = 24;

impl RoleMessage {
    /// Reads a ROLE_REQUEST (header included); `None` when it is not exactly 24 bytes long.
    pub fn parse(msg: &[u8]) -> Option<RoleMessage> {
        let h = Header::parse(msg)?;
        if usize::from(h.length) != ROLE_MSG_LEN || msg.len() != ROLE_MSG_LEN {
            return None;
        }
        let role = u32::from_be_bytes(msg[8..12].try_into().ok()?);
        let generation_id = u64::from_be_bytes(msg[16..24].try_into().ok()?);
        Some(RoleMessage {
            role,
            generation_id,
        })
    }

    /// Appends this as a message of `msg_type` (ROLE_REQUEST or ROLE_REPLY).
    pub fn write(&self, out: &mut Vec<u8>, msg_type: u8, xid: u32) {
        let start = begin(out, OFP_VERSION, msg_type, xid);
        out.extend_from_slice(&self.role.to_be_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&self.generation_id.to_be_bytes());
        finish(out, start);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_golden_bytes() {
        let mut out = vec![];
        hello(&mut out, 0x0102_0304);
        assert_eq!(
            out,
            [
                0x04, 0x00, 0x00, 0x10, 0x01, 0x02, 0x03, 0x04, // header, length 16
                0x00, 0x01, 0x00, 0x08, 0x00, 0x00, 0x00, 0x10, // bitmap element: 1 << 4
            ]
        );
        let offer = HelloOffer::parse(&out).unwrap();
        assert_eq!(
            offer,
            HelloOffer {
                header_version: 4,
                bitmap: Some(0x10)
            }
        );
        assert!(offer.accepts_1_3());
    }

    #[test]
    fn echo_golden_bytes() {
        let mut out = vec![];
        echo_request(&mut out, 7);
        assert_eq!(out, [0x04, 0x02, 0x00, 0x08, 0, 0, 0, 7]);
        let req = [0x04, 0x02, 0x00, 0x0b, 0, 0, 0, 9, b'a', b'b', b'c'];
        out.clear();
        echo_reply(&mut out, &req);
        assert_eq!(out, [0x04, 0x03, 0x00, 0x0b, 0, 0, 0, 9, b'a', b'b', b'c']);
    }

    #[test]
    fn error_golden_bytes() {
        let mut out = vec![];
        error(
            &mut out,
            0x01,
            3,
            error_code::HELLO_FAILED,
            error_code::HELLO_FAILED_INCOMPATIBLE,
            b"v",
        );
        assert_eq!(out, [0x01, 0x01, 0x00, 0x0d, 0, 0, 0, 3, 0, 0, 0, 0, b'v']);
        // An answer to a long request quotes exactly its first 64 bytes and keeps its xid.
        let mut req = vec![0x05, 0x0e, 0x00, 100, 0, 0, 0x12, 0x34];
        req.resize(100, 0xa5);
        out.clear();
        error_for(
            &mut out,
            &req,
            error_code::BAD_REQUEST,
            error_code::BAD_REQUEST_BAD_VERSION,
        );
        assert_eq!(out.len(), 12 + 64);
        assert_eq!(
            &out[..12],
            [0x04, 0x01, 0x00, 76, 0, 0, 0x12, 0x34, 0, 1, 0, 0]
        );
        assert_eq!(&out[12..], &req[..64]);
    }

    #[test]
    fn role_golden_bytes() {
        let mut out = vec![];
        let m = RoleMessage {
            role: 2,
            generation_id: 0x1122_3344_5566_7788,
        };
        m.write(&mut out, msg_type::ROLE_REPLY, 5);
        assert_eq!(
            out,
            [
                0x04, 0x19, 0x00, 0x18, 0, 0, 0, 5, // header
                0, 0, 0, 2, 0, 0, 0, 0, // role, pad
                0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
            ]
        );
        assert_eq!(RoleMessage::parse(&out), Some(m));
        assert_eq!(RoleMessage::parse(&out[..20]), None);
    }

    #[test]
    fn hello_offers() {
        // OpenFlow 1.0 HELLO without elements: incompatible.
        let v10 = [0x01, 0x00, 0x00, 0x08, 0, 0, 0, 1];
        let offer = HelloOffer::parse(&v10).unwrap();
        assert!(!offer.accepts_1_3());
        // 1.5 header without a bitmap: 1.3 is implied.
        let v15 = [0x06, 0x00, 0x00, 0x08, 0, 0, 0, 1];
        assert!(HelloOffer::parse(&v15).unwrap().accepts_1_3());
        // 1.5 header whose bitmap offers 1.0 and 1.5 only: incompatible.
        let mut m = vec![0x06, 0x00, 0x00, 0x10, 0, 0, 0, 1, 0, 1, 0, 8];
        m.extend_from_slice(&((1u32 << 1) | (1 << 6)).to_be_bytes());
        assert!(!HelloOffer::parse(&m).unwrap().accepts_1_3());
        // An unknown element before the bitmap is skipped (element padded to 8).
        let mut m = vec![0x06, 0x00, 0x00, 0x18, 0, 0, 0, 1];
        m.extend_from_slice(&[0, 9, 0, 5, 0xff, 0, 0, 0]);
        m.extend_from_slice(&[0, 1, 0, 8, 0, 0, 0, 0x10]);
        assert_eq!(HelloOffer::parse(&m).unwrap().bitmap, Some(0x10));
        // A broken element list still leaves the header version.
        let m = [0x04, 0x00, 0x00, 0x0c, 0, 0, 0, 1, 0, 1, 0, 0];
        assert!(HelloOffer::parse(&m).unwrap().accepts_1_3());
        // Not a HELLO.
        assert_eq!(HelloOffer::parse(&[0x04, 0x02, 0, 8, 0, 0, 0, 0]), None);
    }
}
