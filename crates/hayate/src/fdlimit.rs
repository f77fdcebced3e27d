//! The switch's own descriptor limit: `hayate run` raises its soft `RLIMIT_NOFILE` to the hard
//! limit at start (the soft limit is often 1,024 while the hard one is far higher), before any
//! listener accepts, so that the agent's descriptor budget
//! ([`agent::shared_budget`]: the limit minus a reserve for the management socket,
//! controllers and ports) is taken from the raised limit.

/// Raises the soft descriptor limit to the hard one; returns (before, after), or the error.
pub fn raise() -> std::io::Result<(u64, u64)> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let before = r.rlim_cur;
    if r.rlim_cur < r.rlim_max {
        r.rlim_cur = r.rlim_max;
        // SAFETY: setrlimit reads the struct we own.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok((before, r.rlim_cur))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_ends_at_the_hard_one() {
        let (_, after) = raise().expect("raise");
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: as above.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) }, 0);
        assert_eq!((r.rlim_cur, after), (r.rlim_max, r.rlim_max));
    }
}
