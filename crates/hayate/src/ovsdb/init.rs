//! `hayate ovsdb-init`: a database of Open vSwitch's schema and an `ovsdb-server` serving it,
//! for a host where none runs (Open vSwitch's `ovs-ctl` does the same at boot): creates
//! `DIR/conf.db` with `ovsdb-tool` when missing, starts `ovsdb-server` in the background on
//! `DIR/db.sock`, puts in the `Open_vSwitch` row (`ovs-vsctl --no-wait init`) and prints the
//! target to give `hayate run --ovsdb`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{anyhow, bail, Result};
use clap::Args;

/// Options of `hayate ovsdb-init`.
#[derive(Args, Debug)]
pub struct InitArgs {
    /// Folder of the database, the socket, the pid and log files (default: the run
    /// directory, /run/hayate as root).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// The schema.
    #[arg(long, default_value = "/usr/share/openvswitch/vswitch.ovsschema")]
    pub schema: PathBuf,
}

fn run_tool(cmd: &mut Command) -> Result<()> {
    let out = cmd.output().map_err(|e| {
        anyhow!(
            "cannot run {:?}: {e} (install openvswitch-common)",
            cmd.get_program()
        )
    })?;
    if !out.status.success() {
        bail!(
            "{:?} failed: {}",
            cmd.get_program(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// The socket of a server started in `dir`.
pub fn socket(dir: &Path) -> PathBuf {
    dir.join("db.sock")
}

/// Runs `hayate ovsdb-init`.
pub fn main(args: InitArgs) -> Result<()> {
    let dir = args
        .dir
        .unwrap_or_else(crate::openflow_side::default_run_dir);
    std::fs::create_dir_all(&dir).map_err(|e| anyhow!("cannot create {}: {e}", dir.display()))?;
    let dir = dir.canonicalize()?;
    let db = dir.join("conf.db");
    if !db.exists() {
        run_tool(
            Command::new("ovsdb-tool")
                .arg("create")
                .arg(&db)
                .arg(&args.schema),
        )?;
    }
    let sock = socket(&dir);
    let pidfile = dir.join("ovsdb-server.pid");
    let running = std::fs::read_to_string(&pidfile)
        .ok()
        .and_then(|p| p.trim().parse::<i32>().ok())
        // SAFETY: signal 0 only checks that the process exists.
        .is_some_and(|pid| unsafe { libc::kill(pid, 0) } == 0);
    if !running {
        run_tool(
            Command::new("ovsdb-server")
                .arg(&db)
                .arg(format!("--remote=punix:{}", sock.display()))
                .arg("--remote=db:Open_vSwitch,Open_vSwitch,manager_options")
                .arg(format!("--pidfile={}", pidfile.display()))
                .arg(format!(
                    "--unixctl={}",
                    dir.join("ovsdb-server.ctl").display()
                ))
                .arg(format!(
                    "--log-file={}",
                    dir.join("ovsdb-server.log").display()
                ))
                .arg("--detach"),
        )?;
    }
    run_tool(
        Command::new("ovs-vsctl")
            .arg(format!("--db=unix:{}", sock.display()))
            .args(["--no-wait", "init"]),
    )?;
    println!("unix:{}", sock.display());
    Ok(())
}
