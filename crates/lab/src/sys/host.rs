//! The host changes a bench (`vhost`, `churn-compare`) makes, each a guard that undoes it: huge pages added
//! to `vm.nr_hugepages` (and only those given back), a private hugetlbfs mount, a network
//! namespace for Open vSwitch's bridge device.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use super::guard::{self, Undo};
use super::proc;

const NR_HUGEPAGES: &str = "/proc/sys/vm/nr_hugepages";

fn read_pages() -> u64 {
    std::fs::read_to_string(NR_HUGEPAGES)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// Gives `n` pages back: lowers `vm.nr_hugepages` by `n` from what it is now (pages others
/// reserved meanwhile stay).
pub fn give_back_pages(n: u64) {
    let _ = std::fs::write(NR_HUGEPAGES, read_pages().saturating_sub(n).to_string());
}

/// 2 MiB huge pages this run added; dropping gives them back.
#[derive(Debug)]
pub struct HugePages {
    added: u64,
    id: u64,
}

impl HugePages {
    /// Adds `n` 2 MiB pages to the reserve; fails when the kernel could not find them.
    pub fn add(n: u64) -> Result<HugePages> {
        let before = read_pages();
        std::fs::write(NR_HUGEPAGES, (before + n).to_string())
            .context("reserving huge pages (vm.nr_hugepages)")?;
        let got = read_pages().saturating_sub(before);
        let id = guard::register(Undo::HugePages(got));
        let pages = HugePages { added: got, id };
        if got < n {
            bail!("asked the kernel for {n} more 2 MiB huge pages, got {got} (memory is fragmented or short)");
        }
        Ok(pages)
    }
}

impl Drop for HugePages {
    fn drop(&mut self) {
        guard::forget(self.id);
        give_back_pages(self.added);
    }
}

/// A private hugetlbfs (2 MiB pages) mounted at a folder; dropping unmounts it.
#[derive(Debug)]
pub struct HugeMount {
    path: PathBuf,
    id: u64,
}

impl HugeMount {
    /// Mounts hugetlbfs at `path` (created).
    pub fn mount(path: &Path) -> Result<HugeMount> {
        std::fs::create_dir_all(path)?;
        proc::run(
            Command::new("mount")
                .args(["-t", "hugetlbfs", "-o", "pagesize=2M", "nodev"])
                .arg(path),
            Duration::from_secs(20),
        )?;
        let id = guard::register(Undo::Umount(path.to_path_buf()));
        Ok(HugeMount {
            path: path.to_path_buf(),
            id,
        })
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Huge pages for DPDK: pages added to the reserve and a private hugetlbfs at a run's
/// `huge` folder; dropping unmounts it, then gives the pages back.
#[derive(Debug)]
pub struct Huge {
    mount: HugeMount,
    _pages: HugePages,
}

impl Huge {
    /// Adds `pages` 2 MiB pages and mounts hugetlbfs at `dir/huge`.
    pub fn add(pages: u64, dir: &Path) -> Result<Huge> {
        let _pages = HugePages::add(pages)?;
        Ok(Huge {
            mount: HugeMount::mount(&dir.join("huge"))?,
            _pages,
        })
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        self.mount.path()
    }
}

impl Drop for HugeMount {
    fn drop(&mut self) {
        guard::forget(self.id);
        if proc::run(
            Command::new("umount").arg(&self.path),
            Duration::from_secs(20),
        )
        .is_err()
        {
            guard::undo(&Undo::Umount(self.path.clone()));
        }
        let _ = std::fs::remove_dir(&self.path);
    }
}

/// Moves the calling thread (only it) into network namespace `ns` (`ip netns add`'s).
pub fn enter_netns(ns: &str) -> Result<()> {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(format!("/var/run/netns/{ns}"))
        .with_context(|| format!("opening namespace {ns}"))?;
    // SAFETY: setns on an open namespace file; affects only this thread.
    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        bail!("setns {ns}: {}", std::io::Error::last_os_error());
    }
    Ok(())
}

/// A network namespace; dropping deletes it.
#[derive(Debug)]
pub struct Netns {
    name: String,
    id: u64,
}

impl Netns {
    /// Creates namespace `name` with its loopback up.
    pub fn add(name: &str) -> Result<Netns> {
        let _ = proc::run(
            Command::new("ip").args(["netns", "del", name]),
            Duration::from_secs(10),
        );
        proc::run(
            Command::new("ip").args(["netns", "add", name]),
            Duration::from_secs(10),
        )?;
        let id = guard::register(Undo::Netns(name.into()));
        let ns = Netns {
            name: name.into(),
            id,
        };
        proc::run(
            Command::new("ip").args(["netns", "exec", name, "ip", "link", "set", "lo", "up"]),
            Duration::from_secs(10),
        )?;
        Ok(ns)
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        guard::forget(self.id);
        guard::undo(&Undo::Netns(self.name.clone()));
    }
}

/// The 1-, 5- and 15-minute load averages and the running/total tasks (`/proc/loadavg`).
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(4).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Removes DPDK's runtime folder of a process with `--file-prefix prefix` (its telemetry
/// socket and config files stay behind after it exits).
pub fn remove_dpdk_runtime(prefix: &str) {
    let _ = std::fs::remove_dir_all(Path::new("/var/run/dpdk").join(prefix));
}

/// The tags of the benches whose leftovers [`remove_stale`] knows: `bench vhost`'s (`hv`) and
/// `bench churn-compare`'s (`hc`), and their default work folders.
const TAGS: [(&str, &str); 2] = [("hv", "hayate-vhost-"), ("hc", "hayate-churn-")];

/// The process id in a name a bench gives to a namespace (`hv<pid>r<rep>S`) or a default
/// work folder (`hayate-vhost-<pid>`).
fn owner(name: &str) -> Option<u32> {
    for (tag, folder) in TAGS {
        if let Some(rest) = name.strip_prefix(tag).and_then(|r| r.strip_suffix('S')) {
            let (pid, rep) = rest.split_once('r')?;
            rep.parse::<u32>().ok()?;
            return pid.parse().ok();
        }
        if let Some(pid) = name.strip_prefix(folder) {
            return pid.parse().ok();
        }
    }
    None
}

fn dead(pid: u32) -> bool {
    !Path::new(&format!("/proc/{pid}")).exists()
}

/// The process id in a DPDK file prefix a bench gives (`hv<pid>r<rep><name>`).
fn dpdk_owner(prefix: &str) -> Option<u32> {
    let rest = TAGS.iter().find_map(|(tag, _)| prefix.strip_prefix(tag))?;
    let (pid, rest) = rest.split_at(rest.find(|c: char| !c.is_ascii_digit())?);
    let rest = rest.strip_prefix('r')?;
    let name = rest.trim_start_matches(|c: char| c.is_ascii_digit());
    (name.len() < rest.len() && !name.is_empty()).then(|| pid.parse().ok())?
}

/// Removes what an earlier run killed with SIGKILL left behind: its namespaces, DPDK runtime
/// folders and the hugetlbfs mount of its default work folder (its reserved huge pages cannot
/// be told from others': `vm.nr_hugepages` stays raised).
pub fn remove_stale() {
    for e in std::fs::read_dir("/var/run/dpdk")
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        if dpdk_owner(&name).is_some_and(dead) {
            remove_dpdk_runtime(&name);
        }
    }
    let ns = proc::run(
        Command::new("ip").args(["netns", "list"]),
        Duration::from_secs(10),
    )
    .unwrap_or_default();
    for name in ns.lines().filter_map(|l| l.split_whitespace().next()) {
        if owner(name).is_some_and(dead) {
            eprintln!("hayate: removing namespace {name} of an earlier run");
            guard::undo(&Undo::Netns(name.into()));
        }
    }
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    for l in mounts.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (Some(&at), Some(&"hugetlbfs")) = (f.get(1), f.get(2)) else {
            continue;
        };
        let p = Path::new(at);
        let stale = p.file_name().is_some_and(|n| n == "huge")
            && p.parent()
                .and_then(|d| d.file_name())
                .and_then(|d| owner(&d.to_string_lossy()))
                .is_some_and(dead);
        if stale {
            eprintln!("hayate: unmounting {at} of an earlier run");
            guard::undo(&Undo::Umount(p.to_path_buf()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leftovers_are_told_by_their_owners_pid() {
        assert_eq!(owner("hv12345r0S"), Some(12345));
        assert_eq!(owner("hayate-vhost-77"), Some(77));
        assert_eq!(owner("hcS"), None);
        assert_eq!(owner("hc99r1S"), Some(99));
        assert_eq!(owner("hayate-churn-5"), Some(5));
        assert_eq!(dpdk_owner("hc4242r0ovs"), Some(4242));
        assert_eq!(owner("hvxr0S"), None);
        assert_eq!(owner("pvpS"), None);
        assert_eq!(dpdk_owner("hv21292r0ovs"), Some(21292));
        assert_eq!(dpdk_owner("hv21292r12vm"), Some(21292));
        assert_eq!(dpdk_owner("hyvt6362c1"), None);
        assert_eq!(dpdk_owner("hv21292r0"), None);
        assert!(!dead(std::process::id()));
    }
}
