//! The XDP program of an AF_XDP port: loaded from the object `build.rs` compiles from
//! `bpf/xsk_redirect.c`, attached to the interface with a bpf_link, and detached when the port
//! is dropped.
//!
//! Why a bpf_link: the kernel detaches a link's program when the last descriptor of the link
//! closes, and a process's descriptors close when it dies, however it dies. So a switch killed
//! with SIGKILL leaves no program behind. A program attached the old way (netlink), e.g. by a
//! switch built for a kernel without links, stays after a crash; when the next open finds one
//! of ours (by name) attached that way, it detaches it and attaches its own, so programs are
//! replaced, never stacked. A program that is not ours is left alone and the open fails,
//! naming it.

use std::io;
use std::os::fd::{AsFd, AsRawFd, RawFd};

use aya::maps::{Array, PerCpuArray, XskMap};
use aya::programs::{Xdp, XdpFlags};
use aya::Ebpf;

use super::netlink::{self, Attached};
use super::sys::{advice, NEED_CAPS};
use super::XdpMode;

/// The object built from `bpf/xsk_redirect.c`.
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/xsk_redirect.o"));

/// The XDP program's name in the kernel (`bpftool prog show` lists it so).
pub const PROGRAM_NAME: &str = "hayate_xsk";
/// The XSKMAP's name in the object.
const MAP_NAME: &str = "hayate_xsks";
/// The program's settings (word 0, bit 0: control frames go to the kernel stack).
const CFG_MAP_NAME: &str = "hayate_cfg";
/// The ingress policer's settings and buckets.
const POLICE_MAP_NAME: &str = "hayate_police";
/// Frames the ingress policer dropped, per CPU.
const POLICE_DROPS_MAP_NAME: &str = "hayate_police_drops";
/// Slots in the XSKMAP (`max_entries` in the C source): the most queues a port can open.
pub(crate) const MAX_QUEUES: u32 = 64;

/// The first io::Error in an error's source chain (aya wraps them a few levels deep).
fn io_cause<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a io::Error> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<io::Error>() {
            return Some(io);
        }
        cur = err.source();
    }
    None
}

/// Turns an aya error into a sentence with the fix.
fn explain(what: &str, e: &(dyn std::error::Error + 'static)) -> String {
    match io_cause(e) {
        Some(io) if matches!(io.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) => {
            format!("{what}: {e}; {NEED_CAPS}")
        }
        Some(io) => advice(&format!("{what} ({e})"), io),
        None => format!("{what}: {e}"),
    }
}

/// The loaded program, attached to one interface while this lives.
pub(crate) struct XdpProgram {
    /// Owns the program, its map and its link; dropping it detaches the link and unloads.
    ebpf: Ebpf,
    /// The mode the program runs in.
    native: bool,
}

impl std::fmt::Debug for XdpProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpProgram")
            .field("native", &self.native)
            .finish()
    }
}

/// Loads the program (not attached yet).
fn load() -> Result<Ebpf, String> {
    let mut ebpf = Ebpf::load(OBJECT).map_err(|e| explain("loading the XDP program", &e))?;
    let prog: &mut Xdp = ebpf
        .program_mut(PROGRAM_NAME)
        .ok_or_else(|| format!("the XDP object has no program {PROGRAM_NAME}"))?
        .try_into()
        .map_err(|e| explain("the XDP object's program", &e))?;
    prog.load()
        .map_err(|e| explain("loading the XDP program into the kernel", &e))?;
    Ok(ebpf)
}

fn program(ebpf: &mut Ebpf) -> &mut Xdp {
    ebpf.program_mut(PROGRAM_NAME)
        .and_then(|p| <&mut Xdp>::try_from(p).ok())
        .expect("checked in load()")
}

/// The name of loaded program `id`, if it can be found.
fn program_name(id: u32) -> Option<String> {
    aya::programs::loaded_programs()
        .filter_map(Result::ok)
        .find(|p| p.id() == id)
        .and_then(|p| p.name_as_str().map(str::to_owned))
}

