//! The OpenFlow 1.3 vocabulary as plain Rust values: matches, actions, instructions, flow
//! entries, flow-mods, groups and meters. These are what the flow-syntax parser produces, what
//! the OpenFlow codec will decode into, and what the tables hold.

use std::sync::Arc;

use packet::key::parsed;
use packet::{Field, FlowKey};

/// Reserved OpenFlow port numbers (OpenFlow 1.3 `ofp_port_no`).
pub mod ports {
    /// Highest number of a physical/logical port.
    pub const MAX: u32 = 0xffff_ff00;
    /// Send back out of the ingress port.
    pub const IN_PORT: u32 = 0xffff_fff8;
    /// Submit to the first table (packet-out only).
    pub const TABLE: u32 = 0xffff_fff9;
    /// L2 learning switch behaviour.
    pub const NORMAL: u32 = 0xffff_fffa;
    /// All ports except the ingress port and ports with no-flood/no-fwd.
    pub const FLOOD: u32 = 0xffff_fffb;
    /// All ports except the ingress port.
    pub const ALL: u32 = 0xffff_fffc;
    /// The controller.
    pub const CONTROLLER: u32 = 0xffff_fffd;
    /// The switch's local port.
    pub const LOCAL: u32 = 0xffff_fffe;
    /// Wildcard / none.
    pub const ANY: u32 = 0xffff_ffff;
}

/// Number of the last flow table (OpenFlow's `OFPTT_MAX`, "last usable table number"):
/// tables 0 to 254 all take flows, so a switch has [`N_TABLES`] of them.
pub const MAX_TABLE: u8 = 254;
/// How many flow tables there are (FEATURES_REPLY's `n_tables`; table stats and table
/// features list as many): 255, tables 0 to [`MAX_TABLE`].
pub const N_TABLES: u8 = MAX_TABLE + 1;
/// `OFPTT_ALL`: every table (in flow-mod delete and stats requests).
pub const ALL_TABLES: u8 = 0xff;
/// `OFPG_ANY` / `OFPG_ALL`: any group (filters).
pub const GROUP_ANY: u32 = 0xffff_ffff;
/// `OFPG_ALL`: every group (in a group-mod delete).
pub const GROUP_ALL: u32 = 0xffff_fffc;
/// `OFPG_MAX`: the highest group id a group-mod may define.
pub const GROUP_MAX: u32 = 0xffff_ff00;
/// `OFPM_MAX`: the highest meter id a meter-mod may define.
pub const METER_MAX: u32 = 0xffff_0000;
/// `OFPM_ALL`: every meter (in a meter-mod delete).
pub const METER_ALL: u32 = 0xffff_ffff;
/// `OFPCML_NO_BUFFER`: send the whole packet to the controller.
pub const CONTROLLER_MAX_LEN_ALL: u16 = 0xffff;

/// A masked match: a packet matches when `key & mask == value` (with `value` pre-masked).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Match {
    /// The values (already masked).
    pub value: FlowKey,
    /// Which bits must be equal.
    pub mask: FlowKey,
}

impl Match {
    /// The match-everything match.
    pub const ANY: Match = Match {
        value: FlowKey::ZERO,
        mask: FlowKey::ZERO,
    };

    /// Adds an exact match on `field`.
    pub fn set_exact(&mut self, field: Field, value: u128) {
        self.set_masked(field, value, field.max_value());
    }

    /// Adds a masked match on `field` (bits set in `mask` must equal `value`).
    pub fn set_masked(&mut self, field: Field, value: u128, mask: u128) {
        let mask = mask & field.max_value();
        self.mask.set(field, mask);
        self.value.set(field, value & mask);
    }

    /// Whether `key` matches.
    #[inline]
    pub fn matches(&self, key: &FlowKey) -> bool {
        key.matches(&self.value, &self.mask)
    }

    /// The value and mask of one field.
    pub fn get(&self, field: Field) -> (u128, u128) {
        (self.value.get(field), self.mask.get(field))
    }

    /// The `parsed` bits this match's tunnel fields imply: `TUN_IPV4` when `tun_src` or
    /// `tun_dst` is matched (only the low 32 bits of its slot), so that it cannot match an
    /// IPv6 underlay address ending in the same 32 bits.
    pub fn implied_parsed(&self) -> u16 {
        let v4 = [Field::TunIpv6Src, Field::TunIpv6Dst].iter().any(|&f| {
            let mask = self.mask.get(f);
            mask != 0 && mask >> 32 == 0
        });
        if v4 {
            parsed::TUN_IPV4
        } else {
            0
        }
    }

    /// The match with its implied `parsed` bits ([`Match::implied_parsed`]) added: what the
    /// flow tables store and look packets up with.
    pub fn with_implied(mut self) -> Match {
        let bits = u128::from(self.implied_parsed());
        let (v, mask) = self.get(Field::Parsed);
        self.set_masked(Field::Parsed, v | bits, mask | bits);
        self
    }

