//! `pcap`: replay frames from a capture file, record sent frames to one.
//!
//! Receive replays the input capture, loaded whole into memory when the port is opened, `loops`
//! times (0: forever). Frames longer than a pool frame holds ([`Pool::max_data`] bytes) are
//! skipped and counted as `rx_errors` on every pass, as is a partial last frame. Only Ethernet
//! pcap captures are read (not pcapng).
//!
//! Transmit appends every sent frame to the output capture (microsecond timestamps from the
//! system clock, link type Ethernet, snaplen 65535) and frees it. Frames are buffered; they
//! reach the file on [`TxQueue::flush`], when the buffer fills, and when the tx queue or the
//! port is dropped. A write error counts the frame in `tx_errors` (it is freed all the same).
//!
//! A port without an input has no rx queue, one without an output no tx queue.

mod file;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use packet::{Batch, Pool, PoolCache};

use crate::claim::{QueueClaim, QueueSlot};
use crate::{
    check_single_queue, Capabilities, Port, PortError, PortStats, QueueCounters, RxQueue, TxQueue,
};

use file::{Capture, Writer};

/// Where a [`PcapPort`] reads and writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PcapConfig {
    /// Capture to replay on receive.
    pub input: Option<PathBuf>,
    /// Capture to write sent frames to (created or truncated).
    pub output: Option<PathBuf>,
    /// How many times to replay the input; 0 = forever.
    pub loops: u32,
}

/// A port backed by capture files; see the [module docs](self).
pub struct PcapPort {
    name: String,
    pool: Pool,
    loops: u32,
    input: Option<Arc<Capture>>,
    /// The output writer while no tx queue holds it.
    output: Option<Arc<Mutex<Option<Writer>>>>,
    rx_slot: QueueSlot,
    tx_slot: QueueSlot,
    rx_counters: Arc<QueueCounters>,
    tx_counters: Arc<QueueCounters>,
}

impl std::fmt::Debug for PcapPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PcapPort")
            .field("name", &self.name)
            .field("input_frames", &self.input.as_ref().map(|c| c.len()))
            .field("output", &self.output.is_some())
            .field("loops", &self.loops)
            .finish()
    }
}

impl PcapPort {
    /// Opens the input (read whole into memory) and creates the output. Errors name the file
    /// and the fix, e.g. "cannot open /x.pcap: No such file or directory; check the path".
    pub fn new(name: &str, cfg: PcapConfig, pool: &Pool) -> Result<PcapPort, PortError> {
        if cfg.input.is_none() && cfg.output.is_none() {
            return Err(PortError::new(
                name,
                "a pcap port needs an input or an output file; give in=FILE and/or out=FILE",
            ));
        }
        let input = match &cfg.input {
            Some(path) => Some(Arc::new(
                file::load(path, pool.max_data()).map_err(|e| PortError::new(name, e))?,
            )),
            None => None,
        };
        let output = match &cfg.output {
            Some(path) => Some(Arc::new(Mutex::new(Some(
                Writer::create(path).map_err(|e| PortError::new(name, e))?,
            )))),
            None => None,
        };
        Ok(PcapPort {
            name: name.to_string(),
            pool: pool.clone(),
            loops: cfg.loops,
            input,
            output,
            rx_slot: QueueSlot::default(),
            tx_slot: QueueSlot::default(),
            rx_counters: Arc::default(),
            tx_counters: Arc::default(),
        })
    }

    /// Frames of the input capture that will be replayed per pass (0 without input).
    pub fn input_frames(&self) -> usize {
        self.input.as_ref().map_or(0, |c| c.len())
    }
}

impl Drop for PcapPort {
    fn drop(&mut self) {
        if let Some(slot) = &self.output {
            let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(w) = slot.as_mut() {
                // Nobody is left to tell; the tx queue's own drop reports into the stats.
                let _ = w.flush();
            }
        }
    }
}

