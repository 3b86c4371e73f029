#!/usr/bin/env bash
# Install hwagent from a checkout and start it as a node runs it. Shared by the users'
# Vagrant VM (vagrant/Vagrantfile runs it as root at provision time) and the qemu test tier
# (tests/vm/guest/test_hwagent_run.py runs it inside the guest), so both paths run the
# same steps:
#
#   1. setup    scripts/setup.sh (apt packages, bcc header links, tracefs, .venv) and the
#               headers of the running kernel; skipped with --no-setup (the qemu tier's
#               guest already runs the host's set-up, read-only)
#   2. install  /usr/local/bin/hwagent -> the checkout's venv, the systemd unit,
#               /etc/hwagent/config.toml (kept if present), /etc/default/hwagent
#   3. start    systemd as PID 1: systemctl enable --now hwagent; without systemd (the
#               qemu tier's busybox init): the unit's own ExecStart line, in the background
#   4. wait     until /healthz answers 200 (exit 1 with the log tail if it never does)
#
# usage: provision.sh [--checkout DIR] [--no-setup] [--only install|start|stop] [--timeout S]
set -euo pipefail

CHECKOUT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SETUP=1 ONLY="" TIMEOUT=180
while [ $# -gt 0 ]; do
    case "$1" in
        --checkout) CHECKOUT="$(cd "$2" && pwd)"; shift 2 ;;
        --no-setup) SETUP=0; shift ;;
        --only) ONLY="$2"; shift 2 ;;
        --timeout) TIMEOUT="$2"; shift 2 ;;
        -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
        *) echo "provision: unknown argument $1" >&2; exit 2 ;;
    esac
done

UNIT_SRC="$CHECKOUT/systemd/hwagent.service"
CONFIG_SRC="$CHECKOUT/vagrant/hwagent.toml"
UNIT=/etc/systemd/system/hwagent.service
CONFIG=/etc/hwagent/config.toml
ENV_FILE=/etc/default/hwagent
PID_FILE=/run/hwagent-provision.pid   # only for the no-systemd start
LOG_FILE=/var/log/hwagent.log         # only for the no-systemd start

log() { printf 'provision: %s\n' "$*" >&2; }
have_systemd() { [ -d /run/systemd/system ]; }

step_setup() {
    bash "$CHECKOUT/scripts/setup.sh"
    # bcc needs the headers of the kernel that runs, which a box may lag behind
    local kh="linux-headers-$(uname -r)"
    if ! dpkg-query -W -f='${Status}' "$kh" 2>/dev/null | grep -q 'install ok installed'; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$kh" >/dev/null ||
            log "warning: $kh not installable; eBPF probes will report unavailable"
    fi
}

step_install() {
    [ -x "$CHECKOUT/.venv/bin/hwagent" ] || { log "no $CHECKOUT/.venv/bin/hwagent: run without --no-setup"; exit 1; }
    ln -sfn "$CHECKOUT/.venv/bin/hwagent" /usr/local/bin/hwagent
    install -D -m 0644 "$UNIT_SRC" "$UNIT"
    if [ ! -f "$CONFIG" ]; then
        install -D -m 0644 "$CONFIG_SRC" "$CONFIG"
    fi
    /usr/local/bin/hwagent run --config "$CONFIG" --print-config >/dev/null  # fail early on a bad config
    [ -f "$ENV_FILE" ] || echo "HWAGENT_ARGS=\"--config $CONFIG\"" > "$ENV_FILE"
    log "installed $UNIT, $CONFIG, $ENV_FILE, /usr/local/bin/hwagent -> $CHECKOUT/.venv/bin/hwagent"
}

# ExecStart of the unit with $HWAGENT_ARGS from the environment file, as systemd would run it
exec_start() {
    local line args=""
    line="$(sed -n 's/^ExecStart=//p' "$UNIT" | head -n 1)"
    # shellcheck disable=SC1090
    [ -f "$ENV_FILE" ] && args="$(. "$ENV_FILE"; echo "${HWAGENT_ARGS:-}")"
    echo "${line//\$HWAGENT_ARGS/$args}"
}

step_start() {
    if have_systemd; then
        systemctl daemon-reload
        systemctl enable --now hwagent.service
        return
    fi
    if [ -f "$PID_FILE" ] && kill -0 "$(cat "$PID_FILE")" 2>/dev/null; then
        log "already running (pid $(cat "$PID_FILE"))"
        return
    fi
    local cmd
    cmd="$(exec_start)"
    log "no systemd: starting the unit's ExecStart: $cmd"
    mkdir -p /var/lib/hwagent "$(dirname "$LOG_FILE")"
    # shellcheck disable=SC2086
    setsid $cmd >>"$LOG_FILE" 2>&1 < /dev/null &
    echo $! > "$PID_FILE"
}

step_stop() {
    if have_systemd; then
        systemctl stop hwagent.service
        return
    fi
    [ -f "$PID_FILE" ] || { log "not running"; return 0; }
    local pid rc=0
    pid="$(cat "$PID_FILE")"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then log "pid $pid ignored SIGTERM for 30 s"; rc=1; fi
    rm -f "$PID_FILE"
    return $rc
}

metrics_address() {
    /usr/local/bin/hwagent run --config "$CONFIG" --print-config |
        sed -n 's/^metrics_address = "\(.*\)"/\1/p' | head -n 1
}

step_wait() {
    local addr deadline=$((SECONDS + TIMEOUT))
    addr="$(metrics_address)"
    while [ $SECONDS -lt $deadline ]; do
        if python3 -c "import sys, urllib.request as u; sys.exit(0 if u.urlopen('http://$addr/healthz', timeout=2).status == 200 else 1)" 2>/dev/null; then
            log "hwagent healthy at http://$addr/healthz"
            return 0
        fi
        if ! have_systemd && [ -f "$PID_FILE" ] && ! kill -0 "$(cat "$PID_FILE")" 2>/dev/null; then
            log "hwagent exited during start:"; tail -n 40 "$LOG_FILE" >&2 || true; return 1
        fi
        sleep 1
    done
    log "hwagent not healthy after ${TIMEOUT}s"
    if have_systemd; then journalctl -u hwagent -n 40 --no-pager >&2 || true; else tail -n 40 "$LOG_FILE" >&2 || true; fi
    return 1
}

[ "$(id -u)" = 0 ] || { log "must run as root"; exit 1; }
case "$ONLY" in
    "") [ "$SETUP" = 1 ] && step_setup; step_install; step_start; step_wait ;;
    install) step_install ;;
    start) step_start; step_wait ;;
    stop) step_stop ;;
    *) log "unknown --only $ONLY (install|start|stop)"; exit 2 ;;
esac
