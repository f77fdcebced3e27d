//! Pinning the current thread to one CPU core.

/// Pins the calling thread to `core`. Returns a message when the kernel refuses.
pub fn pin_current(core: usize) -> Result<(), String> {
    // SAFETY: cpu_set_t is plain data; sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(format!(
                "cannot pin to core {core}: {} (see `nproc` for the cores this machine has)",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

/// Number of CPUs this process may run on.
pub fn available_cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}
