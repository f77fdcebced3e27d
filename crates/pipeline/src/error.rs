//! Why a flow-mod, group-mod or meter-mod was refused. One variant per OpenFlow 1.3 error
//! cause, so the agent can map each to its `OFPT_ERROR` type and code
//! ([`FlowModError::ofp_error`] and friends); the `Display` text names the problem and the fix.

use thiserror::Error;

/// A refused flow-mod.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FlowModError {
    /// The table id is above 254 (or 255 = all tables in an add/modify).
    #[error("table {0} does not exist; tables are numbered 0 to 254 (255 means all tables only in a delete)")]
    BadTableId(u8),
    /// A goto-table does not go forward.
    #[error("goto_table:{to} in table {from} goes backwards; a flow may only go to a later table")]
    GotoBackwards {
        /// The flow's table.
        from: u8,
        /// The goto target.
        to: u8,
    },
    /// A goto-table names a table above 254.
    #[error("goto_table:{0} names a table that does not exist; the last table is 254")]
    GotoBadTable(u8),
    /// The same instruction type appears twice.
    #[error("the instruction {0} appears twice; give each instruction type at most once")]
    DuplicateInstruction(&'static str),
    /// An add with check_overlap overlaps an entry of the same priority.
    #[error("the flow overlaps an existing flow of priority {priority} in table {table} and check_overlap is set; change the priority or the match")]
    Overlap {
        /// Table.
        table: u8,
        /// Priority.
        priority: u16,
    },
    /// All tables together already hold their maximum number of entries.
    #[error("all tables together hold their limit of {capacity} flows; delete flows or raise the bridge's flow_limit_total")]
    AllTablesFull {
        /// The limit.
        capacity: usize,
    },
    /// The table already holds its maximum number of entries.
    #[error(
        "table {table} is full ({capacity} flows); delete flows or raise the bridge's flow_limit"
    )]
    TableFull {
        /// Table.
        table: u8,
        /// Its capacity.
        capacity: usize,
    },
    /// A group action names a group that does not exist.
    #[error("group {0} does not exist; add the group before the flows that use it")]
    UnknownGroup(u32),
    /// A meter instruction names a meter that does not exist.
    #[error("meter {0} does not exist; add the meter before the flows that use it")]
    UnknownMeter(u32),
    /// A match field is used without the fields it depends on.
    #[error("match on {field} needs {needs}; add that to the match")]
    BadPrerequisite {
        /// The field.
        field: &'static str,
        /// What the match must also contain.
        needs: &'static str,
    },
    /// A match value has bits set where its mask is 0.
    #[error("match on {0} has value bits outside its mask; clear them or widen the mask")]
    BadWildcards(&'static str),
    /// A set-field on a field whose prerequisites the match does not guarantee.
    #[error("set_field of {field} needs {needs} in the match (or a push_vlan before it); add it")]
    SetFieldInconsistent {
        /// The field.
        field: &'static str,
        /// What the match must contain.
        needs: &'static str,
    },
    /// A set-field on a field OpenFlow does not allow writing.
    #[error("{0} cannot be written by set_field; use write_metadata for metadata, and match instead for the rest")]
    FieldNotWritable(&'static str),
    /// A set-field value wider than the field.
    #[error("set_field value {value:#x} does not fit in {field} ({bits} bits)")]
    BadSetFieldValue {
        /// The field.
        field: &'static str,
        /// The value.
        value: u128,
        /// The field width.
        bits: u8,
    },
    /// An output to a port number that cannot be an output.
    #[error("output to port {0:#x} is not allowed; use a port number 1..=0xffffff00 or IN_PORT, FLOOD, ALL, CONTROLLER, LOCAL, NORMAL")]
    BadOutPort(u32),
    /// push_vlan with an ethertype other than 0x8100 / 0x88a8.
    #[error("push_vlan ethertype {0:#06x} is not a VLAN ethertype; use 0x8100 or 0x88a8")]
    BadPushVlanEthertype(u16),
    /// push_mpls with an ethertype other than 0x8847 / 0x8848.
    #[error("push_mpls ethertype {0:#06x} is not an MPLS ethertype; use 0x8847 or 0x8848")]
    BadPushMplsEthertype(u16),
    /// An action that needs a header the match (and the actions before it) do not guarantee.
    #[error("{action} needs {needs} in the match (or a push before it); add it")]
    ActionInconsistent {
        /// The action.
        action: &'static str,
        /// What the match must contain.
        needs: &'static str,
    },
}

impl FlowModError {
    /// The OpenFlow 1.3 `(type, code)` of the error message to send.
    pub fn ofp_error(&self) -> (u16, u16) {
        use FlowModError::*;
        // Types: 2 BAD_ACTION, 3 BAD_INSTRUCTION, 4 BAD_MATCH, 5 FLOW_MOD_FAILED, 12 METER_MOD_FAILED.
        match self {
            BadTableId(_) => (5, 2),
            GotoBackwards { .. } | GotoBadTable(_) => (3, 2),
            DuplicateInstruction(_) => (3, 1),
            Overlap { .. } => (5, 3),
            TableFull { .. } | AllTablesFull { .. } => (5, 1),
            UnknownGroup(_) => (2, 9),
            UnknownMeter(_) => (12, 3),
            BadPrerequisite { .. } => (4, 9),
            BadWildcards(_) => (4, 5),
            SetFieldInconsistent { .. } => (2, 10),
            FieldNotWritable(_) => (2, 13),
            BadSetFieldValue { .. } => (2, 15),
            BadOutPort(_) => (2, 4),
            BadPushVlanEthertype(_) | BadPushMplsEthertype(_) => (2, 5),
            ActionInconsistent { .. } => (2, 10),
        }
    }
}

/// A refused group-mod.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GroupModError {
    /// Add of an id that exists.
    #[error("group {0} already exists; use a modify to change it")]
    GroupExists(u32),
    /// Modify or chained reference to an id that does not exist.
    #[error("group {0} does not exist; add it first")]
    UnknownGroup(u32),
    /// The id is a reserved value.
    #[error("group id {0:#x} is reserved; use an id up to 0xffffff00")]
    InvalidGroupId(u32),
    /// The group would (indirectly) forward to itself.
    #[error("group {0} would forward to itself through its buckets; group chains must not loop")]
    Loop(u32),
    /// Delete of a group that another group forwards to.
    #[error("group {group} is used by group {by}; delete or change group {by} first")]
    ChainedGroup {
        /// The group to delete.
        group: u32,
        /// A group that forwards to it.
        by: u32,
    },
    /// An indirect group without exactly one bucket.
    #[error("indirect group {0} must have exactly one bucket")]
    IndirectBuckets(u32),
    /// A fast-failover bucket that watches nothing.
    #[error("fast-failover group {0} has a bucket with neither watch_port nor watch_group; give each bucket something to watch")]
    UnwatchedBucket(u32),
    /// A bucket action is invalid (same reasons as in a flow).
    #[error("group {group}: {error}")]
    BadAction {
        /// The group.
        group: u32,
        /// Why the action is refused.
        error: FlowModError,
    },
}

