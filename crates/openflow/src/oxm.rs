//! OXM: the TLV match fields of OpenFlow 1.3 (`ofp_match` of type `OFPMT_OXM`) and the single
//! field of a set-field action, mapped onto the flow key's [`Field`]s.
//!
//! Every `OPENFLOW_BASIC` (class 0x8000) field the model can hold is supported, plus the few
//! Open vSwitch extensions the model also has (`NXM_OF_VLAN_TCI`, `NXM_NX_IP_FRAG`,
//! `NXM_NX_IP_TTL`, the tunnel endpoints `NXM_NX_TUN_IPV4_SRC`/`DST` and
//! `NXM_NX_TUN_IPV6_SRC`/`DST`, and TCP flags as `ONFOXM_ET_TCP_FLAGS`, which is how
//! `ovs-ofctl -O OpenFlow13` writes them). Fields that share a key slot (ARP addresses and IPv4 addresses;
//! TCP, UDP and SCTP ports and ICMP type/code; ARP and ND hardware addresses) are written
//! under the name the match's `eth_type` / `ip_proto` implies, so decode ∘ encode is the
//! identity on the model's [`Match`].

use packet::Field;
use pipeline::model::{Match, WireForm};

use crate::error::{DecodeError, EncodeError, ErrorCode};
use crate::wire::{Put, Reader};

/// OXM classes.
pub mod oxm_class {
    /// Open vSwitch's NXM 0 (`NXM_OF_*`).
    pub const NXM_0: u16 = 0x0000;
    /// Open vSwitch's NXM 1 (`NXM_NX_*`).
    pub const NXM_1: u16 = 0x0001;
    /// `OFPXMC_OPENFLOW_BASIC`.
    pub const OPENFLOW_BASIC: u16 = 0x8000;
    /// `OFPXMC_EXPERIMENTER`: a 32-bit experimenter id follows the header.
    pub const EXPERIMENTER: u16 = 0xffff;
}

/// The ONF experimenter id (`ONF_EXPERIMENTER_ID`), used by `ONFOXM_ET_TCP_FLAGS`.
pub const ONF_EXPERIMENTER: u32 = 0x4f4e_4600;

/// What a field needs the rest of the match to pin (OpenFlow 1.3 prerequisites).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prereq {
    /// Nothing.
    None,
    /// A VLAN tag: `vlan_vid` matched with the present bit set.
    Vlan,
    /// `eth_type` is this value.
    Eth(u16),
    /// `eth_type` is 0x0800 or 0x86dd.
    Ip,
    /// `eth_type` is 0x0800 or 0x86dd and `ip_proto` is this value.
    Proto(u8),
    /// `eth_type` is 0x0800 and `ip_proto` is 1.
    Icmp4,
    /// `eth_type` is 0x86dd and `ip_proto` is 58.
    Icmp6,
    /// ICMPv6 with `icmpv6_type` 135 or 136.
    NdTarget,
    /// ICMPv6 with `icmpv6_type` this value (135 for SLL, 136 for TLL).
    NdType(u8),
    /// `eth_type` is 0x8847 or 0x8848 (MPLS).
    Mpls,
}

impl Prereq {
    /// Whether `m` satisfies it.
    pub fn holds(self, m: &Match) -> bool {
        let exact = |f: Field| {
            let (v, mask) = m.get(f);
            (mask == f.max_value()).then_some(v)
        };
        let eth = exact(Field::EthType);
        let ip = matches!(eth, Some(0x0800 | 0x86dd));
        let proto = exact(Field::IpProto);
        match self {
            Prereq::None => true,
            Prereq::Vlan => {
                let (v, mask) = m.get(Field::VlanTci);
                v & mask & 0x1000 != 0
            }
            Prereq::Eth(t) => eth == Some(t as u128),
            Prereq::Ip => ip,
            Prereq::Proto(p) => ip && proto == Some(p as u128),
            Prereq::Icmp4 => eth == Some(0x0800) && proto == Some(1),
            Prereq::Icmp6 => eth == Some(0x86dd) && proto == Some(58),
            Prereq::NdTarget => {
                Prereq::Icmp6.holds(m) && matches!(exact(Field::IcmpType), Some(135 | 136))
            }
            Prereq::NdType(t) => {
                Prereq::Icmp6.holds(m) && exact(Field::IcmpType) == Some(t as u128)
            }
            Prereq::Mpls => matches!(eth, Some(0x8847 | 0x8848)),
        }
    }

