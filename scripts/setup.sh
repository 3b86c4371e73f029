#!/usr/bin/env bash
# Idempotent set-up of a checkout on Debian 12. Every step checks before it acts,
# so a second run costs about a second and changes nothing.
#
#   scripts/setup.sh run     what running hwagent needs: runtime apt packages, the venv
#                            with the project alone, the exec shim, and (as root)
#                            /usr/local/bin/hwagent linked to the venv's
#   scripts/setup.sh test    all of run, plus the test and gate tools (apt peers such as
#                            lstopo, perf and promtool; containerd 1.7 from Debian 13, the NRI
#                            peer; pytest, mypy, ruff, hadolint ...)
#   scripts/setup.sh         the same as test
#
# As root: apt packages, kernel-header links for bcc, tracefs, the command link. As
# any user: the venv. Without root the system steps are skipped with a warning; tests
# that need them then skip with a reason rather than fail.
# HWAGENT_SETUP_SYSTEM=0 skips the apt, header and tracefs steps (packages managed
# elsewhere); HWAGENT_BIN_DIR (default /usr/local/bin) is where the command link goes.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"

log() { printf 'setup: %s\n' "$*" >&2; }

profile="${1:-test}"
case "$profile" in
    run|test) ;;
    *) echo "usage: scripts/setup.sh [run|test]" >&2; exit 2 ;;
esac

# What `hwagent run` and the CLI use on a box.
RUN_PACKAGES=(
    python3 python3-venv python3-dev     # the venv is built on Debian's python so bcc imports
    python3-bpfcc                        # bcc for the eBPF probes
    linux-headers-amd64                  # bcc compiles against these (see header links below)
    iproute2 util-linux kmod udev        # network interfaces, block devices, uevents
    gcc                                  # builds wheels that have no binary for this python, and hwagent-shim
    pci.ids                              # PCI vendor/device/class names for the text views (optional at run time)
    librsvg2-bin                         # rsvg-convert: `hwagent topology --format png`
)
# The peers the tests and benches compare against, and their tools.
TEST_PACKAGES=(
    bpfcc-tools                          # bcc's own tools, the probes' reference
    hwloc-nox                            # lstopo-no-graphics: the peer for topology tests and bench
    linux-perf                           # perf bench sched pipe: probe overhead bench
    prometheus                           # promtool: checks and unit-tests deploy/prometheus rules
    slurm-wlm munge                      # slurmctld/slurmd/srun and munged: the Slurm-mode peer (docs/slurm.md)
)
# Services the peer packages enable and (munge) start on install. The tests run their own
# daemons with their own config, key, ports and state under a tmp dir; a system munged or
# slurmd left running would be a daemon nobody configured, holding the default ports and a
# key the tests do not use, and would start again at every boot.
PEER_SERVICES=(munge slurmd slurmctld)
APT_PACKAGES=("${RUN_PACKAGES[@]}")
[ "$profile" = test ] && APT_PACKAGES+=("${TEST_PACKAGES[@]}")

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

# The NRI peer of tests/integration/nri (test profile): containerd 1.7 from Debian 13, whose
# package needs only runc and libc6 >= 2.34 and so installs on Debian 12. Debian 12 stays the
# default release: trixie is added pinned at priority 100, so nothing else moves to it. The
# packaged service is stopped and disabled right after the install: the tests run their own
# containerd (own config, root, state and sockets under a tmp dir, NRI switched on).
TRIXIE_SOURCES=/etc/apt/sources.list.d/debian-trixie.sources
TRIXIE_PIN=/etc/apt/preferences.d/hwagent-trixie
install_nri_peer() {
    # (a removed package keeps its version beside "deinstall ok config-files": look at both)
    case "$(dpkg-query -W -f='${Status} ${Version}' containerd 2>/dev/null || true)" in
        "install ok installed 1.7."*|"install ok installed 2."*) return 0 ;;
    esac
    if [ ! -e "$TRIXIE_SOURCES" ]; then
        printf '%s\n' 'Types: deb' 'URIs: http://deb.debian.org/debian' 'Suites: trixie' 'Components: main' \
            'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' > "$TRIXIE_SOURCES"
        log "added $TRIXIE_SOURCES"
    fi
    if [ ! -e "$TRIXIE_PIN" ]; then
        printf '%s\n' 'Package: *' 'Pin: release n=trixie' 'Pin-Priority: 100' > "$TRIXIE_PIN"
        log "pinned trixie at priority 100 in $TRIXIE_PIN"
    fi
    log "installing containerd 1.7 from Debian 13 (the NRI peer)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends containerd/trixie >/dev/null
    if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
        systemctl disable --now containerd.service >/dev/null 2>&1 \
            && log "stopped and disabled the packaged containerd.service (tests run their own)" || true
    fi
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

