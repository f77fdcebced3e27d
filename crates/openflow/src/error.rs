//! OpenFlow 1.3 error types and codes (`ofp_error_type` and each type's code enum), the error
//! a decode returns ([`DecodeError`]: what was wrong and which `OFPT_ERROR` to answer with) and
//! the error an encode returns ([`EncodeError`]).

use thiserror::Error;

/// An OpenFlow error type and code, as carried by `OFPT_ERROR`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ErrorCode {
    /// `ofp_error_type` (see [`error_type`]).
    pub kind: u16,
    /// The code within the type.
    pub code: u16,
}

/// `ofp_error_type` values.
pub mod error_type {
    /// Hello protocol failed.
    pub const HELLO_FAILED: u16 = 0;
    /// Request was not understood.
    pub const BAD_REQUEST: u16 = 1;
    /// Error in action description.
    pub const BAD_ACTION: u16 = 2;
    /// Error in instruction list.
    pub const BAD_INSTRUCTION: u16 = 3;
    /// Error in match.
    pub const BAD_MATCH: u16 = 4;
    /// Problem modifying flow entry.
    pub const FLOW_MOD_FAILED: u16 = 5;
    /// Problem modifying group entry.
    pub const GROUP_MOD_FAILED: u16 = 6;
    /// Port mod request failed.
    pub const PORT_MOD_FAILED: u16 = 7;
    /// Table mod request failed.
    pub const TABLE_MOD_FAILED: u16 = 8;
    /// Queue operation failed.
    pub const QUEUE_OP_FAILED: u16 = 9;
    /// Switch config request failed.
    pub const SWITCH_CONFIG_FAILED: u16 = 10;
    /// Controller role request failed.
    pub const ROLE_REQUEST_FAILED: u16 = 11;
    /// Error in meter.
    pub const METER_MOD_FAILED: u16 = 12;
    /// Setting table features failed.
    pub const TABLE_FEATURES_FAILED: u16 = 13;
    /// Experimenter error messages.
    pub const EXPERIMENTER: u16 = 0xffff;
}

/// Each code is written once, as the constant; its specification name is `OFP` and the
/// constant's name (`BRC_BAD_TYPE` is `OFPBRC_BAD_TYPE`).
macro_rules! codes {
    ($( $kind:ident { $( $konst:ident = $code:expr; )* } )*) => {
        impl ErrorCode {
            $($(
                #[doc = concat!("`OFP", stringify!($konst), "`.")]
                pub const $konst: ErrorCode = ErrorCode { kind: error_type::$kind, code: $code };
            )*)*
        }

        /// Every type and code of OpenFlow 1.3 with its specification name.
        pub const ALL_CODES: &[(ErrorCode, &str)] = &[
            $($( (ErrorCode::$konst, concat!("OFP", stringify!($konst))), )*)*
        ];
    };
}