impl GroupModError {
    /// The OpenFlow 1.3 `(type, code)` of the error message to send.
    pub fn ofp_error(&self) -> (u16, u16) {
        use GroupModError::*;
        // Type 6 GROUP_MOD_FAILED.
        match self {
            GroupExists(_) => (6, 0),
            UnknownGroup(_) => (6, 8),
            InvalidGroupId(_) => (6, 1),
            Loop(_) => (6, 7),
            ChainedGroup { .. } => (6, 9),
            IndirectBuckets(_) => (6, 12),
            UnwatchedBucket(_) => (6, 13),
            BadAction { error, .. } => error.ofp_error(),
        }
    }
}

/// A refused meter-mod.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MeterModError {
    /// Add of an id that exists.
    #[error("meter {0} already exists; use a modify to change it")]
    MeterExists(u32),
    /// Modify of an id that does not exist.
    #[error("meter {0} does not exist; add it first")]
    UnknownMeter(u32),
    /// The id is 0 or a reserved value.
    #[error("meter id {0:#x} is invalid; use an id from 1 to 0xffff0000")]
    InvalidMeterId(u32),
    /// A band with rate 0, or no band at all.
    #[error("meter {0} needs at least one band, each with a rate above 0")]
    BadRate(u32),
    /// A dscp_remark band with prec_level 0.
    #[error("meter {0}: a dscp_remark band needs prec_level 1..=63")]
    BadBand(u32),
}

impl MeterModError {
    /// The OpenFlow 1.3 `(type, code)` of the error message to send.
    pub fn ofp_error(&self) -> (u16, u16) {
        use MeterModError::*;
        // Type 12 METER_MOD_FAILED.
        match self {
            MeterExists(_) => (12, 1),
            UnknownMeter(_) => (12, 3),
            InvalidMeterId(_) => (12, 2),
            BadRate(_) => (12, 6),
            BadBand(_) => (12, 9),
        }
    }
}
