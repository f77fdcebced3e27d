//! The `OFPT_ERROR` type and code for each refusal of the pipeline (a flow-mod, group-mod or
//! meter-mod the tables would not take), per the OpenFlow 1.3 specification.
//!
//! `pipeline`'s own `ofp_error()` gives the same pairs (the test below holds them together).

use pipeline::{FlowModError, GroupModError, MeterModError};

use crate::error::ErrorCode;

impl From<&FlowModError> for ErrorCode {
    fn from(e: &FlowModError) -> Self {
        use FlowModError::*;
        match e {
            BadTableId(_) => ErrorCode::FMFC_BAD_TABLE_ID,
            GotoBackwards { .. } | GotoBadTable(_) => ErrorCode::BIC_BAD_TABLE_ID,
            // OpenFlow 1.3 has no "duplicate instruction" code (1.4 added OFPBIC_DUP_INST).
            DuplicateInstruction(_) => ErrorCode::BIC_UNSUP_INST,
            Overlap { .. } => ErrorCode::FMFC_OVERLAP,
            TableFull { .. } | AllTablesFull { .. } => ErrorCode::FMFC_TABLE_FULL,
            UnknownGroup(_) => ErrorCode::BAC_BAD_OUT_GROUP,
            UnknownMeter(_) => ErrorCode::MMFC_UNKNOWN_METER,
            BadPrerequisite { .. } => ErrorCode::BMC_BAD_PREREQ,
            BadWildcards(_) => ErrorCode::BMC_BAD_WILDCARDS,
            SetFieldInconsistent { .. } | ActionInconsistent { .. } => {
                ErrorCode::BAC_MATCH_INCONSISTENT
            }
            FieldNotWritable(_) => ErrorCode::BAC_BAD_SET_TYPE,
            BadSetFieldValue { .. } => ErrorCode::BAC_BAD_SET_ARGUMENT,
            BadOutPort(_) => ErrorCode::BAC_BAD_OUT_PORT,
            BadPushVlanEthertype(_) | BadPushMplsEthertype(_) => ErrorCode::BAC_BAD_ARGUMENT,
        }
    }
}

impl From<&GroupModError> for ErrorCode {
    fn from(e: &GroupModError) -> Self {
        use GroupModError::*;
        match e {
            GroupExists(_) => ErrorCode::GMFC_GROUP_EXISTS,
            UnknownGroup(_) => ErrorCode::GMFC_UNKNOWN_GROUP,
            InvalidGroupId(_) => ErrorCode::GMFC_INVALID_GROUP,
            Loop(_) => ErrorCode::GMFC_LOOP,
            ChainedGroup { .. } => ErrorCode::GMFC_CHAINED_GROUP,
            IndirectBuckets(_) => ErrorCode::GMFC_BAD_BUCKET,
            UnwatchedBucket(_) => ErrorCode::GMFC_BAD_WATCH,
            BadAction { error, .. } => ErrorCode::from(error),
        }
    }
}

impl From<&MeterModError> for ErrorCode {
    fn from(e: &MeterModError) -> Self {
        use MeterModError::*;
        match e {
            MeterExists(_) => ErrorCode::MMFC_METER_EXISTS,
            UnknownMeter(_) => ErrorCode::MMFC_UNKNOWN_METER,
            InvalidMeterId(_) => ErrorCode::MMFC_INVALID_METER,
            BadRate(_) => ErrorCode::MMFC_BAD_RATE,
            BadBand(_) => ErrorCode::MMFC_BAD_BAND_VALUE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// pipeline's own `ofp_error()` pairs agree with these for every refusal.
    #[test]
    fn pipeline_pairs_agree_with_the_specification() {
        let flow = [
            FlowModError::BadTableId(255),
            FlowModError::GotoBackwards { from: 2, to: 1 },
            FlowModError::DuplicateInstruction("x"),
            FlowModError::Overlap {
                table: 0,
                priority: 1,
            },
            FlowModError::UnknownGroup(1),
            FlowModError::UnknownMeter(1),
            FlowModError::BadWildcards("x"),
            FlowModError::SetFieldInconsistent {
                field: "x",
                needs: "y",
            },
            FlowModError::FieldNotWritable("x"),
            FlowModError::BadOutPort(0),
            FlowModError::BadPushVlanEthertype(1),
            FlowModError::BadPushMplsEthertype(1),
            FlowModError::ActionInconsistent {
                action: "x",
                needs: "y",
            },
        ];
        for e in &flow {
            assert_eq!(ErrorCode::from(e), ErrorCode::from(e.ofp_error()), "{e:?}");
        }
        for e in [
            GroupModError::GroupExists(1),
            GroupModError::UnknownGroup(1),
            GroupModError::Loop(1),
            GroupModError::ChainedGroup { group: 1, by: 2 },
            GroupModError::UnwatchedBucket(1),
            GroupModError::IndirectBuckets(1),
        ] {
            assert_eq!(ErrorCode::from(&e), ErrorCode::from(e.ofp_error()), "{e:?}");
        }
        for e in [
            MeterModError::MeterExists(1),
            MeterModError::UnknownMeter(1),
            MeterModError::BadBand(1),
        ] {
            assert_eq!(ErrorCode::from(&e), ErrorCode::from(e.ofp_error()), "{e:?}");
        }
    }
}