impl Port for PcapPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            rx_queues: u16::from(self.input.is_some()),
            tx_queues: u16::from(self.output.is_some()),
            vnet_hdr: false,
            max_frame: self.pool.max_data() as u32,
        }
    }

    fn open_rx(&self, queue: u16) -> Result<Box<dyn RxQueue>, PortError> {
        let Some(capture) = &self.input else {
            return Err(PortError::new(
                &self.name,
                "this pcap port has no input file, so no rx queue; give in=FILE",
            ));
        };
        check_single_queue(&self.name, "pcap", "rx", queue)?;
        let claim = self.rx_slot.claim(&self.name, "rx queue 0")?;
        let skipped = capture.too_long + u64::from(capture.truncated);
        Ok(Box::new(PcapRx {
            cache: self.pool.cache(),
            capture: capture.clone(),
            pos: capture.len(),
            passes: 0,
            // A capture with no usable frame is one pass (counting its errors once), even
            // when asked to loop forever.
            loops: if capture.len() == 0 {
                1
            } else {
                u64::from(self.loops)
            },
            skipped,
            counters: self.rx_counters.clone(),
            _claim: claim,
        }))
    }

    fn open_tx(&self, queue: u16) -> Result<Box<dyn TxQueue>, PortError> {
        let Some(home) = &self.output else {
            return Err(PortError::new(
                &self.name,
                "this pcap port has no output file, so no tx queue; give out=FILE",
            ));
        };
        check_single_queue(&self.name, "pcap", "tx", queue)?;
        let claim = self.tx_slot.claim(&self.name, "tx queue 0")?;
        let writer = home.lock().unwrap_or_else(|e| e.into_inner()).take();
        let Some(writer) = writer else {
            return Err(PortError::new(
                &self.name,
                "tx queue 0 is already open; drop the open queue first",
            ));
        };
        Ok(Box::new(PcapTx {
            cache: self.pool.cache(),
            writer: Some(writer),
            home: home.clone(),
            counters: self.tx_counters.clone(),
            _claim: claim,
        }))
    }

    fn stats(&self) -> PortStats {
        PortStats::from_queues(&self.rx_counters, &self.tx_counters)
    }
}

/// Replays the input capture.
struct PcapRx {
    cache: PoolCache,
    capture: Arc<Capture>,
    /// Next frame; `capture.len()` when a pass has ended.
    pos: usize,
    /// Passes started.
    passes: u64,
    /// Passes to make; 0 = forever.
    loops: u64,
    /// Frames skipped per pass.
    skipped: u64,
    counters: Arc<QueueCounters>,
    _claim: QueueClaim,
}

impl RxQueue for PcapRx {
    fn recv(&mut self, batch: &mut Batch) -> usize {
        let mut made = 0;
        let mut bytes = 0;
        while batch.room() > 0 {
            if self.pos == self.capture.len() {
                if self.loops != 0 && self.passes >= self.loops {
                    break;
                }
                self.passes += 1;
                self.pos = 0;
                if self.skipped > 0 {
                    self.counters.add_errors(self.skipped);
                }
                if self.capture.len() == 0 {
                    break;
                }
            }
            let frame = self.capture.frame(self.pos);
            let Some(pkt) = self.cache.alloc_from(frame) else {
                // Pool dry: try again on the next call.
                break;
            };
            bytes += frame.len();
            let pushed = batch.push(pkt);
            debug_assert!(pushed.is_ok());
            self.pos += 1;
            made += 1;
        }
        if made > 0 {
            self.counters.add(made as u64, bytes as u64);
        }
        made
    }
}

/// Records sent frames.
struct PcapTx {
    cache: PoolCache,
    /// Always `Some` until drop hands it back to `home`.
    writer: Option<Writer>,
    home: Arc<Mutex<Option<Writer>>>,
    counters: Arc<QueueCounters>,
    _claim: QueueClaim,
}

