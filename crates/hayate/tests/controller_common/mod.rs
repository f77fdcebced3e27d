//! What the tests that run a real controller (`controller_osken.rs`, `controller_faucet.rs`)
//! share: the venv scripts/setup.sh makes, the repository's files (the controllers' apps and
//! configurations under tests/controllers/), and the controller's process, killed on drop.

#![allow(dead_code)] // Each test binary uses a part of it.

use std::path::{Path, PathBuf};
use std::process::Child;

/// The venv with the controllers: `$HAYATE_VENV`, by default the one scripts/setup.sh makes.
pub fn venv() -> PathBuf {
    std::env::var_os("HAYATE_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/hayate/venv"))
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