    /// What must be added to the match, for error texts.
    pub fn describe(self) -> String {
        match self {
            Prereq::None => "nothing".into(),
            Prereq::Vlan => "vlan_vid with the present bit 0x1000".into(),
            Prereq::Eth(t) => format!("eth_type={t:#06x}"),
            Prereq::Ip => "eth_type=0x0800 or 0x86dd".into(),
            Prereq::Proto(p) => format!("eth_type=0x0800 or 0x86dd and ip_proto={p}"),
            Prereq::Icmp4 => "eth_type=0x0800 and ip_proto=1".into(),
            Prereq::Icmp6 => "eth_type=0x86dd and ip_proto=58".into(),
            Prereq::NdTarget => "eth_type=0x86dd, ip_proto=58 and icmpv6_type=135 or 136".into(),
            Prereq::NdType(t) => format!("eth_type=0x86dd, ip_proto=58 and icmpv6_type={t}"),
            Prereq::Mpls => "eth_type=0x8847 or 0x8848".into(),
        }
    }
}

/// One OXM field this codec knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OxmDef {
    /// OXM class (see [`oxm_class`]).
    pub class: u16,
    /// Field number within the class.
    pub field: u8,
    /// Experimenter id for class [`oxm_class::EXPERIMENTER`].
    pub experimenter: Option<u32>,
    /// Value length in bytes.
    pub len: u8,
    /// Whether a mask is allowed.
    pub maskable: bool,
    /// The flow-key field it reads and writes.
    pub key: Field,
    /// What it needs in the match.
    pub prereq: Prereq,
    /// The specification's name (`OXM_OF_TCP_DST`).
    pub name: &'static str,
}

impl OxmDef {
    /// The bits the field has on the wire: the key field's bits, except `NXM_NX_IP_FRAG`
    /// (2 bits, as Open vSwitch defines it, in an 8-bit key field). A TLV without mask means
    /// this mask.
    pub fn full_mask(&self) -> u128 {
        match self.key {
            Field::IpFrag => 0x3,
            k => k.max_value(),
        }
    }
}

impl OxmDef {
    /// The 32-bit OXM header without mask (`class << 16 | field << 9 | len`).
    pub fn header(&self) -> u32 {
        let extra = if self.experimenter.is_some() { 4 } else { 0 };
        (self.class as u32) << 16 | (self.field as u32) << 9 | (self.len as u32 + extra)
    }
}

const fn basic(
    field: u8,
    len: u8,
    maskable: bool,
    key: Field,
    prereq: Prereq,
    name: &'static str,
) -> OxmDef {
    OxmDef {
        class: oxm_class::OPENFLOW_BASIC,
        field,
        experimenter: None,
        len,
        maskable,
        key,
        prereq,
        name,
    }
}

const fn ext(
    class: u16,
    field: u8,
    len: u8,
    maskable: bool,
    key: Field,
    prereq: Prereq,
    name: &'static str,
) -> OxmDef {
    OxmDef {
        class,
        field,
        experimenter: None,
        len,
        maskable,
        key,
        prereq,
        name,
    }
}

use Field as F;
use Prereq as P;