impl TxQueue for PcapTx {
    fn dropped(&mut self, n: u64) {
        self.counters.add_dropped(n);
    }

    fn send(&mut self, batch: &mut Batch) -> usize {
        let n = batch.len();
        if n == 0 {
            return 0;
        }
        let ts = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let (mut ok, mut bytes, mut failed) = (0u64, 0u64, 0u64);
        for pkt in batch.drain() {
            let written = match self.writer.as_mut() {
                Some(w) => w.write(ts, pkt.data()).is_ok(),
                None => false,
            };
            if written {
                ok += 1;
                bytes += pkt.len() as u64;
            } else {
                failed += 1;
            }
            self.cache.free(pkt);
        }
        self.counters.add(ok, bytes);
        if failed > 0 {
            self.counters.add_errors(failed);
        }
        n
    }

    fn flush(&mut self) {
        if let Some(w) = self.writer.as_mut() {
            if w.flush().is_err() {
                self.counters.add_errors(1);
            }
        }
    }
}

impl Drop for PcapTx {
    fn drop(&mut self) {
        self.flush();
        let mut home = self.home.lock().unwrap_or_else(|e| e.into_inner());
        *home = self.writer.take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet::FRAME_SIZE;
    use pcap_file::pcap::PcapReader;
    use std::path::Path;

    fn temp_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("hayate-pcap-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn frames() -> Vec<Vec<u8>> {
        let mut out = vec![crate::template::UdpFrame::default().build()];
        out.push((0..200u8).collect());
        out.push(vec![0xee; 1500]);
        out
    }

    fn write_frames(port: &PcapPort, pool: &Pool, frames: &[Vec<u8>]) {
        let mut cache = pool.cache();
        let mut tx = port.open_tx(0).unwrap();
        let mut batch = Batch::new();
        for f in frames {
            batch.push(cache.alloc_from(f).unwrap()).unwrap();
        }
        assert_eq!(tx.send(&mut batch), frames.len());
        tx.flush();
    }

    #[test]
    fn written_frames_read_back_with_pcap_file_and_tcpdump() {
        let dir = temp_dir("rw");
        let out = dir.join("out.pcap");
        let pool = Pool::with_frames(64);
        let port = PcapPort::new(
            "cap",
            PcapConfig {
                output: Some(out.clone()),
                ..PcapConfig::default()
            },
            &pool,
        )
        .unwrap();
        let before = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        write_frames(&port, &pool, &frames());
        assert_eq!(port.stats().tx_packets, 3);
        assert_eq!(port.stats().tx_bytes, 64 + 200 + 1500);

        let mut reader = PcapReader::new(std::fs::File::open(&out).unwrap()).unwrap();
        let header = reader.header();
        assert_eq!(header.datalink, pcap_file::DataLink::ETHERNET);
        assert_eq!(header.snaplen, 65535);
        assert_eq!(header.ts_resolution, pcap_file::TsResolution::MicroSecond);
        let mut got = Vec::new();
        while let Some(pkt) = reader.next_packet() {
            let pkt = pkt.unwrap();
            assert!(pkt.timestamp + std::time::Duration::from_secs(1) >= before);
            assert_eq!(pkt.orig_len as usize, pkt.data.len());
            got.push(pkt.data.into_owned());
        }
        assert_eq!(got, frames());
        tcpdump_prints_one_line_per_frame(&out, 3);
        drop(port);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn tcpdump_prints_one_line_per_frame(file: &Path, frames: usize) {
        let run = std::process::Command::new("tcpdump")
            .arg("-nr")
            .arg(file)
            .output();
        match run {
            Ok(out) => {
                assert!(
                    out.status.success(),
                    "tcpdump failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let text = String::from_utf8_lossy(&out.stdout);
                // One line per frame; indented lines are hex dumps of frames tcpdump cannot
                // decode, part of the line above.
                let lines = text.lines().filter(|l| !l.starts_with(char::is_whitespace));
                assert_eq!(lines.count(), frames, "tcpdump printed:\n{text}");
            }
            Err(_) => println!("note: tcpdump is not installed; skipped checking the file with it"),
        }
    }

    #[test]
    fn replay_loops_and_skips_oversized_frames() {
        let dir = temp_dir("loop");
        let file = dir.join("in.pcap");
        let pool = Pool::with_frames(64);
        let mut all = frames();
        all.insert(1, vec![0x11; FRAME_SIZE]); // too long for a pool frame
        {
            let w = PcapPort::new(
                "w",
                PcapConfig {
                    output: Some(file.clone()),
                    ..PcapConfig::default()
                },
                &pool,
            )
            .unwrap();
            // The pool cannot hold the long frame, so write it through the file layer.
            let mut writer = w.output.as_ref().unwrap().lock().unwrap().take().unwrap();
            for f in &all {
                writer.write(std::time::Duration::from_secs(1), f).unwrap();
            }
            writer.flush().unwrap();
        }
        let port = PcapPort::new(
            "r",
            PcapConfig {
                input: Some(file),
                loops: 2,
                ..PcapConfig::default()
            },
            &pool,
        )
        .unwrap();
        assert_eq!(port.input_frames(), 3);
        assert_eq!(port.capabilities().tx_queues, 0);
        assert!(port.open_tx(0).is_err());
        let mut rx = port.open_rx(0).unwrap();
        let mut cache = pool.cache();
        let mut batch = Batch::new();
        assert_eq!(rx.recv(&mut batch), 6);
        assert_eq!(batch[3].data(), &frames()[0][..]);
        assert_eq!(batch[5].data(), &frames()[2][..]);
        batch.free_into(&mut cache);
        assert_eq!(rx.recv(&mut batch), 0);
        let s = port.stats();
        assert_eq!((s.rx_packets, s.rx_errors), (6, 2));
        drop((rx, cache, port));
        assert_eq!(pool.shared_free(), 64);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn errors_name_the_file_and_the_fix() {
        let pool = Pool::with_frames(4);
        let cfg = PcapConfig {
            input: Some("/x.pcap".into()),
            ..PcapConfig::default()
        };
        let err = PcapPort::new("p", cfg, &pool).unwrap_err();
        assert_eq!(
            err.to_string(),
            "port p: cannot open /x.pcap: No such file or directory; check the path"
        );
        let cfg = PcapConfig {
            output: Some("/nonexistent/dir/o.pcap".into()),
            ..PcapConfig::default()
        };
        let err = PcapPort::new("p", cfg, &pool).unwrap_err();
        assert!(
            err.to_string()
                .contains("cannot create /nonexistent/dir/o.pcap"),
            "{err}"
        );
        let err = PcapPort::new("p", PcapConfig::default(), &pool).unwrap_err();
        assert!(err.to_string().contains("in=FILE"), "{err}");
    }

    #[test]
    fn dropping_the_port_flushes_unflushed_frames() {
        let dir = temp_dir("drop");
        let out = dir.join("o.pcap");
        let pool = Pool::with_frames(8);
        let port = PcapPort::new(
            "o",
            PcapConfig {
                output: Some(out.clone()),
                ..PcapConfig::default()
            },
            &pool,
        )
        .unwrap();
        let mut tx = port.open_tx(0).unwrap();
        assert!(port.open_tx(0).is_err());
        let mut cache = pool.cache();
        let mut batch = Batch::new();
        batch.push(cache.alloc_from(&[1, 2, 3]).unwrap()).unwrap();
        tx.send(&mut batch);
        assert_eq!(
            std::fs::metadata(&out).unwrap().len(),
            24,
            "buffered until flush"
        );
        drop(tx);
        drop(port);
        assert_eq!(std::fs::metadata(&out).unwrap().len(), 24 + 16 + 3);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
