"""A libvirtd of the test's own, and its management network, torn down after.

Why not the host's libvirtd: a CI machine may run one (socket-activated with
libvirt-daemon-system) with its own domains, networks and pools, or none at all (no systemd
here). The test's libvirtd runs in a private mount namespace where /etc/libvirt,
/var/lib/libvirt, /var/log/libvirt, /var/cache/libvirt and /run/libvirt are directories of the
test, so its config, domains, pools, leases and sockets are the test's alone, and clients reach
it through ``uri`` (qemu:///system with the test's socket). Its qemu.conf runs qemu as root
(the box exports / over 9p), with no cgroups (only test-owned cgroups may be made here) and no
virtlogd. The network is NAT on a /24 no route of the host uses, with a bridge of the test's name.
What libvirt adds to the host's iptables (its LIBVIRT_* chains, which outlive the network) is
removed at the end when it was not there before.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

#: the daemon's trees, each replaced by a directory of the test inside its namespace
BOUND = ("/etc/libvirt", "/var/lib/libvirt", "/var/log/libvirt", "/var/cache/libvirt", "/run/libvirt")
QEMU_CONF = """
# the test's libvirtd (tests/vm/libvirt_host.py)
user = "root"
group = "root"
dynamic_ownership = 0
cgroup_controllers = [ ]
stdio_handler = "file"
security_driver = "none"
namespaces = [ ]
"""
IPTABLES_TABLES = ("filter", "nat", "mangle")


@dataclass(frozen=True)
class Libvirt:
    """The running test libvirtd: its URI and its network."""

    root: Path
    uri: str
    network: str
    bridge: str
    subnet: ipaddress.IPv4Network

    def virsh(self, *args: str, check: bool = True, timeout: float = 120) -> str:
        p = subprocess.run(["virsh", "-c", self.uri, *args], capture_output=True, text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise RuntimeError(f"virsh {' '.join(args)}: {p.stderr.strip()}")
        return p.stdout


def free_subnet(used: list[ipaddress.IPv4Network], seed: int) -> ipaddress.IPv4Network:
    """A 192.168.x.0/24 that overlaps none of ``used``, starting from a seed (a pid) so that
    two runs side by side pick different ones."""
    for i in range(200):
        net = ipaddress.IPv4Network(f"192.168.{(seed + i) % 200 + 40}.0/24")
        if not any(net.overlaps(u) for u in used):
            return net
    raise RuntimeError("no free 192.168.x.0/24 for the test network")


def host_routes() -> list[ipaddress.IPv4Network]:
    out = subprocess.run(["ip", "-4", "route", "show", "table", "all"], capture_output=True, text=True).stdout
    nets = []
    for line in out.splitlines():
        word = line.split()[0] if line.split() else ""
        if word in ("default", "broadcast", "local", "unreachable") or not word[:1].isdigit():
            continue
        try:
            nets.append(ipaddress.IPv4Network(word, strict=False))
        except ValueError:
            pass
    return nets


def network_xml(name: str, bridge: str, subnet: ipaddress.IPv4Network) -> str:
    gw, first, last = subnet[1], subnet[2], subnet[-2]
    return f"""<network>
  <name>{name}</name>
  <forward mode='nat'/>
  <bridge name='{bridge}' stp='off' delay='0'/>
  <ip address='{gw}' netmask='{subnet.netmask}'>
    <dhcp><range start='{first}' end='{last}'/></dhcp>
  </ip>
</network>
"""


def libvirt_chains() -> set[tuple[str, str]]:
    """(table, chain) of every LIBVIRT_* chain in the host's iptables."""
    found = set()
    for t in IPTABLES_TABLES:
        out = subprocess.run(["iptables", "-w", "-t", t, "-S"], capture_output=True, text=True).stdout
        found |= {(t, ln.split()[1]) for ln in out.splitlines() if ln.startswith("-N LIBVIRT_")}
    return found


