//! Idle cost of many bridges: 1,000 agents, each with one controller connection over
//! loopback to an in-process fake controller, then the process's CPU time over 10 s idle.
//!
//! Run: `cargo test -p agent --release idle_cpu -- --ignored --nocapture`
//! (`HAYATE_IDLE_BRIDGES`, `HAYATE_IDLE_SECS`, `HAYATE_IDLE_WORKERS` change the defaults
//! 1000, 10 and 1). The probe interval is the default 5 s, so every connection exchanges an
//! echo every 5 s; the fake controller's work counts too, so the figure is an upper bound.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpListener;

use super::*;
use crate::{Agent, AgentConfig, Target};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// User + system CPU time of this process.
fn cpu_time() -> Duration {
    // SAFETY: getrusage writes into the zeroed struct we pass and nothing else.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    assert_eq!(rc, 0, "getrusage failed");
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Raises the open-file limit to its hard maximum (two descriptors per connection here).
fn raise_fd_limit(need: u64) {
    // SAFETY: getrlimit/setrlimit with a valid pointer to a local struct.
    unsafe {
        let mut lim: libc::rlimit = std::mem::zeroed();
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim), 0);
        lim.rlim_cur = lim.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        assert!(
            lim.rlim_max >= need,
            "need {need} file descriptors, the hard limit is {}; raise it (ulimit -Hn)",
            lim.rlim_max
        );
    }
}

#[test]
#[ignore = "benchmark: 1,000 connections and 10 s of idle; run with --ignored --nocapture"]
fn idle_cpu_of_many_bridges() {
    let bridges = env("HAYATE_IDLE_BRIDGES", 1000) as usize;
    let secs = env("HAYATE_IDLE_SECS", 10);
    let workers = env("HAYATE_IDLE_WORKERS", 1) as usize;
    raise_fd_limit(bridges as u64 * 2 + 64);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        // The fake controller: HELLO, then answer echoes until the switch goes away.
        tokio::spawn(async move {
            loop {
                let (tcp, _) = l.accept().await.unwrap();
                tokio::spawn(async move {
                    let mut c = FakeController::handshake(tcp).await;
                    while c.recv().await.is_some() {}
                });
            }
        });
        let target = Target::parse(&format!("tcp:127.0.0.1:{port}")).unwrap();
        let mut agents = Vec::with_capacity(bridges);
        for _ in 0..bridges {
            let config = AgentConfig {
                targets: vec![target.clone()],
                ..AgentConfig::default()
            };
            agents.push(
                Agent::start(config, Arc::new(FakeBridge::default()))
                    .await
                    .unwrap(),
            );
        }
        let t0 = Instant::now();
        while agents.iter().any(|a| a.connections().is_empty()) {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "not every bridge connected in 60 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let setup = t0.elapsed();
        let cpu0 = cpu_time();
        let wall0 = Instant::now();
        tokio::time::sleep(Duration::from_secs(secs)).await;
        let cpu = cpu_time() - cpu0;
        let wall = wall0.elapsed();
        let connected = agents.iter().filter(|a| a.connections().len() == 1).count();
        let probes: u64 = agents
            .iter()
            .flat_map(|a| a.connections())
            .map(|c| c.probes)
            .sum();
        let share = cpu.as_secs_f64() / wall.as_secs_f64() * 100.0;
        println!(
            "idle_cpu: {bridges} bridges, {connected} connected (all up after {setup:.2?}), \
             {workers} worker thread(s), probe interval 5 s: {cpu:.3?} CPU over {wall:.2?} idle \
             = {share:.2} % of one core; {probes} echo probes sent"
        );
        assert_eq!(connected, bridges, "a connection dropped while idle");
        assert!(
            share < 5.0,
            "idle cost {share:.2} % of one core, the budget is 5 %"
        );
    });
}
