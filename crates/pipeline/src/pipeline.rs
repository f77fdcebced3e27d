//! The seam with the datapath: [`Pipeline`], an immutable snapshot of everything translation
//! reads, and [`PipelineCell`], the atomically swapped pointer to the current snapshot plus
//! the generation number datapath threads use to know when cached megaflows may be stale.
//!
//! Ordering: the control side stores a new snapshot *then* increments the generation
//! (release); a thread that reads the generation (acquire) and then loads the snapshot sees a
//! snapshot at least as new as that generation. Translations made under an older generation
//! must be revalidated: [`PipelineCell::changes_since`] says what each publish changed
//! ([`crate::changes`]), so that a reader can keep the megaflows no change can affect.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;
use packet::{Field, FlowKey};

use crate::changes::{Cursor, Log, Published, Since};
use crate::group::GroupTable;
use crate::meter::MeterState;
use crate::model::MAX_TABLE;
use crate::normal::MacTable;
use crate::table::{FlowTable, TableStats};
use crate::Translation;

/// Settings of a pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipelineConfig {
    /// dec-TTL on a packet with TTL 0 or 1 sends it to the controller (reason InvalidTtl)
    /// instead of dropping it (OpenFlow `OFPC_INVALID_TTL_TO_CONTROLLER`).
    pub invalid_ttl_to_controller: bool,
    /// NORMAL: milliseconds after which an unseen MAC is forgotten.
    pub mac_aging_ms: u64,
    /// NORMAL: most MACs remembered.
    pub mac_capacity: usize,
    /// Most flow entries per table (an add beyond it gets OFPFMFC_TABLE_FULL).
    pub table_capacity: usize,
    /// Most flow entries in all tables together (OFPFMFC_TABLE_FULL beyond it). A flow entry
    /// takes about 670 bytes, so the default 4,000,000 bounds the tables near 2.7 GB.
    pub total_capacity: usize,
    /// Most datapath actions one translation may produce (FLOOD, ALL and all-groups expand);
    /// a translation over the limit drops the packet.
    pub max_actions: usize,
    /// Tables track IPv4/IPv6 address prefixes so that a rule that cannot match a packet puts
    /// only the address bits that tell it into the megaflow mask, not the whole address
    /// (Open vSwitch's per-table `prefixes`; see `classifier.rs`). On by default; off makes a
    /// megaflow per address wherever a rule matches an exact address.
    pub prefix_tracking: bool,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            invalid_ttl_to_controller: false,
            mac_aging_ms: 300_000,
            mac_capacity: 8192,
            table_capacity: 2_000_000,
            total_capacity: 4_000_000,
            max_actions: 4096,
            prefix_tracking: true,
        }
    }
}

/// One port as the pipeline sees it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PortInfo {
    /// OpenFlow port number.
    pub no: u32,
    /// Name.
    pub name: String,
    /// Excluded from FLOOD (`OFPPC_NO_FWD`'s flood sibling, OpenFlow 1.0 `NO_FLOOD`).
    pub no_flood: bool,
    /// Packets output to it are dropped (`OFPPC_NO_FWD`).
    pub no_fwd: bool,
    /// Packets received on it never go to the controller (`OFPPC_NO_PACKET_IN`).
    pub no_packet_in: bool,
    /// Administratively down (`OFPPC_PORT_DOWN`): excluded from FLOOD.
    pub down: bool,
    /// Link is up (`OFPPS_LIVE`): decides fast-failover buckets.
    pub live: bool,
}

/// State shared by the control side, every snapshot and the cell.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) generation: AtomicU64,
    pub(crate) mac: MacTable,
    pub(crate) stats: Vec<TableStats>,
    /// What recent publishes changed (see [`crate::changes`]).
    pub(crate) log: Log,
}

impl Shared {
    pub(crate) fn new(cfg: &PipelineConfig) -> Self {
        Shared {
            generation: AtomicU64::new(1),
            mac: MacTable::new(cfg.mac_aging_ms, cfg.mac_capacity),
            stats: (0..=MAX_TABLE).map(|_| TableStats::default()).collect(),
            log: Log::new(),
        }
    }

