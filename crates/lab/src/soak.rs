//! `hayate bench soak`: everything a busy host throws at the switch's control side, at once,
//! for N minutes, then checks that nothing was lost (issue 23).
//!
//! ```text
//! netns <p>A: a0 10.77.0.1 ──veth── a1 ┐                       ┌ ping A→B, 50/s, the whole time
//!                                      ├─ hayate run (netns S) ┤ malformed frames from A
//! netns <p>B: b0 10.77.0.2 ──veth── b1 ┘  standalone, ptcp     └ (the established flow)
//! ```
//!
//! Hayate runs in the default fail mode (standalone: the hosts' traffic goes by the fail-open
//! NORMAL flow) with a passive controller listener on loopback and its management socket.
//! Before the clock starts, `--flows` entries that no packet matches are installed. Then, in
//! parallel until the end:
//!
//! - **churn**: `hayate ctl add-flows` of 50 rules and `del-flows` of them again, each
//!   answered only after a barrier;
//! - **dumps**: `ovs-ofctl dump-flows` of the whole table through the listener;
//! - **flood**: rounds of connections to the listener that send a HELLO and half a message
//!   and hang, and stray HELLOs that leave at once;
//! - **malformed**: runts and frames with a bad IPv4 header, sent from host A's interface;
//! - **ports**: a port added and removed every second (`add-port null:` / `del-port`).
//!
//! At the end: the switch still runs and answers on both channels, the ping lost nothing, the
//! malformed frames were counted (`drop_malformed`), the descriptor count is back where it
//! started, and the resident memory is near its start (after the table was installed).

use std::io::Write;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::compare::topo::{in_ns, run, Topo, IP_B};

/// Options of `hayate bench soak`.
#[derive(Args, Debug, Clone)]
pub struct SoakArgs {
    /// How long the mix runs, in minutes (fractions allowed: CI runs half a minute).
    #[arg(long, default_value_t = 10.0)]
    pub minutes: f64,
    /// Flow entries installed before the mix (dumped whole during it).
    #[arg(long, default_value_t = 1_000_000)]
    pub flows: usize,
    /// Connections per flood round (each holds a half message until the round ends).
    #[arg(long, default_value_t = 400)]
    pub flood: usize,
    /// Core of the switch's poll thread (default: the last core).
    #[arg(long)]
    pub core: Option<usize>,
    /// Write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Folder for logs and the switch's run folder (default: a fresh one under /tmp; kept).
    #[arg(long)]
    pub workdir: Option<PathBuf>,
}

/// The controller listener's port (inside the switch's namespace).
const LISTENER: u16 = 16653;
/// The bridge `hayate run --port ...` makes.
const BRIDGE: &str = "br0";
/// Memory the switch may hold at the end beyond its start (allocator slack, grown caches).
const RSS_SLACK_KB: u64 = 64 * 1024;

/// What the soak counted, and its verdict.
#[derive(Debug, Default, serde::Serialize)]
pub struct Soak {
    /// Minutes the mix ran.
    pub minutes: f64,
    /// Flow entries installed first.
    pub flows: usize,
    /// Pings sent and answered.
    pub pings: (u64, u64),
    /// Churn rounds (50 adds, then their delete) completed.
    pub churn_rounds: u64,
    /// Whole-table dumps completed.
    pub dumps: u64,
    /// Dumps whose connection the switch closed before any reply (a newcomer from the
    /// flood's address while the listener is at its caps), tried again a second later. A
    /// dump cut after its reply began is a failure.
    pub dumps_refused: u64,
    /// Flood connections opened, and stray HELLOs sent.
    pub flood_conns: (u64, u64),
    /// Malformed frames sent, and what the switch counted as `drop_malformed`.
    pub malformed: (u64, u64),
    /// Ports added and removed.
    pub port_cycles: u64,
    /// Resident memory at the start (after the table) and at the end, KiB.
    pub rss_kb: (u64, u64),
    /// Open descriptors at the start and at the end.
    pub fds: (u64, u64),
    /// Checks that failed (empty: passed).
    pub failures: Vec<String>,
}

