//! The flow key: a fixed layout of [`KEY_WORDS`] `u64` words that describes one packet.
//!
//! Every stage that classifies packets (exact-match cache, megaflow classifier, OpenFlow
//! tables) works on this struct. Masks have the same type and layout, so masking, hashing and
//! comparing are word loops. Each matchable field lives at a fixed word and bit range given by
//! [`Field::spec`]; values are stored as host integers of the field's network value (an IPv4
//! address `10.0.0.1` is `0x0a00_0001`).
//!
//! | word | bits 63..0 |
//! |---|---|
//! | 0 | `parsed` (16) · `dl_type` (16) · `in_port` (32) |
//! | 1 | `metadata` |
//! | 2 | `tun_id` |
//! | 3 | `eth_dst` (48) · `vlan_tci` (16; outer tag, bit 12 = tag present) |
//! | 4 | `eth_src` (48) · `cvlan_tci` (16; inner tag of QinQ, bit 12 = present) |
//! | 5 | `ipv4_src` / `arp_spa` (32) · `ipv4_dst` / `arp_tpa` (32) |
//! | 6 | `ip_proto` (8) · `ip_tos` (dscp 6 · ecn 2) · `ip_ttl` (8) · `ip_frag` (8) · `tp_src` (16) · `tp_dst` (16) |
//! | 7–8 | `ipv6_src` |
//! | 9–10 | `ipv6_dst` |
//! | 11 | `arp_sha` / `nd_sll` (48) · `arp_op` (16) |
//! | 12 | `arp_tha` / `nd_tll` (48) · `tcp_flags` (16) |
//! | 13–14 | `nd_target` |
//! | 15 | MPLS top label stack entry (32: `mpls_label` 20 · `mpls_tc` 3 · `mpls_bos` 1 · `mpls_ttl` 8) · unused (3) · `ipv6_exthdr` (9) · `ipv6_label` (20) |
//! | 16–17 | `tun_ipv6_src`; `tun_src` is the low 32 bits of word 17 |
//! | 18–19 | `tun_ipv6_dst`; `tun_dst` is the low 32 bits of word 19 |
//!
//! Tunnel metadata (words 2 and 16–19) describe the outer headers a packet arrived in
//! (written by tunnel termination; zero for a packet that did not come from a tunnel). An
//! IPv4 underlay's addresses sit in the low 32 bits of the 128-bit slots, so `tun_src` and
//! `tun_ipv6_src` are two fields over the same bits, and [`parsed::TUN_IPV4`] /
//! [`parsed::TUN_IPV6`] say which underlay the packet came over.
//!
//! ICMP and ICMPv6 type and code live in the low bytes of `tp_src` and `tp_dst`, as in Open
//! vSwitch, so that an L4 mask covers them.
//!
//! Room: the key is 20 words (160 bytes, padded to 192 by its 64-byte alignment; the
//! `const` assertions pin it). Words 16–19 were added for tunnel endpoints (issue 18); the
//! MPLS entry and `ipv6_exthdr` fill the last free bits of word 15, so the key holds the
//! *top* MPLS label stack entry only (Open vSwitch keeps three): a label below it is reached
//! by popping, not by matching. PBB's `pbb_isid` (24 bits) is not supported.

/// Number of `u64` words in a key.
pub const KEY_WORDS: usize = 20;

/// A flow key (or a mask of one): see the module documentation for the layout.
///
/// Equality is a word loop (xor and or over the words, no early exit), which compiles to a
/// few vector instructions instead of a call to `memcmp`.
#[derive(Clone, Copy, Eq, Default)]
#[repr(C, align(64))]
pub struct FlowKey {
    /// The words.
    pub w: [u64; KEY_WORDS],
}

impl PartialEq for FlowKey {
    #[inline(always)]
    fn eq(&self, other: &FlowKey) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            words_equal_sse2(&self.w, &other.w)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            words_equal(&self.w, &other.w)
        }
    }
}

/// Word equality without an early exit: the generic form of [`FlowKey`]'s `==`.
#[inline(always)]
pub fn words_equal(a: &[u64; KEY_WORDS], b: &[u64; KEY_WORDS]) -> bool {
    let mut diff = 0u64;
    for i in 0..KEY_WORDS {
        diff |= a[i] ^ b[i];
    }
    diff == 0
}