    /// Bumps the generation for a change the change log does not track (MAC learning,
    /// ports): readers flush every cached translation.
    pub(crate) fn bump(&self) {
        self.log.full();
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Bumps the generation after a publish whose record is in the log.
    pub(crate) fn bump_published(&self) {
        self.generation.fetch_add(1, Ordering::Release);
    }
}

/// An immutable snapshot of the pipeline: tables, groups, meters, ports and settings.
#[derive(Debug)]
pub struct Pipeline {
    pub(crate) tables: Vec<Arc<FlowTable>>,
    pub(crate) groups: Arc<GroupTable>,
    pub(crate) meters: Arc<HashMap<u32, Arc<MeterState>>>,
    /// Sorted by port number.
    pub(crate) ports: Arc<Vec<PortInfo>>,
    pub(crate) config: PipelineConfig,
    pub(crate) shared: Arc<Shared>,
}

impl Pipeline {
    /// The state of meter `id` (what the datapath polices `DpAction::Meter(id)` with).
    #[inline]
    pub fn meter(&self, id: u32) -> Option<&Arc<MeterState>> {
        self.meters.get(&id)
    }

    /// Flow table `id` (0..=254).
    pub fn table(&self, id: u8) -> Option<&FlowTable> {
        self.tables.get(id as usize).map(|t| &**t)
    }

    /// The group table.
    pub fn groups(&self) -> &GroupTable {
        &self.groups
    }

    /// Every port, by number.
    pub fn ports(&self) -> &[PortInfo] {
        &self.ports
    }

    /// Port `no`.
    #[inline]
    pub fn port(&self, no: u32) -> Option<&PortInfo> {
        self.ports
            .binary_search_by_key(&no, |p| p.no)
            .ok()
            .map(|i| &self.ports[i])
    }

    /// Settings.
    pub fn config(&self) -> &PipelineConfig {
        &self.config
    }

    /// The NORMAL MAC learning table.
    pub fn mac_table(&self) -> &MacTable {
        &self.shared.mac
    }

    /// Whether port `no` exists, is up and live (fast-failover liveness).
    pub fn port_live(&self, no: u32) -> bool {
        self.port(no).is_some_and(|p| p.live && !p.down)
    }
}

/// The fields a select group hashes (L2–L4 of the flow), as a mask.
pub(crate) fn select_hash_mask() -> &'static (FlowKey, arrayvec::ArrayVec<u8, { packet::KEY_WORDS }>)
{
    static MASK: OnceLock<(FlowKey, arrayvec::ArrayVec<u8, { packet::KEY_WORDS }>)> =
        OnceLock::new();
    MASK.get_or_init(|| {
        let mut m = FlowKey::ZERO;
        for f in [
            Field::EthSrc,
            Field::EthDst,
            Field::EthType,
            Field::VlanVid,
            Field::IpProto,
            Field::Ipv4Src,
            Field::Ipv4Dst,
            Field::Ipv6Src,
            Field::Ipv6Dst,
            Field::TpSrc,
            Field::TpDst,
        ] {
            m.set_all(f);
        }
        let words = m.nonzero_words();
        (m, words)
    })
}

/// What datapath threads hold: the current snapshot and the generation counter.
#[derive(Debug)]
pub struct PipelineCell {
    pub(crate) current: ArcSwap<Pipeline>,
    pub(crate) shared: Arc<Shared>,
}

impl PipelineCell {
    /// The current snapshot (lock-free).
    #[inline]
    pub fn load(&self) -> Arc<Pipeline> {
        self.current.load_full()
    }

    /// Translates `key` through the current snapshot into `out` (see
    /// [`Pipeline::translate`]). Cheaper than `load().translate(..)`: it borrows the snapshot
    /// instead of taking a reference, so threads translating at once do not contend on the
    /// snapshot's reference count.
    #[inline]
    pub fn translate(&self, key: &FlowKey, out: &mut Translation) {
        self.current.load().translate(key, out);
    }

    /// Makes every datapath thread drop its cached megaflows at its next batch: for a change
    /// outside the pipeline that megaflows depend on (a tunnel port's next hop and outer
    /// headers).
    pub fn invalidate_megaflows(&self) {
        self.shared.bump();
    }

    /// A number that changes whenever any translation result could change: a published
    /// snapshot, a MAC table change, a port liveness change.
    #[inline]
    pub fn generation(&self) -> u64 {
        self.shared.generation.load(Ordering::Acquire)
    }

    /// The records of the publishes since `cursor` (appended to `out`), or [`Since::Full`]
    /// when something the log does not track changed or the reader fell too far behind
    /// (see [`crate::changes`]). Call after [`PipelineCell::generation`] showed a change;
    /// translations made afterwards see a snapshot at least as new as the records taken.
    /// Lock-free; allocates only when `out` must grow.
    pub fn changes_since(&self, cursor: &mut Cursor, out: &mut Vec<Arc<Published>>) -> Since {
        self.shared.log.since(cursor, out)
    }
}
