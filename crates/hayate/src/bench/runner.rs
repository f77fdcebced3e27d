//! Runs one scenario at one frame size: builds the bridge on null ports, drives one poll-mode
//! thread inline on a pinned core, and measures a window after a warm-up. A churn scenario
//! also runs a control thread that applies flow-mods, each followed by a publish, at a steady
//! rate during the window.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use packet::{Pool, PoolConfig};
use port::null::{NullConfig, NullPort, Vary};
use port::Port;

use super::report::{wire_bits, Row};
use super::scenario::{churn_mods, Churn, Scenario, Traffic};
use crate::switch::{Switch, SwitchPort};

/// How to run one measurement.
#[derive(Debug, Clone)]
pub struct Opts {
    /// Frame length, FCS included.
    pub frame_len: usize,
    /// Measured window, seconds.
    pub seconds: f64,
    /// Warm-up, seconds.
    pub warmup: f64,
    /// Core for the switch thread.
    pub core: usize,
    /// TSC rate in Hz.
    pub tsc_hz: f64,
    /// Address prefix tracking, where the scenario allows it.
    pub prefix_tracking: bool,
    /// Revalidate megaflows after flow changes (false: flush every cache, the old policy).
    pub revalidate: bool,
}

const MAC_A: u64 = 0x0200_0000_0001;
const MAC_B: u64 = 0x0200_0000_0002;
const IP_A: u32 = 0x0a00_0001;
const IP_B: u32 = 0x0a00_0002;

// Byte offsets in an untagged Ethernet/IPv4/UDP frame.
const OFF_ETH_DST_LO: usize = 2;
const OFF_ETH_SRC_LO: usize = 8;
const OFF_IP_SRC: usize = 26;

/// The UDP template and the fields a source varies for `traffic`.
fn source(traffic: Traffic, frame_len: usize) -> NullConfig {
    let buf_len = frame_len - 4;
    let udp = |src_mac: u64, dst_mac: u64, src_ip: u32| {
        packet::builder::PacketSpec::udp4(
            mac(src_mac),
            mac(dst_mac),
            src_ip,
            IP_B,
            1024,
            1024,
            buf_len,
        )
        .build()
    };
    match traffic {
        Traffic::OneFlow => NullConfig {
            template: udp(MAC_A, MAC_B, IP_A),
            vary: vec![],
            limit: None,
        },
        Traffic::Flows(n) => NullConfig {
            template: udp(MAC_A, MAC_B, 0x0a00_0000),
            vary: if n > 1 {
                vec![Vary {
                    offset: OFF_IP_SRC,
                    width: 4,
                    base: 0x0a00_0000,
                    count: n,
                    random: false,
                }]
            } else {
                vec![]
            },
            limit: None,
        },
        Traffic::Macs { n, side } => {
            let (src_base, dst_base) = if side == 0 {
                (0x0a00_0000u32, 0x0b00_0000u32)
            } else {
                (0x0b00_0000, 0x0a00_0000)
            };
            NullConfig {
                template: udp(
                    0x0200_0000_0000 | src_base as u64,
                    0x0200_0000_0000 | dst_base as u64,
                    IP_A,
                ),
                vary: vec![
                    Vary {
                        offset: OFF_ETH_SRC_LO,
                        width: 4,
                        base: src_base,
                        count: n,
                        random: false,
                    },
                    Vary {
                        offset: OFF_ETH_DST_LO,
                        width: 4,
                        base: dst_base,
                        count: n,
                        random: false,
                    },
                ],
                limit: None,
            }
        }
        Traffic::Vxlan => NullConfig {
            template: vxlan_frame(&udp(MAC_A, MAC_B, IP_A)),
            vary: vec![],
            limit: None,
        },
        Traffic::VxlanRemotes(n) => NullConfig {
            template: vxlan_frame(&udp(MAC_A, MAC_B, IP_A)),
            vary: vec![Vary {
                offset: OFF_IP_SRC, // the outer header's: the frame starts with it
                width: 4,
                base: super::scenario::TUN_REMOTES_BASE,
                count: n,
                random: false,
            }],
            limit: None,
        },
        Traffic::NewFlows => NullConfig {
            template: udp(MAC_A, MAC_B, 0),
            vary: vec![Vary {
                offset: OFF_IP_SRC,
                width: 4,
                base: 0,
                count: u32::MAX,
                random: false,
            }],
            limit: None,
        },
    }
}

