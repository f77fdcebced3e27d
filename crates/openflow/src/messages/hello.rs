//! `OFPT_HELLO` with its version-bitmap element, and version negotiation.

use crate::error::{DecodeError, ErrorCode};
use crate::header::OFP_VERSION;
use crate::messages::error_msg::ErrorMsg;
use crate::wire::{Put, Reader};

/// `OFPHET_VERSIONBITMAP`.
pub const HELLO_ELEM_VERSIONBITMAP: u16 = 1;

/// A hello: the sender's highest version (the header's) and, optionally, the bitmap of every
/// version it speaks (bit `v` of word `v / 32`). Unknown hello elements are skipped on decode,
/// as the specification asks.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Hello {
    /// The version in the message header.
    pub version: u8,
    /// The version-bitmap element's words, when present.
    pub versions: Option<Vec<u32>>,
}

impl Default for Hello {
    /// The switch's hello: version 1.3 and a bitmap saying 1.3 only.
    fn default() -> Self {
        Hello {
            version: OFP_VERSION,
            versions: Some(vec![1 << OFP_VERSION]),
        }
    }
}

impl Hello {
    /// Whether the hello says the sender speaks `version`.
    pub fn supports(&self, version: u8) -> bool {
        match &self.versions {
            Some(words) => words
                .get(version as usize / 32)
                .is_some_and(|w| w & (1 << (version % 32)) != 0),
            None => self.version >= version,
        }
    }

    pub(crate) fn read(version: u8, r: &mut Reader<'_>) -> Result<Hello, DecodeError> {
        let mut versions = None;
        while r.remaining() >= 4 {
            let kind = r.u16()?;
            let len = r.u16()? as usize;
            if len < 4 {
                return Err(r.error(format!("hello element length {len} is below 4")));
            }
            let mut body = r.sub(len - 4, ErrorCode::BRC_BAD_LEN, "hello element")?;
            r.skip(((8 - len % 8) % 8).min(r.remaining()))?;
            if kind == HELLO_ELEM_VERSIONBITMAP && versions.is_none() {
                if body.remaining() % 4 != 0 {
                    return Err(
                        body.error("hello version bitmap is not a whole number of 32-bit words")
                    );
                }
                let mut words = Vec::new();
                while !body.is_empty() {
                    words.push(body.u32()?);
                }
                versions = Some(words);
            }
        }
        Ok(Hello { version, versions })
    }

    pub(crate) fn write(&self, buf: &mut Vec<u8>) {
        if let Some(words) = &self.versions {
            let start = buf.len();
            buf.put_u16(HELLO_ELEM_VERSIONBITMAP);
            buf.put_u16(4 + 4 * words.len() as u16);
            for w in words {
                buf.put_u32(*w);
            }
            buf.pad_to_8(start);
        }
    }
}

/// Picks the version to speak with a peer that sent `peer`: OpenFlow 1.3 when the peer
/// speaks it, else the `OFPET_HELLO_FAILED / OFPHFC_INCOMPATIBLE` error to send before closing.
pub fn negotiate(peer: &Hello) -> Result<u8, ErrorMsg> {
    let ok = match &peer.versions {
        Some(_) => peer.supports(OFP_VERSION),
        None => peer.version >= OFP_VERSION,
    };
    if ok {
        Ok(OFP_VERSION)
    } else {
        Err(ErrorMsg {
            code: ErrorCode::HFC_INCOMPATIBLE,
            experimenter: 0,
            data: format!(
                "this switch speaks OpenFlow 1.3 (0x04) only; the peer offered version {:#04x}{}",
                peer.version,
                if peer.versions.is_some() {
                    " and a bitmap without 0x04"
                } else {
                    ""
                }
            )
            .into_bytes(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitmap_golden_and_negotiation() {
        let mut b = Vec::new();
        Hello::default().write(&mut b);
        assert_eq!(b, [0, 1, 0, 8, 0, 0, 0, 0x10]);
        let mut r = Reader::new(&b, ErrorCode::BRC_BAD_LEN, "t");
        let h = Hello::read(4, &mut r).unwrap();
        assert_eq!(h, Hello::default());
        assert_eq!(negotiate(&h), Ok(4));
        // A 1.5 peer that also speaks 1.3; a 1.0-only peer; a 1.5 peer without a bitmap.
        let both = Hello {
            version: 6,
            versions: Some(vec![(1 << 6) | (1 << 4)]),
        };
        assert_eq!(negotiate(&both), Ok(4));
        let old = Hello {
            version: 1,
            versions: None,
        };
        assert_eq!(
            negotiate(&old).unwrap_err().code,
            ErrorCode::HFC_INCOMPATIBLE
        );
        let only15 = Hello {
            version: 6,
            versions: Some(vec![1 << 6]),
        };
        assert!(negotiate(&only15).is_err());
        assert_eq!(
            negotiate(&Hello {
                version: 6,
                versions: None
            }),
            Ok(4)
        );
    }

    #[test]
    fn unknown_elements_are_skipped() {
        let b = [0, 9, 0, 5, 1, 0, 0, 0, 0, 1, 0, 8, 0, 0, 0, 0x12];
        let mut r = Reader::new(&b, ErrorCode::BRC_BAD_LEN, "t");
        let h = Hello::read(4, &mut r).unwrap();
        assert_eq!(h.versions, Some(vec![0x12]));
        assert!(h.supports(4) && h.supports(1) && !h.supports(2));
    }
}