/// Makes room for our program on `ifindex`: nothing attached is fine; a stale program of ours
/// attached the old way is detached (logged); anything else is an error that names it.
fn clear_stale(ifname: &str, ifindex: u32) -> Result<(), String> {
    let state = netlink::xdp_state(ifindex)
        .map_err(|e| advice(&format!("reading {ifname}'s XDP state"), &e))?;
    let Some(state) = state else {
        return Ok(());
    };
    let name = program_name(state.prog_id).unwrap_or_else(|| "?".to_string());
    if name != PROGRAM_NAME {
        return Err(format!(
            "{ifname} already has XDP program '{name}' (id {}) attached; remove it first \
             (ip link set dev {ifname} xdp off) or use another interface",
            state.prog_id
        ));
    }
    if matches!(state.mode, Attached::Hardware | Attached::Multi) {
        return Err(format!(
            "{ifname} has {PROGRAM_NAME} (id {}) attached in {:?} mode; remove it with \
             ip link set dev {ifname} xdp off",
            state.prog_id, state.mode
        ));
    }
    match netlink::set_xdp_fd(ifindex, -1, state.flags()) {
        Ok(()) => {
            tracing::warn!(
                "port afxdp:{ifname}: detached stale XDP program {PROGRAM_NAME} (id {}) left by \
                 a switch that did not close it",
                state.prog_id
            );
            Ok(())
        }
        // A link holds it: a live process owns that program.
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => Err(format!(
            "{ifname} is already open as an AF_XDP port (its XDP program {PROGRAM_NAME}, id {}, \
             is held by a live bpf_link: another port of this switch, or another running \
             switch); open each interface once, or stop the other switch",
            state.prog_id
        )),
        Err(e) => Err(advice(
            &format!("detaching the stale XDP program from {ifname}"),
            &e,
        )),
    }
}

impl XdpProgram {
    /// Loads the program and attaches it to `ifname` (index `ifindex`) in `mode`. `Auto`
    /// tries native mode first and falls back to skb (generic) mode; the mode used is logged.
    pub(crate) fn attach(ifname: &str, ifindex: u32, mode: XdpMode) -> Result<XdpProgram, String> {
        let mut ebpf = load()?;
        clear_stale(ifname, ifindex)?;
        let try_attach = |ebpf: &mut Ebpf, flags: XdpFlags| {
            program(ebpf).attach_to_if_index(ifindex, flags).map(|_| ())
        };
        let native = match mode {
            XdpMode::Native => {
                try_attach(&mut ebpf, XdpFlags::DRV_MODE).map_err(|e| {
                    explain(
                        &format!(
                            "attaching the XDP program to {ifname} in native mode (the driver \
                             may not support XDP; try mode=skb or mode=auto)"
                        ),
                        &e,
                    )
                })?;
                true
            }
            XdpMode::Skb => {
                try_attach(&mut ebpf, XdpFlags::SKB_MODE).map_err(|e| {
                    explain(
                        &format!("attaching the XDP program to {ifname} in skb mode"),
                        &e,
                    )
                })?;
                false
            }
            XdpMode::Auto => match try_attach(&mut ebpf, XdpFlags::DRV_MODE) {
                Ok(()) => true,
                Err(native_err) => {
                    try_attach(&mut ebpf, XdpFlags::SKB_MODE).map_err(|e| {
                        format!(
                            "{}; native mode failed too: {native_err}",
                            explain(&format!("attaching the XDP program to {ifname}"), &e)
                        )
                    })?;
                    false
                }
            },
        };
        tracing::info!(
            "port afxdp:{ifname}: XDP program {PROGRAM_NAME} attached in {} mode",
            if native { "native" } else { "skb (generic)" }
        );
        Ok(XdpProgram { ebpf, native })
    }

    /// Whether the program runs in native (driver) mode rather than skb (generic) mode.
    pub(crate) fn native(&self) -> bool {
        self.native
    }