    /// The match without its implied `parsed` bits: as the controller wrote it (for
    /// encoding and printing it back).
    pub fn without_implied(mut self) -> Match {
        let bits = u128::from(self.implied_parsed());
        let (v, mask) = self.get(Field::Parsed);
        self.set_masked(Field::Parsed, v & !bits, mask & !bits);
        self
    }
}

/// One OpenFlow action.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Action {
    /// Output to a port number (physical or reserved, see [`ports`]); `max_len` applies to
    /// CONTROLLER.
    Output {
        /// The port.
        port: u32,
        /// Bytes to send to the controller.
        max_len: u16,
    },
    /// Apply a group.
    Group(u32),
    /// Set the egress queue.
    SetQueue(u32),
    /// Set a header field.
    SetField {
        /// The field.
        field: Field,
        /// The value.
        value: u128,
    },
    /// Push a VLAN tag (TPID 0x8100 or 0x88a8).
    PushVlan(u16),
    /// Pop the outer VLAN tag.
    PopVlan,
    /// Decrement the IP TTL / hop limit.
    DecNwTtl,
    /// Set the IP TTL.
    SetNwTtl(u8),
    /// Push an MPLS label stack entry; the Ethernet type becomes this (0x8847 or 0x8848).
    PushMpls(u16),
    /// Pop the top MPLS label stack entry; the Ethernet type becomes this (what is below).
    PopMpls(u16),
    /// Set the TTL of the top MPLS label stack entry.
    SetMplsTtl(u8),
    /// Decrement the TTL of the top MPLS label stack entry.
    DecMplsTtl,
    /// Copy the TTL from the header below the top MPLS entry out to it.
    CopyTtlOut,
    /// Copy the top MPLS entry's TTL in to the header below it.
    CopyTtlIn,
}

/// One OpenFlow instruction.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Instruction {
    /// Pass through a meter first.
    Meter(u32),
    /// Apply these actions now.
    ApplyActions(Vec<Action>),
    /// Empty the action set.
    ClearActions,
    /// Merge these actions into the action set.
    WriteActions(Vec<Action>),
    /// `metadata = (metadata & !mask) | (value & mask)`.
    WriteMetadata {
        /// Value.
        value: u64,
        /// Mask.
        mask: u64,
    },
    /// Continue in a later table.
    GotoTable(u8),
}

/// Flags of a flow entry (OpenFlow `ofp_flow_mod_flags`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FlowFlags {
    /// Send FLOW_REMOVED when the entry expires or is deleted.
    pub send_flow_rem: bool,
    /// Refuse an add that overlaps an entry of the same priority.
    pub check_overlap: bool,
    /// Reset counters on modify.
    pub reset_counts: bool,
    /// Do not count packets.
    pub no_pkt_counts: bool,
    /// Do not count bytes.
    pub no_byte_counts: bool,
}

/// What a flow-mod does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FlowModCommand {
    /// Add (replace an identical match+priority).
    Add,
    /// Modify all matching entries.
    Modify,
    /// Modify the entry with exactly this match and priority.
    ModifyStrict,
    /// Delete all matching entries.
    Delete,
    /// Delete the entry with exactly this match and priority.
    DeleteStrict,
}

/// A flow table modification (OpenFlow `ofp_flow_mod` without the wire format).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FlowMod {
    /// The command.
    pub command: FlowModCommand,
    /// Table (or [`ALL_TABLES`] for deletes).
    pub table_id: u8,
    /// Priority.
    pub priority: u16,
    /// Match.
    pub matcher: Match,
    /// Instructions (add/modify).
    pub instructions: Vec<Instruction>,
    /// Cookie to set (add) or to filter by (modify/delete, with `cookie_mask`).
    pub cookie: u64,
    /// Which cookie bits to filter on (0 = no filter).
    pub cookie_mask: u64,
    /// Seconds idle before removal (0 = never).
    pub idle_timeout: u16,
    /// Seconds before removal (0 = never).
    pub hard_timeout: u16,
    /// Delete filters: only entries with an output to this port ([`ports::ANY`] = no filter).
    pub out_port: u32,
    /// Delete filters: only entries with this group ([`GROUP_ANY`] = no filter).
    pub out_group: u32,
    /// Flags.
    pub flags: FlowFlags,
    /// How the controller wrote the match on the wire, when not as the codec writes the
    /// model back (see [`WireForm`]); `None` for the canonical form and for flows that never
    /// crossed the wire.
    pub matcher_as_sent: Option<WireForm>,
    /// The instructions' bytes as the controller wrote them, when the codec would write them
    /// otherwise even in the order given (a set-field of `tp_dst` is `udp_dst` to the codec
    /// under a UDP match, whatever an earlier `ip_proto` rewrite made of the packet); `None`
    /// almost always.
    pub instructions_as_sent: Option<WireForm>,
}

