//! `BPF_PROG_TEST_RUN`: the kernel runs a loaded program on a frame the caller hands it, as
//! if it had arrived on an interface. For XDP programs ([`run`]), two users: the AF_XDP port
//! asks what its program would do with a frame ([`crate::afxdp::AfXdpPort::xdp_verdict`]),
//! and the live-frames transmitter ([`crate::xdplive`]) has the kernel send copies of a frame.
//! For tc programs ([`run_skb`]): what an AF_PACKET tunnel underlay's program does with a
//! frame at ingress ([`crate::afpacket::host_skip::HostSkip::verdict`]).

use std::io;
use std::os::fd::RawFd;

/// `BPF_PROG_TEST_RUN` command of bpf(2).
const BPF_PROG_TEST_RUN: libc::c_long = 10;
/// Run the XDP program on live frames that really go out.
const BPF_F_TEST_XDP_LIVE_FRAMES: u32 = 1 << 1;

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

/// One test run of an XDP program.
pub(crate) struct TestRun<'a> {
    /// The loaded program.
    pub prog_fd: RawFd,
    /// The frame (Ethernet header on, no FCS).
    pub frame: &'a [u8],
    /// The interface and receive queue the frame arrives on.
    pub ifindex: u32,
    pub queue: u32,
    /// Runs (at most 2^31).
    pub repeat: u32,
    /// `Some(bulk)`: live frames, really sent, in bulks of `bulk` (at most 256).
    pub live: Option<u32>,
}

/// Runs the program; returns its XDP action (of the last run).
pub(crate) fn run(r: &TestRun) -> io::Result<u32> {
    let ctx = XdpMd {
        data_end: r.frame.len() as u32,
        ingress_ifindex: r.ifindex,
        rx_queue_index: r.queue,
        ..XdpMd::default()
    };
    let mut attr = TestAttr {
        prog_fd: r.prog_fd as u32,
        data_size_in: r.frame.len() as u32,
        data_in: r.frame.as_ptr() as u64,
        repeat: r.repeat.clamp(1, 1 << 31),
        ctx_size_in: std::mem::size_of::<XdpMd>() as u32,
        ctx_in: &ctx as *const XdpMd as u64,
        flags: if r.live.is_some() {
            BPF_F_TEST_XDP_LIVE_FRAMES
        } else {
            0
        },
        batch_size: r.live.unwrap_or(0),
        ..TestAttr::default()
    };
    // SAFETY: the attribute's pointers name the frame and `ctx`, both alive for the call.
    unsafe { test_run(&mut attr) }
}

/// The `BPF_PROG_TEST_RUN` call; the program's return value.
///
/// # Safety
/// Every pointer in `attr` names memory of the size it gives, alive for the call (the kernel
/// reads it and writes only `attr`).
unsafe fn test_run(attr: &mut TestAttr) -> io::Result<u32> {
    // SAFETY: `attr` is a valid BPF_PROG_TEST_RUN attribute (the caller's promise).
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_PROG_TEST_RUN,
            attr as *mut TestAttr,
            std::mem::size_of::<TestAttr>(),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(attr.retval)
}

/// Runs tc program `prog_fd` once on `frame` (Ethernet header on), as at ingress; returns
/// its verdict (`TC_ACT_OK` 0, `TC_ACT_SHOT` 2, …).
pub(crate) fn run_skb(prog_fd: RawFd, frame: &[u8]) -> io::Result<u32> {
    let mut attr = TestAttr {
        prog_fd: prog_fd as u32,
        data_size_in: frame.len() as u32,
        data_in: frame.as_ptr() as u64,
        repeat: 1,
        ..TestAttr::default()
    };
    // SAFETY: the attribute's one pointer names the frame, alive for the call.
    unsafe { test_run(&mut attr) }
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
}