/// Every OXM field the codec decodes and encodes.
#[rustfmt::skip]
pub const OXM_FIELDS: &[OxmDef] = &[
    basic(0, 4, false, F::InPort, P::None, "OXM_OF_IN_PORT"),
    basic(2, 8, true, F::Metadata, P::None, "OXM_OF_METADATA"),
    basic(3, 6, true, F::EthDst, P::None, "OXM_OF_ETH_DST"),
    basic(4, 6, true, F::EthSrc, P::None, "OXM_OF_ETH_SRC"),
    basic(5, 2, false, F::EthType, P::None, "OXM_OF_ETH_TYPE"),
    basic(6, 2, true, F::VlanVid, P::None, "OXM_OF_VLAN_VID"),
    basic(7, 1, false, F::VlanPcp, P::Vlan, "OXM_OF_VLAN_PCP"),
    basic(8, 1, false, F::IpDscp, P::Ip, "OXM_OF_IP_DSCP"),
    basic(9, 1, false, F::IpEcn, P::Ip, "OXM_OF_IP_ECN"),
    basic(10, 1, false, F::IpProto, P::Ip, "OXM_OF_IP_PROTO"),
    basic(11, 4, true, F::Ipv4Src, P::Eth(0x0800), "OXM_OF_IPV4_SRC"),
    basic(12, 4, true, F::Ipv4Dst, P::Eth(0x0800), "OXM_OF_IPV4_DST"),
    basic(13, 2, true, F::TpSrc, P::Proto(6), "OXM_OF_TCP_SRC"),
    basic(14, 2, true, F::TpDst, P::Proto(6), "OXM_OF_TCP_DST"),
    basic(15, 2, true, F::TpSrc, P::Proto(17), "OXM_OF_UDP_SRC"),
    basic(16, 2, true, F::TpDst, P::Proto(17), "OXM_OF_UDP_DST"),
    basic(17, 2, true, F::TpSrc, P::Proto(132), "OXM_OF_SCTP_SRC"),
    basic(18, 2, true, F::TpDst, P::Proto(132), "OXM_OF_SCTP_DST"),
    basic(19, 1, false, F::IcmpType, P::Icmp4, "OXM_OF_ICMPV4_TYPE"),
    basic(20, 1, false, F::IcmpCode, P::Icmp4, "OXM_OF_ICMPV4_CODE"),
    basic(21, 2, false, F::ArpOp, P::Eth(0x0806), "OXM_OF_ARP_OP"),
    basic(22, 4, true, F::Ipv4Src, P::Eth(0x0806), "OXM_OF_ARP_SPA"),
    basic(23, 4, true, F::Ipv4Dst, P::Eth(0x0806), "OXM_OF_ARP_TPA"),
    basic(24, 6, true, F::ArpSha, P::Eth(0x0806), "OXM_OF_ARP_SHA"),
    basic(25, 6, true, F::ArpTha, P::Eth(0x0806), "OXM_OF_ARP_THA"),
    basic(26, 16, true, F::Ipv6Src, P::Eth(0x86dd), "OXM_OF_IPV6_SRC"),
    basic(27, 16, true, F::Ipv6Dst, P::Eth(0x86dd), "OXM_OF_IPV6_DST"),
    basic(28, 4, true, F::Ipv6Label, P::Eth(0x86dd), "OXM_OF_IPV6_FLABEL"),
    basic(29, 1, false, F::IcmpType, P::Icmp6, "OXM_OF_ICMPV6_TYPE"),
    basic(30, 1, false, F::IcmpCode, P::Icmp6, "OXM_OF_ICMPV6_CODE"),
    basic(31, 16, true, F::NdTarget, P::NdTarget, "OXM_OF_IPV6_ND_TARGET"),
    basic(32, 6, true, F::ArpSha, P::NdType(135), "OXM_OF_IPV6_ND_SLL"),
    basic(33, 6, true, F::ArpTha, P::NdType(136), "OXM_OF_IPV6_ND_TLL"),
    basic(34, 4, false, F::MplsLabel, P::Mpls, "OXM_OF_MPLS_LABEL"),
    basic(35, 1, false, F::MplsTc, P::Mpls, "OXM_OF_MPLS_TC"),
    basic(36, 1, false, F::MplsBos, P::Mpls, "OXM_OF_MPLS_BOS"),
    basic(38, 8, true, F::TunnelId, P::None, "OXM_OF_TUNNEL_ID"),
    basic(39, 2, true, F::Ipv6Exthdr, P::Eth(0x86dd), "OXM_OF_IPV6_EXTHDR"),
    ext(oxm_class::NXM_0, 4, 2, true, F::VlanTci, P::None, "NXM_OF_VLAN_TCI"),
    ext(oxm_class::NXM_1, 26, 1, true, F::IpFrag, P::Ip, "NXM_NX_IP_FRAG"),
    ext(oxm_class::NXM_1, 29, 1, false, F::IpTtl, P::Ip, "NXM_NX_IP_TTL"),
    ext(oxm_class::NXM_1, 30, 1, false, F::MplsTtl, P::Mpls, "NXM_NX_MPLS_TTL"),
    ext(oxm_class::NXM_1, 34, 2, true, F::TcpFlags, P::Proto(6), "NXM_NX_TCP_FLAGS"),
    ext(oxm_class::NXM_1, 31, 4, true, F::TunSrc, P::None, "NXM_NX_TUN_IPV4_SRC"),
    ext(oxm_class::NXM_1, 32, 4, true, F::TunDst, P::None, "NXM_NX_TUN_IPV4_DST"),
    ext(oxm_class::NXM_1, 109, 16, true, F::TunIpv6Src, P::None, "NXM_NX_TUN_IPV6_SRC"),
    ext(oxm_class::NXM_1, 110, 16, true, F::TunIpv6Dst, P::None, "NXM_NX_TUN_IPV6_DST"),
    OxmDef {
        experimenter: Some(ONF_EXPERIMENTER),
        ..ext(oxm_class::EXPERIMENTER, 42, 2, true, F::TcpFlags, P::Proto(6), "ONFOXM_ET_TCP_FLAGS")
    },
];