# Stop and disable PEER_SERVICES where installed and enabled or running (idempotent: a second
# run finds them disabled and inactive and does nothing). Works without a running systemd too
# (a container: `systemctl disable` then only removes the links).
quiet_peer_services() {
    [ "$profile" = test ] && command -v systemctl >/dev/null || return 0
    local s
    for s in "${PEER_SERVICES[@]}"; do
        [ -f "/lib/systemd/system/$s.service" ] || continue
        if systemctl is-enabled --quiet "$s" 2>/dev/null || systemctl is-active --quiet "$s" 2>/dev/null; then
            systemctl disable --now --quiet "$s" >/dev/null 2>&1 || systemctl disable --quiet "$s" >/dev/null 2>&1 || true
            log "stopped and disabled $s.service (the tests run their own)"
        fi
    done
}

mount_tracefs() {
    if [ -d /sys/kernel/tracing ] && ! mountpoint -q /sys/kernel/tracing; then
        mount -t tracefs nodev /sys/kernel/tracing && log "mounted tracefs at /sys/kernel/tracing" \
            || log "warning: could not mount tracefs"
    fi
}

# The venv's content: the project (run), and its test extras (test). Each has a stamp of
# what decided it; a change re-installs, an unchanged one costs nothing.
build_venv() {
    local stamp=".venv/.hwagent-setup-$profile" want spec='.'
    # test adds the optional kube group (the kubernetes client, ~150 MB: the DRA driver's API-server
    # mode and its tests); run leaves it out: pip install '.[kube]' where [dra] kubeconfig is set
    [ "$profile" = test ] && spec='.[test,kube]'
    want="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x .venv/bin/hwagent ]; then
        return 0
    fi
    log "building .venv for $profile (Debian python3 with system site-packages, for bcc)"
    [ -x .venv/bin/python ] || /usr/bin/python3 -m venv --system-site-packages .venv
    .venv/bin/python -m pip install -q --upgrade pip >/dev/null
    .venv/bin/python -m pip install -q -e "$spec"
    echo "$want" > "$stamp"
    # test's install is a superset of run's: a later `run` has nothing to add
    [ "$profile" = test ] && echo "$want" > .venv/.hwagent-setup-run
    return 0
}

# The venv's `hwagent`: pip's console script rewritten as agent/commands/_entry.py's, which starts
# the interpreter without site for the commands that only talk to the daemon (~12 ms of CPU less
# per call, bench/cli.py). Rewritten only when its text would change.
write_entry() {
    if [ "$(head -n1 .venv/bin/hwagent)" = "#!$here/.venv/bin/python -S" ] \
        && [ ! agent/commands/_entry.py -nt .venv/bin/hwagent ]; then
        return 0
    fi
    .venv/bin/python -m agent.commands._entry .venv/bin/hwagent | while read -r line; do log "$line"; done
}

# `hwagent` on the PATH: a link to the venv's console script, as root only. A file of
# that name that is not such a link (another installation) is left alone, with a warning.
link_command() {
    local dir="${HWAGENT_BIN_DIR:-/usr/local/bin}" target="$here/.venv/bin/hwagent"
    local link="$dir/hwagent"
    [ -d "$dir" ] || return 0
    if [ -e "$link" ] && [ ! -L "$link" ]; then
        log "warning: $link exists and is not a link; leaving it (use scripts/dev hwagent ...)"
        return 0
    fi
    [ "$(readlink "$link" 2>/dev/null)" = "$target" ] && return 0
    ln -sfn "$target" "$link" && log "linked $link -> $target"
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
    if [ "${HWAGENT_SETUP_SYSTEM:-1}" != 0 ]; then
        install_apt
        [ "$profile" = test ] && install_nri_peer
        link_headers
        mount_tracefs
    fi
else
    log "warning: not root; skipping apt packages, header links, tracefs and the hwagent link"
fi
build_venv
write_entry
build_shim
[ "$(id -u)" = 0 ] && link_command
exit 0