    /// Puts AF_XDP socket `fd` in slot `queue` of the XSKMAP: frames of that receive queue go
    /// to it from now on.
    pub(crate) fn set_socket(&mut self, queue: u32, fd: RawFd) -> Result<(), String> {
        let map = self
            .ebpf
            .map_mut(MAP_NAME)
            .ok_or_else(|| format!("the XDP object has no map {MAP_NAME}"))?;
        let mut xsks = XskMap::try_from(map).map_err(|e| explain("the XSKMAP", &e))?;
        xsks.set(queue, fd, 0)
            .map_err(|e| explain(&format!("putting queue {queue}'s socket in the XSKMAP"), &e))
    }

    /// Runs the program on `frame` as if it arrived on receive queue `queue` of interface
    /// `ifindex`, without acting on the verdict (`BPF_PROG_TEST_RUN`); returns the XDP action.
    pub(crate) fn verdict(
        &mut self,
        ifindex: u32,
        queue: u32,
        frame: &[u8],
    ) -> Result<u32, String> {
        let prog_fd = program(&mut self.ebpf)
            .fd()
            .map_err(|e| explain("the XDP program", &e))?
            .as_fd()
            .as_raw_fd();
        crate::bpf_test_run::run(&crate::bpf_test_run::TestRun {
            prog_fd,
            frame,
            ifindex,
            queue,
            repeat: 1,
            live: None,
        })
        .map_err(|e| advice("running the XDP program on a frame", &e))
    }

    /// Sends control frames (ARP, ICMP, ICMPv6, TCP SYNs) up the kernel stack, where the
    /// port's priority socket reads them, instead of to the AF_XDP sockets.
    pub(crate) fn set_control_to_stack(&mut self, on: bool) -> Result<(), String> {
        let map = self
            .ebpf
            .map_mut(CFG_MAP_NAME)
            .ok_or_else(|| format!("the XDP object has no map {CFG_MAP_NAME}"))?;
        let mut cfg: Array<_, u32> =
            Array::try_from(map).map_err(|e| explain("the XDP settings map", &e))?;
        cfg.set(0, u32::from(on), 0)
            .map_err(|e| explain("setting the XDP program's priority class", &e))
    }
}

/// `struct police` of `bpf/xsk_redirect.c`: the program's ingress policer (rates 0: not by
/// that measure; buckets in billionths).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct XdpPolice {
    /// The kernel's `struct bpf_spin_lock` (left alone by map updates).
    lock: u32,
    /// 0: no policing.
    on: u32,
    byte_rate: u64,
    byte_burst: u64,
    pkt_rate: u64,
    pkt_burst: u64,
    byte_tokens: u64,
    pkt_tokens: u64,
    last_ns: u64,
}

// SAFETY: plain integers, no padding (4 + 4 + 7 × 8 bytes), any bit pattern valid.
unsafe impl aya::Pod for XdpPolice {}

/// Billionths per unit in the program's buckets.
const NANO: u64 = 1_000_000_000;

impl XdpPolice {
    /// Whether it polices at all.
    pub(crate) fn is_on(&self) -> bool {
        self.on != 0
    }

    /// The program's form of `p`, buckets full; `None` when a figure is beyond what the
    /// program's 64-bit arithmetic holds (over 100 Gbit/s, 10 Gpkt/s, or buckets of more than
    /// 16 GB or 16 G packets): the datapath alone polices such a port.
    pub(crate) fn of(p: &crate::Policing) -> Option<XdpPolice> {
        let byte_rate = u64::from(p.rate_kbps) * 1000 / 8;
        let byte_burst = u64::from(p.burst_kbit) * 1000 / 8;
        let pkt_rate = u64::from(p.rate_kpps) * 1000;
        let pkt_burst = u64::from(p.burst_kpkts) * 1000;
        let fits = byte_rate <= 12_500_000_000
            && pkt_rate <= 10_000_000_000
            && byte_burst <= 16_000_000_000
            && pkt_burst <= 16_000_000_000;
        fits.then_some(XdpPolice {
            lock: 0,
            on: u32::from(byte_rate > 0 || pkt_rate > 0),
            byte_rate,
            byte_burst,
            pkt_rate,
            pkt_burst,
            byte_tokens: byte_burst * NANO,
            pkt_tokens: pkt_burst * NANO,
            last_ns: 0,
        })
    }
}