#[cfg(test)]
fn def_named(name: &str) -> &'static OxmDef {
    OXM_FIELDS
        .iter()
        .find(|d| d.name == name)
        .unwrap_or(&OXM_FIELDS[0])
}

const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The index in [`OXM_FIELDS`] of the def named `name`; used in constants, so a name not in
/// the table does not build.
const fn index_named(name: &str) -> usize {
    let mut i = 0;
    while i < OXM_FIELDS.len() {
        if same(OXM_FIELDS[i].name, name) {
            return i;
        }
        i += 1;
    }
    panic!("no OXM field of that name")
}

/// The def named by a string literal, looked up when the program is built.
macro_rules! named {
    ($name:literal) => {
        &OXM_FIELDS[const { index_named($name) }]
    };
}

/// For each key field (`Field as usize`), the index in [`OXM_FIELDS`] of the def a match on it
/// is written as when nothing else decides: the first `OPENFLOW_BASIC` one, else the first
/// one; `u8::MAX` for none.
const DEFAULT_DEFS: [u8; Field::ALL.len()] = {
    let mut out = [u8::MAX; Field::ALL.len()];
    let mut basic_only = false;
    loop {
        let mut i = OXM_FIELDS.len();
        while i > 0 {
            i -= 1;
            let d = &OXM_FIELDS[i];
            if !basic_only || d.class == oxm_class::OPENFLOW_BASIC {
                out[d.key as usize] = i as u8;
            }
        }
        if basic_only {
            break out;
        }
        basic_only = true;
    }
};

/// The def with this class, field and experimenter.
pub fn lookup(class: u16, field: u8, experimenter: Option<u32>) -> Option<&'static OxmDef> {
    OXM_FIELDS
        .iter()
        .find(|d| d.class == class && d.field == field && d.experimenter == experimenter)
}

/// The name under which `field` is written in a match or set-field, given the match that
/// decides between names sharing a key slot. `None` when OpenFlow cannot express the field.
pub fn def_for(field: Field, ctx: &Match) -> Option<&'static OxmDef> {
    let exact = |f: Field| {
        let (v, mask) = ctx.get(f);
        (mask == f.max_value()).then_some(v)
    };
    let eth = exact(Field::EthType);
    let proto = exact(Field::IpProto);
    Some(match field {
        F::Ipv4Src if eth == Some(0x0806) => named!("OXM_OF_ARP_SPA"),
        F::Ipv4Dst if eth == Some(0x0806) => named!("OXM_OF_ARP_TPA"),
        F::TpSrc => match proto {
            Some(17) => named!("OXM_OF_UDP_SRC"),
            Some(132) => named!("OXM_OF_SCTP_SRC"),
            _ => named!("OXM_OF_TCP_SRC"),
        },
        F::TpDst => match proto {
            Some(17) => named!("OXM_OF_UDP_DST"),
            Some(132) => named!("OXM_OF_SCTP_DST"),
            _ => named!("OXM_OF_TCP_DST"),
        },
        F::IcmpType if eth == Some(0x86dd) => named!("OXM_OF_ICMPV6_TYPE"),
        F::IcmpCode if eth == Some(0x86dd) => named!("OXM_OF_ICMPV6_CODE"),
        F::ArpSha if eth == Some(0x86dd) => named!("OXM_OF_IPV6_ND_SLL"),
        F::ArpTha if eth == Some(0x86dd) => named!("OXM_OF_IPV6_ND_TLL"),
        F::TcpFlags => named!("ONFOXM_ET_TCP_FLAGS"),
        F::Parsed | F::CvlanTci | F::MplsLse => return None,
        _ => OXM_FIELDS.get(usize::from(DEFAULT_DEFS[field as usize]))?,
    })
}