/// [`words_equal`] in `KEY_WORDS / 2` 16-byte xors and one test (SSE2 is part of every x86-64
/// CPU). Written with intrinsics because the optimizer turns the generic loop into a
/// compare-and-branch pair per word.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn words_equal_sse2(a: &[u64; KEY_WORDS], b: &[u64; KEY_WORDS]) -> bool {
    use core::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128,
        _mm_setzero_si128, _mm_xor_si128,
    };
    let (pa, pb) = (a.as_ptr() as *const __m128i, b.as_ptr() as *const __m128i);
    // SAFETY: both arrays are `KEY_WORDS * 8` bytes (KEY_WORDS is even), read as
    // `KEY_WORDS / 2` unaligned 16-byte vectors; SSE2 is always available on x86_64.
    unsafe {
        let mut acc = _mm_setzero_si128();
        for i in 0..KEY_WORDS / 2 {
            let x = _mm_xor_si128(_mm_loadu_si128(pa.add(i)), _mm_loadu_si128(pb.add(i)));
            acc = _mm_or_si128(acc, x);
        }
        _mm_movemask_epi8(_mm_cmpeq_epi8(acc, _mm_setzero_si128())) == 0xffff
    }
}

impl std::hash::Hash for FlowKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.w.hash(state);
    }
}

// 160 bytes of words, padded to three cache lines by the alignment.
const _: () = assert!(std::mem::size_of::<FlowKey>() == 192);
const _: () = assert!(std::mem::align_of::<FlowKey>() == 64);
// `hash` folds the words into four lanes of `KEY_WORDS / 4` words; SSE2 equality reads pairs.
const _: () = assert!(KEY_WORDS.is_multiple_of(4));

impl std::fmt::Debug for FlowKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut l = f.debug_map();
        for field in Field::ALL {
            let v = self.get(*field);
            if v != 0 {
                l.entry(&field.name(), &format_args!("{v:#x}"));
            }
        }
        l.finish()
    }
}

/// Bits of the `parsed` field (word 0, bits 48..64): which layers key extraction understood.
pub mod parsed {
    /// An Ethernet header was read.
    pub const ETH: u16 = 1 << 0;
    /// At least one VLAN tag (802.1Q or 802.1ad) was read.
    pub const VLAN: u16 = 1 << 1;
    /// Two VLAN tags (QinQ) were read.
    pub const QINQ: u16 = 1 << 2;
    /// An L3 header (IPv4, IPv6 or ARP) was read completely.
    pub const L3: u16 = 1 << 3;
    /// An L4 header (TCP, UDP, SCTP, ICMP, ICMPv6) was read completely.
    pub const L4: u16 = 1 << 4;
    /// IPv4 options were present (and skipped).
    pub const IP_OPTIONS: u16 = 1 << 5;
    /// IPv6 extension headers were present (and skipped).
    pub const IPV6_EXT: u16 = 1 << 6;
    /// The frame ended inside a header the type fields announced (counted as malformed).
    pub const TRUNCATED: u16 = 1 << 7;
    /// A header had an impossible value (bad IHL, version mismatch, …).
    pub const MALFORMED: u16 = 1 << 8;
    /// The packet arrived in a tunnel over IPv4: `tun_src` / `tun_dst` hold the outer
    /// addresses (in the low 32 bits of the `tun_ipv6_*` slots, whose other bits are zero).
    pub const TUN_IPV4: u16 = 1 << 9;
    /// The packet arrived in a tunnel over IPv6: `tun_ipv6_src` / `tun_ipv6_dst` hold the
    /// outer addresses.
    pub const TUN_IPV6: u16 = 1 << 10;
}

/// Values of the `ip_frag` field (word 6): bit 0 = is a fragment, bit 1 = a later fragment.
pub mod frag {
    /// The packet is a fragment (first or later).
    pub const ANY: u8 = 1;
    /// The packet is a fragment other than the first (no L4 header).
    pub const LATER: u8 = 2;
}

