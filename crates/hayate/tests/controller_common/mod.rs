//! What the tests that run a real controller (`controller_osken.rs`, `controller_faucet.rs`,
//! `tunnel_three_hosts.rs`) share: the venv scripts/setup.sh makes (and its python, when it
//! has os-ken), the repository's files (the controllers' apps and configurations under
//! tests/controllers/), and the controller's process, killed on drop.

#![allow(dead_code)] // Each test binary uses a part of it.

use std::path::{Path, PathBuf};
use std::process::Child;

/// The venv with the controllers: `$HAYATE_VENV`, by default the one scripts/setup.sh makes.
pub fn venv() -> PathBuf {
    std::env::var_os("HAYATE_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/hayate/venv"))
}

/// The venv's python when it has os-ken (`import os_ken` works), else `None`.
pub fn osken_python() -> Option<PathBuf> {
    let py = venv().join("bin/python");
    let ok = std::process::Command::new(&py)
        .args(["-c", "import os_ken"])
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then_some(py)
}

/// A file of the repository, by its path from the repository's root.
pub fn repo_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
}

/// A controller's process; killed when dropped.
pub struct Process(pub Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