/// One decoded OXM TLV.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OxmTlv {
    /// Which field.
    pub def: &'static OxmDef,
    /// Value.
    pub value: u128,
    /// Mask, when the TLV had one.
    pub mask: Option<u128>,
}

/// Error codes a TLV parse uses: match fields and set-field actions answer differently.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TlvCodes {
    pub bad_len: ErrorCode,
    pub bad_field: ErrorCode,
    pub bad_value: ErrorCode,
    pub bad_mask: ErrorCode,
}

pub(crate) const MATCH_CODES: TlvCodes = TlvCodes {
    bad_len: ErrorCode::BMC_BAD_LEN,
    bad_field: ErrorCode::BMC_BAD_FIELD,
    bad_value: ErrorCode::BMC_BAD_VALUE,
    bad_mask: ErrorCode::BMC_BAD_MASK,
};

pub(crate) const SET_FIELD_CODES: TlvCodes = TlvCodes {
    bad_len: ErrorCode::BAC_BAD_SET_LEN,
    bad_field: ErrorCode::BAC_BAD_SET_TYPE,
    bad_value: ErrorCode::BAC_BAD_SET_ARGUMENT,
    bad_mask: ErrorCode::BAC_BAD_SET_ARGUMENT,
};

fn be_value(b: &[u8]) -> u128 {
    b.iter().fold(0u128, |a, &x| (a << 8) | x as u128)
}

fn put_be(buf: &mut Vec<u8>, v: u128, len: u8) {
    let bytes = v.to_be_bytes();
    buf.extend_from_slice(&bytes[16 - len as usize..]);
}

/// Reads one TLV from `r`.
pub(crate) fn read_tlv(r: &mut Reader<'_>, codes: TlvCodes) -> Result<OxmTlv, DecodeError> {
    let mut hr = Reader::new(r.bytes(r.remaining().min(4))?, codes.bad_len, "OXM header");
    let header = hr.u32()?;
    let class = (header >> 16) as u16;
    let field = ((header >> 9) & 0x7f) as u8;
    let has_mask = header & 0x100 != 0;
    let len = (header & 0xff) as usize;
    let mut body = r.sub(len, codes.bad_len, "OXM field").map_err(|e| {
        DecodeError::new(
            codes.bad_len,
            format!(
                "OXM field {class:#06x}:{field} claims {len} bytes: {}",
                e.reason
            ),
        )
    })?;
    let experimenter = if class == oxm_class::EXPERIMENTER {
        Some(body.u32()?)
    } else {
        None
    };
    let Some(def) = lookup(class, field, experimenter) else {
        return Err(DecodeError::new(
            codes.bad_field,
            format!(
                "OXM field class {class:#06x} field {field}{} is not supported by this switch",
                experimenter
                    .map(|e| format!(" experimenter {e:#010x}"))
                    .unwrap_or_default()
            ),
        ));
    };
    let want = def.len as usize * if has_mask { 2 } else { 1 };
    if body.remaining() != want {
        return Err(DecodeError::new(
            codes.bad_len,
            format!(
                "{} has {} value bytes; it needs {want}",
                def.name,
                body.remaining()
            ),
        ));
    }
    if has_mask && !def.maskable {
        return Err(DecodeError::new(
            codes.bad_mask,
            format!("{} does not take a mask; send it without one", def.name),
        ));
    }
    let value = be_value(body.bytes(def.len as usize)?);
    let mask = if has_mask {
        Some(be_value(body.bytes(def.len as usize)?) & def.full_mask())
    } else {
        None
    };
    if value > def.full_mask() {
        return Err(DecodeError::new(
            codes.bad_value,
            format!(
                "{} value {value:#x} is wider than the field (mask {:#x})",
                def.name,
                def.full_mask()
            ),
        ));
    }
    Ok(OxmTlv { def, value, mask })
}

