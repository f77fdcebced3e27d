//! Byte-level reading and writing: a bounds-checked reader whose every short read becomes a
//! [`DecodeError`] with the OpenFlow error code its caller chose, and big-endian writers on
//! `Vec<u8>`.

use crate::error::{DecodeError, ErrorCode};

/// A cursor over a byte slice. Every read is bounds-checked; a read past the end returns a
/// [`DecodeError`] carrying `code` (the error a switch must send for this structure).
#[derive(Debug, Clone)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    code: ErrorCode,
    what: &'static str,
}

impl<'a> Reader<'a> {
    /// A reader over `buf`; short reads fail with `code`, naming `what`.
    pub fn new(buf: &'a [u8], code: ErrorCode, what: &'static str) -> Self {
        Reader {
            buf,
            pos: 0,
            code,
            what,
        }
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Whether every byte was read.
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// An error with this reader's code.
    pub fn error(&self, reason: impl Into<String>) -> DecodeError {
        DecodeError::new(self.code, reason)
    }

    /// The next `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err(self.error(format!(
                "{} is truncated: {} bytes needed at offset {}, {} left",
                self.what,
                n,
                self.pos,
                self.remaining()
            )));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// The next `N` bytes as an array.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.bytes(N)?);
        Ok(a)
    }

    /// Skips `n` bytes (padding).
    pub fn skip(&mut self, n: usize) -> Result<(), DecodeError> {
        self.bytes(n).map(|_| ())
    }

    /// Everything not yet read.
    pub fn rest(&mut self) -> &'a [u8] {
        let s = &self.buf[self.pos..];
        self.pos = self.buf.len();
        s
    }

    /// A sub-reader over the next `n` bytes (with a new code and name for its short reads).
    pub fn sub(
        &mut self,
        n: usize,
        code: ErrorCode,
        what: &'static str,
    ) -> Result<Reader<'a>, DecodeError> {
        let b = self.bytes(n)?;
        Ok(Reader::new(b, code, what))
    }

    /// Reads a `u8`.
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }

    /// Reads a big-endian `u16`.
    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    /// Reads a big-endian `u32`.
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    /// Reads a big-endian `u64`.
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    /// Reads a NUL-padded fixed-size string of `n` bytes: up to the first NUL within the
    /// first `n - 1` bytes (the last byte is the terminator OpenFlow requires, ignored if it
    /// is not NUL); invalid UTF-8 is replaced.
    pub fn string(&mut self, n: usize) -> Result<String, DecodeError> {
        let b = self.bytes(n)?;
        let b = &b[..n.saturating_sub(1)];
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        Ok(String::from_utf8_lossy(&b[..end]).into_owned())
    }
}

/// Big-endian writes on a byte vector.
pub(crate) trait Put {
    /// Appends a `u8`.
    fn put_u8(&mut self, v: u8);
    /// Appends a big-endian `u16`.
    fn put_u16(&mut self, v: u16);
    /// Appends a big-endian `u32`.
    fn put_u32(&mut self, v: u32);
    /// Appends a big-endian `u64`.
    fn put_u64(&mut self, v: u64);
    /// Appends `n` zero bytes.
    fn put_zeros(&mut self, n: usize);
    /// Overwrites the big-endian `u16` at `at`.
    fn patch_u16(&mut self, at: usize, v: u16);
    /// Appends `s` NUL-padded to `n` bytes, cut to `n - 1` bytes (at a character boundary)
    /// so a NUL always ends it.
    fn put_string(&mut self, s: &str, n: usize);
    /// Appends zeros up to the next multiple of 8 counted from `start`.
    fn pad_to_8(&mut self, start: usize);
}

impl Put for Vec<u8> {
    fn put_u8(&mut self, v: u8) {
        self.push(v);
    }
    fn put_u16(&mut self, v: u16) {
        self.extend_from_slice(&v.to_be_bytes());
    }
    fn put_u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_be_bytes());
    }
    fn put_u64(&mut self, v: u64) {
        self.extend_from_slice(&v.to_be_bytes());
    }
    fn put_zeros(&mut self, n: usize) {
        self.resize(self.len() + n, 0);
    }
    fn patch_u16(&mut self, at: usize, v: u16) {
        self[at..at + 2].copy_from_slice(&v.to_be_bytes());
    }
    fn put_string(&mut self, s: &str, n: usize) {
        let mut end = s.len().min(n.saturating_sub(1));
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.extend_from_slice(&s.as_bytes()[..end]);
        self.put_zeros(n - end);
    }
    fn pad_to_8(&mut self, start: usize) {
        let len = self.len() - start;
        self.put_zeros((8 - len % 8) % 8);
    }
}

/// Patches the `u16` length at `at` with the bytes written since `start`, or fails when they
/// do not fit in 16 bits.
pub(crate) fn patch_len(
    buf: &mut Vec<u8>,
    at: usize,
    start: usize,
    what: &'static str,
) -> Result<(), crate::error::EncodeError> {
    let len = buf.len() - start;
    let len16 = u16::try_from(len).map_err(|_| crate::error::EncodeError::TooLong { what, len })?;
    buf.patch_u16(at, len16);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_reads_carry_the_callers_code() {
        let mut r = Reader::new(&[1, 2, 3], ErrorCode::BAC_BAD_LEN, "action");
        assert_eq!(r.u16().unwrap(), 0x0102);
        let e = r.u16().unwrap_err();
        assert_eq!(e.code, ErrorCode::BAC_BAD_LEN);
        assert!(e.reason.contains("action is truncated"), "{}", e.reason);
        assert_eq!(r.u8().unwrap(), 3);
        assert!(r.is_empty());
    }

    #[test]
    fn strings_are_nul_padded_and_cut() {
        let mut v = Vec::new();
        v.put_string("héllo", 4);
        assert_eq!(v, b"h\xc3\xa9\0");
        let mut r = Reader::new(&v, ErrorCode::BRC_BAD_LEN, "x");
        assert_eq!(r.string(4).unwrap(), "hé");
        let mut v = Vec::new();
        v.put_u8(1);
        v.pad_to_8(0);
        assert_eq!(v.len(), 8);
        v.pad_to_8(0);
        assert_eq!(v.len(), 8);
    }
}
