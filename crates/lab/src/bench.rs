//! The steps every bench's `main` takes alike: its options checked, the switches (or
//! generators) picked by name, its work folder, the switch core beside this process's core,
//! this process readied on its core, and the results written as JSON.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::sys::{guard, host};

/// Fails unless this process is root (`what` names the bench, which builds namespaces) and
/// every `(program, Debian package)` of `tools` is on the PATH; the error names the package.
pub fn check_root_and_tools(what: &str, tools: &[(&str, &str)]) -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        anyhow::bail!("{what} builds network namespaces: run it as root");
    }
    for (bin, pkg) in tools {
        let found = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join(bin).exists()))
            .unwrap_or(false);
        if !found {
            anyhow::bail!("{bin} is missing; install it with: apt-get install -y {pkg}");
        }
    }
    Ok(())
}

/// Checks a measured window of `seconds` after `warmup` seconds: (0, 600] and [0, 600].
pub fn check_window(seconds: f64, warmup: f64) -> Result<()> {
    if !(seconds > 0.0 && seconds <= 600.0 && (0.0..=600.0).contains(&warmup)) {
        bail!("--seconds must be in (0, 600] and --warmup in [0, 600]");
    }
    Ok(())
}

/// Checks `--repeat`: 1 to `most`.
pub fn check_repeat(repeat: usize, most: usize) -> Result<()> {
    if !(1..=most).contains(&repeat) {
        bail!("--repeat must be in 1..={most}");
    }
    Ok(())
}

/// Checks frame sizes: 64 to 1518 bytes.
pub fn check_sizes(sizes: &[usize]) -> Result<()> {
    for &s in sizes {
        if !(64..=1518).contains(&s) {
            bail!("frame size {s} is out of range; use 64..=1518");
        }
    }
    Ok(())
}

/// The one of `all` whose `name` is `n`; otherwise an error that lists every name, calling
/// them `what`s.
pub fn by_name<T>(
    all: impl IntoIterator<Item = T>,
    name: impl Fn(&T) -> &str,
    what: &str,
    n: &str,
) -> Result<T> {
    let mut names = Vec::new();
    for x in all {
        if name(&x) == n {
            return Ok(x);
        }
        names.push(name(&x).to_string());
    }
    bail!("unknown {what} '{n}'; use one of: {}", names.join(", "))
}

/// Those named in `asked`, looked up by `by_name`, or `all` when none was named.
pub fn chosen<T>(
    asked: &[String],
    all: impl FnOnce() -> Vec<T>,
    by_name: impl Fn(&str) -> Result<T>,
) -> Result<Vec<T>> {
    if asked.is_empty() {
        Ok(all())
    } else {
        asked.iter().map(|n| by_name(n)).collect()
    }
}

/// The folder of a bench's logs, configs and sockets: `given`, or a fresh
/// `hayate-<name>-<pid>` under the temporary folder; created.
pub fn workdir(given: Option<&Path>, name: &str) -> Result<PathBuf> {
    let dir = match given {
        Some(d) => d.to_path_buf(),
        None => std::env::temp_dir().join(format!("hayate-{name}-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// The switch's core, `asked` or the last one, after checking that it and `other` (this
/// process's core, called `other_name`) are two of this machine's cores.
pub fn switch_core(asked: Option<usize>, other: usize, other_name: &str) -> Result<usize> {
    let cores = cpu::available_cores();
    let switch_core = asked.unwrap_or(cores.saturating_sub(1));
    if switch_core == other || switch_core >= cores || other >= cores {
        bail!(
            "the switch core ({switch_core}) and the {other_name} core ({other}) must be two of the {cores} cores"
        );
    }
    Ok(switch_core)
}

/// Readies this process for a bench that changes the host: an earlier run's leftovers
/// removed, the last-resort undo ([`guard`]) installed, this process (and the helpers it runs)
/// on `core` ahead of the busy-polling children there, so that its counter reads are not
/// delayed (children start back at nice 0).
pub fn take_core(core: usize) -> Result<()> {
    guard::install();
    host::remove_stale();
    cpu::pin_current(core).map_err(anyhow::Error::msg)?;
    // SAFETY: setpriority on this process; children are started back at nice 0.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, -10) };
    Ok(())
}

/// Writes `value` as JSON to `path`, when there is one.
pub fn write_json(path: Option<&Path>, value: &impl Serialize) -> Result<()> {
    if let Some(p) = path {
        std::fs::write(p, serde_json::to_string_pretty(value)? + "\n")
            .with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_choices_and_checks() {
        let all = || vec!["a", "bb"];
        assert_eq!(by_name(all(), |s| s, "switch", "bb").unwrap(), "bb");
        let e = by_name(all(), |s| s, "switch", "c").unwrap_err();
        assert_eq!(e.to_string(), "unknown switch 'c'; use one of: a, bb");
        let pick = |n: &str| by_name(all(), |s| s, "switch", n);
        assert_eq!(chosen(&[], all, pick).unwrap(), ["a", "bb"]);
        assert_eq!(chosen(&["bb".into()], all, pick).unwrap(), ["bb"]);
        assert!(chosen(&["x".into()], all, pick).is_err());
        assert!(check_window(10.0, 0.0).is_ok() && check_window(0.0, 1.0).is_err());
        assert!(check_window(1.0, 601.0).is_err());
        assert!(check_repeat(20, 20).is_ok() && check_repeat(0, 20).is_err());
        assert!(check_sizes(&[64, 1518]).is_ok() && check_sizes(&[63]).is_err());
    }

    #[test]
    fn json_goes_where_asked_and_the_work_folder_is_made() {
        let dir = tempfile::tempdir().unwrap();
        let w = workdir(Some(&dir.path().join("w")), "test").unwrap();
        assert!(w.is_dir());
        let p = w.join("r.json");
        write_json(Some(&p), &vec![1, 2]).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "[\n  1,\n  2\n]\n");
        write_json(None, &1).unwrap();
    }
}