/// `inner` in the outer headers a VXLAN tunnel from the benchmark's remote to its local
/// endpoint gives it (UDP checksum 0, as VXLAN over IPv4 sends by default).
fn vxlan_frame(inner: &[u8]) -> Vec<u8> {
    use super::scenario::{TUN_LOCAL, TUN_LOCAL_MAC, TUN_REMOTE, TUN_REMOTE_MAC, TUN_VNI};
    let ip = |s: &str| {
        s.parse::<std::net::Ipv4Addr>()
            .expect("a benchmark constant")
    };
    let mac = |s: &str| {
        let b: Vec<u8> = s
            .split(':')
            .map(|h| u8::from_str_radix(h, 16).expect("a benchmark constant"))
            .collect();
        <[u8; 6]>::try_from(b).expect("a benchmark constant")
    };
    const OUTER: usize = 14 + 20 + 8; // Ethernet, IPv4, UDP
    let mut f = packet::builder::PacketSpec::udp4(
        mac(TUN_REMOTE_MAC),
        mac(TUN_LOCAL_MAC),
        ip(TUN_REMOTE),
        ip(TUN_LOCAL),
        49152,
        4789,
        OUTER + 8 + inner.len(),
    )
    .build();
    f[OUTER - 2..OUTER].fill(0);
    f[OUTER..OUTER + 8].copy_from_slice(&[0x08, 0, 0, 0, 0, 0, 0, 0]);
    f[OUTER + 4..OUTER + 7].copy_from_slice(&TUN_VNI.to_be_bytes()[1..]);
    f[OUTER + 8..].copy_from_slice(inner);
    f
}

