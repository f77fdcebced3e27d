#!/usr/bin/env bash
# Builds the small Linux guest Hayate's QEMU tests boot (crates/hayate/tests/vhost_qemu.rs):
# Debian's kernel (the package linux-image-amd64 depends on, fetched with `apt-get download`
# and unpacked with `dpkg-deb -x` into OUTDIR, never installed on the host) and a busybox
# initramfs with the virtio-net modules and what they need, iperf3 and its libraries, and
# scripts/guest/init. No download but apt's.
#
# Usage: bash scripts/guest/build.sh [OUTDIR]     (default /var/cache/hayate/guest)
# Prints OUTDIR/vmlinuz and OUTDIR/initrd.img. Idempotent: the kernel package is fetched
# once, and the initramfs is rebuilt only when this script, init, the kernel, busybox or
# iperf3 changed. Safe to run from several processes at once (a lock). Needs root for
# nothing but apt-get (the tests run it as root); needs busybox-static, cpio, iperf3.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${1:-/var/cache/hayate/guest}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
exec 9>"$OUT/.lock"
flock -w 600 9

# The modules eth0 needs; their dependencies are found in the modules' own .modinfo.
WANT_MODULES=(virtio_pci virtio_net)
BUSYBOX=/bin/busybox

need() {
    command -v "$1" >/dev/null 2>&1 || {
        echo "guest/build.sh: needs $1 (bash scripts/setup.sh installs it)" >&2
        exit 1
    }
}
need cpio
need iperf3
need dpkg-deb
[ -x "$BUSYBOX" ] && ! ldd "$BUSYBOX" >/dev/null 2>&1 || {
    echo "guest/build.sh: needs a static $BUSYBOX (package busybox-static)" >&2
    exit 1
}

# 1. The kernel package, once.
kpkg=""
[ -f "$OUT/kernel.pkg" ] && kpkg="$(cat "$OUT/kernel.pkg")"
if [ -z "$kpkg" ] || [ ! -d "$OUT/kernel/lib/modules" ] || ! ls "$OUT"/kernel/boot/vmlinuz-* >/dev/null 2>&1; then
    pick() { apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}'; }
    # As root apt warns that it cannot sandbox the download into a folder of root's: harmless.
    fetch() {
        (cd "$dl" && apt-get download -q "$1" 2>&1 || true) | { grep -v 'unsandboxed' || true; } >&2
        ls "$dl"/*.deb >/dev/null 2>&1
    }
    dl="$(mktemp -d)"
    chmod 755 "$dl"
    kpkg="$(pick)"
    if [ -z "$kpkg" ] || ! { echo "guest/build.sh: fetching $kpkg" >&2; fetch "$kpkg"; }; then
        # No lists yet, or lists older than the mirror: update once and try again.
        apt-get update -qq >&2
        kpkg="$(pick)"
        [ -n "$kpkg" ] || { echo "guest/build.sh: apt knows no linux-image-amd64" >&2; exit 1; }
        echo "guest/build.sh: fetching $kpkg" >&2
        fetch "$kpkg" || { echo "guest/build.sh: apt-get download $kpkg failed" >&2; exit 1; }
    fi
    rm -rf "$OUT/kernel.new"
    dpkg-deb -x "$dl"/*.deb "$OUT/kernel.new"
    rm -rf "$dl" "$OUT/kernel"
    mv "$OUT/kernel.new" "$OUT/kernel"
    echo "$kpkg" > "$OUT/kernel.pkg"
fi
vmlinuz="$(ls "$OUT"/kernel/boot/vmlinuz-* | head -n 1)"
kver="$(basename "$vmlinuz" | sed 's/^vmlinuz-//')"
moddir="$OUT/kernel/lib/modules/$kver"

# 2. Is the initramfs up to date?
iperf_bin="$(command -v iperf3)"
stamp="$( { cat "$0" "$HERE/init"; echo "$kpkg $kver"; sha256sum "$BUSYBOX" "$iperf_bin"; ldd "$iperf_bin" | grep -o '/[^ ]*' | xargs sha256sum; } | sha256sum | cut -d' ' -f1)"
if [ -f "$OUT/initrd.img" ] && [ -f "$OUT/vmlinuz" ] && [ "$(cat "$OUT/stamp" 2>/dev/null)" = "$stamp" ]; then
    echo "$OUT/vmlinuz"
    echo "$OUT/initrd.img"
    exit 0
fi
echo "guest/build.sh: building the initramfs ($kver) in $OUT" >&2

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage"/{bin,sbin,dev,proc,sys,tmp,run,etc,lib/modules,usr/bin}
cp "$BUSYBOX" "$stage/bin/busybox"
ln -s busybox "$stage/bin/sh"
cp "$HERE/init" "$stage/init"
chmod 755 "$stage/init"

# Modules in load order: each after what its .modinfo says it depends on.
modpath() { find "$moddir/kernel" -name "$1.ko" -o -name "$(echo "$1" | tr _ -).ko" | head -n 1; }
deps() { grep -a -o 'depends=[A-Za-z0-9_,-]*' "$1" | head -n 1 | sed 's/^depends=//' | tr ',' ' '; }
builtin() { grep -q "/$1.ko\$" "$moddir/modules.builtin" 2>/dev/null; }
ordered=()
visit() {
    local m="$1" f d
    for o in "${ordered[@]:-}"; do [ "$o" = "$m" ] && return 0; done
    builtin "$m" && return 0
    f="$(modpath "$m")"
    [ -n "$f" ] || { echo "guest/build.sh: no module $m in $kver" >&2; exit 1; }
    for d in $(deps "$f"); do visit "$(echo "$d" | tr - _)"; done
    ordered+=("$m")
    cp "$f" "$stage/lib/modules/$m.ko"
}
for m in "${WANT_MODULES[@]}"; do visit "$m"; done
printf '%s.ko\n' "${ordered[@]}" > "$stage/lib/modules/order"
echo "guest/build.sh: modules ${ordered[*]}" >&2

# iperf3 and the libraries ldd names (with the loader), at the same paths.
cp "$iperf_bin" "$stage/usr/bin/iperf3"
ldd "$iperf_bin" | grep -o '/[^ ]*' | while read -r lib; do
    mkdir -p "$stage$(dirname "$lib")"
    cp -L "$lib" "$stage$lib"
done
# The loader's usual path, whatever ldd printed.
if [ ! -e "$stage/lib64/ld-linux-x86-64.so.2" ]; then
    mkdir -p "$stage/lib64"
    cp -L /lib64/ld-linux-x86-64.so.2 "$stage/lib64/"
fi
echo "root:x:0:0:root:/:/bin/sh" > "$stage/etc/passwd"
echo "127.0.0.1 localhost" > "$stage/etc/hosts"

(cd "$stage" && find . -print0 | sort -z | cpio --null -o -H newc --quiet) | gzip -1 > "$OUT/initrd.img.new"
mv "$OUT/initrd.img.new" "$OUT/initrd.img"
cp "$vmlinuz" "$OUT/vmlinuz.new"
mv "$OUT/vmlinuz.new" "$OUT/vmlinuz"
echo "$stamp" > "$OUT/stamp"
echo "$OUT/vmlinuz"
echo "$OUT/initrd.img"
