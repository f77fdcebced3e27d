//! `hayate run` and `hayate check`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use clap::Args;
use packet::{Pool, PoolConfig};

use std::sync::Arc;

use crate::config;
use crate::openflow_side::{default_run_dir, OpenFlowSettings};
use crate::switch::{Switch, SwitchPort};

/// Options of `hayate run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// A TOML config of bridges, ports and flows (see docs/config.md).
    #[arg(long, short)]
    pub config: Option<PathBuf>,
    /// Without a config: a port of the one standalone bridge, numbered in the order given
    /// (`null:`, `null:sink`, `ring:NAME`, `pcap:in=FILE`, `pcap:out=FILE`, `afxdp:IFNAME`,
    /// `afpacket:IFNAME`, `tap:NAME`, `vhostuser:PATH` for a VM); any of them may add
    /// `,ingress_policing_rate=KBPS[,ingress_policing_burst=KBIT]`,
    /// `,ingress_policing_kpkts_rate=KPPS[,ingress_policing_kpkts_burst=KPKTS]` and
    /// `,rxq_affinity=QUEUE:CORE` (docs/config.md).
    #[arg(long = "port", short = 'p')]
    pub ports: Vec<String>,
    /// Without a config: cores for poll threads (default: the last core).
    #[arg(long = "core")]
    pub cores: Vec<usize>,
    /// Without a config: the core of the priority lane, the thread that serves control frames
    /// (ARP, ICMP, TCP SYNs) of AF_PACKET and AF_XDP ports (default: the first poll thread's).
    /// A housekeeping core spares them the wait for a poll thread's system call.
    #[arg(long)]
    pub lane_core: Option<usize>,
    /// Stop after this many seconds (default: run until interrupted).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Print port counters every this many seconds (0: only at exit).
    #[arg(long, default_value_t = 1.0)]
    pub stats_interval: f64,
    /// Frames in the packet buffer pool.
    #[arg(long, default_value_t = 65536)]
    pub pool_frames: u32,
    /// Bytes per pool frame: 2048 (frames up to 1920 bytes), or 4096, 8192, 16384 for jumbo
    /// frames (16384 holds 16256 bytes; give ports MTU 9000 and use afpacket or tap ports:
    /// AF_XDP ports need 2048).
    #[arg(long, default_value_t = packet::FRAME_SIZE)]
    pub frame_size: usize,
    /// Busy-poll even when idle (lowest latency, a full core per thread). By default a thread
    /// whose queues stay empty for 200 µs sleeps until packets arrive.
    #[arg(long)]
    pub busy_poll: bool,
    /// The poll threads share their cores with other busy threads (another switch, VMs'
    /// vCPUs): after each poll that finds nothing, a thread yields its core
    /// (`sched_yield`), so that the others run at once rather than at the scheduler's next
    /// tick. Costs a system call per empty poll; leave it off on cores the switch owns.
    #[arg(long)]
    pub shared_core: bool,
    /// Do not join TCP segments into super-packets for ports that take them (VMs' ports;
    /// every bridge, as a bridge's `gro = false` does for one).
    #[arg(long)]
    pub no_gro: bool,
    /// At exit, write every port's final counters to this file as JSON:
    /// `[{"bridge", "ofport", "name", "rx_packets", "rx_bytes", ...}]` (`rx_dropped` and
    /// `rx_errors` as `dump-ports` shows them; the switch's drops by reason as `dump-drops`).
    #[arg(long)]
    pub stats_json: Option<PathBuf>,
    /// A controller target, repeatable: tcp:HOST:PORT, ssl:HOST:PORT, ptcp:PORT[:IP],
    /// pssl:PORT[:IP], unix:PATH, punix:PATH (default: ptcp:6653:127.0.0.1). Applies to every
    /// bridge of a config.
    #[arg(long = "controller")]
    pub controllers: Vec<String>,
    /// What a bridge does without a controller: standalone (L2 learning, the default) or
    /// secure (keep flows, forward nothing new).
    #[arg(long)]
    pub fail_mode: Option<String>,
    /// Datapath id in hex (one bridge only; default: derived from the bridge name).
    #[arg(long)]
    pub datapath_id: Option<String>,
    /// Packet-ins per second each controller may receive, for every bridge (default 1000,
    /// or `packet_in_rate` in the config); the rest are counted and dropped.
    #[arg(long)]
    pub packet_in_rate: Option<u32>,
    /// CA certificate (PEM) for ssl:/pssl: controllers.
    #[arg(long)]
    pub ssl_ca: Option<String>,
    /// The switch's certificate (PEM) for ssl:/pssl:.
    #[arg(long)]
    pub ssl_cert: Option<String>,
    /// The switch's private key (PEM) for ssl:/pssl:.
    #[arg(long)]
    pub ssl_key: Option<String>,
    /// Folder of the management sockets `<bridge>.mgmt` that `hayate ctl` talks to (default:
    /// /run/hayate as root, else $XDG_RUNTIME_DIR/hayate).
    #[arg(long)]
    pub run_dir: Option<PathBuf>,
    /// Serve the switch's counters (ports, drops by reason, poll threads, tables, controllers)
    /// to Prometheus over HTTP on ADDR/metrics, e.g. 127.0.0.1:9464.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,
    /// Take bridges, ports and controllers from an OVSDB server (Open vSwitch's database, as
    /// ovs-vswitchd does) and apply its changes live: unix:PATH or tcp:HOST:PORT, e.g.
    /// unix:/run/openvswitch/db.sock. See docs/ovsdb.md.
    #[arg(long, value_name = "TARGET", conflicts_with_all = ["config", "ports"])]
    pub ovsdb: Option<String>,
}

