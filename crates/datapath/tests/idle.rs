//! A poll-mode thread with nothing to do sleeps, and wakes up for the next packets.
//!
//! Alone in its test binary, so the process's CPU time is this thread's (and the test's).

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{fixture, mask_of, udp};
use datapath::{Counter, DpConfig, IdleConfig};
use packet::Field;
use pipeline::DpAction;

/// CPU time (user + system) this process has used.
fn cpu_time() -> Duration {
    // SAFETY: getrusage writes one rusage struct into `ru`.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) }, 0);
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

#[test]
fn an_idle_thread_sleeps_and_wakes_for_traffic() {
    let cfg = DpConfig {
        idle: IdleConfig {
            spin_us: 100,
            ..IdleConfig::default()
        },
        ..DpConfig::default()
    };
    let logic: common::Logic = Box::new(|_k, out| {
        out.mask = mask_of(&[Field::InPort]);
        out.actions.push(DpAction::Output(2));
    });
    let mut f = fixture(2, cfg, logic);
    let mut pmd = f.pmds.pop().unwrap();
    let stats = pmd.stats_handle().clone();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let thread = std::thread::spawn(move || pmd.run(&stop2));

    // Idle: ring ports have no readiness descriptor, so the thread naps in steps ≤ 1 ms.
    let (cpu0, wall0) = (cpu_time(), Instant::now());
    std::thread::sleep(Duration::from_millis(500));
    let (cpu, wall) = (cpu_time() - cpu0, wall0.elapsed());
    let sleeps = stats.snapshot()[Counter::IdleSleeps];
    assert!(
        sleeps > 50,
        "an idle thread should sleep, slept {sleeps} times"
    );
    assert!(
        cpu.as_secs_f64() < 0.25 * wall.as_secs_f64(),
        "an idle thread used {cpu:?} of CPU in {wall:?} (a spinning one uses all of it)"
    );

    // Traffic wakes it: every frame comes out, within a bounded wait.
    let frames: Vec<_> = (0..10).map(|i| udp(1000 + i, [10, 0, 0, 2])).collect();
    f.inject(1, &frames);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut out = Vec::new();
    while out.len() < frames.len() && Instant::now() < deadline {
        out.extend(f.collect(2));
        std::thread::sleep(Duration::from_millis(1));
    }
    stop.store(true, Ordering::Relaxed);
    thread.join().unwrap();
    assert_eq!(out, frames, "a sleeping thread forwards what arrives");
}
