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

use std::io;
use std::os::fd::{AsFd, AsRawFd};

use aya::programs::Xdp;
use aya::Ebpf;

use crate::afxdp::sys::ifindex as sys_ifindex;

/// The program's object, built from `bpf/gen_tx.c` by build.rs.
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/gen_tx.o"));
const PROGRAM_NAME: &str = "hayate_gen_tx";

/// `BPF_PROG_TEST_RUN` command of bpf(2).
const BPF_PROG_TEST_RUN: libc::c_long = 10;
/// Run the XDP program on live frames that really go out.
const BPF_F_TEST_XDP_LIVE_FRAMES: u32 = 1 << 1;
/// Frames per bulk transmit inside the kernel (at most 256).
const BATCH: u32 = 64;

/// The `test` member of `union bpf_attr`.
#[repr(C, align(8))]
#[derive(Default)]
struct TestAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    /// Explicit tail padding: the kernel refuses an attribute whose bytes after the last
    /// field it knows are not zero, and implicit padding is not guaranteed to be.
    _pad: u32,
}

/// `struct xdp_md` as the context of a test run.
#[repr(C)]
#[derive(Default)]
struct XdpMd {
    data: u32,
    data_end: u32,
    data_meta: u32,
    ingress_ifindex: u32,
    rx_queue_index: u32,
    egress_ifindex: u32,
}

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
        let ctx = XdpMd {
            data_end: self.frame.len() as u32,
            ingress_ifindex: self.ifindex,
            ..XdpMd::default()
        };
        let mut attr = TestAttr {
            prog_fd: self.prog_fd as u32,
            data_size_in: self.frame.len() as u32,
            data_in: self.frame.as_ptr() as u64,
            repeat: count.clamp(1, 1 << 31),
            ctx_size_in: std::mem::size_of::<XdpMd>() as u32,
            ctx_in: &ctx as *const XdpMd as u64,
            flags: BPF_F_TEST_XDP_LIVE_FRAMES,
            batch_size: BATCH,
            ..TestAttr::default()
        };
        // SAFETY: `attr` is a valid BPF_PROG_TEST_RUN attribute whose pointers name `frame`
        // and `ctx`, both alive for the call; the kernel reads them and writes only `attr`.
        let r = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                BPF_PROG_TEST_RUN,
                &mut attr as *mut TestAttr,
                std::mem::size_of::<TestAttr>(),
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
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
    fn the_test_attribute_has_the_kernels_layout() {
        // union bpf_attr's `test` member: 76 bytes of fields, 8-byte aligned.
        assert_eq!(std::mem::size_of::<TestAttr>(), 80);
        assert_eq!(std::mem::size_of::<XdpMd>(), 24);
    }

    #[test]
    fn frames_out_of_range_are_refused_before_anything_loads() {
        let e = XdpLive::open("lo", &[0u8; 10]).unwrap_err();
        assert!(e.contains("14 to 3000"), "{e}");
    }
}