static STOP_FLAG: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP_FLAG.store(true, Ordering::Relaxed);
}

fn bridges_from(args: &RunArgs) -> Result<Vec<config::Bridge>> {
    if let Some(path) = &args.config {
        if !args.ports.is_empty() {
            bail!(
                "--port is for running without a config; put ports in {}",
                path.display()
            );
        }
        if !args.cores.is_empty() || args.lane_core.is_some() {
            bail!(
                "--core and --lane-core are for running without a config; put cores = [..] and \
                 lane_core = N in the bridge of {}",
                path.display()
            );
        }
        return Ok(config::load(path)?);
    }
    if args.ports.is_empty() {
        bail!(
            "nothing to run: give --config FILE, or ports with --port SPEC (e.g. --port null: --port null:sink)"
        );
    }
    Ok(vec![config::Bridge {
        name: "br0".into(),
        cores: args.cores.clone(),
        lane_core: args.lane_core,
        gro: true,
        ports: args
            .ports
            .iter()
            .enumerate()
            .map(|(i, s)| (i as u32 + 1, s.clone(), s.clone()))
            .collect(),
        flows: Vec::new(),
        datapath_id: None,
        controllers: Vec::new(),
        fail_mode: agent::FailMode::default(),
        tls: None,
        packet_in_limit: agent::RateLimit::default(),
        pipeline: pipeline::PipelineConfig::default(),
        packet_in_port: None,
        tunnel_refresh: crate::tunnels::REFRESH_INTERVAL,
    }])
}

