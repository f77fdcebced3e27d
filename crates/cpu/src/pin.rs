//! Pinning the current thread to one CPU core, keeping it off the poll threads' cores, and
//! how many cores there are to pin to.

/// Pins the calling thread to `core`. Returns a message naming the core and the fix when the
/// kernel refuses (or the core is beyond what a CPU set holds).
pub fn pin_current(core: usize) -> Result<(), String> {
    // SAFETY: cpu_set_t is plain data; zeroed is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if core >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
        return Err(format!("core {core} is beyond the CPU set size"));
    }
    // SAFETY: `core` is within the set (checked above).
    unsafe { libc::CPU_SET(core, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is the calling thread.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0 {
        return Err(format!(
            "cannot pin to core {core}: {} (see `nproc` for the cores this machine has)",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// Keeps the calling thread (and every thread it starts afterwards, which inherit its CPU
/// set) off `cores`: its CPU set becomes the one it has minus `cores`. Returns the cores left
/// to it; when `cores` would leave it none, nothing changes and the set it has is returned.
///
/// A switch calls this on its main thread before it starts anything else, with its poll
/// threads' cores: its housekeeping threads (controller connections, the control side,
/// timers, memory given back) then never take time from a poll thread, as Open vSwitch with
/// DPDK keeps its non-poll threads on `dpdk-lcore-mask`.
pub fn keep_off(cores: &[usize]) -> Result<Vec<usize>, String> {
    // SAFETY: cpu_set_t is plain data; zeroed is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is the calling thread.
    if unsafe { libc::sched_getaffinity(0, size, &mut set) } != 0 {
        return Err(format!(
            "cannot read this thread's cores: {}",
            std::io::Error::last_os_error()
        ));
    }
    let max = 8 * size;
    let has = |s: &libc::cpu_set_t| -> Vec<usize> {
        // SAFETY: `c < max`, within the set.
        (0..max)
            .filter(|&c| unsafe { libc::CPU_ISSET(c, s) })
            .collect()
    };
    let mut rest = set;
    for &c in cores.iter().filter(|&&c| c < max) {
        // SAFETY: `c < max`, within the set.
        unsafe { libc::CPU_CLR(c, &mut rest) };
    }
    if has(&rest).is_empty() {
        return Ok(has(&set));
    }
    // SAFETY: as above.
    if unsafe { libc::sched_setaffinity(0, size, &rest) } != 0 {
        return Err(format!(
            "cannot keep off cores {cores:?}: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(has(&rest))
}

/// Number of CPUs this process may run on.
pub fn available_cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_pins_to_a_core_it_has_and_not_to_one_beyond_the_set() {
        std::thread::spawn(|| {
            pin_current(0).unwrap();
            // SAFETY: sched_getcpu has no preconditions.
            assert_eq!(unsafe { libc::sched_getcpu() }, 0);
        })
        .join()
        .unwrap();
        assert!(pin_current(1 << 20).unwrap_err().contains("beyond"));
        assert!(available_cores() >= 1);
    }

    #[test]
    fn a_thread_kept_off_some_cores_runs_on_the_others_and_keeps_one_at_least() {
        std::thread::spawn(|| {
            let all = keep_off(&[]).unwrap();
            assert!(!all.is_empty());
            // Off every core it has: nothing changes.
            assert_eq!(keep_off(&all).unwrap(), all);
            if all.len() >= 2 {
                let left = keep_off(&all[1..]).unwrap();
                assert_eq!(left, vec![all[0]]);
                // SAFETY: sched_getcpu has no preconditions.
                assert_eq!(unsafe { libc::sched_getcpu() } as usize, all[0]);
                // A thread it starts inherits the set.
                let child = std::thread::spawn(keep_off_nothing).join().unwrap();
                assert_eq!(child, vec![all[0]]);
            }
        })
        .join()
        .unwrap();
    }

    fn keep_off_nothing() -> Vec<usize> {
        keep_off(&[]).unwrap()
    }
}
