//! dpdk-testpmd as the "VMs" (virtio-user ports, io forwarding, on the VM core) and as DPDK's
//! vhost floor, and its telemetry socket, read for port counters.
//!
//! - PVP VM: one virtio-user port (`server=1`: it owns the socket, the switch connects),
//!   `--port-topology=loop`: what it receives goes back out of the same port.
//! - V2V VMs: one testpmd drives both VMs' ports (as pvp.sh's B2: two busy-polling processes
//!   on one core would measure the scheduler): ports 0 net_pcap (the frame, replayed without
//!   end), 1 vmA, 2 vmB, 3 net_null; `--port-topology=chained` forwards 0→1 (vmA sends), 1→2
//!   (vmA receives nothing), 2→3 (what vmB receives is dropped), 3→0 (net_null has no rx).

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use super::counters::parse_ethdev_stats;
use super::{Ctx, Topology};
use crate::sys::guard;
use crate::sys::proc::{Proc, Spawn};

/// A virtio-user vdev on `sock` (`server`: testpmd owns the socket).
pub fn virtio(i: usize, sock: &Path, vq: u32, server: bool) -> String {
    format!(
        "net_virtio_user{i},path={},queues=1,queue_size={vq}{}",
        sock.display(),
        if server { ",server=1" } else { "" }
    )
}

/// The file prefix of testpmd `name` (unique to this run and repetition).
pub fn prefix(ctx: &Ctx, name: &str) -> String {
    format!("{}{name}", ctx.tag)
}

fn base(ctx: &Ctx, name: &str, eal: &[String], vdevs: &[String], app: &[&str]) -> Spawn {
    let mut a: Vec<String> = eal.to_vec();
    a.extend(["--no-pci".into(), "--file-prefix".into(), prefix(ctx, name)]);
    for v in vdevs {
        a.push(format!("--vdev={v}"));
    }
    a.push("--".into());
    a.extend(app.iter().map(|s| s.to_string()));
    // Without a stats period testpmd reads stdin and stops at its end.
    for s in ["--nb-cores=1", "--auto-start", "--stats-period", "60"] {
        a.push(s.into());
    }
    Spawn::new(name, "dpdk-testpmd")
        .args(a)
        .lifetime(ctx.lifetime())
        .stop_with(libc::SIGINT)
}

/// A "VM" testpmd on the VM core (main lcore and forwarding lcore both there), its memory
/// memfd-backed 4 KiB pages (`--no-huge`) or the private hugetlbfs (`--vm-memory huge`).
pub fn vm(ctx: &Ctx, name: &str, vdevs: &[String], topology: &str) -> Spawn {
    let v = ctx.vm_core;
    let mut eal = vec![
        "--lcores".to_string(),
        format!("0@{v},1@{v}"),
        "--main-lcore".into(),
        "0".into(),
    ];
    match &ctx.huge {
        Some(h) if ctx.vm_huge => eal.extend([
            "--in-memory".into(),
            "--single-file-segments".into(),
            "--huge-dir".into(),
            h.display().to_string(),
            "-m".into(),
            "512".into(),
        ]),
        _ => eal.extend(["--no-huge".into(), "-m".into(), "1024".into()]),
    }
    let topo = format!("--port-topology={topology}");
    base(ctx, name, &eal, vdevs, &["--forward-mode=io", &topo]).cpus(&[v])
}

/// The floor's EAL options: main lcore on the VM core, the forwarding lcore on the switch
/// core, memory on the private hugetlbfs.
fn floor_eal(ctx: &Ctx, huge: &Path) -> [String; 9] {
    let (v, s) = (ctx.vm_core, ctx.switch_core);
    [
        "-l".to_string(),
        format!("{v},{s}"),
        "--main-lcore".into(),
        v.to_string(),
        "--in-memory".into(),
        "--huge-dir".into(),
        huge.display().to_string(),
        "-m".into(),
        "512".into(),
    ]
}

/// DPDK's vhost floor: testpmd io forwarding net_pcap → net_vhost (server) → net_null, its
/// forwarding lcore on the switch core.
pub fn floor(ctx: &Ctx, name: &str, pcap: &Path, sock: &Path, huge: &Path) -> Spawn {
    let eal = floor_eal(ctx, huge);
    let vdevs = [
        format!("net_pcap0,rx_pcap={},infinite_rx=1", pcap.display()),
        format!("net_vhost0,iface={},client=0,queues=1", sock.display()),
        "net_null0,no-rx=1".to_string(),
    ];
    base(
        ctx,
        name,
        &eal,
        &vdevs,
        &["--forward-mode=io", "--port-topology=chained"],
    )
    .cpus(&[ctx.vm_core, ctx.switch_core])
}

/// DPDK's vhost floor for V2V: testpmd io forwarding between two net_vhost ports in client
/// mode on the VMs' sockets (`socks`: vmA, vmB), `paired` (vmA → vmB; vmB sends nothing), its
/// forwarding lcore on the switch core.
pub fn floor_v2v(ctx: &Ctx, name: &str, socks: &[PathBuf], huge: &Path) -> Spawn {
    let eal = floor_eal(ctx, huge);
    let vdevs: Vec<String> = socks
        .iter()
        .enumerate()
        .map(|(i, p)| format!("net_vhost{i},iface={},client=1,queues=1", p.display()))
        .collect();
    base(
        ctx,
        name,
        &eal,
        &vdevs,
        &["--forward-mode=io", "--port-topology=paired"],
    )
    .cpus(&[ctx.vm_core, ctx.switch_core])
}