/// Writes one TLV (`mask` only when not all-ones).
pub(crate) fn write_tlv(buf: &mut Vec<u8>, def: &OxmDef, value: u128, mask: Option<u128>) {
    let mut header = def.header();
    if let Some(_m) = mask {
        header = (header & !0xff) | 0x100 | ((header & 0xff) + def.len as u32);
    }
    buf.put_u32(header);
    if let Some(e) = def.experimenter {
        buf.put_u32(e);
    }
    put_be(buf, value, def.len);
    if let Some(m) = mask {
        put_be(buf, m, def.len);
    }
}

/// Decodes the OXM TLVs of a match (the bytes after `ofp_match`'s type and length), checking
/// lengths, duplicates, value bits outside masks and prerequisites. A field's prerequisites
/// must come before it (OpenFlow 1.3.5 §7.2.3.6: `eth_type` before `ip_proto` before
/// `tcp_dst`; `vlan_vid` before `vlan_pcp`): a prerequisite given after the field that needs
/// it is refused with OFPBMC_BAD_PREREQ, as Open vSwitch (`nx_pull_raw`) refuses it. The
/// first problem in wire order is the one reported; for one field, a bad length, value or
/// mask before a missing prerequisite before a duplicate (Open vSwitch's order).
pub fn decode_oxm_fields(bytes: &[u8]) -> Result<Match, DecodeError> {
    let mut r = Reader::new(bytes, ErrorCode::BMC_BAD_LEN, "match");
    let mut m = Match::ANY;
    let mut seen: Vec<&'static OxmDef> = Vec::new();
    while !r.is_empty() {
        let tlv = read_tlv(&mut r, MATCH_CODES)?;
        let def = tlv.def;
        let mask = tlv.mask.unwrap_or(def.full_mask());
        if tlv.value & !mask != 0 {
            return Err(DecodeError::new(
                ErrorCode::BMC_BAD_WILDCARDS,
                format!(
                    "{} value {:#x} has bits outside its mask {mask:#x}; clear them",
                    def.name, tlv.value
                ),
            ));
        }
        // Against the fields before this one only; checked before duplicates, as Open
        // vSwitch does (fields that share bits have exclusive prerequisites anyway).
        if !def.prereq.holds(&m) {
            return Err(DecodeError::new(
                ErrorCode::BMC_BAD_PREREQ,
                format!(
                    "{} needs {} before it in the match (a field's prerequisites come first); \
                     add or move them",
                    def.name,
                    def.prereq.describe()
                ),
            ));
        }
        if let Some(prev) = seen.iter().find(|d| overlaps(d.key, def.key)) {
            return Err(DecodeError::new(
                ErrorCode::BMC_DUP_FIELD,
                format!(
                    "{} appears twice in the match (or with {}, which shares its bits); give it once",
                    def.name, prev.name
                ),
            ));
        }
        seen.push(def);
        m.set_masked(def.key, tlv.value, mask);
    }
    Ok(m)
}

/// Whether two key fields share any bit (so a match may not name both): a 128-bit field
/// covers its two words whole (`tun_ipv6_src` covers `tun_src`).
fn overlaps(a: Field, b: Field) -> bool {
    let words = |f: Field| {
        let s = f.spec();
        if s.bits == 128 {
            [(s.word, u64::MAX), (s.word + 1, u64::MAX)]
        } else {
            [(s.word, f.word_mask()), (s.word, f.word_mask())]
        }
    };
    words(a)
        .iter()
        .any(|&(wa, ma)| words(b).iter().any(|&(wb, mb)| wa == wb && ma & mb != 0))
}

/// Reads an `ofp_match` (type, length, OXM fields, padding to 8 bytes).
pub(crate) fn read_match(r: &mut Reader<'_>) -> Result<Match, DecodeError> {
    read_match_as_sent(r).map(|(m, _)| m)
}

