//! Builds the BPF programs with clang: the AF_XDP port's (`bpf/xsk_redirect.c` into
//! `$OUT_DIR/xsk_redirect.o`, which `src/afxdp/program.rs` embeds), the live-frames
//! transmitter's (`bpf/gen_tx.c` into `$OUT_DIR/gen_tx.o`, embedded by `src/xdplive.rs`) and
//! the tunnel underlay's tc program (`bpf/host_skip.c`, embedded by
//! `src/afpacket/host_skip.rs`). Nothing prebuilt is kept in
//! the repository, so a machine that builds the switch needs clang and the libbpf headers
//! (`scripts/setup.sh` installs them).

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=CLANG");
    for name in ["xsk_redirect", "gen_tx", "host_skip"] {
        build(name);
    }
}

/// Compiles `bpf/NAME.c` into `$OUT_DIR/NAME.o`.
fn build(name: &str) {
    let src = format!("bpf/{name}.c");
    println!("cargo:rerun-if-changed={src}");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let obj = out.join(format!("{name}.o"));
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
        .args(["-c", &src, "-o"])
        .arg(&obj)
        .output();
    match result {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!(
            "\n\nbuilding the XDP program {src} failed:\n{}\n\
             It needs the libbpf headers and the kernel headers: apt-get install -y libbpf-dev \
             linux-libc-dev (or run scripts/setup.sh).\n\n",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => panic!(
            "\n\nbuilding the XDP program {src} needs clang, and '{clang}' \
             could not be run ({e}).\nInstall it: apt-get install -y clang libbpf-dev (or run \
             scripts/setup.sh), or point the CLANG environment variable at a clang binary.\n\n"
        ),
    }
}