/// The VMs' side of a topology for a switch that connects to their sockets.
pub struct Vms {
    /// The testpmd process.
    pub proc: Proc,
    /// Its file prefix.
    pub prefix: String,
    /// The sockets, in the switch's port order (PVP: vm; V2V: vmA, vmB).
    pub socks: Vec<PathBuf>,
}

impl Vms {
    /// Starts the VMs of `topo` with their sockets in `dir`.
    pub fn start(ctx: &Ctx, topo: Topology, dir: &Path) -> Result<Vms> {
        let (name, socks, vdevs, t) = match topo {
            Topology::Pvp => {
                let s = dir.join("vm.sock");
                let v = vec![virtio(0, &s, ctx.vq, true)];
                ("vm", vec![s], v, "loop")
            }
            Topology::V2v => {
                let (a, b) = (dir.join("vmA.sock"), dir.join("vmB.sock"));
                let v = vec![
                    format!("net_pcap0,rx_pcap={},infinite_rx=1", ctx.pcap.display()),
                    virtio(0, &a, ctx.vq, true),
                    virtio(1, &b, ctx.vq, true),
                    "net_null0,no-rx=1".to_string(),
                ];
                ("vms", vec![a, b], v, "chained")
            }
        };
        for s in &socks {
            let _ = std::fs::remove_file(s);
        }
        let proc = vm(ctx, name, &vdevs, t).start(dir)?;
        Ok(Vms {
            proc,
            prefix: prefix(ctx, name),
            socks,
        })
    }
}

impl Drop for Vms {
    fn drop(&mut self) {
        self.proc.stop();
        crate::sys::host::remove_dpdk_runtime(&self.prefix);
        for s in &self.socks {
            let _ = std::fs::remove_file(s);
        }
    }
}

/// A connection to a DPDK process's telemetry socket.
#[derive(Debug)]
pub struct Telemetry {
    fd: OwnedFd,
}

impl Telemetry {
    /// Connects to the telemetry socket of the process with file prefix `prefix`, trying
    /// for up to `wait` (it appears once the EAL is up); `alive` fails when the process has
    /// exited.
    pub fn connect(
        prefix: &str,
        wait: Duration,
        alive: &mut dyn FnMut() -> Result<()>,
    ) -> Result<Telemetry> {
        let path = format!("/var/run/dpdk/{prefix}/dpdk_telemetry.v2");
        let end = Instant::now() + wait;
        loop {
            match Self::try_connect(&path) {
                Ok(t) => return Ok(t),
                Err(e) if Instant::now() >= end => {
                    bail!("no DPDK telemetry at {path} after {wait:?}: {e}")
                }
                Err(_) => {
                    alive()?;
                    guard::nap(Duration::from_millis(200))?;
                }
            }
        }
    }

    fn try_connect(path: &str) -> Result<Telemetry> {
        // SAFETY: plain socket(2); the descriptor is owned at once.
        let fd =
            unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            bail!("socket: {}", std::io::Error::last_os_error());
        }
        // SAFETY: fd is a new descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: sockaddr_un is plain data.
        let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
        addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
        let b = path.as_bytes();
        if b.len() >= addr.sun_path.len() {
            bail!("socket path too long: {path}");
        }
        for (d, s) in addr.sun_path.iter_mut().zip(b) {
            *d = *s as libc::c_char;
        }
        let tv = libc::timeval {
            tv_sec: 5,
            tv_usec: 0,
        };
        // SAFETY: valid descriptor, address and option buffers of the sizes given.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                &tv as *const _ as *const libc::c_void,
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            );
            if libc::connect(
                fd.as_raw_fd(),
                &addr as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
            ) != 0
            {
                bail!("connect: {}", std::io::Error::last_os_error());
            }
        }
        let t = Telemetry { fd };
        t.recv()?; // the greeting: version, pid, max output length
        Ok(t)
    }

    fn recv(&self) -> Result<String> {
        let mut buf = vec![0u8; 1 << 16];
        // SAFETY: buf is writable for its length.
        let n = unsafe {
            libc::recv(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                0,
            )
        };
        if n <= 0 {
            bail!("telemetry recv: {}", std::io::Error::last_os_error());
        }
        buf.truncate(n as usize);
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }

    /// Sends one command and returns the reply.
    pub fn query(&self, cmd: &str) -> Result<String> {
        // SAFETY: cmd is readable for its length.
        let n = unsafe {
            libc::send(
                self.fd.as_raw_fd(),
                cmd.as_ptr() as *const libc::c_void,
                cmd.len(),
                libc::MSG_NOSIGNAL,
            )
        };
        if n != cmd.len() as isize {
            bail!("telemetry send: {}", std::io::Error::last_os_error());
        }
        self.recv()
    }

    /// `key.p<N>.rx` / `.tx` of each port in `ports`.
    pub fn ports(&self, key: &str, ports: &[u16]) -> Result<BTreeMap<String, u64>> {
        let mut m = BTreeMap::new();
        for &p in ports {
            let (rx, tx) = parse_ethdev_stats(&self.query(&format!("/ethdev/stats,{p}"))?)?;
            m.insert(format!("{key}.p{p}.rx"), rx);
            m.insert(format!("{key}.p{p}.tx"), tx);
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn virtio_user_vdevs_say_who_owns_the_socket() {
        let s = Path::new("/tmp/x/vm.sock");
        assert_eq!(
            virtio(0, s, 256, true),
            "net_virtio_user0,path=/tmp/x/vm.sock,queues=1,queue_size=256,server=1"
        );
        assert!(!virtio(1, s, 1024, false).contains("server"));
    }
}
