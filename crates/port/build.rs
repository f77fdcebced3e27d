//! Builds the XDP program of the AF_XDP port (`bpf/xsk_redirect.c`) with clang into
//! `$OUT_DIR/xsk_redirect.o`, which `src/afxdp/program.rs` embeds. Nothing prebuilt is kept in
//! the repository, so a machine that builds the switch needs clang and the libbpf headers
//! (`scripts/setup.sh` installs them).

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let src = "bpf/xsk_redirect.c";
    println!("cargo:rerun-if-changed={src}");
    println!("cargo:rerun-if-env-changed=CLANG");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let obj = out.join("xsk_redirect.o");
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".to_string());

    // `-target bpf` drops the host's multiarch include folder, where <asm/types.h> lives.
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let multiarch = match arch.as_str() {
        "x86_64" => "x86_64-linux-gnu",
        "aarch64" => "aarch64-linux-gnu",
        "riscv64" => "riscv64-linux-gnu",
        other => other,
    };
    let result = Command::new(&clang)
        .args(["-O2", "-g", "-Wall", "-Werror", "-target", "bpf"])
        .arg(format!("-I/usr/include/{multiarch}"))
        .args(["-c", src, "-o"])
        .arg(&obj)
        .output();
    match result {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!(
            "\n\nbuilding the AF_XDP port's XDP program ({src}) failed:\n{}\n\
             It needs the libbpf headers and the kernel headers: apt-get install -y libbpf-dev \
             linux-libc-dev (or run scripts/setup.sh).\n\n",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => panic!(
            "\n\nbuilding the AF_XDP port's XDP program ({src}) needs clang, and '{clang}' \
             could not be run ({e}).\nInstall it: apt-get install -y clang libbpf-dev (or run \
             scripts/setup.sh), or point the CLANG environment variable at a clang binary.\n\n"
        ),
    }
}
