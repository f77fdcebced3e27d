//! Pinning the current thread to one CPU core, and how many cores there are to pin to.

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
}