fn mac(v: u64) -> [u8; 6] {
    let b = v.to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

/// Runs `sc` once with `opts`.
pub fn run(sc: &Scenario, opts: &Opts) -> Result<Row> {
    let pool = Pool::new(&PoolConfig {
        frames: 32 * 1024,
        hugepages: true,
        populate: true,
        ..PoolConfig::default()
    })
    .context("packet pool for the benchmark")?;
    let mut ports = Vec::new();
    let mut sinks: Vec<Arc<NullPort>> = Vec::new();
    for (i, src) in sc.sources.iter().enumerate() {
        let cfg = match src {
            Some(t) => source(*t, opts.frame_len),
            None => NullConfig {
                limit: Some(0),
                ..NullConfig::default()
            },
        };
        let name = format!("null{}", i + 1);
        let p = Arc::new(
            NullPort::new(&name, cfg, &pool)
                .map_err(|e| anyhow::anyhow!("{e}"))
                .with_context(|| format!("scenario {}", sc.name))?,
        );
        sinks.push(p.clone());
        ports.push(SwitchPort {
            ofport: i as u32 + 1,
            name,
            port: p as Arc<dyn Port>,
            policing: port::Policing::default(),
            egress: port::Egress::default(),
            rxq_affinity: Vec::new(),
        });
    }
    // Setup-rate scenarios run with the default megaflow bound: once the table is full every
    // install evicts one, so they measure the steady state of a new-flow flood.
    let cfg = pipeline::PipelineConfig {
        prefix_tracking: sc.prefix_tracking && opts.prefix_tracking,
        ..pipeline::PipelineConfig::default()
    };
    let mut sw = Switch::new(&sc.name, pool, ports, &sc.rules.flows(), cfg)
        .with_context(|| format!("setting up scenario {}", sc.name))?;
    sw.config.revalidate = opts.revalidate;
    let dp = sw.build(&[Some(opts.core)])?;
    if !sc.tunnels.is_empty() {
        tunnels_up(sc, &mut sw, dp.tunnels())?;
    }
    let mut pmds = dp.build_pmds().map_err(|e| anyhow::anyhow!("{e}"))?;
    drop(dp);
    let mods = match sc.churn {
        Some(c) => churn_mods(c.matching_every).map_err(anyhow::Error::msg)?,
        None => Vec::new(),
    };
    let churn = ChurnFlags::default();
    let control = &mut sw.control;
    let (row, mods_done) = std::thread::scope(|scope| {
        let (mods, churn, core) = (&mods, &churn, opts.core);
        let churner = sc
            .churn
            .map(|c| scope.spawn(move || churn_loop(control, mods, c, churn, core)));
        let row = measure(sc, opts, &mut pmds, &sinks, churn);
        churn.stop.store(true, Ordering::Relaxed);
        if let Some(t) = churner {
            let _ = t.join();
        }
        (row, churn.applied.load(Ordering::Relaxed))
    });
    drop(pmds);
    let mut row = row;
    if sc.churn.is_some() {
        row.flow_mods_per_sec = Some(mods_done as f64 / row.seconds);
    }
    Ok(row)
}

/// Adds `sc`'s tunnel ports (numbered after its null ports) to the switch's pipeline and
/// their outer headers and termination to the datapath's tunnel table, as `hayate run` does
/// (their next hops are in their specs, so no kernel table is asked).
fn tunnels_up(sc: &Scenario, sw: &mut Switch, dp: &datapath::Tunnels) -> Result<()> {
    use crate::tunnels::{self, Housekeeping, Underlay};
    let first = sc.sources.len() as u32 + 1;
    let confs = sc
        .tunnels
        .iter()
        .enumerate()
        .map(|(j, spec)| {
            let no = first + j as u32;
            tunnels::conf(no, &format!("tun{}", j + 1), spec)
                .unwrap_or_else(|| Err(format!("{spec} is not a tunnel port spec")))
                .map_err(anyhow::Error::msg)
        })
        .collect::<Result<Vec<_>>>()?;
    let underlays = sw
        .ports
        .iter()
        .map(|p| Underlay::of(p.ofport, &p.name, "null:"))
        .collect();
    let mut infos = sw.control.ports().to_vec();
    infos.extend(tunnels::port_infos(&confs));
    sw.control.set_ports(infos);
    sw.control.publish();
    let names: Vec<u32> = confs.iter().map(|c| c.ofport).collect();
    let mut hk = Housekeeping::new(confs, underlays).context("tunnel housekeeping")?;
    hk.refresh(dp);
    for no in names {
        if dp.output(no).is_none() {
            anyhow::bail!(
                "scenario {}: tunnel port {no} has no outer headers",
                sc.name
            );
        }
    }
    Ok(())
}

/// Signals between the measurement and a churn thread.
#[derive(Default)]
struct ChurnFlags {
    /// The measured window started: churn.
    go: AtomicBool,
    /// The window ended: stop.
    stop: AtomicBool,
    /// Flow-mods applied (and published) so far.
    applied: AtomicU64,
}

/// Applies `mods` in a cycle at `c.per_sec`, publishing after each (what a barrier does),
/// from the start of the measured window to its end, off the poll thread's core `pmd_core`
/// (as `hayate run` keeps its control side: see [`cpu::keep_off`]).
fn churn_loop(
    control: &mut pipeline::Control,
    mods: &[pipeline::FlowMod],
    c: Churn,
    f: &ChurnFlags,
    pmd_core: usize,
) {
    if let Err(e) = cpu::keep_off(&[pmd_core]) {
        eprintln!("hayate bench: the churn thread may share the poll thread's core: {e}");
    }
    while !f.go.load(Ordering::Acquire) {
        if f.stop.load(Ordering::Relaxed) {
            return;
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    let t0 = Instant::now();
    let mut done = 0u64;
    while !f.stop.load(Ordering::Relaxed) {
        let due = (t0.elapsed().as_secs_f64() * f64::from(c.per_sec)) as u64;
        while done < due && !f.stop.load(Ordering::Relaxed) {
            // A refused flow-mod (a delete of a rule a rewrite displaced) changes nothing.
            let _ = control.flow_mod(&mods[done as usize % mods.len()]);
            control.publish();
            done += 1;
        }
        f.applied.store(done, Ordering::Relaxed);
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// The warm-up and the measured window on the inline thread.
fn measure(
    sc: &Scenario,
    opts: &Opts,
    pmds: &mut [datapath::Pmd],
    sinks: &[Arc<NullPort>],
    churn: &ChurnFlags,
) -> Row {
    let pmd = &mut pmds[0];
    if let Err(e) = cpu::pin_current(opts.core) {
        eprintln!("hayate bench: {e}; running unpinned");
    }
    let delivered = || sinks.iter().map(|s| s.stats().tx_packets).sum::<u64>();

    let t_warm = Instant::now();
    while t_warm.elapsed() < Duration::from_secs_f64(opts.warmup) {
        for _ in 0..64 {
            pmd.poll_once();
        }
    }
    let s0 = pmd.stats();
    churn.go.store(true, Ordering::Release);
    let d0 = delivered();
    let t0 = Instant::now();
    let c0 = cpu::cycles();
    let window = Duration::from_secs_f64(opts.seconds);
    loop {
        for _ in 0..256 {
            pmd.poll_once();
        }
        if t0.elapsed() >= window {
            break;
        }
    }
    let c1 = cpu::cycles();
    let secs = t0.elapsed().as_secs_f64();
    let d1 = delivered();
    let s1 = pmd.stats();
    let (megaflows, masks) = (pmd.megaflows(), pmd.subtables());
    let packets = d1 - d0;
    let pps = packets as f64 / secs;
    let upcalls = s1.upcalls - s0.upcalls;
    let installs = s1.megaflow_installs - s0.megaflow_installs;
    Row {
        scenario: sc.name.clone(),
        frame_len: opts.frame_len,
        mpps: pps / 1e6,
        gbps: pps * wire_bits(opts.frame_len) / 1e9,
        cycles_per_packet: if packets > 0 {
            c1.wrapping_sub(c0) as f64 / packets as f64
        } else {
            f64::INFINITY
        },
        setups_per_sec: sc.setups.then(|| installs as f64 / secs),
        packets,
        seconds: secs,
        tsc_ghz: opts.tsc_hz / 1e9,
        emc_hits: s1.emc_hits - s0.emc_hits,
        megaflow_hits: s1.megaflow_hits - s0.megaflow_hits,
        probes_per_hit: match s1.megaflow_hits - s0.megaflow_hits {
            0 => 0.0,
            hits => (s1.megaflow_probes - s0.megaflow_probes) as f64 / hits as f64,
        },
        upcalls,
        megaflows,
        masks,
        drops: s1.drops() - s0.drops(),
        core: opts.core,
        runs: 1,
        flow_mods_per_sec: None,
        cache_flushes: s1.cache_flushes - s0.cache_flushes,
        invalidated: s1.megaflow_invalidated - s0.megaflow_invalidated,
        baseline: sc
            .churn
            .map(|c| c.baseline)
            .or(sc.baseline)
            .map(str::to_string),
        vs_baseline: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn the_decap_frame_is_the_one_the_ovs_twin_replays() {
        // scripts/lib/udp-pcap.py --vxlan: the outer 50 bytes, then p2p-1flow's frame.
        let inner = source(Traffic::OneFlow, 64).template;
        let outer = hex(
            "020000000101020000000102080045000060000000004011f689c0000202c0000201\
             c00012b5004c00000800000000002a00",
        );
        let f = source(Traffic::Vxlan, 64).template;
        assert_eq!(f.len(), 110);
        assert_eq!(&f[..50], &outer[..]);
        assert_eq!(&f[50..], &inner[..]);
        assert_eq!(
            &inner[..],
            &hex(
                "02000000000202000000000108004500002e00000000401166bd0a0000010a000002\
                 04000400001ae3b7000000000000000000000000000000000000"
            )[..]
        );
    }
}