/// Bits of the `ipv6_exthdr` field (OpenFlow 1.3 `ofp_ipv6exthdr_flags`): which IPv6
/// extension headers the packet has, and whether they broke RFC 8200's order or repeated.
pub mod exthdr {
    /// A "no next header" (59) was reached.
    pub const NONEXT: u16 = 1 << 0;
    /// An encapsulating security payload header is present.
    pub const ESP: u16 = 1 << 1;
    /// An authentication header is present.
    pub const AUTH: u16 = 1 << 2;
    /// One or two destination options headers are present.
    pub const DEST: u16 = 1 << 3;
    /// A fragment header is present.
    pub const FRAG: u16 = 1 << 4;
    /// A routing header is present.
    pub const ROUTER: u16 = 1 << 5;
    /// A hop-by-hop options header is present.
    pub const HOP: u16 = 1 << 6;
    /// A header appeared more often than allowed.
    pub const UNREP: u16 = 1 << 7;
    /// Headers came out of the recommended order.
    pub const UNSEQ: u16 = 1 << 8;
}

/// Where a field lives in the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldSpec {
    /// First (most significant) word; 128-bit fields span `word` and `word + 1`.
    pub word: u8,
    /// Lowest bit within the word (for fields of at most 64 bits).
    pub shift: u8,
    /// Width in bits (1..=64, or 128).
    pub bits: u8,
}