/// Runs `hayate bench soak`.
pub fn main(args: SoakArgs) -> Result<()> {
    if !(args.minutes > 0.0 && args.minutes <= 24.0 * 60.0) {
        bail!("--minutes must be in (0, 1440]");
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("bench soak creates network namespaces: run it as root");
    }
    for tool in ["ip", "ping", "ovs-ofctl"] {
        if Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .map(|o| !o.status.success())
            .unwrap_or(true)
        {
            bail!("bench soak needs {tool} (apt-get install iproute2 iputils-ping openvswitch-common)");
        }
    }
    let dir = crate::bench::workdir(args.workdir.as_deref(), "soak")?;
    eprintln!("hayate: logs in {}", dir.display());
    let soak = soak(&args, &dir)?;
    print!("{}", table(&soak));
    crate::bench::write_json(args.json.as_deref(), &soak)?;
    if !soak.failures.is_empty() {
        bail!("the soak failed: {}", soak.failures.join("; "));
    }
    Ok(())
}

fn table(s: &Soak) -> String {
    format!(
        "soak: {:.1} min over {} flow entries\n\
         ping A→B          {} sent, {} answered\n\
         churn rounds      {} (50 adds + their delete, with barriers)\n\
         whole-table dumps {} ({} refused before any reply during floods, and tried again)\n\
         flood             {} held connections, {} stray HELLOs\n\
         malformed frames  {} sent, {} counted as drop_malformed\n\
         ports             {} added and removed\n\
         resident memory   {} → {} KiB\n\
         descriptors       {} → {}\n\
         verdict           {}\n",
        s.minutes,
        s.flows,
        s.pings.0,
        s.pings.1,
        s.churn_rounds,
        s.dumps,
        s.dumps_refused,
        s.flood_conns.0,
        s.flood_conns.1,
        s.malformed.0,
        s.malformed.1,
        s.port_cycles,
        s.rss_kb.0,
        s.rss_kb.1,
        s.fds.0,
        s.fds.1,
        if s.failures.is_empty() {
            "passed".to_string()
        } else {
            format!("FAILED: {}", s.failures.join("; "))
        }
    )
}

/// The switch under soak: its process, run folder and binary.
struct Switch {
    child: Child,
    run_dir: PathBuf,
    hayate: PathBuf,
    /// The process inside the namespace (`ip netns exec` execs it, so the same pid).
    pid: u32,
}

impl Switch {
    fn ctl(&self, args: &[&str]) -> Result<String> {
        let out = run(Command::new(&self.hayate)
            .arg("ctl")
            .arg("--run-dir")
            .arg(&self.run_dir)
            .arg(BRIDGE)
            .args(args))?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        crate::sys::proc::terminate(&mut self.child, libc::SIGTERM);
    }
}

fn status_kb(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

fn fd_count(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count() as u64)
        .unwrap_or(0)
}

