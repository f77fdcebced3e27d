//! What a bench (`vhost`, `churn-compare`) must undo whatever happens: children to kill, a hugetlbfs mount,
//! reserved huge pages, a network namespace.
//!
//! Every guard ([`super::proc::Proc`], [`super::host`]) undoes its change when dropped and
//! also registers it here, so that it is undone on the paths that skip `Drop`: a panic (the
//! release profile aborts, so the panic hook runs [`emergency`]) and a child outliving its
//! time bound (a watchdog thread kills it). Ctrl-C and SIGTERM only set a flag ([`nap`] and
//! [`check`] turn it into an error), so that the guards unwind normally. Children also get
//! `PR_SET_PDEATHSIG`: a `kill -9` of the bench takes them down too.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

/// A change to undo.
#[derive(Debug, Clone)]
pub enum Undo {
    /// A child process, to be killed at `deadline` at the latest.
    Kill {
        /// Its process id (our unreaped child: the id cannot be reused meanwhile).
        pid: i32,
        /// When the watchdog kills it.
        deadline: Instant,
    },
    /// A mount point to unmount.
    Umount(PathBuf),
    /// Huge pages this run added to `vm.nr_hugepages`.
    HugePages(u64),
    /// A network namespace to delete.
    Netns(String),
}

static STOP: AtomicBool = AtomicBool::new(false);
static NEXT: AtomicU64 = AtomicU64::new(1);
static UNDO: Mutex<Vec<(u64, Undo)>> = Mutex::new(Vec::new());
static INSTALL: Once = Once::new();

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// Installs the SIGINT/SIGTERM handlers, the panic hook and the watchdog (once).
pub fn install() {
    INSTALL.call_once(|| {
        // SAFETY: the handler only stores to an atomic.
        unsafe {
            let h = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::signal(libc::SIGINT, h);
            libc::signal(libc::SIGTERM, h);
        }
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            prev(info);
            emergency();
        }));
        std::thread::Builder::new()
            .name("vhost-watchdog".into())
            .spawn(watchdog)
            .expect("starting the watchdog thread");
    });
}

fn watchdog() {
    loop {
        std::thread::sleep(Duration::from_millis(250));
        let now = Instant::now();
        let Ok(list) = UNDO.lock() else { return };
        for (_, u) in list.iter() {
            if let Undo::Kill { pid, deadline } = u {
                if now >= *deadline {
                    // SAFETY: kill(2) on our own unreaped child.
                    unsafe { libc::kill(*pid, libc::SIGKILL) };
                }
            }
        }
    }
}

/// Registers `u`; the id is for [`forget`].
pub fn register(u: Undo) -> u64 {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut list = UNDO.lock().unwrap_or_else(|e| e.into_inner());
    list.push((id, u));
    id
}

/// Forgets `id` (its guard undoes it itself).
pub fn forget(id: u64) {
    let mut list = UNDO.lock().unwrap_or_else(|e| e.into_inner());
    list.retain(|(i, _)| *i != id);
}

/// Undoes everything still registered, newest first (from the panic hook).
pub fn emergency() {
    let list = match UNDO.try_lock() {
        Ok(mut l) => std::mem::take(&mut *l),
        Err(_) => return,
    };
    for (_, u) in list.into_iter().rev() {
        undo(&u);
    }
}

/// Undoes one change, as well as it can (errors are ignored: this is the last resort).
pub fn undo(u: &Undo) {
    match u {
        Undo::Kill { pid, .. } => {
            // SAFETY: kill(2) on our own unreaped child.
            unsafe { libc::kill(*pid, libc::SIGKILL) };
        }
        Undo::Umount(p) => {
            if let Ok(c) =
                std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(p.as_os_str()))
            {
                // SAFETY: a valid C string; MNT_DETACH never blocks.
                unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
            }
        }
        Undo::HugePages(n) => super::host::give_back_pages(*n),
        Undo::Netns(name) => {
            let _ = Command::new("ip").args(["netns", "del", name]).output();
        }
    }
}

/// Whether Ctrl-C or SIGTERM arrived.
pub fn interrupted() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// Fails when interrupted.
pub fn check() -> Result<()> {
    if interrupted() {
        bail!("interrupted");
    }
    Ok(())
}

/// Sleeps for `d`, failing as soon as the run is interrupted.
pub fn nap(d: Duration) -> Result<()> {
    let end = Instant::now() + d;
    loop {
        check()?;
        let now = Instant::now();
        if now >= end {
            return Ok(());
        }
        std::thread::sleep((end - now).min(Duration::from_millis(50)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_changes_are_forgotten_by_id() {
        let a = register(Undo::Netns("never-made-a".into()));
        let b = register(Undo::Netns("never-made-b".into()));
        forget(a);
        let list = UNDO.lock().unwrap();
        assert!(list.iter().any(|(i, _)| *i == b));
        assert!(!list.iter().any(|(i, _)| *i == a));
        drop(list);
        forget(b);
    }
}
