//! A transmit-only path for generators: XDP live frames (`BPF_PROG_TEST_RUN` with
//! `BPF_F_TEST_XDP_LIVE_FRAMES`, Linux 5.18+).
//!
//! The kernel runs a tiny XDP program (`bpf/gen_tx.c`, `XDP_TX`) on copies of one frame as if
//! each had arrived on the interface, and sends them out of it through the driver's
//! `ndo_xdp_xmit` in bulk: no socket buffer per packet and one system call per `repeat`
//! frames. That is the cheapest way a process can put frames on a veth or a NIC: AF_XDP in
//! copy mode and AF_PACKET build a socket buffer for every frame, and on a veth the receiver's
//! stack runs once per frame in the sender's system call.
//!
//! What the driver needs: `ndo_xdp_xmit`. A veth has it only while its peer receives through
//! NAPI (the peer runs an XDP program, or has GRO on: `ethtool -K PEER gro on`); otherwise
//! the kernel drops the frames without counting them anywhere the sender can read (Linux
//! 6.18), so callers must count what arrives.
//! Frames are sent as they are: every copy is the same frame (one flow, no probe).

use std::os::fd::{AsFd, AsRawFd};

use aya::programs::Xdp;
use aya::Ebpf;

use crate::afxdp::sys::ifindex as sys_ifindex;

/// The program's object, built from `bpf/gen_tx.c` by build.rs.
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/gen_tx.o"));
const PROGRAM_NAME: &str = "hayate_gen_tx";

/// Frames per bulk transmit inside the kernel (at most 256).
const BATCH: u32 = 64;

/// Sends copies of one frame out of one interface with XDP live frames.
pub struct XdpLive {
    /// Owns the loaded program (unloaded on drop).
    _ebpf: Ebpf,
    prog_fd: i32,
    ifindex: u32,
    frame: Vec<u8>,
}

impl std::fmt::Debug for XdpLive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpLive")
            .field("ifindex", &self.ifindex)
            .field("frame_len", &self.frame.len())
            .finish()
    }
}

impl XdpLive {
    /// Loads the transmitter for interface `ifname` (in the calling thread's namespace) and
    /// the frame to send (Ethernet header on, no FCS; 14 to 3,000 bytes).
    pub fn open(ifname: &str, frame: &[u8]) -> Result<XdpLive, String> {
        if !(14..=3000).contains(&frame.len()) {
            return Err(format!(
                "xdplive: a frame of {} bytes cannot be sent; use 14 to 3000 bytes",
                frame.len()
            ));
        }
        let ifindex = sys_ifindex(ifname)?;
        let mut ebpf = Ebpf::load(OBJECT)
            .map_err(|e| format!("xdplive: loading the XDP program: {e} (needs root)"))?;
        let prog: &mut Xdp = ebpf
            .program_mut(PROGRAM_NAME)
            .ok_or_else(|| format!("xdplive: the object has no program {PROGRAM_NAME}"))?
            .try_into()
            .map_err(|e| format!("xdplive: {e}"))?;
        prog.load()
            .map_err(|e| format!("xdplive: loading the XDP program: {e} (needs root)"))?;
        let prog_fd = prog
            .fd()
            .map_err(|e| format!("xdplive: {e}"))?
            .as_fd()
            .as_raw_fd();
        Ok(XdpLive {
            _ebpf: ebpf,
            prog_fd,
            ifindex,
            frame: frame.to_vec(),
        })
    }

    /// Runs the program on `count` copies of the frame (the kernel sends them in bulks of
    /// 64); returns once they are handed to the driver. `count` is capped at 2^31 per call.
    pub fn send(&self, count: u32) -> Result<(), String> {
        let r = crate::bpf_test_run::run(&crate::bpf_test_run::TestRun {
            prog_fd: self.prog_fd,
            frame: &self.frame,
            ifindex: self.ifindex,
            queue: 0,
            repeat: count,
            live: Some(BATCH),
        });
        if let Err(e) = r {
            return Err(match e.raw_os_error() {
                Some(libc::EINVAL) => format!(
                    "{e}: this kernel has no XDP live frames (Linux 5.18+), or refuses this \
                     frame"
                ),
                Some(libc::EPERM) => format!("{e}: needs root (CAP_BPF, CAP_NET_ADMIN)"),
                _ => e.to_string(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_out_of_range_are_refused_before_anything_loads() {
        let e = XdpLive::open("lo", &[0u8; 10]).unwrap_err();
        assert!(e.contains("14 to 3000"), "{e}");
    }
}
