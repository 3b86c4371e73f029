#!/usr/bin/env bash
# Idempotent set-up of a checkout on Debian 12. Every step checks before it acts,
# so a second run costs about a second and changes nothing.
#
# As root: apt packages, kernel-header links for bcc, tracefs. As any user: the venv.
# Without root the system steps are skipped with a warning; tests that need them
# then skip with a reason rather than fail.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"

log() { printf 'setup: %s\n' "$*" >&2; }

APT_PACKAGES=(
    python3 python3-venv python3-dev     # the venv is built on Debian's python so bcc imports
    python3-bpfcc bpfcc-tools            # bcc for the eBPF probes
    linux-headers-amd64                  # bcc compiles against these (see header links below)
    hwloc-nox                            # lstopo-no-graphics: the peer for topology tests and bench
    linux-perf                           # perf bench sched pipe: probe overhead bench
    iproute2 util-linux kmod udev        # dummy links, loop devices, uevents in hotplug tests
    gcc                                  # builds wheels that have no binary for this python, and hwagent-shim
    pci.ids                              # PCI vendor/device/class names for the text views (optional at run time)
    librsvg2-bin                         # rsvg-convert: `hwagent topology --format png` and the picture tests
    prometheus                           # promtool: checks and unit-tests deploy/prometheus rules
)

missing_packages() {
    local p
    for p in "${APT_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || echo "$p"
    done
}

install_apt() {
    local missing
    missing="$(missing_packages)"
    [ -z "$missing" ] && return 0
    log "installing apt packages: $(echo $missing)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
}

# bcc looks for headers at /lib/modules/$(uname -r)/{build,source}. Debian splits them
# into an -amd64 tree (build) and a -common tree (source); BCC_KERNEL_SOURCE alone fails.
link_headers() {
    local kdir="/lib/modules/$(uname -r)" build common
    build="$(ls -d /usr/src/linux-headers-*-amd64 2>/dev/null | sort -V | tail -n 1 || true)"
    [ -n "$build" ] || { log "warning: no linux-headers-*-amd64 tree; bcc probes will not compile"; return 0; }
    common="${build%-amd64}-common"
    mkdir -p "$kdir"
    if [ "$(readlink "$kdir/build" 2>/dev/null)" != "$build" ]; then
        ln -sfn "$build" "$kdir/build"; log "linked $kdir/build -> $build"
    fi
    if [ -d "$common" ] && [ "$(readlink "$kdir/source" 2>/dev/null)" != "$common" ]; then
        ln -sfn "$common" "$kdir/source"; log "linked $kdir/source -> $common"
    fi
}

mount_tracefs() {
    if [ -d /sys/kernel/tracing ] && ! mountpoint -q /sys/kernel/tracing; then
        mount -t tracefs nodev /sys/kernel/tracing && log "mounted tracefs at /sys/kernel/tracing" \
            || log "warning: could not mount tracefs"
    fi
}

build_venv() {
    # The stamp covers what decides the venv's content; a change re-installs.
    local stamp=".venv/.hwagent-setup" want
    want="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x .venv/bin/hwagent ]; then
        return 0
    fi
    log "building .venv (Debian python3 with system site-packages, for bcc)"
    [ -x .venv/bin/python ] || /usr/bin/python3 -m venv --system-site-packages .venv
    .venv/bin/python -m pip install -q --upgrade pip >/dev/null
    .venv/bin/python -m pip install -q -e '.[test]'
    echo "$want" > "$stamp"
}

# The workload runtime's exec shim (agent/runtime/shim.c), beside the venv's python
# where the runtime looks first. Without gcc the runtime uses its Python fallback.
build_shim() {
    local src=agent/runtime/shim.c out=.venv/bin/hwagent-shim
    [ -x "$out" ] && [ "$out" -nt "$src" ] && return 0
    if ! command -v gcc >/dev/null; then
        log "warning: no gcc; the workload runtime will use its Python shim (slower launches)"
        return 0
    fi
    gcc -O2 -Wall -o "$out.tmp" "$src" && mv "$out.tmp" "$out" && log "built $out"
}

if [ "$(id -u)" = 0 ]; then
    install_apt
    link_headers
    mount_tracefs
else
    log "warning: not root; skipping apt packages, header links and tracefs"
fi
build_venv
build_shim