fn soak(args: &SoakArgs, dir: &Path) -> Result<Soak> {
    let prefix = format!("sk{}", std::process::id() % 100_000);
    let topo = Topo::up(&prefix)?;
    let core = args
        .core
        .unwrap_or(cpu::available_cores().saturating_sub(1));
    let run_dir = dir.join("run");
    std::fs::create_dir_all(&run_dir)?;
    let hayate = std::env::current_exe().context("finding the hayate binary")?;
    let listener = format!("ptcp:{LISTENER}:127.0.0.1");
    let core_s = core.to_string();
    let a = format!("afpacket:{}", topo.a1);
    let b = format!("afpacket:{}", topo.b1);
    let hayate_s = hayate.to_string_lossy().into_owned();
    let run_dir_s = run_dir.to_string_lossy().into_owned();
    let child = in_ns(
        &topo.ns_s,
        &[
            &hayate_s,
            "run",
            "--port",
            &a,
            "--port",
            &b,
            "--core",
            &core_s,
            "--controller",
            &listener,
            "--run-dir",
            &run_dir_s,
            "--stats-interval",
            "0",
        ],
    )
    .stdin(Stdio::null())
    .stdout(std::fs::File::create(dir.join("hayate.log"))?)
    .stderr(std::fs::File::create(dir.join("hayate.err"))?)
    .spawn()
    .context("starting hayate")?;
    let pid = child.id();
    let mut sw = Switch {
        child,
        run_dir,
        hayate,
        pid,
    };
    let end = Instant::now() + Duration::from_secs(30);
    while sw.ctl(&["dump-ports"]).is_err() {
        if !sw.alive() || Instant::now() > end {
            let err = std::fs::read_to_string(dir.join("hayate.err")).unwrap_or_default();
            bail!("the switch did not come up: {}", err.trim());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("hayate: installing {} flow entries ...", args.flows);
    let table = dir.join("table.txt");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&table)?);
    for i in 0..args.flows {
        writeln!(
            f,
            "priority=50,udp,nw_dst=172.{}.{}.{},actions=drop",
            16 + (i >> 16) % 16,
            (i >> 8) & 0xff,
            i & 0xff
        )?;
    }
    drop(f);
    sw.ctl(&["add-flows", &table.to_string_lossy()])?;
    // The start: after the table, once the switch settled.
    std::thread::sleep(Duration::from_secs(1));
    let mut s = Soak {
        minutes: args.minutes,
        flows: args.flows,
        rss_kb: (status_kb(sw.pid, "VmRSS:"), 0),
        fds: (fd_count(sw.pid), 0),
        ..Soak::default()
    };
    let malformed_before = pmd_total(&sw, "drop_malformed")?;
    let secs = args.minutes * 60.0;
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    eprintln!("hayate: soaking for {secs:.0} s ...");

    // The established flow: ping at 50/s for the whole time. A loaded machine stretches
    // ping's interval, so it also has a deadline (twice the time, plus 10 s) that it ends at
    // whatever it counted by then.
    let count = ((secs * 50.0) as u64).max(10);
    let ping_deadline = (secs * 2.0 + 10.0) as u64;
    let ping = in_ns(
        &topo.ns_a,
        &[
            "ping",
            "-n",
            "-q",
            "-i",
            "0.02",
            "-c",
            &count.to_string(),
            "-w",
            &ping_deadline.to_string(),
            IP_B,
        ],
    )
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::null())
    .spawn()
    .context("starting ping")?;

    let stop = Arc::new(AtomicBool::new(false));
    let churn = Arc::new(AtomicU64::new(0));
    let dumps = Arc::new(AtomicU64::new(0));
    let refused = Arc::new(AtomicU64::new(0));
    let held = Arc::new(AtomicU64::new(0));
    let strays = Arc::new(AtomicU64::new(0));
    let bad = Arc::new(AtomicU64::new(0));
    let ports = Arc::new(AtomicU64::new(0));
    let errors: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let mut threads = Vec::new();
    {
        let (stop, n, errors, ctl) = (stop.clone(), churn.clone(), errors.clone(), ctl_cmd(&sw));
        let rules = dir.join("churn.txt");
        let mut text = String::new();
        for i in 0..50 {
            text.push_str(&format!(
                "priority=100,udp,nw_dst=192.168.{}.{i},actions=drop\n",
                i % 4
            ));
        }
        std::fs::write(&rules, text)?;
        threads.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let r = run(ctl().args(["add-flows", &rules.to_string_lossy()]))
                    .and_then(|_| run(ctl().args(["del-flows", "udp,nw_dst=192.168.0.0/16"])));
                match r {
                    Ok(_) => n.fetch_add(1, Ordering::Relaxed),
                    Err(e) => {
                        errors.lock().unwrap().push(format!("churn: {e:#}"));
                        return;
                    }
                };
            }
        }));
    }
    {
        let (stop, n, refused, errors, ns) = (
            stop.clone(),
            dumps.clone(),
            refused.clone(),
            errors.clone(),
            topo.ns_s.clone(),
        );
        threads.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let target = format!("tcp:127.0.0.1:{LISTENER}");
                match dump(&ns, &target) {
                    Ok(()) => {
                        n.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(DumpEnd::Refused) => {
                        refused.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(DumpEnd::Failed(e)) => {
                        errors.lock().unwrap().push(format!("dump: {e}"));
                        return;
                    }
                }
                nap(&stop, Duration::from_secs(1));
            }
        }));
    }
    {
        let (stop, held, strays, ns, rounds) = (
            stop.clone(),
            held.clone(),
            strays.clone(),
            topo.ns_s.clone(),
            args.flood,
        );
        threads.push(std::thread::spawn(move || {
            if crate::sys::host::enter_netns(&ns).is_err() {
                return;
            }
            flood(&stop, rounds, &held, &strays);
        }));
    }
    {
        let (stop, n, ns, dev) = (
            stop.clone(),
            bad.clone(),
            topo.ns_a.clone(),
            topo.a0.clone(),
        );
        threads.push(std::thread::spawn(move || {
            if crate::sys::host::enter_netns(&ns).is_err() {
                return;
            }
            malformed(&stop, &dev, &n);
        }));
    }
    {
        let (stop, n, errors, ctl) = (stop.clone(), ports.clone(), errors.clone(), ctl_cmd(&sw));
        threads.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let r = run(ctl().args(["add-port", "null:", "name=soakp"]))
                    .and_then(|_| run(ctl().args(["del-port", "soakp"])));
                match r {
                    Ok(_) => n.fetch_add(1, Ordering::Relaxed),
                    Err(e) => {
                        errors.lock().unwrap().push(format!("ports: {e:#}"));
                        return;
                    }
                };
                nap(&stop, Duration::from_secs(1));
            }
        }));
    }

    while Instant::now() < deadline && sw.alive() {
        std::thread::sleep(Duration::from_millis(200));
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    let out = ping.wait_with_output().context("waiting for ping")?;
    s.pings = ping_counts(&String::from_utf8_lossy(&out.stdout));
    s.churn_rounds = churn.load(Ordering::Relaxed);
    s.dumps = dumps.load(Ordering::Relaxed);
    s.dumps_refused = refused.load(Ordering::Relaxed);
    s.flood_conns = (held.load(Ordering::Relaxed), strays.load(Ordering::Relaxed));
    s.port_cycles = ports.load(Ordering::Relaxed);
    s.failures = errors.lock().unwrap().clone();
    if !sw.alive() {
        s.failures.push("the switch exited".into());
        return Ok(s);
    }
    // Let closed connections and freed tables settle, then read the end.
    std::thread::sleep(Duration::from_secs(3));
    s.malformed = (
        bad.load(Ordering::Relaxed),
        pmd_total(&sw, "drop_malformed")?.saturating_sub(malformed_before),
    );
    s.rss_kb.1 = status_kb(sw.pid, "VmRSS:");
    s.fds.1 = fd_count(sw.pid);
    check(&mut s, &mut sw, &topo);
    Ok(s)
}

