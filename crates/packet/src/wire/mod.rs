//! Zero-copy header views in the smoltcp style: `Header<T: AsRef<[u8]>>` wraps a buffer,
//! `new_checked` validates its length once, and then no accessor can panic. Setters need
//! `T: AsMut<[u8]>`. These are for the slow path and tools (the per-packet parse is
//! [`crate::extract`], which reads fixed offsets directly).

use std::fmt;

/// Why a buffer cannot be viewed as a header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireError {
    /// The buffer is shorter than the header.
    Truncated {
        /// The header kind.
        header: &'static str,
        /// Bytes needed.
        need: usize,
        /// Bytes there.
        have: usize,
    },
    /// A field holds an impossible value.
    Malformed {
        /// The header kind.
        header: &'static str,
        /// What is wrong.
        why: &'static str,
    },
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Truncated { header, need, have } => {
                write!(f, "{header} header truncated: need {need} bytes, have {have}")
            }
            WireError::Malformed { header, why } => write!(f, "malformed {header} header: {why}"),
        }
    }
}

impl std::error::Error for WireError {}

pub(crate) fn check_len(header: &'static str, have: usize, need: usize) -> Result<(), WireError> {
    if have < need {
        Err(WireError::Truncated { header, need, have })
    } else {
        Ok(())
    }
}