codes! {
    HELLO_FAILED {
        HFC_INCOMPATIBLE = 0;
        HFC_EPERM = 1;
    }
    BAD_REQUEST {
        BRC_BAD_VERSION = 0;
        BRC_BAD_TYPE = 1;
        BRC_BAD_MULTIPART = 2;
        BRC_BAD_EXPERIMENTER = 3;
        BRC_BAD_EXP_TYPE = 4;
        BRC_EPERM = 5;
        BRC_BAD_LEN = 6;
        BRC_BUFFER_EMPTY = 7;
        BRC_BUFFER_UNKNOWN = 8;
        BRC_BAD_TABLE_ID = 9;
        BRC_IS_SLAVE = 10;
        BRC_BAD_PORT = 11;
        BRC_BAD_PACKET = 12;
        BRC_MULTIPART_BUFFER_OVERFLOW = 13;
    }
    BAD_ACTION {
        BAC_BAD_TYPE = 0;
        BAC_BAD_LEN = 1;
        BAC_BAD_EXPERIMENTER = 2;
        BAC_BAD_EXP_TYPE = 3;
        BAC_BAD_OUT_PORT = 4;
        BAC_BAD_ARGUMENT = 5;
        BAC_EPERM = 6;
        BAC_TOO_MANY = 7;
        BAC_BAD_QUEUE = 8;
        BAC_BAD_OUT_GROUP = 9;
        BAC_MATCH_INCONSISTENT = 10;
        BAC_UNSUPPORTED_ORDER = 11;
        BAC_BAD_TAG = 12;
        BAC_BAD_SET_TYPE = 13;
        BAC_BAD_SET_LEN = 14;
        BAC_BAD_SET_ARGUMENT = 15;
    }
    BAD_INSTRUCTION {
        BIC_UNKNOWN_INST = 0;
        BIC_UNSUP_INST = 1;
        BIC_BAD_TABLE_ID = 2;
        BIC_UNSUP_METADATA = 3;
        BIC_UNSUP_METADATA_MASK = 4;
        BIC_BAD_EXPERIMENTER = 5;
        BIC_BAD_EXP_TYPE = 6;
        BIC_BAD_LEN = 7;
        BIC_EPERM = 8;
    }
    BAD_MATCH {
        BMC_BAD_TYPE = 0;
        BMC_BAD_LEN = 1;
        BMC_BAD_TAG = 2;
        BMC_BAD_DL_ADDR_MASK = 3;
        BMC_BAD_NW_ADDR_MASK = 4;
        BMC_BAD_WILDCARDS = 5;
        BMC_BAD_FIELD = 6;
        BMC_BAD_VALUE = 7;
        BMC_BAD_MASK = 8;
        BMC_BAD_PREREQ = 9;
        BMC_DUP_FIELD = 10;
        BMC_EPERM = 11;
    }
    FLOW_MOD_FAILED {
        FMFC_UNKNOWN = 0;
        FMFC_TABLE_FULL = 1;
        FMFC_BAD_TABLE_ID = 2;
        FMFC_OVERLAP = 3;
        FMFC_EPERM = 4;
        FMFC_BAD_TIMEOUT = 5;
        FMFC_BAD_COMMAND = 6;
        FMFC_BAD_FLAGS = 7;
    }
    GROUP_MOD_FAILED {
        GMFC_GROUP_EXISTS = 0;
        GMFC_INVALID_GROUP = 1;
        GMFC_WEIGHT_UNSUPPORTED = 2;
        GMFC_OUT_OF_GROUPS = 3;
        GMFC_OUT_OF_BUCKETS = 4;
        GMFC_CHAINING_UNSUPPORTED = 5;
        GMFC_WATCH_UNSUPPORTED = 6;
        GMFC_LOOP = 7;
        GMFC_UNKNOWN_GROUP = 8;
        GMFC_CHAINED_GROUP = 9;
        GMFC_BAD_TYPE = 10;
        GMFC_BAD_COMMAND = 11;
        GMFC_BAD_BUCKET = 12;
        GMFC_BAD_WATCH = 13;
        GMFC_EPERM = 14;
    }
    PORT_MOD_FAILED {
        PMFC_BAD_PORT = 0;
        PMFC_BAD_HW_ADDR = 1;
        PMFC_BAD_CONFIG = 2;
        PMFC_BAD_ADVERTISE = 3;
        PMFC_EPERM = 4;
    }
    TABLE_MOD_FAILED {
        TMFC_BAD_TABLE = 0;
        TMFC_BAD_CONFIG = 1;
        TMFC_EPERM = 2;
    }
    QUEUE_OP_FAILED {
        QOFC_BAD_PORT = 0;
        QOFC_BAD_QUEUE = 1;
        QOFC_EPERM = 2;
    }
    SWITCH_CONFIG_FAILED {
        SCFC_BAD_FLAGS = 0;
        SCFC_BAD_LEN = 1;
        SCFC_EPERM = 2;
    }
    ROLE_REQUEST_FAILED {
        RRFC_STALE = 0;
        RRFC_UNSUP = 1;
        RRFC_BAD_ROLE = 2;
    }
    METER_MOD_FAILED {
        MMFC_UNKNOWN = 0;
        MMFC_METER_EXISTS = 1;
        MMFC_INVALID_METER = 2;
        MMFC_UNKNOWN_METER = 3;
        MMFC_BAD_COMMAND = 4;
        MMFC_BAD_FLAGS = 5;
        MMFC_BAD_RATE = 6;
        MMFC_BAD_BURST = 7;
        MMFC_BAD_BAND = 8;
        MMFC_BAD_BAND_VALUE = 9;
        MMFC_OUT_OF_METERS = 10;
        MMFC_OUT_OF_BANDS = 11;
    }
    TABLE_FEATURES_FAILED {
        TFFC_BAD_TABLE = 0;
        TFFC_BAD_METADATA = 1;
        TFFC_BAD_TYPE = 2;
        TFFC_BAD_LEN = 3;
        TFFC_BAD_ARGUMENT = 4;
        TFFC_EPERM = 5;
    }
}