/// The end's checks, added to `s.failures`: the counts ([`verdict`]), then both channels.
fn check(s: &mut Soak, sw: &mut Switch, topo: &Topo) {
    let mut f = verdict(s);
    if let Err(e) = sw.ctl(&["dump-ports"]) {
        f.push(format!("the management socket no longer answers: {e:#}"));
    }
    let target = format!("tcp:127.0.0.1:{LISTENER}");
    if let Err(e) = run(&mut in_ns(
        &topo.ns_s,
        &[
            "ovs-ofctl",
            "-O",
            "OpenFlow13",
            "--timeout=30",
            "show",
            &target,
        ],
    )) {
        f.push(format!("the controller listener no longer answers: {e:#}"));
    }
    s.failures.extend(f);
}

/// What the counts of `s` say failed.
fn verdict(s: &Soak) -> Vec<String> {
    let mut f = Vec::new();
    if s.pings.0 == 0 || s.pings.1 != s.pings.0 {
        f.push(format!(
            "the established flow lost {} of {} pings",
            s.pings.0.saturating_sub(s.pings.1),
            s.pings.0
        ));
    }
    if s.malformed.0 == 0 || s.malformed.1 < s.malformed.0 {
        f.push(format!(
            "{} malformed frames sent, {} counted",
            s.malformed.0, s.malformed.1
        ));
    }
    if s.fds.1 > s.fds.0 + 8 {
        f.push(format!("descriptors grew from {} to {}", s.fds.0, s.fds.1));
    }
    if s.rss_kb.1 > s.rss_kb.0 + s.rss_kb.0 / 10 + RSS_SLACK_KB {
        f.push(format!(
            "resident memory grew from {} to {} KiB",
            s.rss_kb.0, s.rss_kb.1
        ));
    }
    if s.churn_rounds == 0 || s.dumps == 0 || s.port_cycles == 0 || s.flood_conns.0 == 0 {
        f.push("a part of the mix never completed once".into());
    }
    f
}

