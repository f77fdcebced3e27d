//! Cuts OpenFlow messages out of a byte stream.
//!
//! A stream read may end anywhere: inside a header, inside a body, or after several messages.
//! [`Framer`] keeps the unread tail and hands out whole messages, each exactly as long as its
//! header says. A header that declares fewer than 8 bytes cannot be framed (where would the
//! next message start?), so it is an error that ends the connection; the caller answers it with
//! OFPBRC_BAD_LEN. The buffer never holds more than one maximal message (64 KiB) plus one read.

use openflow::header::HEADER_LEN;
use openflow::Header;

/// A header declared a length shorter than the header itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("OpenFlow message declares length {declared}, less than the 8-byte header; the peer's framing is broken, so the connection is closed")]
pub struct BadLength {
    /// The length the header declared.
    pub declared: u16,
    /// The 8 header bytes, to quote in the ERROR reply.
    pub header: [u8; HEADER_LEN],
}

/// Reassembles messages from arbitrary chunks of a byte stream.
#[derive(Debug, Default)]
pub struct Framer {
    buf: Vec<u8>,
    /// Start of the unread bytes in `buf`.
    start: usize,
    /// Messages handed out so far.
    taken: u64,
}

/// How many bytes [`Framer::read_buffer`] guarantees free for one read.
pub const READ_CHUNK: usize = 16 * 1024;

impl Framer {
    /// An empty framer.
    pub fn new() -> Framer {
        Framer {
            buf: Vec::with_capacity(READ_CHUNK),
            start: 0,
            taken: 0,
        }
    }

    /// Drops consumed bytes and makes room for a read of at least [`READ_CHUNK`] bytes; read
    /// into the spare capacity of the returned vector (e.g. `AsyncReadExt::read_buf`).
    pub fn read_buffer(&mut self) -> &mut Vec<u8> {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.reserve(READ_CHUNK);
        &mut self.buf
    }

    /// Appends bytes received from the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        self.read_buffer().extend_from_slice(bytes);
    }

    /// The next whole message, `Ok(None)` when more bytes are needed.
    pub fn next_message(&mut self) -> Result<Option<&[u8]>, BadLength> {
        let unread = &self.buf[self.start..];
        let Ok(header) = Header::parse(unread) else {
            return Ok(None);
        };
        let len = usize::from(header.length);
        if len < HEADER_LEN {
            let mut bytes = [0; HEADER_LEN];
            bytes.copy_from_slice(&unread[..HEADER_LEN]);
            return Err(BadLength {
                declared: header.length,
                header: bytes,
            });
        }
        if unread.len() < len {
            return Ok(None);
        }
        let begin = self.start;
        self.start += len;
        self.taken += 1;
        Ok(Some(&self.buf[begin..begin + len]))
    }

    /// The type of the next message when it is whole (what [`Framer::next_message`] would hand
    /// out next), without consuming it.
    pub fn peek_type(&self) -> Option<u8> {
        let unread = &self.buf[self.start..];
        let header = Header::parse(unread).ok()?;
        let len = usize::from(header.length);
        (len >= HEADER_LEN && unread.len() >= len).then_some(header.kind)
    }

    /// Whether a message has begun but is not whole yet (bytes wait, and the next message
    /// cannot be handed out).
    pub fn partial(&self) -> bool {
        let unread = &self.buf[self.start..];
        match Header::parse(unread) {
            Err(_) => !unread.is_empty(),
            Ok(h) => unread.len() < usize::from(h.length),
        }
    }

    /// How many messages [`Framer::next_message`] has handed out.
    pub fn taken(&self) -> u64 {
        self.taken
    }

    /// Bytes received but not yet handed out.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.start
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn message(ty: u8, xid: u32, body: &[u8]) -> Vec<u8> {
        let mut m = vec![];
        Header {
            version: 4,
            kind: ty,
            length: (8 + body.len()) as u16,
            xid,
        }
        .write(&mut m);
        m.extend_from_slice(body);
        m
    }

    fn drain(f: &mut Framer) -> Vec<Vec<u8>> {
        let mut out = vec![];
        while let Some(m) = f.next_message().unwrap() {
            out.push(m.to_vec());
        }
        out
    }

    #[test]
    fn one_byte_at_a_time() {
        let m = message(2, 9, b"hello");
        let mut f = Framer::new();
        for (i, b) in m.iter().enumerate() {
            assert!(
                f.next_message().unwrap().is_none(),
                "message early at byte {i}"
            );
            f.push(&[*b]);
        }
        assert_eq!(f.next_message().unwrap(), Some(&m[..]));
        assert_eq!(f.next_message().unwrap(), None);
        assert_eq!(f.pending(), 0);
    }

    #[test]
    fn short_length_is_an_error() {
        let mut f = Framer::new();
        f.push(&[4, 0, 0, 7, 0, 0, 0, 1, 0xff]);
        let err = f.next_message().unwrap_err();
        assert_eq!(err.declared, 7);
        assert_eq!(err.header, [4, 0, 0, 7, 0, 0, 0, 1]);
    }

    #[test]
    fn maximal_message() {
        let m = message(14, 1, &vec![0xa5; 65535 - 8]);
        let mut f = Framer::new();
        f.push(&m[..30000]);
        assert_eq!(f.next_message().unwrap(), None);
        f.push(&m[30000..]);
        assert_eq!(f.next_message().unwrap().map(<[u8]>::len), Some(65535));
    }

    proptest! {
        /// Any sequence of messages, cut into any chunks, comes out as the same messages.
        #[test]
        fn any_split_any_coalescing(
            bodies in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 1..20),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..40),
        ) {
            let msgs: Vec<Vec<u8>> =
                bodies.iter().enumerate().map(|(i, b)| message(i as u8, i as u32, b)).collect();
            let stream: Vec<u8> = msgs.concat();
            let mut points: Vec<usize> = cuts.iter().map(|c| c.index(stream.len() + 1)).collect();
            points.push(0);
            points.push(stream.len());
            points.sort_unstable();
            let mut f = Framer::new();
            let mut got = vec![];
            for w in points.windows(2) {
                f.push(&stream[w[0]..w[1]]);
                got.extend(drain(&mut f));
            }
            prop_assert_eq!(got, msgs);
            prop_assert_eq!(f.pending(), 0);
        }
    }
}
