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

macro_rules! codes {
    ($( $kind:ident { $( $konst:ident = $code:expr, $name:expr; )* } )*) => {
        impl ErrorCode {
            $($(
                #[doc = concat!("`", $name, "`.")]
                pub const $konst: ErrorCode = ErrorCode { kind: error_type::$kind, code: $code };
            )*)*
        }

        /// Every type and code of OpenFlow 1.3 with its specification name.
        pub const ALL_CODES: &[(ErrorCode, &str)] = &[
            $($( (ErrorCode::$konst, $name), )*)*
        ];
    };
}

codes! {
    HELLO_FAILED {
        HFC_INCOMPATIBLE = 0, "OFPHFC_INCOMPATIBLE";
        HFC_EPERM = 1, "OFPHFC_EPERM";
    }
    BAD_REQUEST {
        BRC_BAD_VERSION = 0, "OFPBRC_BAD_VERSION";
        BRC_BAD_TYPE = 1, "OFPBRC_BAD_TYPE";
        BRC_BAD_MULTIPART = 2, "OFPBRC_BAD_MULTIPART";
        BRC_BAD_EXPERIMENTER = 3, "OFPBRC_BAD_EXPERIMENTER";
        BRC_BAD_EXP_TYPE = 4, "OFPBRC_BAD_EXP_TYPE";
        BRC_EPERM = 5, "OFPBRC_EPERM";
        BRC_BAD_LEN = 6, "OFPBRC_BAD_LEN";
        BRC_BUFFER_EMPTY = 7, "OFPBRC_BUFFER_EMPTY";
        BRC_BUFFER_UNKNOWN = 8, "OFPBRC_BUFFER_UNKNOWN";
        BRC_BAD_TABLE_ID = 9, "OFPBRC_BAD_TABLE_ID";
        BRC_IS_SLAVE = 10, "OFPBRC_IS_SLAVE";
        BRC_BAD_PORT = 11, "OFPBRC_BAD_PORT";
        BRC_BAD_PACKET = 12, "OFPBRC_BAD_PACKET";
        BRC_MULTIPART_BUFFER_OVERFLOW = 13, "OFPBRC_MULTIPART_BUFFER_OVERFLOW";
    }
    BAD_ACTION {
        BAC_BAD_TYPE = 0, "OFPBAC_BAD_TYPE";
        BAC_BAD_LEN = 1, "OFPBAC_BAD_LEN";
        BAC_BAD_EXPERIMENTER = 2, "OFPBAC_BAD_EXPERIMENTER";
        BAC_BAD_EXP_TYPE = 3, "OFPBAC_BAD_EXP_TYPE";
        BAC_BAD_OUT_PORT = 4, "OFPBAC_BAD_OUT_PORT";
        BAC_BAD_ARGUMENT = 5, "OFPBAC_BAD_ARGUMENT";
        BAC_EPERM = 6, "OFPBAC_EPERM";
        BAC_TOO_MANY = 7, "OFPBAC_TOO_MANY";
        BAC_BAD_QUEUE = 8, "OFPBAC_BAD_QUEUE";
        BAC_BAD_OUT_GROUP = 9, "OFPBAC_BAD_OUT_GROUP";
        BAC_MATCH_INCONSISTENT = 10, "OFPBAC_MATCH_INCONSISTENT";
        BAC_UNSUPPORTED_ORDER = 11, "OFPBAC_UNSUPPORTED_ORDER";
        BAC_BAD_TAG = 12, "OFPBAC_BAD_TAG";
        BAC_BAD_SET_TYPE = 13, "OFPBAC_BAD_SET_TYPE";
        BAC_BAD_SET_LEN = 14, "OFPBAC_BAD_SET_LEN";
        BAC_BAD_SET_ARGUMENT = 15, "OFPBAC_BAD_SET_ARGUMENT";
    }
    BAD_INSTRUCTION {
        BIC_UNKNOWN_INST = 0, "OFPBIC_UNKNOWN_INST";
        BIC_UNSUP_INST = 1, "OFPBIC_UNSUP_INST";
        BIC_BAD_TABLE_ID = 2, "OFPBIC_BAD_TABLE_ID";
        BIC_UNSUP_METADATA = 3, "OFPBIC_UNSUP_METADATA";
        BIC_UNSUP_METADATA_MASK = 4, "OFPBIC_UNSUP_METADATA_MASK";
        BIC_BAD_EXPERIMENTER = 5, "OFPBIC_BAD_EXPERIMENTER";
        BIC_BAD_EXP_TYPE = 6, "OFPBIC_BAD_EXP_TYPE";
        BIC_BAD_LEN = 7, "OFPBIC_BAD_LEN";
        BIC_EPERM = 8, "OFPBIC_EPERM";
    }
    BAD_MATCH {
        BMC_BAD_TYPE = 0, "OFPBMC_BAD_TYPE";
        BMC_BAD_LEN = 1, "OFPBMC_BAD_LEN";
        BMC_BAD_TAG = 2, "OFPBMC_BAD_TAG";
        BMC_BAD_DL_ADDR_MASK = 3, "OFPBMC_BAD_DL_ADDR_MASK";
        BMC_BAD_NW_ADDR_MASK = 4, "OFPBMC_BAD_NW_ADDR_MASK";
        BMC_BAD_WILDCARDS = 5, "OFPBMC_BAD_WILDCARDS";
        BMC_BAD_FIELD = 6, "OFPBMC_BAD_FIELD";
        BMC_BAD_VALUE = 7, "OFPBMC_BAD_VALUE";
        BMC_BAD_MASK = 8, "OFPBMC_BAD_MASK";
        BMC_BAD_PREREQ = 9, "OFPBMC_BAD_PREREQ";
        BMC_DUP_FIELD = 10, "OFPBMC_DUP_FIELD";
        BMC_EPERM = 11, "OFPBMC_EPERM";
    }
    FLOW_MOD_FAILED {
        FMFC_UNKNOWN = 0, "OFPFMFC_UNKNOWN";
        FMFC_TABLE_FULL = 1, "OFPFMFC_TABLE_FULL";
        FMFC_BAD_TABLE_ID = 2, "OFPFMFC_BAD_TABLE_ID";
        FMFC_OVERLAP = 3, "OFPFMFC_OVERLAP";
        FMFC_EPERM = 4, "OFPFMFC_EPERM";
        FMFC_BAD_TIMEOUT = 5, "OFPFMFC_BAD_TIMEOUT";
        FMFC_BAD_COMMAND = 6, "OFPFMFC_BAD_COMMAND";
        FMFC_BAD_FLAGS = 7, "OFPFMFC_BAD_FLAGS";
    }
    GROUP_MOD_FAILED {
        GMFC_GROUP_EXISTS = 0, "OFPGMFC_GROUP_EXISTS";
        GMFC_INVALID_GROUP = 1, "OFPGMFC_INVALID_GROUP";
        GMFC_WEIGHT_UNSUPPORTED = 2, "OFPGMFC_WEIGHT_UNSUPPORTED";
        GMFC_OUT_OF_GROUPS = 3, "OFPGMFC_OUT_OF_GROUPS";
        GMFC_OUT_OF_BUCKETS = 4, "OFPGMFC_OUT_OF_BUCKETS";
        GMFC_CHAINING_UNSUPPORTED = 5, "OFPGMFC_CHAINING_UNSUPPORTED";
        GMFC_WATCH_UNSUPPORTED = 6, "OFPGMFC_WATCH_UNSUPPORTED";
        GMFC_LOOP = 7, "OFPGMFC_LOOP";
        GMFC_UNKNOWN_GROUP = 8, "OFPGMFC_UNKNOWN_GROUP";
        GMFC_CHAINED_GROUP = 9, "OFPGMFC_CHAINED_GROUP";
        GMFC_BAD_TYPE = 10, "OFPGMFC_BAD_TYPE";
        GMFC_BAD_COMMAND = 11, "OFPGMFC_BAD_COMMAND";
        GMFC_BAD_BUCKET = 12, "OFPGMFC_BAD_BUCKET";
        GMFC_BAD_WATCH = 13, "OFPGMFC_BAD_WATCH";
        GMFC_EPERM = 14, "OFPGMFC_EPERM";
    }
    PORT_MOD_FAILED {
        PMFC_BAD_PORT = 0, "OFPPMFC_BAD_PORT";
        PMFC_BAD_HW_ADDR = 1, "OFPPMFC_BAD_HW_ADDR";
        PMFC_BAD_CONFIG = 2, "OFPPMFC_BAD_CONFIG";
        PMFC_BAD_ADVERTISE = 3, "OFPPMFC_BAD_ADVERTISE";
        PMFC_EPERM = 4, "OFPPMFC_EPERM";
    }
    TABLE_MOD_FAILED {
        TMFC_BAD_TABLE = 0, "OFPTMFC_BAD_TABLE";
        TMFC_BAD_CONFIG = 1, "OFPTMFC_BAD_CONFIG";
        TMFC_EPERM = 2, "OFPTMFC_EPERM";
    }
    QUEUE_OP_FAILED {
        QOFC_BAD_PORT = 0, "OFPQOFC_BAD_PORT";
        QOFC_BAD_QUEUE = 1, "OFPQOFC_BAD_QUEUE";
        QOFC_EPERM = 2, "OFPQOFC_EPERM";
    }
    SWITCH_CONFIG_FAILED {
        SCFC_BAD_FLAGS = 0, "OFPSCFC_BAD_FLAGS";
        SCFC_BAD_LEN = 1, "OFPSCFC_BAD_LEN";
        SCFC_EPERM = 2, "OFPSCFC_EPERM";
    }
    ROLE_REQUEST_FAILED {
        RRFC_STALE = 0, "OFPRRFC_STALE";
        RRFC_UNSUP = 1, "OFPRRFC_UNSUP";
        RRFC_BAD_ROLE = 2, "OFPRRFC_BAD_ROLE";
    }
    METER_MOD_FAILED {
        MMFC_UNKNOWN = 0, "OFPMMFC_UNKNOWN";
        MMFC_METER_EXISTS = 1, "OFPMMFC_METER_EXISTS";
        MMFC_INVALID_METER = 2, "OFPMMFC_INVALID_METER";
        MMFC_UNKNOWN_METER = 3, "OFPMMFC_UNKNOWN_METER";
        MMFC_BAD_COMMAND = 4, "OFPMMFC_BAD_COMMAND";
        MMFC_BAD_FLAGS = 5, "OFPMMFC_BAD_FLAGS";
        MMFC_BAD_RATE = 6, "OFPMMFC_BAD_RATE";
        MMFC_BAD_BURST = 7, "OFPMMFC_BAD_BURST";
        MMFC_BAD_BAND = 8, "OFPMMFC_BAD_BAND";
        MMFC_BAD_BAND_VALUE = 9, "OFPMMFC_BAD_BAND_VALUE";
        MMFC_OUT_OF_METERS = 10, "OFPMMFC_OUT_OF_METERS";
        MMFC_OUT_OF_BANDS = 11, "OFPMMFC_OUT_OF_BANDS";
    }
    TABLE_FEATURES_FAILED {
        TFFC_BAD_TABLE = 0, "OFPTFFC_BAD_TABLE";
        TFFC_BAD_METADATA = 1, "OFPTFFC_BAD_METADATA";
        TFFC_BAD_TYPE = 2, "OFPTFFC_BAD_TYPE";
        TFFC_BAD_LEN = 3, "OFPTFFC_BAD_LEN";
        TFFC_BAD_ARGUMENT = 4, "OFPTFFC_BAD_ARGUMENT";
        TFFC_EPERM = 5, "OFPTFFC_EPERM";
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