/// Reads an `ofp_match` and how its fields were written when not as [`encode_oxm_fields`]
/// writes them back ([`crate::as_sent`]).
pub(crate) fn read_match_as_sent(
    r: &mut Reader<'_>,
) -> Result<(Match, Option<WireForm>), DecodeError> {
    let mut hr = Reader::new(
        r.bytes(r.remaining().min(4))?,
        ErrorCode::BMC_BAD_LEN,
        "ofp_match",
    );
    let kind = hr.u16()?;
    let len = hr.u16()? as usize;
    if kind != 1 {
        return Err(DecodeError::new(
            ErrorCode::BMC_BAD_TYPE,
            format!("match type {kind} is not OFPMT_OXM (1); OpenFlow 1.3 matches are OXM"),
        ));
    }
    if len < 4 {
        return Err(DecodeError::new(
            ErrorCode::BMC_BAD_LEN,
            format!("ofp_match length {len} is below its 4-byte header"),
        ));
    }
    let fields = r
        .bytes(len - 4)
        .map_err(|e| DecodeError::new(ErrorCode::BMC_BAD_LEN, e.reason))?;
    let pad = (8 - len % 8) % 8;
    r.skip(pad).map_err(|_| {
        DecodeError::new(
            ErrorCode::BMC_BAD_LEN,
            "ofp_match lacks its padding to 8 bytes",
        )
    })?;
    let m = decode_oxm_fields(fields)?;
    let form = crate::as_sent::match_form(fields, &m);
    Ok((m, form))
}

/// Appends the OXM TLVs of `m`, in the order Open vSwitch writes them (so a flow-mod that
/// `ovs-ofctl` sent encodes back to the same bytes): in_port, Ethernet, VLAN, L3 and L4 (or
/// ARP), tunnel id, tunnel endpoints, metadata.
pub fn encode_oxm_fields(m: &Match, buf: &mut Vec<u8>) -> Result<(), EncodeError> {
    // The bits the tunnel fields imply are not sent: they follow from those fields.
    let m = &m.without_implied();
    let (eth, proto) = (m.get(F::EthType), m.get(F::IpProto));
    let eth = (eth.1 == 0xffff).then_some(eth.0);
    let proto = (proto.1 == 0xff).then_some(proto.0);
    let emit = |field: Field, def: &OxmDef, buf: &mut Vec<u8>| -> Result<(), EncodeError> {
        let (v, mask) = m.get(field);
        if mask == 0 {
            return Ok(());
        }
        let full = def.full_mask();
        if mask & !full != 0 && mask != field.max_value()
            || (!def.maskable && mask != full && mask != field.max_value())
        {
            return Err(EncodeError::Unencodable(format!(
                "match on {} with mask {mask:#x}: {} {}",
                field.name(),
                def.name,
                if def.maskable {
                    "has fewer bits"
                } else {
                    "does not take a mask"
                }
            )));
        }
        let mask = mask & full;
        write_tlv(buf, def, v & full, (mask != full).then_some(mask));
        Ok(())
    };
    // The name is looked up only for a field the match uses (most use a few of ~35).
    let by_key = |f: Field, buf: &mut Vec<u8>| -> Result<(), EncodeError> {
        if m.mask.get(f) == 0 {
            return Ok(());
        }
        emit(f, def_for(f, m).unwrap_or(&OXM_FIELDS[0]), buf)
    };
    for f in [F::CvlanTci, F::Parsed] {
        if m.get(f).1 != 0 {
            return Err(EncodeError::Unencodable(format!("match on {}", f.name())));
        }
    }
    for f in [F::InPort, F::EthSrc, F::EthDst, F::EthType] {
        by_key(f, buf)?;
    }
    // VLAN: OXM vid (+ pcp when a tag is required), else the whole TCI as NXM. Then MPLS
    // (Open vSwitch's order: tc, bos, label, ttl).
    let (tci, tci_mask) = m.get(F::VlanTci);
    let pcp_mask = tci_mask & 0xe000;
    let tagged = tci & tci_mask & 0x1000 != 0;
    if pcp_mask == 0 || (pcp_mask == 0xe000 && tagged) {
        emit(F::VlanVid, named!("OXM_OF_VLAN_VID"), buf)?;
        emit(F::VlanPcp, named!("OXM_OF_VLAN_PCP"), buf)?;
    } else {
        emit(F::VlanTci, named!("NXM_OF_VLAN_TCI"), buf)?;
    }
    for f in [F::MplsTc, F::MplsBos, F::MplsLabel, F::MplsTtl] {
        by_key(f, buf)?;
    }
    if eth == Some(0x0806) {
        for f in [F::ArpOp, F::Ipv4Src, F::Ipv4Dst, F::ArpSha, F::ArpTha] {
            by_key(f, buf)?;
        }
    }
    let l3 = [
        F::Ipv4Src,
        F::Ipv4Dst,
        F::Ipv6Src,
        F::Ipv6Dst,
        F::Ipv6Label,
        F::Ipv6Exthdr,
        F::IpFrag,
        F::IpDscp,
        F::IpEcn,
        F::IpTtl,
        F::IpProto,
    ];
    for f in l3 {
        if eth != Some(0x0806) || !matches!(f, F::Ipv4Src | F::Ipv4Dst) {
            by_key(f, buf)?;
        }
    }
    let icmp = match (eth, proto) {
        (Some(0x0800), Some(1)) => {
            Some((named!("OXM_OF_ICMPV4_TYPE"), named!("OXM_OF_ICMPV4_CODE")))
        }
        (Some(0x86dd), Some(58)) => {
            Some((named!("OXM_OF_ICMPV6_TYPE"), named!("OXM_OF_ICMPV6_CODE")))
        }
        _ => None,
    };
    if let Some((ty, code)) = icmp {
        for (port, f, def) in [(F::TpSrc, F::IcmpType, ty), (F::TpDst, F::IcmpCode, code)] {
            let mask = m.get(port).1;
            if mask != 0 && mask != 0xff {
                return Err(EncodeError::Unencodable(format!(
                    "match on {} with mask {mask:#x} under ICMP: {} takes the whole low byte",
                    port.name(),
                    def.name
                )));
            }
            emit(f, def, buf)?;
        }
    } else {
        for f in [F::TpSrc, F::TpDst] {
            by_key(f, buf)?;
        }
    }
    by_key(F::TcpFlags, buf)?;
    if eth != Some(0x0806) {
        for f in [F::NdTarget, F::ArpSha, F::ArpTha, F::ArpOp] {
            by_key(f, buf)?;
        }
    } else {
        by_key(F::NdTarget, buf)?;
    }
    by_key(F::TunnelId, buf)?;
    encode_tunnel_endpoints(m, buf, emit)?;
    by_key(F::Metadata, buf)
}

