//! Without privileges, opening an AF_XDP port fails with an error that names the fix. The test
//! (run as root) starts this binary again as user `nobody` through `setpriv`, with no
//! capabilities, and reads the child's error.

mod afxdp_support;

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Command;

use afxdp_support::root_or_say_why;
use packet::Pool;
use port::afxdp::{AfXdpConfig, AfXdpPort};

const CHILD_ENV: &str = "HY_AFXDP_UNPRIVILEGED_CHILD";

#[test]
#[ignore = "run by an_unprivileged_open_names_the_fix as a child process"]
fn child_opens_without_privileges() {
    if std::env::var(CHILD_ENV).is_err() {
        return;
    }
    let pool = Pool::with_frames(4096);
    match AfXdpPort::open(&AfXdpConfig::new("lo"), &pool) {
        Ok(_) => println!("CHILD-RESULT opened"),
        Err(e) => println!("CHILD-RESULT {e}"),
    }
}

/// Removes the folder on drop.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn an_unprivileged_open_names_the_fix() {
    if !root_or_say_why("an_unprivileged_open_names_the_fix") {
        return;
    }
    // `nobody` may not reach the build folder (e.g. under /root): run a copy from /tmp.
    let dir = TempDir(std::env::temp_dir().join(format!("hy-afxdp-unpriv-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let exe = dir.0.join("child");
    std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    for path in [&dir.0, &exe] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
        ])
        .arg(&exe)
        .args([
            "--exact",
            "child_opens_without_privileges",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD_ENV, "1")
        .output()
        .expect("running setpriv (util-linux)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("CHILD-RESULT"))
        .unwrap_or_else(|| {
            panic!(
                "the child said nothing: {stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    assert!(
        line.contains("AF_XDP needs CAP_NET_ADMIN and CAP_BPF; run as root"),
        "{line}"
    );
}
