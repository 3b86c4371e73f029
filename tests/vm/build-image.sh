#!/usr/bin/env bash
# Build (or reuse) the cached guest image of the VM test tier and print its directory.
#
# The guest is "hostroot": Debian's own kernel boots under qemu and mounts THIS machine's
# / read-only over 9p with a tmpfs overlay on top (tests/vm/init.sh). So no debootstrap,
# no second userland: the guest runs the checkout's .venv, python3-bpfcc and the
# linux-headers the host has, and the kernel is the one those headers belong to
# (linux-headers-amd64's ABI), so bcc compiles against matching headers in the guest.
#
# What gets cached under $HWAGENT_VM_CACHE (default /var/cache/hwagent-vm), in a directory
# named after a hash of every build input (kernel ABI + package version + this script +
# init.sh), so a kernel security update or an edit here builds a fresh one and a repeat
# run costs nothing:
#   vmlinuz              the kernel (from linux-image-$KVER, apt-get download)
#   initramfs.cpio.gz    busybox-static + the virtio/9p/overlay modules + init.sh as /init
#   modules/             lib/modules/$KVER of that kernel (depmod'ed), bind-mounted in the guest
#                        with build/source pointing at the host's header trees
#   kver                 the kernel release
#
# The tier's own apt packages (qemu-system-x86 busybox-static cpio kmod) are installed here,
# idempotently, rather than in scripts/setup.sh: a checkout that skips the VM tier
# (HWAGENT_SKIP_VM=1) never pays for qemu.
#
# Exit codes: 0 ok (last stdout line = image dir), 3 = prerequisites unavailable (not root
# and missing packages, apt failed, no headers): callers skip with the message; other = bug.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE_ROOT="${HWAGENT_VM_CACHE:-/var/cache/hwagent-vm}"
VM_APT_PACKAGES=(qemu-system-x86 busybox-static cpio kmod)
# loaded by /init, in dependency order (modprobe --show-depends resolves the order below)
INITRAMFS_MODULES=(virtio_pci 9pnet_virtio 9p overlay)
# large driver trees no guest test needs; left out of modules/ to keep the cache small
PRUNE_MODULE_DIRS=(drivers/gpu drivers/media drivers/net/wireless drivers/infiniband drivers/staging
    drivers/usb drivers/bluetooth drivers/iio drivers/hid drivers/input sound net/bluetooth net/wireless
    net/mac80211 drivers/isdn drivers/scsi drivers/mtd drivers/platform)

log() { printf 'build-image: %s\n' "$*" >&2; }
unavailable() { log "UNAVAILABLE: $*"; exit 3; }

missing_packages() {
    local p
    for p in "${VM_APT_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || echo "$p"
    done
}

install_packages() {
    local missing
    missing="$(missing_packages)"
    [ -z "$missing" ] && return 0
    [ "$(id -u)" = 0 ] || unavailable "not root and missing apt packages: $(echo $missing)"
    log "installing apt packages: $(echo $missing)"
    export DEBIAN_FRONTEND=noninteractive
    # shellcheck disable=SC2086
    if ! { apt-get install -y -qq --no-install-recommends $missing >/dev/null 2>&1 ||
           { apt-get update -qq && apt-get install -y -qq --no-install-recommends $missing >/dev/null; }; }; then
        unavailable "apt-get install $(echo $missing) failed"
    fi
}

# The guest kernel is the ABI whose headers the host has installed (setup.sh installs
# linux-headers-amd64): "linux-headers-6.1.0-57-amd64 (= 6.1.192-3)" -> KVER, version.
resolve_kernel() {
    local dep
    dep="$(dpkg-query -W -f='${Depends}' linux-headers-amd64 2>/dev/null || true)"
    [ -n "$dep" ] || unavailable "linux-headers-amd64 is not installed (scripts/setup.sh installs it)"
    KVER="$(sed -E 's/^linux-headers-([^ ,]+).*/\1/' <<<"$dep")"
    KPKGVER="$(sed -nE 's/.*\(= ([^)]+)\).*/\1/p' <<<"$dep")"
    [ -d "/usr/src/linux-headers-$KVER" ] || unavailable "no /usr/src/linux-headers-$KVER"
    [ -n "$KPKGVER" ] || unavailable "cannot parse linux-headers-amd64 Depends: $dep"
}

cache_key() {
    { echo "$KVER $KPKGVER"; cat "$here/build-image.sh" "$here/init.sh"; } | sha256sum | cut -c1-16
}