/// The tunnel endpoints of a match: the IPv4 names when only their low 32 bits are matched,
/// else the IPv6 names (between the tunnel id and metadata, where Open vSwitch puts them).
fn encode_tunnel_endpoints(
    m: &Match,
    buf: &mut Vec<u8>,
    emit: impl Fn(Field, &OxmDef, &mut Vec<u8>) -> Result<(), EncodeError>,
) -> Result<(), EncodeError> {
    for (v4, v6) in [(F::TunSrc, F::TunIpv6Src), (F::TunDst, F::TunIpv6Dst)] {
        let mask = m.get(v6).1;
        if mask == 0 {
            continue;
        }
        if mask >> 32 == 0 {
            emit(v4, def_for(v4, m).unwrap_or(&OXM_FIELDS[0]), buf)?;
        } else {
            emit(v6, def_for(v6, m).unwrap_or(&OXM_FIELDS[0]), buf)?;
        }
    }
    Ok(())
}

/// Appends an `ofp_match` (type OXM, length, fields, padding).
pub(crate) fn write_match(m: &Match, buf: &mut Vec<u8>) -> Result<(), EncodeError> {
    write_match_as_sent(m, None, buf)
}

/// Appends an `ofp_match` whose fields are written as `form` says ([`crate::as_sent`]).
pub(crate) fn write_match_as_sent(
    m: &Match,
    form: Option<&WireForm>,
    buf: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let start = buf.len();
    buf.put_u16(1);
    buf.put_u16(0);
    crate::as_sent::write_fields(m, form, buf)?;
    crate::wire::patch_len(buf, start + 2, start, "ofp_match")?;
    buf.pad_to_8(start);
    Ok(())
}

#[cfg(test)]
#[path = "oxm_tests.rs"]
mod tests;
