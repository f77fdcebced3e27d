//! A switch that is one child process (Hayate, dpdk-testpmd): alive while it runs, stopped
//! with SIGTERM (Hayate detaches its XDP programs then), SIGKILL after 5 s.

use std::path::PathBuf;
use std::process::Child;
use std::time::Duration;

use anyhow::{bail, Result};

use super::Started;

/// A started child process and where its stderr goes.
pub struct ChildSwitch {
    /// The process.
    pub child: Child,
    /// Its stderr file, read when it exits.
    pub err: PathBuf,
}

impl ChildSwitch {
    /// Waits `settle` (a switch that cannot open its ports exits at once) and fails with the
    /// switch's own words if it did.
    pub fn settled(mut self, settle: Duration) -> Result<Box<dyn Started>> {
        std::thread::sleep(settle);
        self.check_alive()?;
        Ok(Box::new(self))
    }
}

impl Started for ChildSwitch {
    fn check_alive(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            let msg = std::fs::read_to_string(&self.err).unwrap_or_default();
            bail!("the switch exited ({status}): {}", msg.trim());
        }
        Ok(())
    }

    fn pid(&self) -> Option<u32> {
        Some(self.child.id())
    }
}

impl Drop for ChildSwitch {
    fn drop(&mut self) {
        crate::sys::proc::terminate(&mut self.child, libc::SIGTERM);
    }
}