build() {
    local dst="$1" work="$2" deb kx m
    log "building guest image for kernel $KVER ($KPKGVER) in $dst"
    mkdir -p "$work/deb" "$work/kx" "$work/initramfs/bin" "$work/initramfs/modules" "$work/image/modules"
    (cd "$work/deb" && apt-get download -q "linux-image-$KVER=$KPKGVER" >/dev/null 2>&1) ||
        (cd "$work/deb" && apt-get update -qq && apt-get download -q "linux-image-$KVER=$KPKGVER" >/dev/null) ||
        unavailable "apt-get download linux-image-$KVER=$KPKGVER failed"
    deb="$(ls "$work"/deb/linux-image-*.deb)"
    # Extract beside, never into, a root: dpkg -x would replace a merged-/usr lib symlink.
    dpkg -x "$deb" "$work/kx"
    kx="$work/kx"
    [ -d "$kx/lib/modules/$KVER" ] || kx="$work/kx/usr"
    cp "$work/kx/boot/vmlinuz-$KVER" "$work/image/vmlinuz"

    # modules tree for the guest (loop, dummy, null_blk, virtio_blk...): bind-mounted over
    # /lib/modules/$KVER in the guest, so build/source must point at the host's headers.
    cp -a "$kx/lib/modules/$KVER/." "$work/image/modules/"
    for m in "${PRUNE_MODULE_DIRS[@]}"; do rm -rf "$work/image/modules/kernel/$m"; done
    ln -sfn "/usr/src/linux-headers-$KVER" "$work/image/modules/build"
    if [ -d "/usr/src/linux-headers-${KVER%-amd64}-common" ]; then
        ln -sfn "/usr/src/linux-headers-${KVER%-amd64}-common" "$work/image/modules/source"
    fi
    mkdir -p "$work/depmod/lib/modules"
    ln -s "$work/image/modules" "$work/depmod/lib/modules/$KVER"
    depmod -b "$work/depmod" "$KVER"

    # initramfs: busybox + the modules /init needs, in load order + /init
    cp /bin/busybox "$work/initramfs/bin/busybox"
    modprobe -d "$work/depmod" -S "$KVER" -a --show-depends "${INITRAMFS_MODULES[@]}" |
        awk '$1 == "insmod" && !seen[$2]++ {print $2}' > "$work/module-order"
    [ -s "$work/module-order" ] || { log "no initramfs modules resolved"; exit 1; }
    : > "$work/initramfs/modules/order"
    while read -r m; do
        cp "$m" "$work/initramfs/modules/"
        basename "$m" >> "$work/initramfs/modules/order"
    done < "$work/module-order"
    install -m 0755 "$here/init.sh" "$work/initramfs/init"
    echo "$KVER" > "$work/initramfs/kver"
    (cd "$work/initramfs" && find . | cpio -o -H newc --quiet | gzip -1 > "$work/image/initramfs.cpio.gz")

    echo "$KVER" > "$work/image/kver"
    mv "$work/image" "$dst"
}

main() {
    install_packages
    resolve_kernel
    local key
    key="$(cache_key)"
    dst="$CACHE_ROOT/$key"
    if [ -f "$dst/kver" ] && [ -f "$dst/vmlinuz" ] && [ -f "$dst/initramfs.cpio.gz" ]; then
        log "reusing cached image $dst (kernel $KVER)"
        echo "$dst"
        return 0
    fi
    mkdir -p "$CACHE_ROOT" 2>/dev/null || unavailable "cannot create $CACHE_ROOT"
    [ -w "$CACHE_ROOT" ] || unavailable "$CACHE_ROOT is not writable"
    # one builder at a time; a second one waits, then finds the image built
    exec 9>"$CACHE_ROOT/.lock"
    flock 9
    if [ -f "$dst/kver" ]; then log "reusing $dst (built meanwhile)"; echo "$dst"; return 0; fi
    rm -rf "$CACHE_ROOT"/.build.* "$CACHE_ROOT"/*.tmp.*   # leftovers of killed builds (we hold the lock)
    WORK="$(mktemp -d "$CACHE_ROOT/.build.XXXXXX")"
    TMPDST="$dst.tmp.$$"
    trap 'rm -rf "$WORK" "$TMPDST"' EXIT
    local t0=$SECONDS
    build "$dst.tmp.$$" "$WORK"
    rm -rf "$dst"
    mv "$dst.tmp.$$" "$dst"
    # keep the two newest images; older kernels' trees are dead weight
    ls -1dt "$CACHE_ROOT"/*/ 2>/dev/null | tail -n +3 | xargs -r rm -rf
    log "built $dst in $((SECONDS - t0)) s ($(du -sh "$dst" | cut -f1))"
    echo "$dst"
}

main "$@"
