//! `hayate ctl BRIDGE capture PORT [FILTER] -w FILE|- [-c COUNT] [--rx|--tx]`: the frames a
//! port receives and sends, live, written as pcap (microsecond timestamps, Ethernet) that
//! tcpdump and Wireshark read. The filter is tcpdump's syntax, compiled to classic BPF by
//! `tcpdump -ddd` (libpcap's compiler) and run by the switch on each frame of the port.
//!
//! The capture reads what the switch has taken every 20 ms, writes it and flushes the file;
//! it stops after COUNT frames, or on Ctrl-C / SIGTERM, and then says on stderr how many
//! frames it wrote and how many the switch lost because this reader fell behind (the
//! switch's rings are bounded: a slow reader loses frames, never traffic).

use std::io::Write;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agent::ofproto::port_cmd::{exp_type, parse_capture_records};
use anyhow::{anyhow, bail, Context, Result};

use super::client::Client;

/// Bytes kept of each frame (the switch's [`datapath::capture::SNAPLEN`]).
const SNAPLEN: u32 = datapath::capture::SNAPLEN as u32;

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// What the command line asks.
#[derive(Debug, PartialEq, Eq)]
struct Ask {
    port: String,
    filter: Option<String>,
    out: String,
    count: Option<u64>,
    dir: &'static str,
}

fn parse(args: &[String]) -> Result<Ask> {
    let mut words = Vec::new();
    let (mut out, mut count, mut dir) = (None, None, "both");
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-w" => {
                out = Some(
                    it.next()
                        .ok_or_else(|| anyhow!("-w needs a file or -"))?
                        .clone(),
                )
            }
            "-c" => {
                let n = it.next().ok_or_else(|| anyhow!("-c needs a count"))?;
                count = Some(n.parse().map_err(|_| anyhow!("-c {n}: not a count"))?);
            }
            "--rx" => dir = "rx",
            "--tx" => dir = "tx",
            _ => words.push(a.clone()),
        }
    }
    let Some((port, filter)) = words.split_first() else {
        bail!("capture needs a port: capture PORT [FILTER] -w FILE|- [-c COUNT] [--rx|--tx]");
    };
    Ok(Ask {
        port: port.clone(),
        filter: (!filter.is_empty()).then(|| filter.join(" ")),
        out: out.ok_or_else(|| anyhow!("capture needs -w FILE (or -w - for stdout)"))?,
        count,
        dir,
    })
}

/// The filter compiled by libpcap, as `tcpdump -ddd` prints it.
fn compile(filter: &str) -> Result<String> {
    let out = Command::new("tcpdump")
        .args(["-ddd", "-y", "EN10MB", filter])
        .output()
        .context("a capture filter is compiled by tcpdump -ddd: is tcpdump installed?")?;
    if !out.status.success() {
        bail!(
            "tcpdump cannot compile the filter {filter:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The pcap file header.
fn pcap_header() -> Vec<u8> {
    let mut h = Vec::with_capacity(24);
    h.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    h.extend_from_slice(&2u16.to_le_bytes());
    h.extend_from_slice(&4u16.to_le_bytes());
    h.extend_from_slice(&0i32.to_le_bytes());
    h.extend_from_slice(&0u32.to_le_bytes());
    h.extend_from_slice(&SNAPLEN.to_le_bytes());
    h.extend_from_slice(&1u32.to_le_bytes()); // LINKTYPE_ETHERNET
    h
}

/// One pcap record.
fn pcap_record(ts_ns: u64, wire: u32, data: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&((ts_ns / 1_000_000_000) as u32).to_le_bytes());
    out.extend_from_slice(&((ts_ns % 1_000_000_000 / 1000) as u32).to_le_bytes());
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out.extend_from_slice(&wire.to_le_bytes());
    out.extend_from_slice(data);
}

/// Runs `capture` on `c`.
pub fn run(c: &mut Client, args: &[String]) -> Result<()> {
    let ask = parse(args)?;
    let mut start = vec![ask.port.clone(), ask.dir.to_string()];
    if let Some(f) = &ask.filter {
        start.extend(compile(f)?.lines().map(String::from));
    }
    let mut w: Box<dyn Write> = if ask.out == "-" {
        Box::new(std::io::stdout().lock())
    } else {
        Box::new(
            std::fs::File::create(&ask.out)
                .with_context(|| format!("cannot create {}", ask.out))?,
        )
    };
    let reply = c.look(exp_type::CAPTURE_START, false, &start)?;
    let id = reply
        .strip_prefix("capture ")
        .ok_or_else(|| anyhow!("the switch answered {reply:?} to a capture"))?
        .to_string();
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
    w.write_all(&pcap_header())?;
    w.flush()?;
    eprintln!(
        "hayate: capturing {} of port {}{}",
        ask.dir,
        ask.port,
        ask.filter
            .as_deref()
            .map(|f| format!(" ({f})"))
            .unwrap_or_default()
    );
    let mut written = 0u64;
    let ids = [id.clone()];
    let mut buf = Vec::new();
    let mut last = false;
    while !last && ask.count.is_none_or(|n| written < n) {
        // Once stopped, one more read takes what the switch holds.
        last = STOP.load(Ordering::Relaxed);
        let recs = parse_capture_records(&c.look_bytes(exp_type::CAPTURE_READ, &ids)?)
            .map_err(|e| anyhow!("{e}"))?;
        buf.clear();
        for (ts, wire, data) in recs {
            if ask.count.is_some_and(|n| written >= n) {
                break;
            }
            pcap_record(ts, wire, &data, &mut buf);
            written += 1;
        }
        if !buf.is_empty() {
            w.write_all(&buf)?;
            w.flush()?;
        } else if !last {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let summary = c.look(exp_type::CAPTURE_STOP, false, &ids)?;
    eprintln!("hayate: wrote {written} frames ({summary})");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn the_command_line_names_port_filter_and_file() {
        let a = parse(&words("p1 udp and port 53 -w /tmp/x.pcap -c 5 --tx")).unwrap();
        assert_eq!(
            a,
            Ask {
                port: "p1".into(),
                filter: Some("udp and port 53".into()),
                out: "/tmp/x.pcap".into(),
                count: Some(5),
                dir: "tx",
            }
        );
        assert!(parse(&words("p1 udp"))
            .unwrap_err()
            .to_string()
            .contains("-w"));
        assert_eq!(parse(&words("p1 -w -")).unwrap().filter, None);
    }

    #[test]
    fn records_are_pcap() {
        let mut b = pcap_header();
        pcap_record(1_500_000_123_456, 100, &[1, 2, 3], &mut b);
        assert_eq!(b.len(), 24 + 16 + 3);
        assert_eq!(&b[24..28], &1500u32.to_le_bytes());
        assert_eq!(&b[28..32], &123u32.to_le_bytes());
        assert_eq!(&b[32..36], &3u32.to_le_bytes());
        assert_eq!(&b[36..40], &100u32.to_le_bytes());
    }
}
