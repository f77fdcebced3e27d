//! Command-line options of `hayate gen`, shared by its subcommands, and their conversion
//! into the generator's types.

use std::net::IpAddr;
use std::path::PathBuf;

use anyhow::{anyhow, bail, Result};
use clap::Args;
use hayate_gen::engine::RunConfig;
use hayate_gen::rate::{parse_bps, RateSpec};
use hayate_gen::template::{Proto, Sizes, Traffic, VaryField};

/// What to send.
#[derive(Args, Debug, Clone)]
pub struct TrafficArgs {
    /// Protocol: udp, tcp, icmp (over IPv4) or udp6.
    #[arg(long, default_value = "udp")]
    pub proto: String,
    /// Frame size in bytes, FCS included (64 to 16260: jumbo frames get pool frames large
    /// enough; AF_XDP ports take up to 1796), or imix (7:4:1 of 64/570/1518).
    #[arg(long, default_value = "64")]
    pub size: String,
    /// Number of flows.
    #[arg(long, default_value_t = 1)]
    pub flows: u32,
    /// Field that tells flows apart: src-ip, dst-ip, src-port, dst-port.
    #[arg(long, default_value = "src-ip")]
    pub vary: String,
    /// Flows in pseudo-random order instead of round robin.
    #[arg(long)]
    pub random: bool,
    /// Add an 802.1Q tag with this VLAN id.
    #[arg(long)]
    pub vlan: Option<u16>,
    /// Ethernet source address.
    #[arg(long, default_value = "02:00:00:00:00:01")]
    pub src_mac: String,
    /// Ethernet destination address.
    #[arg(long, default_value = "02:00:00:00:00:02")]
    pub dst_mac: String,
    /// IP source address (of the first flow); IPv4 or IPv6 to match --proto.
    #[arg(long)]
    pub src_ip: Option<IpAddr>,
    /// IP destination address.
    #[arg(long)]
    pub dst_ip: Option<IpAddr>,
    /// L4 source port.
    #[arg(long, default_value_t = 1024)]
    pub sport: u16,
    /// L4 destination port.
    #[arg(long, default_value_t = 1024)]
    pub dport: u16,
}

/// How much and how fast.
#[derive(Args, Debug, Clone)]
pub struct RateArgs {
    /// Rate: max (as fast as possible), line, N% of line rate, Npps/Nkpps/NMpps, or a bit
    /// rate on the wire (5G, 500M).
    #[arg(long, default_value = "max")]
    pub rate: String,
    /// Line rate the percentages refer to (default 10G, also for ring and kernel ports).
    #[arg(long, default_value = "10G")]
    pub line_rate: String,
    /// Seconds of sending (the run always stops by itself).
    #[arg(long, default_value_t = 5.0)]
    pub duration: f64,
    /// Stop after this many packets.
    #[arg(long)]
    pub count: Option<u64>,
    /// Worker threads (each takes one transmit queue and a share of the receive queues).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Most packets per send call (1..=32).
    #[arg(long, default_value_t = 32)]
    pub burst: u32,
    /// Pin worker i to the i-th core of this list (e.g. --cores 2,3).
    #[arg(long, value_delimiter = ',')]
    pub cores: Vec<usize>,
    /// Seconds to keep receiving after sending stops.
    #[arg(long, default_value_t = 0.5)]
    pub drain: f64,
}

/// Where results go.
#[derive(Args, Debug, Clone)]
pub struct OutputArgs {
    /// Print JSON (to stdout, or to FILE when given) instead of the table.
    #[arg(long, num_args = 0..=1, default_missing_value = "-", value_name = "FILE")]
    pub json: Option<String>,
    /// Write SVG plots into this directory.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// No progress line on stderr.
    #[arg(long)]
    pub quiet: bool,
    /// Packet buffers in the pool (of 2 KiB; fewer when jumbo frames need larger ones, so
    /// that the pool's memory stays the same).
    #[arg(long, default_value_t = 32_768)]
    pub pool_frames: u32,
    /// Largest frame (FCS included) the pool must hold, e.g. 9018 to receive jumbo frames;
    /// default: the largest frame sent, at least 1518.
    #[arg(long, value_name = "BYTES")]
    pub max_size: Option<usize>,
}

fn mac(s: &str) -> Result<[u8; 6]> {
    let parts: Vec<&str> = s.split(':').collect();
    let bad = || anyhow!("MAC address '{s}': write six hex bytes, e.g. 02:00:00:00:00:01");
    if parts.len() != 6 {
        return Err(bad());
    }
    let mut m = [0u8; 6];
    for (b, p) in m.iter_mut().zip(parts) {
        *b = u8::from_str_radix(p, 16).map_err(|_| bad())?;
    }
    Ok(m)
}

impl TrafficArgs {
    /// The traffic these options describe.
    pub fn traffic(&self) -> Result<Traffic> {
        let proto = Proto::parse(&self.proto).map_err(anyhow::Error::msg)?;
        let mut t = Traffic {
            proto,
            sizes: Sizes::parse(&self.size).map_err(anyhow::Error::msg)?,
            flows: self.flows,
            vary: VaryField::parse(&self.vary).map_err(anyhow::Error::msg)?,
            random: self.random,
            vlan: self.vlan,
            src_mac: mac(&self.src_mac)?,
            dst_mac: mac(&self.dst_mac)?,
            src_port: self.sport,
            dst_port: self.dport,
            ..Traffic::default()
        };
        let v6 = proto == Proto::Udp6;
        for (addr, which) in [(self.src_ip, "--src-ip"), (self.dst_ip, "--dst-ip")] {
            match (addr, v6) {
                (None, _) => {}
                (Some(IpAddr::V4(a)), false) => {
                    if which == "--src-ip" {
                        t.src_ip4 = a
                    } else {
                        t.dst_ip4 = a
                    }
                }
                (Some(IpAddr::V6(a)), true) => {
                    if which == "--src-ip" {
                        t.src_ip6 = a
                    } else {
                        t.dst_ip6 = a
                    }
                }
                (Some(a), _) => bail!(
                    "{which} {a}: --proto {} needs an {} address",
                    self.proto,
                    if v6 { "IPv6" } else { "IPv4" }
                ),
            }
        }
        let frame_size = t.pool_frame_size().map_err(anyhow::Error::msg)?;
        t.compile_for(frame_size - packet::HEADROOM)
            .map_err(anyhow::Error::msg)?;
        Ok(t)
    }
}

impl RateArgs {
    /// Line rate in bits per second.
    pub fn line_bps(&self) -> Result<f64> {
        parse_bps(&self.line_rate).map_err(|e| anyhow!("--line-rate: {e}"))
    }

    /// The run configuration for `traffic`.
    pub fn config(&self, traffic: Traffic) -> Result<RunConfig> {
        let spec = RateSpec::parse(&self.rate).map_err(|e| anyhow!("--rate: {e}"))?;
        let pps = spec.pps(self.line_bps()?, traffic.sizes.mean());
        if !(self.drain >= 0.0 && self.drain <= 60.0) {
            bail!("--drain {}: give 0 to 60 seconds", self.drain);
        }
        Ok(RunConfig {
            traffic,
            pps,
            duration: self.duration,
            count: self.count,
            threads: self.threads,
            burst: self.burst,
            drain: self.drain,
            cores: self.cores.clone(),
            ..RunConfig::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_parse_or_name_the_format() {
        assert_eq!(mac("02:00:00:00:00:0a").unwrap(), [2, 0, 0, 0, 0, 10]);
        assert!(mac("02:00")
            .unwrap_err()
            .to_string()
            .contains("six hex bytes"));
    }
}