def remove_chains(chains: set[tuple[str, str]]) -> None:
    """Drop the jumps into ``chains``, then the chains themselves."""
    for t in {t for t, _ in chains}:
        names = {c for tt, c in chains if tt == t}
        out = subprocess.run(["iptables", "-w", "-t", t, "-S"], capture_output=True, text=True).stdout
        for ln in out.splitlines():
            parts = ln.split()
            if parts[:1] == ["-A"] and parts[1] not in names and "-j" in parts and parts[parts.index("-j") + 1] in names:
                subprocess.run(["iptables", "-w", "-t", t, "-D", *parts[1:]], capture_output=True)
        for c in names:
            subprocess.run(["iptables", "-w", "-t", t, "-F", c], capture_output=True)
        for c in names:
            subprocess.run(["iptables", "-w", "-t", t, "-X", c], capture_output=True)


def _prepare(root: Path) -> None:
    for d in BOUND:
        (root / d.strip("/").replace("/", "_")).mkdir(parents=True, exist_ok=True)
    etc = root / "etc_libvirt"
    shutil.rmtree(etc)
    shutil.copytree("/etc/libvirt", etc, symlinks=True)
    # the packaged default network (192.168.122.0/24, virbr0) is not the test's
    for xml in (etc / "qemu" / "networks").glob("**/*.xml"):
        xml.unlink()
    with open(etc / "qemu.conf", "a") as conf:
        conf.write(QEMU_CONF)


def _start_script(root: Path) -> str:
    binds = "\n".join(f"mkdir -p {d} && mount --bind {root / d.strip('/').replace('/', '_')} {d}" for d in BOUND)
    return f"set -e\nmount --make-rprivate /\n{binds}\nexec /usr/sbin/libvirtd\n"


@contextmanager
def private_libvirtd(root: Path, prefix: str) -> Iterator[Libvirt]:
    """Start libvirtd and a NAT network of the test's own; on exit destroy every domain and
    network it has, stop it, and leave the host's iptables and /run as they were."""
    root.mkdir(parents=True, exist_ok=True)
    _prepare(root)
    chains_before = libvirt_chains()
    run_created = not Path("/run/libvirt").exists()
    sock = root / "run_libvirt" / "libvirt-sock"
    uri = f"qemu:///system?socket={sock}"
    log = open(root / "libvirtd.log", "ab")
    proc = subprocess.Popen(["unshare", "-m", "bash", "-c", _start_script(root)], stdin=subprocess.DEVNULL,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while subprocess.run(["virsh", "-c", uri, "version"], capture_output=True).returncode != 0:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"libvirtd did not answer at {sock}: {(root / 'libvirtd.log').read_text()[-2000:]}")
            time.sleep(0.5)
        subnet = free_subnet(host_routes(), os.getpid())
        bridge = f"{prefix[:8]}{os.getpid() % 10000}"[:15]
        lv = Libvirt(root, uri, f"{prefix}-net", bridge, subnet)
        (root / "network.xml").write_text(network_xml(lv.network, bridge, subnet))
        lv.virsh("net-create", str(root / "network.xml"))
        yield lv
    finally:
        _teardown(uri, proc)
        log.close()
        remove_chains(libvirt_chains() - chains_before)
        if run_created:
            shutil.rmtree("/run/libvirt", ignore_errors=True)


def _teardown(uri: str, proc: subprocess.Popen[bytes]) -> None:
    def virsh(*a: str) -> str:
        return subprocess.run(["virsh", "-c", uri, *a], capture_output=True, text=True, timeout=120).stdout

    if proc.poll() is None:
        for dom in virsh("list", "--all", "--name").split():
            virsh("destroy", dom)
            virsh("undefine", dom, "--nvram", "--remove-all-storage")
        for net in virsh("net-list", "--all", "--name").split():
            virsh("net-destroy", net)
            virsh("net-undefine", net)
        for pool in virsh("pool-list", "--all", "--name").split():
            for vol in virsh("vol-list", pool).splitlines()[2:]:
                if vol.split():
                    virsh("vol-delete", vol.split()[0], "--pool", pool)
            virsh("pool-destroy", pool)
            virsh("pool-undefine", pool)
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