/// How a controller wrote something on the wire (the OXM fields of a match in its own
/// order, the actions of a bucket under other field names), kept so that statistics and
/// descriptions give back what was installed. Opaque to the pipeline: the OpenFlow codec makes
/// and reads the bytes (`openflow::as_sent`). Forms are shared: the match forms of flows a
/// controller writes alike are one allocation (the control side interns them), so a million
/// flows in a controller's field order cost a pointer each.
pub type WireForm = Arc<[u8]>;

impl FlowMod {
    /// An add of `matcher` at `priority` in `table_id` with `instructions`; other fields
    /// default.
    pub fn add(
        table_id: u8,
        priority: u16,
        matcher: Match,
        instructions: Vec<Instruction>,
    ) -> Self {
        FlowMod {
            command: FlowModCommand::Add,
            table_id,
            priority,
            matcher,
            instructions,
            cookie: 0,
            cookie_mask: 0,
            idle_timeout: 0,
            hard_timeout: 0,
            out_port: ports::ANY,
            out_group: GROUP_ANY,
            flags: FlowFlags::default(),
            matcher_as_sent: None,
            instructions_as_sent: None,
        }
    }
}

/// Group types (OpenFlow `ofp_group_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupType {
    /// Every bucket.
    All,
    /// One bucket chosen by a stable hash of the flow, weighted.
    Select,
    /// The single bucket.
    Indirect,
    /// The first bucket whose watch port/group is live.
    FastFailover,
}

/// One bucket of a group.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Bucket {
    /// Weight (select groups).
    pub weight: u16,
    /// Port whose liveness decides (fast-failover), or [`ports::ANY`].
    pub watch_port: u32,
    /// Group whose liveness decides (fast-failover), or [`GROUP_ANY`].
    pub watch_group: u32,
    /// Actions applied to a copy of the packet.
    pub actions: Vec<Action>,
    /// The actions as the controller wrote them, when the codec would write them otherwise
    /// (a set-field of `udp_src` is `tp_src` in the model, which a bucket, having no match to
    /// tell, writes back as `tcp_src`); `None` otherwise.
    pub actions_as_sent: Option<WireForm>,
}

/// A group definition.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Group {
    /// Group id.
    pub id: u32,
    /// Type.
    pub kind: GroupType,
    /// Buckets.
    pub buckets: Vec<Bucket>,
}

/// A meter band.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MeterBand {
    /// Drop packets over `rate`.
    Drop {
        /// Rate (kbit/s or packets/s, per the meter's flags).
        rate: u32,
        /// Burst size (same unit as rate).
        burst: u32,
    },
    /// Raise the drop precedence (lower the DSCP) of packets over `rate`.
    DscpRemark {
        /// Rate.
        rate: u32,
        /// Burst size.
        burst: u32,
        /// Precedence levels to add.
        prec_level: u8,
    },
}

/// A meter definition.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Meter {
    /// Meter id.
    pub id: u32,
    /// Rates are packets per second (else kbit/s).
    pub pktps: bool,
    /// The controller set `OFPMF_KBPS`. Rates are kbit/s whenever `pktps` is not; a meter-mod
    /// may leave both unit flags clear (Open vSwitch takes that too), so the bit is kept for
    /// the meter to read back as it was installed.
    pub kbps: bool,
    /// Bands honour their burst sizes.
    pub burst: bool,
    /// The controller asked for statistics (`OFPMF_STATS`). Hayate counts every meter; the
    /// flag is kept so that the meter reads back as it was installed.
    pub stats: bool,
    /// Bands.
    pub bands: Vec<MeterBand>,
}

/// What a group-mod does (OpenFlow `ofp_group_mod_command`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupModCommand {
    /// Define a new group.
    Add,
    /// Replace an existing group's type and buckets.
    Modify,
    /// Delete a group ([`GROUP_ALL`]: every group) and the flows that use it.
    Delete,
}

/// A group table modification (OpenFlow `ofp_group_mod` without the wire format). For
/// [`GroupModCommand::Delete`] only `group.id` is read.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GroupMod {
    /// The command.
    pub command: GroupModCommand,
    /// The group (id, type, buckets).
    pub group: Group,
}

/// What a meter-mod does (OpenFlow `ofp_meter_mod_command`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MeterModCommand {
    /// Define a new meter.
    Add,
    /// Replace an existing meter's flags and bands (its token buckets restart full).
    Modify,
    /// Delete a meter ([`METER_ALL`]: every meter) and the flows that use it.
    Delete,
}

/// A meter table modification (OpenFlow `ofp_meter_mod` without the wire format). For
/// [`MeterModCommand::Delete`] only `meter.id` is read.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MeterMod {
    /// The command.
    pub command: MeterModCommand,
    /// The meter (id, flags, bands).
    pub meter: Meter,
}
