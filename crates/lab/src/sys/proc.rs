//! Child processes of a bench (`vhost`, `churn-compare`): pinned, bounded in time, logged, and stopped when
//! their guard drops; short helper commands (ovs-vsctl, ovs-ofctl, hayate ctl) with a timeout;
//! and the one way every bench stops a child of its own ([`terminate`]: a signal, then
//! SIGKILL after 5 s).

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use super::guard::{self, Undo};

/// How to start a child.
#[derive(Debug, Clone)]
pub struct Spawn {
    name: String,
    program: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    cpus: Vec<usize>,
    lifetime: Duration,
    stop_signal: i32,
}

impl Spawn {
    /// `program` as `name` (in messages and the log's file name), stopped with SIGTERM.
    pub fn new(name: &str, program: &str) -> Spawn {
        Spawn {
            name: name.into(),
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            cpus: Vec::new(),
            lifetime: Duration::from_secs(120),
            stop_signal: libc::SIGTERM,
        }
    }

    /// Adds arguments.
    pub fn args<S: AsRef<str>>(mut self, a: impl IntoIterator<Item = S>) -> Spawn {
        self.args
            .extend(a.into_iter().map(|s| s.as_ref().to_string()));
        self
    }

    /// Sets an environment variable.
    pub fn env(mut self, k: &str, v: &str) -> Spawn {
        self.env.push((k.into(), v.into()));
        self
    }

    /// The CPUs it may run on (inherited by its threads unless they pin themselves).
    pub fn cpus(mut self, cpus: &[usize]) -> Spawn {
        self.cpus = cpus.to_vec();
        self
    }

    /// Killed by the watchdog after this long, whatever happens.
    pub fn lifetime(mut self, d: Duration) -> Spawn {
        self.lifetime = d;
        self
    }

    /// The signal that asks it to stop (testpmd: SIGINT, which makes it close its ports).
    pub fn stop_with(mut self, sig: i32) -> Spawn {
        self.stop_signal = sig;
        self
    }

    /// The command line, for logs and reports.
    pub fn line(&self) -> String {
        std::iter::once(self.program.as_str())
            .chain(self.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Starts it with stdout and stderr in `dir/<name>.log`, at nice 0, dying with this
    /// process.
    pub fn start(self, dir: &Path) -> Result<Proc> {
        let log = dir.join(format!("{}.log", self.name));
        let out = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        std::fs::write(dir.join(format!("{}.cmd", self.name)), self.line() + "\n")?;
        let mut c = Command::new(&self.program);
        c.args(&self.args)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out);
        for (k, v) in &self.env {
            c.env(k, v);
        }
        // SAFETY: cpu_set_t is plain data; CPU_SET writes inside it (cores < CPU_SETSIZE).
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for &cpu in self
            .cpus
            .iter()
            .filter(|&&c| c < libc::CPU_SETSIZE as usize)
        {
            // SAFETY: as above.
            unsafe { libc::CPU_SET(cpu, &mut set) };
        }
        let pin = !self.cpus.is_empty();
        // SAFETY: only async-signal-safe system calls run between fork and exec.
        unsafe {
            c.pre_exec(move || {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                libc::setpriority(libc::PRIO_PROCESS, 0, 0);
                if pin
                    && libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = c
            .spawn()
            .with_context(|| format!("starting {} ({})", self.name, self.program))?;
        let id = guard::register(Undo::Kill {
            pid: child.id() as i32,
            deadline: Instant::now() + self.lifetime,
        });
        Ok(Proc {
            name: self.name,
            child,
            id,
            log,
            stop_signal: self.stop_signal,
        })
    }
}

/// A running child; dropping it stops it (its stop signal, then SIGKILL after 5 s).
#[derive(Debug)]
pub struct Proc {
    name: String,
    child: Child,
    id: u64,
    log: PathBuf,
    stop_signal: i32,
}

impl Proc {
    /// The last lines of its log.
    pub fn tail(&self, lines: usize) -> String {
        tail(&self.log, lines)
    }

    /// Fails, with the end of its log, when it has exited.
    pub fn alive(&mut self) -> Result<()> {
        if let Some(st) = self.child.try_wait()? {
            bail!("{} exited ({st}): {}", self.name, self.tail(8));
        }
        Ok(())
    }

    /// Stops it now (idempotent).
    pub fn stop(&mut self) {
        guard::forget(self.id);
        terminate(&mut self.child, self.stop_signal);
    }
}

/// Stops `child` unless it has exited: `signal` (SIGTERM lets a switch detach its XDP
/// programs), then at most 5 s for it to exit, then SIGKILL; reaped either way.
pub fn terminate(child: &mut Child, signal: i32) {
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    // SAFETY: kill(2) on our own unreaped child.
    unsafe { libc::kill(child.id() as i32, signal) };
    let end = Instant::now() + Duration::from_secs(5);
    while Instant::now() < end {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The last `lines` lines of a file, on one line (`|` between them).
pub fn tail(path: &Path, lines: usize) -> String {
    let raw = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&raw);
    let v: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    v[v.len().saturating_sub(lines)..].join(" | ")
}

/// Runs a short command to its end within `timeout` (killed after it) and returns its
/// stdout; fails with its stderr when it fails.
pub fn run(c: &mut Command, timeout: Duration) -> Result<String> {
    let what = format!("{c:?}");
    let child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("running {what}"))?;
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(timeout) {
        Ok(r) => r?,
        Err(_) => {
            // SAFETY: the waiting thread has not reaped it yet: the id is still our child's.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            let _ = rx.recv();
            return Err(anyhow!("{what} took more than {timeout:?}; killed"));
        }
    };
    if !out.status.success() {
        bail!(
            "{what} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_helper_that_hangs_is_killed_and_said() {
        let e = run(Command::new("sleep").arg("10"), Duration::from_millis(200))
            .unwrap_err()
            .to_string();
        assert!(e.contains("killed"), "{e}");
        assert_eq!(
            run(Command::new("echo").arg("hi"), Duration::from_secs(5)).unwrap(),
            "hi\n"
        );
    }
}