impl ErrorCode {
    /// The specification name (`OFPBRC_BAD_TYPE`), or `None` for a pair OpenFlow 1.3 does
    /// not define.
    pub fn name(self) -> Option<&'static str> {
        ALL_CODES.iter().find(|(c, _)| *c == self).map(|(_, n)| *n)
    }
}

impl From<(u16, u16)> for ErrorCode {
    /// From the `(type, code)` pairs the pipeline's errors give (`FlowModError::ofp_error`).
    fn from((kind, code): (u16, u16)) -> Self {
        ErrorCode { kind, code }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "error type {} code {}", self.kind, self.code),
        }
    }
}

/// Why bytes could not be decoded, and the OpenFlow error a switch answers with.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{reason} ({code})")]
pub struct DecodeError {
    /// The `OFPT_ERROR` type and code to reply with.
    pub code: ErrorCode,
    /// What was wrong, for logs.
    pub reason: String,
}

impl DecodeError {
    /// An error with `code` and a reason.
    pub fn new(code: ErrorCode, reason: impl Into<String>) -> Self {
        DecodeError {
            code,
            reason: reason.into(),
        }
    }
}

/// Why a value could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EncodeError {
    /// A structure (or the whole message) is longer than a 16-bit length field allows.
    #[error("{what} would be {len} bytes, over the 65535 an OpenFlow length holds; split it (multipart replies: send several with REPLY_MORE)")]
    TooLong {
        /// The structure.
        what: &'static str,
        /// Its length.
        len: usize,
    },
    /// A match or set-field uses key bits that no OpenFlow 1.3 field (nor a supported Nicira
    /// or ONF extension) can express.
    #[error("{0}; OpenFlow 1.3 cannot express it, so the controller cannot be told about it")]
    Unencodable(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_pairs() {
        assert_eq!(ErrorCode::BMC_BAD_PREREQ, ErrorCode::from((4, 9)));
        assert_eq!(ErrorCode::BMC_BAD_PREREQ.name(), Some("OFPBMC_BAD_PREREQ"));
        assert_eq!(ErrorCode::from((99, 1)).name(), None);
        assert_eq!(ErrorCode::from((99, 1)).to_string(), "error type 99 code 1");
        let e = DecodeError::new(ErrorCode::BRC_BAD_LEN, "too short");
        assert_eq!(e.to_string(), "too short (OFPBRC_BAD_LEN)");
    }

    #[test]
    fn codes_are_unique() {
        for (i, (a, na)) in ALL_CODES.iter().enumerate() {
            for (b, nb) in &ALL_CODES[i + 1..] {
                assert!(a != b && na != nb, "{na} / {nb}");
            }
        }
    }
}