impl XdpProgram {
    /// Polices received frames in the program as `p` says (an `on` of 0: not at all).
    pub(crate) fn set_police(&mut self, p: &XdpPolice) -> Result<(), String> {
        let map = self
            .ebpf
            .map_mut(POLICE_MAP_NAME)
            .ok_or_else(|| format!("the XDP object has no map {POLICE_MAP_NAME}"))?;
        let mut police: Array<_, XdpPolice> =
            Array::try_from(map).map_err(|e| explain("the XDP policing map", &e))?;
        police
            .set(0, *p, 0)
            .map_err(|e| explain("setting the XDP program's ingress policing", &e))
    }

    /// Frames the program's policer dropped, summed over the CPUs.
    pub(crate) fn police_drops(&self) -> Result<u64, String> {
        let map = self
            .ebpf
            .map(POLICE_DROPS_MAP_NAME)
            .ok_or_else(|| format!("the XDP object has no map {POLICE_DROPS_MAP_NAME}"))?;
        let drops: PerCpuArray<_, u64> =
            PerCpuArray::try_from(map).map_err(|e| explain("the XDP policing drops", &e))?;
        let per_cpu = drops
            .get(&0, 0)
            .map_err(|e| explain("reading the XDP policing drops", &e))?;
        Ok(per_cpu.iter().sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Wrapper(io::Error);

    impl std::fmt::Display for Wrapper {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "wrapped")
        }
    }

    impl std::error::Error for Wrapper {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn permission_errors_deep_in_a_chain_name_the_capabilities() {
        let e = Wrapper(io::Error::from_raw_os_error(libc::EPERM));
        let text = explain("loading the XDP program", &e);
        assert!(text.contains(NEED_CAPS), "{text}");
        let busy = Wrapper(io::Error::from_raw_os_error(libc::EBUSY));
        assert!(explain("x", &busy).contains("stop it first"));
        let plain = io::Error::other("no errno");
        assert_eq!(explain("x", &plain), "x (no errno): no errno");
    }

    #[test]
    fn the_embedded_object_has_the_program_and_the_map() {
        // An ELF object for BPF built by build.rs; loading it needs root, parsing does not.
        assert_eq!(&OBJECT[..4], b"\x7fELF");
        let find = |needle: &[u8]| OBJECT.windows(needle.len()).any(|w| w == needle);
        assert!(find(PROGRAM_NAME.as_bytes()));
        assert!(find(MAP_NAME.as_bytes()));
        assert!(find(CFG_MAP_NAME.as_bytes()));
        assert!(find(POLICE_MAP_NAME.as_bytes()));
        assert!(find(POLICE_DROPS_MAP_NAME.as_bytes()));
    }

    #[test]
    fn policing_in_the_program_converts_kbit_to_bytes_and_refuses_what_overflows() {
        let p = XdpPolice::of(&crate::Policing {
            rate_kbps: 10_000,
            burst_kbit: 1_000,
            ..Default::default()
        })
        .unwrap();
        assert_eq!((p.on, p.byte_rate, p.byte_burst), (1, 1_250_000, 125_000));
        assert_eq!((p.pkt_rate, p.byte_tokens), (0, 125_000 * NANO));
        let off = XdpPolice::of(&crate::Policing::default()).unwrap();
        assert_eq!(off.on, 0);
        let huge = crate::Policing {
            rate_kbps: u32::MAX,
            burst_kbit: 13,
            ..Default::default()
        };
        assert_eq!(XdpPolice::of(&huge), None);
        assert_eq!(std::mem::size_of::<XdpPolice>(), 64);
    }
}