/// A command builder for `hayate ctl BRIDGE ...` usable from another thread.
fn ctl_cmd(sw: &Switch) -> impl Fn() -> Command + Send + 'static {
    let (hayate, run_dir) = (sw.hayate.clone(), sw.run_dir.clone());
    move || {
        let mut c = Command::new(&hayate);
        c.arg("ctl").arg("--run-dir").arg(&run_dir).arg(BRIDGE);
        c
    }
}

/// The `total:` value of counter `name` in `dump-pmd`.
fn pmd_total(sw: &Switch, name: &str) -> Result<u64> {
    let text = sw.ctl(&["dump-pmd"])?;
    let total = text
        .split("total:")
        .nth(1)
        .context("dump-pmd without a total")?;
    total
        .lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{name}:")))
        .and_then(|v| v.trim().parse().ok())
        .with_context(|| format!("no {name} in dump-pmd's total"))
}

/// How a dump that did not complete ended.
#[derive(Debug)]
enum DumpEnd {
    /// Closed before any reply: what a newcomer from a flooding address may meet.
    Refused,
    /// Anything else, a reply cut short above all.
    Failed(String),
}

/// One `ovs-ofctl dump-flows` of the whole table through the listener, its output counted
/// (not kept): whether any of the reply came tells a refused connection from a cut reply.
fn dump(ns: &str, target: &str) -> Result<(), DumpEnd> {
    use std::io::Read;
    let mut child = in_ns(
        ns,
        &[
            "ovs-ofctl",
            "-O",
            "OpenFlow13",
            "--timeout=120",
            "dump-flows",
            target,
        ],
    )
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .map_err(|e| DumpEnd::Failed(e.to_string()))?;
    let mut out = child.stdout.take().expect("piped");
    let mut got = 0usize;
    let mut buf = vec![0u8; 1 << 16];
    while let Ok(n) = out.read(&mut buf) {
        if n == 0 {
            break;
        }
        got += n;
    }
    let o = child
        .wait_with_output()
        .map_err(|e| DumpEnd::Failed(e.to_string()))?;
    if o.status.success() {
        return Ok(());
    }
    let e = String::from_utf8_lossy(&o.stderr);
    let e = e
        .lines()
        .filter(|l| !l.contains("|timeval|") && !l.contains("|coverage|"));
    let e = e.collect::<Vec<_>>().join("; ");
    if got == 0 {
        Err(DumpEnd::Refused)
    } else {
        Err(DumpEnd::Failed(format!(
            "cut after {got} bytes of reply: {e}"
        )))
    }
}

/// (transmitted, received) of `ping -q`'s summary.
fn ping_counts(text: &str) -> (u64, u64) {
    let line = text
        .lines()
        .find(|l| l.contains("transmitted"))
        .unwrap_or("");
    let num = |key: &str| {
        line.split(',')
            .find(|p| p.contains(key))
            .and_then(|p| p.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    (num("transmitted"), num("received"))
}

/// Sleeps `d` or until `stop`.
fn nap(stop: &AtomicBool, d: Duration) {
    let end = Instant::now() + d;
    while Instant::now() < end && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Rounds of `per_round` connections that send a HELLO and half of a message and hang for
/// 2 s, plus stray HELLOs that leave at once, until `stop`.
fn flood(stop: &AtomicBool, per_round: usize, held: &AtomicU64, strays: &AtomicU64) {
    const HELLO: [u8; 8] = [4, 0, 0, 8, 0, 0, 0, 1];
    // A FEATURES_REQUEST header that announces 64 bytes and sends 8 of them.
    const HALF: [u8; 8] = [4, 5, 0, 64, 0, 0, 0, 2];
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], LISTENER));
    while !stop.load(Ordering::Relaxed) {
        // A round opens what it can in 3 s (a listener at its caps makes connects wait).
        let round_end = Instant::now() + Duration::from_secs(3);
        let open = || !stop.load(Ordering::Relaxed) && Instant::now() < round_end;
        let mut conns = Vec::with_capacity(per_round);
        for _ in 0..per_round {
            if !open() {
                break;
            }
            if let Ok(mut c) = TcpStream::connect_timeout(&addr, Duration::from_millis(500)) {
                let _ = c.write_all(&HELLO);
                let _ = c.write_all(&HALF);
                conns.push(c);
                held.fetch_add(1, Ordering::Relaxed);
            }
        }
        for _ in 0..20 {
            if !open() {
                break;
            }
            if let Ok(mut c) = TcpStream::connect_timeout(&addr, Duration::from_millis(500)) {
                let _ = c.write_all(&HELLO);
                strays.fetch_add(1, Ordering::Relaxed);
            }
        }
        nap(stop, Duration::from_secs(2));
        drop(conns);
    }
}

