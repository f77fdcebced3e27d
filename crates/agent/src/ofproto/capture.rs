//! `hayate ctl BRIDGE capture PORT [FILTER] -w FILE|-` on the switch's side: captures
//! started, read and stopped through the management socket ([`datapath::capture`] does the
//! capturing).
//!
//! | request | body (lines) | reply |
//! |---|---|---|
//! | [`exp_type::CAPTURE_START`] | the port (name or number), `rx`, `tx` or `both`, then the filter program as `tcpdump -ddd` prints it (none: every frame) | `capture N` |
//! | [`exp_type::CAPTURE_READ`] | `N` | the frames captured since the last read ([`super::port_cmd::capture_records`], times on the wall clock) |
//! | [`exp_type::CAPTURE_STOP`] | `N` | `captured C frames, lost L` |
//!
//! A capture nobody has read for [`STALE`] (its reader died) is stopped when the next capture
//! request arrives.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use datapath::capture::{Capture, Direction, Taps};
use packet::cbpf::Program;

use super::port_cmd::{capture_records, exp_type};
use super::OfBridge;

/// A capture not read for this long is stopped (the threads already ignore it).
pub use datapath::capture::STALE;

struct Running {
    capture: Arc<Capture>,
    taps: Arc<Taps>,
    last_read: Instant,
    taken: u64,
}

/// The bridge's running captures, by id.
#[derive(Default)]
pub struct Captures {
    next: u64,
    running: HashMap<u64, Running>,
}

/// Answers a capture request; the reply's bytes.
pub(super) fn answer(
    b: &OfBridge,
    captures: &Mutex<Captures>,
    t: u32,
    args: &[String],
) -> Result<Vec<u8>, String> {
    let mut c = captures.lock().unwrap_or_else(|e| e.into_inner());
    let now = Instant::now();
    c.running.retain(|_, r| {
        let keep = now.duration_since(r.last_read) < STALE;
        if !keep {
            r.taps.stop(&r.capture);
        }
        keep
    });
    match t {
        exp_type::CAPTURE_START => {
            let (port, rest) = args
                .split_first()
                .ok_or("capture needs a port (its name or number)")?;
            let ofport = b
                .ports()
                .iter()
                .find(|p| p.name == *port || p.no.to_string() == *port)
                .map(|p| p.no)
                .ok_or_else(|| format!("bridge {} has no port {port}", b.cfg.name))?;
            let (dir, prog) = rest
                .split_first()
                .map_or(("both", &[][..]), |(d, p)| (d.as_str(), p));
            let dir = match dir {
                "rx" => Direction {
                    rx: true,
                    tx: false,
                },
                "tx" => Direction {
                    rx: false,
                    tx: true,
                },
                "both" => Direction { rx: true, tx: true },
                other => return Err(format!("capture direction {other:?}: use rx, tx or both")),
            };
            let filter = if prog.is_empty() {
                None
            } else {
                Some(Program::parse(&prog.join("\n")).map_err(|e| format!("bad filter: {e}"))?)
            };
            let taps = b
                .datapath_counters()
                .and_then(|d| d.taps())
                .ok_or_else(|| format!("bridge {} has no running datapath", b.cfg.name))?;
            let capture = taps.start(ofport, dir, filter);
            c.next += 1;
            let id = c.next;
            c.running.insert(
                id,
                Running {
                    capture,
                    taps,
                    last_read: now,
                    taken: 0,
                },
            );
            Ok(format!("capture {id}").into_bytes())
        }
        exp_type::CAPTURE_READ | exp_type::CAPTURE_STOP => {
            let id: u64 = args
                .first()
                .and_then(|a| a.parse().ok())
                .ok_or("capture read/stop needs the capture's id")?;
            let r = c
                .running
                .get_mut(&id)
                .ok_or_else(|| format!("no capture {id} (stopped, or not read for {STALE:?})"))?;
            r.last_read = now;
            if t == exp_type::CAPTURE_STOP {
                let r = c.running.remove(&id).ok_or("capture gone")?;
                r.taps.stop(&r.capture);
                return Ok(
                    format!("captured {} frames, lost {}", r.taken, r.capture.lost()).into_bytes(),
                );
            }
            let mut frames = Vec::new();
            r.capture.drain(&mut frames);
            r.taken += frames.len() as u64;
            // The threads' clock to the wall clock, at this read.
            let wall = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            let offset = wall.wrapping_sub(datapath::now_ns());
            let recs: Vec<(u64, u32, Vec<u8>)> = frames
                .into_iter()
                .map(|f| (f.ts_ns.wrapping_add(offset), f.wire_len, f.data))
                .collect();
            Ok(capture_records(&recs))
        }
        other => Err(format!("unknown capture request {other}")),
    }
}
