//! One bridge assembled from its parts: ports, the OpenFlow pipeline (control side and the
//! published snapshot), and the datapath that forwards between the ports.

use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use datapath::{Datapath, DpConfig};
use packet::Pool;
use pipeline::{Control, PipelineCell, PipelineConfig, PortInfo};
use port::Port;

/// A port with its OpenFlow number.
pub struct SwitchPort {
    /// OpenFlow port number.
    pub ofport: u32,
    /// Name.
    pub name: String,
    /// The backend.
    pub port: Arc<dyn Port>,
    /// Its ingress policing (default: none).
    pub policing: port::Policing,
    /// Its egress queues (default: none).
    pub egress: port::Egress,
    /// Its rx queues pinned to cores: `(queue, core)` (default: none).
    pub rxq_affinity: Vec<(u16, usize)>,
}

/// A bridge, ready to start.
pub struct Switch {
    /// Bridge name.
    pub name: String,
    /// Buffer pool shared by its ports.
    pub pool: Pool,
    /// Ports.
    pub ports: Vec<SwitchPort>,
    /// Control side of the pipeline.
    pub control: Control,
    /// What the datapath reads.
    pub cell: Arc<PipelineCell>,
    /// Datapath tuning.
    pub config: DpConfig,
    /// Core of the priority lane (`None`: the first poll thread's).
    pub lane_core: Option<usize>,
}

impl Switch {
    /// Builds a bridge with `flows` (ovs-ofctl syntax) installed and pipeline settings
    /// `config`; no flows means standalone L2 learning (`priority=0,actions=normal`).
    pub fn new(
        name: &str,
        pool: Pool,
        ports: Vec<SwitchPort>,
        flows: &[String],
        config: PipelineConfig,
    ) -> Result<Switch> {
        let mut mods = Vec::new();
        for f in flows {
            mods.push(pipeline::ofctl::parse_flow(f).map_err(|e| anyhow!("{e}"))?);
        }
        if mods.is_empty() {
            mods.push(
                pipeline::ofctl::parse_flow("table=0,priority=0,actions=normal")
                    .map_err(|e| anyhow!("{e}"))?,
            );
        }
        Self::with_exact_flow_mods(name, pool, ports, mods, config)
    }

    /// Builds a bridge with exactly `mods` installed (none: empty tables; the OpenFlow
    /// bridge's fail mode decides what happens without a controller).
    pub fn with_exact_flow_mods(
        name: &str,
        pool: Pool,
        ports: Vec<SwitchPort>,
        mods: Vec<pipeline::FlowMod>,
        config: PipelineConfig,
    ) -> Result<Switch> {
        let (mut control, cell) = Control::new(config);
        control.set_ports(
            ports
                .iter()
                .map(|p| PortInfo {
                    no: p.ofport,
                    name: p.name.clone(),
                    live: true,
                    ..PortInfo::default()
                })
                .collect(),
        );
        control
            .apply(&mods)
            .map_err(|(i, e)| anyhow!("bridge {name}: flow {}: {e}", i + 1))?;
        control.publish();
        Ok(Switch {
            name: name.to_string(),
            pool,
            ports,
            control,
            cell,
            config: DpConfig::default(),
            lane_core: None,
        })
    }

    fn datapath(&self, cores: &[Option<usize>]) -> datapath::Builder {
        let mut b = Datapath::builder()
            .pool(self.pool.clone())
            .pipeline(self.cell.clone())
            .threads(cores.to_vec())
            .lane_core(self.lane_core)
            .config(self.config.clone());
        for p in &self.ports {
            b = b.port(p.ofport, p.port.clone());
            if p.policing.is_on() {
                b = b.policing(p.ofport, p.policing);
            }
            if p.egress.is_on() {
                b = b.egress(p.ofport, p.egress.clone());
            }
            b = b.rxq_affinity(p.ofport, p.rxq_affinity.clone());
        }
        b
    }

    /// The datapath with threads on `cores`, not started: its tunnel table can be filled
    /// before [`Datapath::build_pmds`] makes the threads' states (for benchmarks).
    pub fn build(&self, cores: &[Option<usize>]) -> Result<Datapath> {
        self.datapath(cores)
            .build()
            .map_err(|e| anyhow!("{e}"))
            .with_context(|| format!("bridge {}", self.name))
    }

    /// Starts poll-mode threads on `cores`.
    pub fn start(&self, cores: &[Option<usize>]) -> Result<datapath::Running> {
        self.datapath(cores)
            .start()
            .map_err(|e| anyhow!("{e}"))
            .with_context(|| format!("bridge {}", self.name))
    }
}