/// The OpenFlow settings of bridge `b`, command-line options over config keys.
pub(crate) fn openflow_settings(
    args: &RunArgs,
    b: &config::Bridge,
    nbridges: usize,
) -> Result<OpenFlowSettings> {
    let datapath_id = match &args.datapath_id {
        Some(_) if nbridges > 1 => bail!(
            "--datapath-id names one bridge's id but the config has {nbridges} bridges; set datapath_id per bridge in the config"
        ),
        Some(t) => Some(config::parse_datapath_id(t).map_err(|e| anyhow!(e))?),
        None => b.datapath_id,
    };
    for t in &args.controllers {
        agent::Target::parse(t)?;
    }
    let fail_mode = match &args.fail_mode {
        Some(f) => config::parse_fail_mode(f).map_err(|e| anyhow!(e))?,
        None => b.fail_mode,
    };
    let tls = match config::tls_files(
        args.ssl_ca.as_deref(),
        args.ssl_cert.as_deref(),
        args.ssl_key.as_deref(),
    )
    .map_err(|e| anyhow!(e))?
    {
        Some(t) => Some(t),
        None => b.tls.clone(),
    };
    let mut packet_in_limit = b.packet_in_limit;
    if let Some(r) = args.packet_in_rate {
        packet_in_limit.rate =
            config::check_packet_in("--packet-in-rate", r).map_err(|e| anyhow!(e))?;
        // A burst of a tenth of a second's worth, as the default (1000/s, 100).
        packet_in_limit.burst = packet_in_limit.burst.max(r / 10).max(1);
    }
    Ok(OpenFlowSettings {
        packet_in_limit,
        datapath_id,
        controllers: if args.controllers.is_empty() {
            b.controllers.clone()
        } else {
            args.controllers.clone()
        },
        fail_mode,
        tls,
        run_dir: Some(args.run_dir.clone().unwrap_or_else(default_run_dir)),
        default_listener: true,
        probe_interval: None,
    })
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // A second initialisation (tests) is harmless.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Runs `hayate run`.
pub fn run(args: RunArgs) -> Result<()> {
    init_logging();
    // Before any listener accepts: the agent's descriptor budget is read from this limit.
    if let Err(e) = crate::fdlimit::raise() {
        eprintln!("warning: cannot raise the descriptor limit: {e}");
    }
    let bridges = if args.ovsdb.is_some() {
        Vec::new()
    } else {
        bridges_from(&args)?
    };
    let metrics = args
        .metrics
        .as_deref()
        .map(crate::metrics::bind)
        .transpose()?;
    let metric_sources = crate::metrics::Sources::default();
    let nbridges = bridges.len();
    let last_core = cpu::available_cores().saturating_sub(1);
    // Before any other thread starts (they inherit this thread's cores): housekeeping —
    // controller connections, the control side, timers — stays off the poll threads' cores.
    let poll_cores: Vec<usize> = bridges
        .iter()
        .flat_map(|b| {
            if b.cores.is_empty() {
                vec![last_core]
            } else {
                b.cores.clone()
            }
        })
        .collect();
    match cpu::keep_off(&poll_cores) {
        Ok(left) => {
            tracing::info!(cores = ?left, "housekeeping threads off the poll threads' cores")
        }
        Err(e) => eprintln!("warning: housekeeping threads may share the poll threads' cores: {e}"),
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("hayate-agent")
        .enable_all()
        .build()
        .map_err(|e| anyhow!("cannot start the controller connections' runtime: {e}"))?;
    let pool = Pool::new(&PoolConfig {
        frames: args.pool_frames,
        hugepages: true,
        populate: false,
        frame_size: args.frame_size,
    })
    .map_err(|e| anyhow!("--pool-frames/--frame-size: {e}"))?;
    crate::pool_watch::spawn(pool.clone(), &STOP_FLAG);
    if let Some(target) = &args.ovsdb {
        let metrics = metrics
            .map(|l| crate::metrics::serve(&rt, l, metric_sources.clone()))
            .transpose()?;
        let r = crate::ovsdb::run(
            target,
            &args,
            &rt,
            &pool,
            last_core,
            &metric_sources,
            &STOP_FLAG,
        );
        drop(metrics);
        rt.shutdown_timeout(Duration::from_secs(1));
        return r;
    }
    let mut running = Vec::new();
    for b in bridges {
        let settings = openflow_settings(&args, &b, nbridges)?;
        let started = start_bridge(&rt, &args, b, &pool, settings, last_core)?;
        lock(&metric_sources).push(crate::metrics::BridgeSource::of(&started));
        running.push(started);
    }
    let metrics = metrics
        .map(|l| crate::metrics::serve(&rt, l, metric_sources))
        .transpose()?;
    // SAFETY: installing a handler that only stores to an atomic.
    unsafe {
        let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
    let start = Instant::now();
    let mut last_print = Instant::now();
    while !STOP_FLAG.load(Ordering::Relaxed) {
        // Timeouts and MAC aging run in each bridge's pump (control side, agent runtime).
        std::thread::sleep(Duration::from_millis(50));
        if let Some(d) = args.duration {
            if start.elapsed().as_secs_f64() >= d {
                break;
            }
        }
        if args.stats_interval > 0.0 && last_print.elapsed().as_secs_f64() >= args.stats_interval {
            print_stats(&running);
            last_print = Instant::now();
        }
    }
    drop(metrics);
    let mut finals = Vec::new();
    for (view, handle, side) in running {
        // The pump holds the datapath too: stop it first, then the poll threads; read the
        // final counters before the datapath goes (the bridge only holds it weakly).
        drop(side);
        let rows = match Arc::try_unwrap(handle) {
            Ok(mut h) => {
                h.stop();
                view.rows(Some(&h))
            }
            Err(h) => view.rows(Some(&h)),
        };
        finals.push((view.name, rows));
    }
    rt.shutdown_timeout(Duration::from_secs(1));
    print_rows(&finals);
    if let Some(path) = &args.stats_json {
        write_stats_json(path, &finals)?;
    }
    Ok(())
}

/// Starts bridge `b` (its ports opened in `pool`, its poll threads on `b.cores` or
/// `last_core`) and its OpenFlow side on `rt`.
pub(crate) fn start_bridge(
    rt: &tokio::runtime::Runtime,
    args: &RunArgs,
    b: config::Bridge,
    pool: &Pool,
    settings: OpenFlowSettings,
    last_core: usize,
) -> Result<Running> {
    let mut ports = Vec::new();
    let (mut tunnel_ports, mut underlays) = (Vec::new(), Vec::new());
    for (no, name, spec) in &b.ports {
        // A tunnel port has no queues: the datapath serves it through its underlay port.
        if let Some(t) = crate::tunnels::conf(*no, name, spec) {
            // Checked here; added once the bridge runs, as add-port adds one (`plug.rs`).
            t.map_err(|e| anyhow!("bridge {}: {e}", b.name))?;
            tunnel_ports.push((*no, name.clone(), spec.clone()));
            continue;
        }
        // Policing, egress queues and queue pinning are the datapath's; the rest opens the port.
        let (open_spec, options) =
            port::dp_options::split_spec(spec).map_err(|e| anyhow!("bridge {}: {e}", b.name))?;
        underlays.push(crate::tunnels::Underlay::of(*no, name, &open_spec));
        let port =
            port::spec::open(&open_spec, pool).map_err(|e| anyhow!("bridge {}: {e}", b.name))?;
        if let Some(w) = port::mtu::check(&open_spec, port.capabilities().max_frame) {
            eprintln!("warning: bridge {}: port {spec}: {w}", b.name);
        }
        ports.push(SwitchPort {
            ofport: *no,
            name: name.clone(),
            port,
            policing: options.policing,
            egress: options.egress,
            rxq_affinity: options.rxq_affinity,
        });
    }
    let mut sw = Switch::with_exact_flow_mods(&b.name, pool.clone(), ports, b.flows, b.pipeline)?;
    sw.config.idle.sleep = !args.busy_poll;
    sw.config.idle.yield_when_empty = args.shared_core;
    sw.config.gro = b.gro && !args.no_gro;
    if let Some((rate, burst)) = b.packet_in_port {
        sw.config.packet_in_port_rate = rate;
        sw.config.packet_in_port_burst = burst;
    }
    if let Some(c) = b.lane_core {
        // Online CPUs, not this process's affinity: the lane may leave the poll threads'.
        // SAFETY: sysconf has no preconditions.
        let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as usize;
        if c >= online {
            bail!(
                "bridge {}: lane core {c} does not exist; this machine has cores 0 ..= {}",
                b.name,
                online - 1
            );
        }
    }
    sw.lane_core = b.lane_core;
    if settings.fail_mode == agent::FailMode::Standalone {
        // Before the datapath starts: the first packets must meet the NORMAL flow, not an
        // empty table (1.3 drops table misses).
        let has_catch_all = !sw
            .control
            .flows(
                0,
                &pipeline::FlowFilter {
                    matcher: pipeline::model::Match::ANY,
                    strict_priority: Some(0),
                    ..pipeline::FlowFilter::ALL
                },
            )
            .is_empty();
        if !has_catch_all {
            agent::ofproto::preinstall_fail_open(&mut sw.control)
                .map_err(|e| anyhow!("bridge {}: fail-open flow: {e}", b.name))?;
        }
    }
    let cores: Vec<Option<usize>> = if b.cores.is_empty() {
        vec![Some(last_core)]
    } else {
        b.cores.iter().map(|c| Some(*c)).collect()
    };
    let handle = Arc::new(sw.start(&cores)?);
    let tunnels = Arc::new(crate::tunnels::BridgeTunnels::new(
        handle.tunnels(),
        sw.cell.clone(),
        underlays,
        b.tunnel_refresh,
    ));
    let lanes: u16 = sw.ports.iter().map(|p| p.port.priority_queues()).sum();
    eprintln!(
        "hayate: bridge {} running: {} ports, {} thread(s) on cores {:?}{}",
        sw.name,
        sw.ports.len(),
        cores.len(),
        cores.iter().flatten().collect::<Vec<_>>(),
        if lanes > 0 {
            let core = b.lane_core.or(cores[0]);
            let on = core.map_or(String::new(), |c| format!(" on core {c}"));
            format!(", and a priority lane{on} for {lanes} control-frame queue(s)")
        } else {
            String::new()
        }
    );
    let name = sw.name.clone();
    let mut slot = Some(sw);
    let side = crate::openflow_side::start(rt, &mut slot, handle.clone(), &settings, tunnels)?;
    for (no, name, spec) in &tunnel_ports {
        side.bridge()
            .add_port(spec, Some(*no), Some(name))
            .map_err(|e| anyhow!("bridge {}: port {name}: {e}", b.name))?;
    }
    let stats = StatsView {
        name,
        bridge: side.bridge(),
    };
    Ok((stats, handle, side))
}

/// Stops a bridge started by [`start_bridge`]: its OpenFlow side, then its poll threads.
pub(crate) fn stop_bridge(r: Running) {
    let (_, mut handle, side) = r;
    drop(side);
    // The aborted pump lets go of the datapath on the runtime's thread, soon.
    for _ in 0..200 {
        match Arc::try_unwrap(handle) {
            Ok(mut h) => return h.stop(),
            Err(h) => handle = h,
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    eprintln!("warning: a stopped bridge's poll threads are still held; they stop at exit");
}

/// One port's final counters: the port, its own counters, the switch's drops of its packets.
type PortRow = (agent::ofproto::OfPort, port::PortStats, datapath::Snapshot);

/// Writes every port's final counters to `path` as JSON (`--stats-json`).
fn write_stats_json(path: &Path, bridges: &[(String, Vec<PortRow>)]) -> Result<()> {
    let mut rows = Vec::new();
    for (bridge, ports) in bridges {
        for (p, own, drops) in ports {
            let s = agent::ofproto::merged(*own, drops);
            let mut row = serde_json::json!({
                "bridge": bridge,
                "ofport": p.no,
                "name": p.name,
                "rx_packets": s.rx_packets,
                "rx_bytes": s.rx_bytes,
                "rx_dropped": s.rx_dropped,
                "rx_errors": s.rx_errors,
                "rx_priority": s.rx_priority,
                "tx_packets": s.tx_packets,
                "tx_bytes": s.tx_bytes,
                "tx_dropped": s.tx_dropped,
                "tx_errors": s.tx_errors,
            });
            // The switch's drops of the port's packets, by reason (as `hayate ctl dump-drops`).
            for c in datapath::IN_PORT_DROPS {
                row[c.name()] = drops[c].into();
            }
            rows.push(row);
        }
    }
    let text = serde_json::to_string_pretty(&rows)?;
    std::fs::write(path, text)
        .map_err(|e| anyhow!("--stats-json {}: cannot write: {e}", path.display()))
}

/// What stats printing needs of a bridge: its name and its ports now (they change with
/// `hayate ctl BRIDGE add-port` / `del-port`).
pub(crate) struct StatsView {
    pub(crate) name: String,
    pub(crate) bridge: Arc<agent::ofproto::OfBridge>,
}

impl StatsView {
    /// Every port's counters now; `dp`, when given, is read for the switch's drops (the
    /// bridge's own handle on the datapath is gone once it stopped).
    fn rows(&self, dp: Option<&datapath::Running>) -> Vec<PortRow> {
        match dp {
            Some(dp) => self
                .bridge
                .ports()
                .into_iter()
                .map(|p| {
                    let (own, drops) = (p.port.stats(), dp.port_drops(p.no));
                    (p, own, drops)
                })
                .collect(),
            None => self.bridge.port_counters(),
        }
    }
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A running bridge: its counters view, its datapath, its OpenFlow side.
pub(crate) type Running = (
    StatsView,
    Arc<datapath::Running>,
    crate::openflow_side::OpenFlowSide,
);

fn print_stats(running: &[Running]) {
    let rows: Vec<(String, Vec<PortRow>)> = running
        .iter()
        .map(|(v, _, _)| (v.name.clone(), v.rows(None)))
        .collect();
    print_rows(&rows);
}

/// Prints every port's counters. A closed stdout (the reader went away) is not an error
/// worth stopping a switch for: the lines are dropped.
fn print_rows(bridges: &[(String, Vec<PortRow>)]) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    for (bridge, ports) in bridges {
        for (p, own, drops) in ports {
            let (ofport, name) = (p.no, &p.name);
            let s = agent::ofproto::merged(*own, drops);
            let prio = if s.rx_priority > 0 {
                format!(" ({} priority)", s.rx_priority)
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "{} port {} ({}): rx {} pkts{prio} {} bytes, tx {} pkts {} bytes, drops rx {} tx {}, errors rx {}",
                bridge,
                ofport,
                name,
                s.rx_packets,
                s.rx_bytes,
                s.tx_packets,
                s.tx_bytes,
                s.rx_dropped,
                s.tx_dropped,
                s.rx_errors
            );
        }
    }
}

/// Runs `hayate check FILE`: validates and prints the bridges.
pub fn check(path: &Path) -> Result<()> {
    let bridges = config::load(path)?;
    for b in &bridges {
        match b.lane_core {
            Some(c) => println!(
                "bridge {} (cores {:?}, priority lane on core {c})",
                b.name, b.cores
            ),
            None => println!("bridge {} (cores {:?})", b.name, b.cores),
        }
        for (no, name, spec) in &b.ports {
            println!("  port {no}: {name} ({spec})");
        }
        println!(
            "  datapath id: {}",
            b.datapath_id.map_or_else(
                || "derived from the name".to_string(),
                |d| format!("{d:016x}")
            )
        );
        println!(
            "  controllers: {}, fail mode {:?}",
            if b.controllers.is_empty() {
                crate::openflow_side::DEFAULT_TARGET.to_string()
            } else {
                b.controllers.join(" ")
            },
            b.fail_mode
        );
        if b.flows.is_empty() {
            println!("  flows: none (standalone: L2 learning until a controller connects)");
        }
        for f in &b.flows {
            println!("  {}", pipeline::ofctl::format_flow_mod(f));
        }
    }
    Ok(())
}