macro_rules! fields {
    ($( $(#[$doc:meta])* $name:ident = ($word:expr, $shift:expr, $bits:expr, $text:expr); )*) => {
        /// A matchable and (where an action allows) writable field of the flow key.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Field {
            $( $(#[$doc])* $name, )*
        }

        impl Field {
            /// Every field, in layout order.
            pub const ALL: &'static [Field] = &[ $( Field::$name, )* ];

            /// Where the field lives.
            #[inline(always)]
            pub const fn spec(self) -> FieldSpec {
                match self {
                    $( Field::$name => FieldSpec { word: $word, shift: $shift, bits: $bits }, )*
                }
            }

            /// The name used in flow syntax (as `ovs-ofctl` spells it, OpenFlow 1.3 names).
            pub const fn name(self) -> &'static str {
                match self {
                    $( Field::$name => $text, )*
                }
            }
        }
    };
}

fields! {
    /// OpenFlow ingress port.
    InPort = (0, 0, 32, "in_port");
    /// Ethernet type (after VLAN tags).
    EthType = (0, 32, 16, "eth_type");
    /// Which layers were parsed (see [`parsed`]); not an OpenFlow field.
    Parsed = (0, 48, 16, "parsed");
    /// OpenFlow metadata register.
    Metadata = (1, 0, 64, "metadata");
    /// Tunnel id (VNI for VXLAN/Geneve).
    TunnelId = (2, 0, 64, "tun_id");
    /// Ethernet destination.
    EthDst = (3, 16, 48, "eth_dst");
    /// Outer VLAN TCI with bit 12 meaning "tag present" (OpenFlow's OFPVID_PRESENT).
    VlanTci = (3, 0, 16, "vlan_tci");
    /// VLAN id with the present bit (13 bits: OFPVID_PRESENT | vid).
    VlanVid = (3, 0, 13, "vlan_vid");
    /// VLAN priority.
    VlanPcp = (3, 13, 3, "vlan_pcp");
    /// Ethernet source.
    EthSrc = (4, 16, 48, "eth_src");
    /// Inner VLAN TCI of a QinQ frame, bit 12 = present.
    CvlanTci = (4, 0, 16, "cvlan_tci");
    /// IPv4 source (also ARP sender protocol address).
    Ipv4Src = (5, 32, 32, "ipv4_src");
    /// IPv4 destination (also ARP target protocol address).
    Ipv4Dst = (5, 0, 32, "ipv4_dst");
    /// IP protocol / IPv6 next header (after extension headers).
    IpProto = (6, 56, 8, "ip_proto");
    /// DSCP (6 bits).
    IpDscp = (6, 50, 6, "ip_dscp");
    /// ECN (2 bits).
    IpEcn = (6, 48, 2, "ip_ecn");
    /// IPv4 TTL / IPv6 hop limit.
    IpTtl = (6, 40, 8, "nw_ttl");
    /// Fragment bits (see [`frag`]).
    IpFrag = (6, 32, 8, "ip_frag");
    /// L4 source port (TCP/UDP/SCTP).
    TpSrc = (6, 16, 16, "tp_src");
    /// L4 destination port (TCP/UDP/SCTP).
    TpDst = (6, 0, 16, "tp_dst");
    /// ICMP / ICMPv6 type (low byte of `tp_src`).
    IcmpType = (6, 16, 8, "icmp_type");
    /// ICMP / ICMPv6 code (low byte of `tp_dst`).
    IcmpCode = (6, 0, 8, "icmp_code");
    /// IPv6 source.
    Ipv6Src = (7, 0, 128, "ipv6_src");
    /// IPv6 destination.
    Ipv6Dst = (9, 0, 128, "ipv6_dst");
    /// ARP sender hardware address (also ND source link-layer address).
    ArpSha = (11, 16, 48, "arp_sha");
    /// ARP opcode.
    ArpOp = (11, 0, 16, "arp_op");
    /// ARP target hardware address (also ND target link-layer address).
    ArpTha = (12, 16, 48, "arp_tha");
    /// TCP flags (12 bits).
    TcpFlags = (12, 0, 16, "tcp_flags");
    /// IPv6 neighbour discovery target.
    NdTarget = (13, 0, 128, "nd_target");
    /// IPv6 flow label (20 bits).
    Ipv6Label = (15, 0, 20, "ipv6_label");
    /// IPv6 extension-header pseudo-field (9 bits, see [`exthdr`]).
    Ipv6Exthdr = (15, 20, 9, "ipv6_exthdr");
    /// The top MPLS label stack entry as on the wire (label · tc · bos · ttl).
    MplsLse = (15, 32, 32, "mpls_lse");
    /// MPLS label of the top entry (20 bits).
    MplsLabel = (15, 44, 20, "mpls_label");
    /// MPLS traffic class of the top entry (3 bits).
    MplsTc = (15, 41, 3, "mpls_tc");
    /// MPLS bottom-of-stack bit of the top entry.
    MplsBos = (15, 40, 1, "mpls_bos");
    /// MPLS TTL of the top entry.
    MplsTtl = (15, 32, 8, "mpls_ttl");
    /// Outer IPv6 source of a tunnel packet (the remote endpoint it came from).
    TunIpv6Src = (16, 0, 128, "tun_ipv6_src");
    /// Outer IPv4 source of a tunnel packet (low 32 bits of `tun_ipv6_src`'s slot).
    TunSrc = (17, 0, 32, "tun_src");
    /// Outer IPv6 destination of a tunnel packet (the local endpoint).
    TunIpv6Dst = (18, 0, 128, "tun_ipv6_dst");
    /// Outer IPv4 destination of a tunnel packet (low 32 bits of `tun_ipv6_dst`'s slot).
    TunDst = (19, 0, 32, "tun_dst");
}

impl Field {
    /// Mask of the field's bits within its word (for fields of at most 64 bits).
    #[inline(always)]
    pub const fn word_mask(self) -> u64 {
        let s = self.spec();
        if s.bits >= 64 {
            u64::MAX
        } else {
            ((1u64 << s.bits) - 1) << s.shift
        }
    }

    /// The largest value the field can hold.
    pub const fn max_value(self) -> u128 {
        let b = self.spec().bits;
        if b >= 128 {
            u128::MAX
        } else {
            (1u128 << b) - 1
        }
    }

    /// Looks a field up by its [`Field::name`].
    pub fn from_name(name: &str) -> Option<Field> {
        Field::ALL.iter().copied().find(|f| f.name() == name)
    }
}

impl FlowKey {
    /// The all-zero key (also the all-wildcard mask).
    pub const ZERO: FlowKey = FlowKey { w: [0; KEY_WORDS] };
    /// The all-ones mask (exact match on every bit).
    pub const ONES: FlowKey = FlowKey {
        w: [u64::MAX; KEY_WORDS],
    };

    /// Reads a field.
    #[inline(always)]
    pub fn get(&self, f: Field) -> u128 {
        let s = f.spec();
        let w = s.word as usize;
        if s.bits == 128 {
            ((self.w[w] as u128) << 64) | self.w[w + 1] as u128
        } else {
            ((self.w[w] & f.word_mask()) >> s.shift) as u128
        }
    }

    /// Writes a field (bits above the field's width are ignored).
    #[inline(always)]
    pub fn set(&mut self, f: Field, v: u128) {
        let s = f.spec();
        let w = s.word as usize;
        if s.bits == 128 {
            self.w[w] = (v >> 64) as u64;
            self.w[w + 1] = v as u64;
        } else {
            let m = f.word_mask();
            self.w[w] = (self.w[w] & !m) | (((v as u64) << s.shift) & m);
        }
    }

    /// Sets the bits of `v` in a field, keeping those set (one OR into its word; for a field
    /// under 128 bits).
    #[inline(always)]
    pub fn or(&mut self, f: Field, v: u64) {
        let s = f.spec();
        self.w[s.word as usize] |= (v << s.shift) & f.word_mask();
    }

    /// Sets every bit of a field (for building masks).
    #[inline]
    pub fn set_all(&mut self, f: Field) {
        self.set(f, u128::MAX);
    }

    /// `self & mask`, word by word.
    #[inline(always)]
    pub fn masked(&self, mask: &FlowKey) -> FlowKey {
        let mut out = FlowKey::ZERO;
        for i in 0..KEY_WORDS {
            out.w[i] = self.w[i] & mask.w[i];
        }
        out
    }

    /// `self |= other`, word by word (union of masks).
    #[inline(always)]
    pub fn or_assign(&mut self, other: &FlowKey) {
        for i in 0..KEY_WORDS {
            self.w[i] |= other.w[i];
        }
    }

    /// Whether `self & mask == value` (where `value` is already masked).
    #[inline(always)]
    pub fn matches(&self, value: &FlowKey, mask: &FlowKey) -> bool {
        let mut diff = 0u64;
        for i in 0..KEY_WORDS {
            diff |= (self.w[i] & mask.w[i]) ^ value.w[i];
        }
        diff == 0
    }

    /// Whether every bit set in `self` is also set in `other` (mask inclusion).
    #[inline]
    pub fn is_subset_of(&self, other: &FlowKey) -> bool {
        (0..KEY_WORDS).all(|i| self.w[i] & !other.w[i] == 0)
    }

    /// A 32-bit hash of the whole key, for the exact-match cache (where a full key compare
    /// decides, so the hash only has to spread keys well; it is not cryptographic).
    ///
    /// The words are folded into 4 lanes (lane `j` takes words `j`, `j + 4`, …) with xor, add
    /// and constant rotations (the same operations in every lane, so the loop vectorizes), and
    /// the lanes are mixed with two 64×64→128-bit multiplies at the end: about a third of the
    /// work of hashing each word.
    /// Not equal to [`FlowKey::hash_words`] over all words (that one is the classifier's).
    #[inline(always)]
    pub fn hash(&self) -> u32 {
        let mut acc = [0u64; 4];
        for (j, a) in acc.iter_mut().enumerate() {
            let x0 = self.w[j] ^ HASH_SEEDS[j];
            let x1 = self.w[j + 4] ^ HASH_SEEDS[j + 4];
            let x2 = self.w[j + 8] ^ HASH_SEEDS[j + 8];
            let x3 = self.w[j + 12] ^ HASH_SEEDS[j + 12];
            let x4 = self.w[j + 16] ^ HASH_SEEDS[j + 16];
            *a = x0.wrapping_add(x1.rotate_left(23))
                ^ x2.wrapping_add(x3.rotate_left(23)).rotate_left(41)
                ^ x4.rotate_left(11);
        }
        let lo = acc[0].wrapping_add(acc[1].rotate_left(32));
        let hi = acc[2].wrapping_add(acc[3].rotate_left(32));
        finish(mix(lo) ^ hi)
    }

    /// A 32-bit hash of `self & mask` over the listed words only (the words a mask uses).
    /// Equal to [`FlowKey::hash_words`] of the masked key with the same word list.
    #[inline(always)]
    pub fn masked_hash(&self, mask: &FlowKey, words: &[u8]) -> u32 {
        let mut acc = [0u64; 4];
        for (j, &i) in words.iter().enumerate() {
            let i = i as usize;
            acc[j & 3] = acc[j & 3].wrapping_add(mix((self.w[i] & mask.w[i]) ^ HASH_SEEDS[i]));
        }
        finish(acc[0] ^ acc[1].rotate_left(17) ^ acc[2].rotate_left(31) ^ acc[3].rotate_left(47))
    }

    /// A 32-bit hash over the listed words (of a key that is already masked).
    #[inline(always)]
    pub fn hash_words(&self, words: &[u8]) -> u32 {
        self.masked_hash(&FlowKey::ONES, words)
    }

    /// A 32-bit hash of `self & mask` over the listed words, for hash tables that compare
    /// the full masked key on a hit (the megaflow classifier): one CRC32C step per word in
    /// two chains and one multiply at the end, instead of a multiply per word. Equal for
    /// keys equal under the mask, and to [`fold_hash`] of the masked words in `words` order;
    /// not equal to [`FlowKey::masked_hash`].
    #[inline(always)]
    pub fn masked_fold_hash(&self, mask: &FlowKey, words: &[u8]) -> u32 {
        fold_hash_iter(
            words.iter().map(|&i| {
                let i = i as usize % KEY_WORDS;
                self.w[i] & mask.w[i]
            }),
            words.len(),
        )
    }

    /// Indices of the words that have any bit set (for a mask: the words a lookup must read).
    pub fn nonzero_words(&self) -> arrayvec::ArrayVec<u8, KEY_WORDS> {
        (0..KEY_WORDS as u8)
            .filter(|&i| self.w[i as usize] != 0)
            .collect()
    }
}

const HASH_SEEDS: [u64; KEY_WORDS] = [
    0x9e37_79b9_7f4a_7c15,
    0xc2b2_ae3d_27d4_eb4f,
    0x1656_67b1_9e37_79f9,
    0x85eb_ca77_c2b2_ae63,
    0x27d4_eb2f_1656_67c5,
    0x94d0_49bb_1331_11eb,
    0xbf58_476d_1ce4_e5b9,
    0xd6e8_feb8_6659_fd93,
    0xa076_1d64_78bd_642f,
    0xe703_7ed1_a0b4_28db,
    0x8ebc_6af0_9c88_c6e3,
    0x5899_65cc_7537_4cc3,
    0x1d8e_4e27_c47d_124f,
    0x2d35_8dcc_aa6c_78a5,
    0x4f1b_bcdc_bfa5_4418,
    0x7a4b_1c5f_3f7c_2e59,
    0x3c6e_f372_fe94_f82b,
    0xa54f_f53a_5f1d_36f1,
    0x510e_527f_ade6_82d1,
    0x9b05_688c_2b3e_6c1f,
];

/// [`FlowKey::masked_fold_hash`] of a key whose masked words, in the mask's word order, are
/// `values`: lets a lookup that holds a mask's words in registers hash without the word list.
#[inline(always)]
pub fn fold_hash(values: &[u64]) -> u32 {
    fold_hash_iter(values.iter().copied(), values.len())
}

/// The fold hash of `n` word values.
#[inline(always)]
fn fold_hash_iter(values: impl Iterator<Item = u64>, n: usize) -> u32 {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse4.2"))]
    {
        use std::arch::x86_64::_mm_crc32_u64;
        // One CRC32C step per word (3-cycle latency, one per cycle), two chains so that
        // consecutive words do not wait on each other, one multiply to spread the bits.
        let (mut a, mut b) = (0u64, 0x9e37_79b9u64);
        for (j, x) in values.enumerate() {
            // SAFETY: the cfg above guarantees SSE4.2.
            if j & 1 == 0 {
                a = unsafe { _mm_crc32_u64(a, x) };
            } else {
                b = unsafe { _mm_crc32_u64(b, x) };
            }
        }
        let m = ((a << 32 | b) ^ n as u64).wrapping_mul(0x9fb2_1c65_1e98_df25);
        return (m >> 32) as u32;
    }
    #[allow(unreachable_code)]
    let (mut a, mut b) = (0u64, n as u64);
    for (j, x) in values.enumerate() {
        let x = x ^ HASH_SEEDS[j % KEY_WORDS];
        a = a.wrapping_add(x);
        b = (b ^ x).rotate_left(23);
    }
    finish(mix(a) ^ b)
}

#[inline(always)]
fn mix(x: u64) -> u64 {
    let m = (x as u128).wrapping_mul(0x9fb2_1c65_1e98_df25u128);
    (m as u64) ^ ((m >> 64) as u64)
}

#[inline(always)]
fn finish(x: u64) -> u32 {
    let x = mix(x ^ (x >> 29));
    (x ^ (x >> 32)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_fit_their_words_and_do_not_overlap_unless_aliases() {
        // Aliases share bits on purpose (vlan_vid/vlan_pcp within vlan_tci, icmp in tp_*).
        let aliases = [
            Field::VlanVid,
            Field::VlanPcp,
            Field::MplsLabel,
            Field::MplsTc,
            Field::MplsBos,
            Field::MplsTtl,
            Field::IcmpType,
            Field::IcmpCode,
        ];
        let mut used = [0u64; KEY_WORDS];
        for f in Field::ALL {
            let s = f.spec();
            if s.bits == 128 {
                assert!((s.word as usize) + 1 < KEY_WORDS);
                continue;
            }
            assert!(
                s.shift as u32 + s.bits as u32 <= 64,
                "{f:?} overflows its word"
            );
            if aliases.contains(f) {
                continue;
            }
            let m = f.word_mask();
            assert_eq!(used[s.word as usize] & m, 0, "{f:?} overlaps another field");
            used[s.word as usize] |= m;
        }
    }

    #[test]
    fn set_get_roundtrip_every_field() {
        for f in Field::ALL {
            let mut k = FlowKey::ZERO;
            let v = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210u128 & f.max_value();
            k.set(*f, v);
            assert_eq!(k.get(*f), v, "{f:?}");
            k.set(*f, 0);
            assert_eq!(k, FlowKey::ZERO, "{f:?} left bits behind");
        }
    }

    #[test]
    fn ipv4_tunnel_endpoints_are_the_low_bits_of_the_ipv6_slots() {
        let mut k = FlowKey::ZERO;
        k.set(Field::TunSrc, 0x0a00_0001);
        k.set(Field::TunDst, 0x0a00_0002);
        assert_eq!(k.get(Field::TunIpv6Src), 0x0a00_0001);
        assert_eq!(k.get(Field::TunIpv6Dst), 0x0a00_0002);
        assert_eq!(
            (k.w[16], k.w[17], k.w[18], k.w[19]),
            (0, 0x0a00_0001, 0, 0x0a00_0002)
        );
    }

    #[test]
    fn vlan_aliases_line_up_with_tci() {
        let mut k = FlowKey::ZERO;
        k.set(Field::VlanTci, 0xa000 | 0x1000 | 100);
        assert_eq!(k.get(Field::VlanVid), 0x1000 | 100);
        assert_eq!(k.get(Field::VlanPcp), 5);
    }

    #[test]
    fn mpls_fields_line_up_with_the_wire_entry() {
        let mut k = FlowKey::ZERO;
        // label 0x12345, tc 5, bos 1, ttl 64.
        k.set(Field::MplsLse, 0x1234_5b40);
        assert_eq!(k.get(Field::MplsLabel), 0x12345);
        assert_eq!(k.get(Field::MplsTc), 5);
        assert_eq!(k.get(Field::MplsBos), 1);
        assert_eq!(k.get(Field::MplsTtl), 64);
        assert_eq!(k.get(Field::Ipv6Label) | k.get(Field::Ipv6Exthdr), 0);
    }

    #[test]
    fn masked_hash_equals_hash_of_masked_key() {
        let mut k = FlowKey::ZERO;
        k.set(Field::Ipv4Src, 0x0a00_0001);
        k.set(Field::TpDst, 80);
        k.set(Field::EthDst, 0x0200_0000_0001);
        let mut m = FlowKey::ZERO;
        m.set_all(Field::Ipv4Src);
        m.set_all(Field::TpDst);
        let words = m.nonzero_words();
        assert_eq!(k.masked_hash(&m, &words), k.masked(&m).hash_words(&words));
        assert!(k.matches(&k.masked(&m), &m));
        let mut other = k;
        other.set(Field::EthDst, 7);
        assert!(other.matches(&k.masked(&m), &m));
        other.set(Field::TpDst, 81);
        assert!(!other.matches(&k.masked(&m), &m));
    }

    #[test]
    fn equality_is_word_equality() {
        let mut a = FlowKey::ZERO;
        a.set(Field::Ipv4Src, 0x0a00_0001);
        let mut b = a;
        assert_eq!(a, b);
        for i in 0..KEY_WORDS {
            for bit in [0, 31, 63] {
                b.w[i] ^= 1 << bit;
                assert_ne!(a, b, "word {i} bit {bit}");
                b.w[i] ^= 1 << bit;
            }
        }
        assert_eq!(a, b);
    }

    #[test]
    fn masked_fold_hash_depends_on_masked_bits_only_and_spreads() {
        let mut m = FlowKey::ZERO;
        m.set_all(Field::InPort);
        m.set_all(Field::EthDst);
        m.set_all(Field::Ipv4Src);
        let words = m.nonzero_words();
        let mut k = FlowKey::ZERO;
        k.set(Field::InPort, 1);
        k.set(Field::EthDst, 0x0200_0000_0002);
        k.set(Field::TpSrc, 99);
        let h = k.masked_fold_hash(&m, &words);
        assert_eq!(h, k.masked(&m).masked_fold_hash(&FlowKey::ONES, &words));
        let values: Vec<u64> = words
            .iter()
            .map(|&i| k.w[i as usize] & m.w[i as usize])
            .collect();
        assert_eq!(
            h,
            fold_hash(&values),
            "fold_hash of the masked words in order"
        );
        assert_ne!(fold_hash(&[]), fold_hash(&[0]), "the word count is hashed");
        let mut other = k;
        other.set(Field::TpSrc, 100);
        assert_eq!(
            other.masked_fold_hash(&m, &words),
            h,
            "unmasked bits changed it"
        );
        // One masked field varying: 65536 keys into 4096 buckets, both halves of the hash.
        let (mut low, mut high) = (vec![0u32; 4096], vec![0u32; 4096]);
        let mut seen = std::collections::HashSet::new();
        for v in 0..65536u32 {
            let mut x = k;
            x.set(Field::Ipv4Src, 0x0a00_0000 | v as u128);
            let h = x.masked_fold_hash(&m, &words);
            low[h as usize % 4096] += 1;
            high[(h >> 16) as usize % 4096] += 1;
            seen.insert(h);
        }
        assert!(*low.iter().max().unwrap() < 48 && *high.iter().max().unwrap() < 48);
        assert!(seen.len() > 65_000, "{} distinct", seen.len());
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn sse2_equality_agrees_with_the_generic_loop() {
        let mut rng = 0x1234_5678_9abc_def0u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for _ in 0..2000 {
            let mut a = [0u64; KEY_WORDS];
            a.iter_mut().for_each(|w| *w = next());
            let mut b = a;
            if next() % 2 == 0 {
                let i = (next() % KEY_WORDS as u64) as usize;
                b[i] ^= 1 << (next() % 64);
            }
            assert_eq!(words_equal_sse2(&a, &b), words_equal(&a, &b));
        }
    }

    /// The exact-match cache indexes with the low bits of `hash()` and with bits 16.. of it:
    /// keys that differ in one field (a port, an address) must spread evenly over both.
    #[test]
    fn hash_spreads_single_field_variation() {
        let base = {
            let mut k = FlowKey::ZERO;
            k.set(Field::InPort, 1);
            k.set(Field::EthType, 0x0800);
            k.set(Field::IpProto, 17);
            k
        };
        let fields = [
            Field::TpSrc,
            Field::TpDst,
            Field::Ipv4Src,
            Field::Ipv4Dst,
            Field::EthSrc,
            Field::InPort,
            Field::Ipv6Label,
            Field::TunSrc,
            Field::TunDst,
        ];
        const BUCKETS: usize = 4096;
        const KEYS: u32 = 65536;
        for f in fields {
            let mut low = vec![0u32; BUCKETS];
            let mut high = vec![0u32; BUCKETS];
            for v in 0..KEYS {
                let mut k = base;
                k.set(f, v as u128);
                let h = k.hash();
                low[h as usize % BUCKETS] += 1;
                high[(h >> 16) as usize % BUCKETS] += 1;
            }
            // 16 keys per bucket on average; a good spread stays far below 48.
            let (lmax, hmax) = (low.iter().max().unwrap(), high.iter().max().unwrap());
            assert!(
                *lmax < 48 && *hmax < 48,
                "{f:?}: max bucket {lmax} / {hmax}"
            );
        }
    }

    /// Two fields varying together (source and destination port, address and port) must
    /// not cancel out.
    #[test]
    fn hash_has_no_collisions_on_correlated_fields() {
        let mut seen = std::collections::HashSet::new();
        for v in 0..20_000u32 {
            let mut k = FlowKey::ZERO;
            k.set(Field::TpSrc, (v & 0xffff) as u128);
            k.set(Field::TpDst, (v & 0xffff) as u128);
            k.set(Field::Ipv4Src, v as u128);
            k.set(Field::Ipv4Dst, v as u128);
            seen.insert(k.hash());
        }
        // 20k keys into 2^32 values: a handful of chance collisions at most.
        assert!(seen.len() > 19_990, "{} distinct", seen.len());
    }
}