/// Sends malformed frames out of `dev` (a runt, a bad IPv4 header length, an IPv4 header
/// cut short) at about 1,000 a second until `stop`; counts what was sent.
fn malformed(stop: &AtomicBool, dev: &str, sent: &AtomicU64) {
    // SAFETY: plain socket(2); the descriptor is closed below.
    let fd = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW,
            i32::from((libc::ETH_P_ALL as u16).to_be()),
        )
    };
    if fd < 0 {
        return;
    }
    let Ok(name) = std::ffi::CString::new(dev) else {
        return;
    };
    // SAFETY: a valid C string.
    let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
    // SAFETY: sockaddr_ll is plain data.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_ifindex = ifindex as i32;
    sll.sll_halen = 6;
    let mut good = vec![0u8; 60];
    good[0..6].copy_from_slice(&[2, 0, 0, 0x77, 0, 2]);
    good[6..12].copy_from_slice(&[2, 0, 0, 0x77, 0, 1]);
    good[12..14].copy_from_slice(&[0x08, 0x00]);
    good[14] = 0x45;
    let mut bad_ihl = good.clone();
    bad_ihl[14] = 0x43;
    let frames = [good[..10].to_vec(), bad_ihl, good[..20].to_vec()];
    while !stop.load(Ordering::Relaxed) {
        for f in &frames {
            // SAFETY: `f` is readable for its length; `sll` is a valid address of its size.
            let n = unsafe {
                libc::sendto(
                    fd,
                    f.as_ptr().cast(),
                    f.len(),
                    0,
                    &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                    std::mem::size_of::<libc::sockaddr_ll>() as u32,
                )
            };
            if n == f.len() as isize {
                sent.fetch_add(1, Ordering::Relaxed);
            }
        }
        std::thread::sleep(Duration::from_millis(3));
    }
    // SAFETY: our own descriptor.
    unsafe { libc::close(fd) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ping_summaries_parse() {
        let t = "--- 10.77.0.2 ping statistics ---\n\
                 3000 packets transmitted, 2998 received, 0% packet loss, time 30000ms\n";
        assert_eq!(ping_counts(t), (3000, 2998));
        assert_eq!(ping_counts("nothing"), (0, 0));
    }

    #[test]
    fn the_verdict_names_each_loss_and_leak() {
        let good = Soak {
            pings: (100, 100),
            malformed: (30, 30),
            fds: (20, 24),
            rss_kb: (1_000_000, 1_050_000),
            churn_rounds: 1,
            dumps: 1,
            port_cycles: 1,
            flood_conns: (1, 1),
            ..Soak::default()
        };
        assert!(verdict(&good).is_empty(), "{:?}", verdict(&good));
        let bad = Soak {
            pings: (100, 99),
            malformed: (30, 29),
            fds: (20, 40),
            rss_kb: (1_000_000, 1_200_000),
            dumps: 0,
            ..good
        };
        let v = verdict(&bad);
        assert_eq!(v.len(), 5, "{v:?}");
        assert!(v[0].contains("lost 1 of 100"), "{v:?}");
        let mut s = bad;
        s.failures = v;
        assert!(table(&s).contains("FAILED"));
    }
}
