"""A test bridge with one network namespace per Slurm node, always removed again.

Each node gets its own network namespace (``ip netns add``), a veth pair with one end
on a test-made bridge and the other as the node's ``eth0`` with its own address, and
``lo`` up. The UTS namespace (its own host name) is made when the node's slurmd
starts (``NetNode.wrap``). The bridge holds the controller's address in this
namespace. Names carry this process's id, so two test runs do not collide, and
everything made is deleted on exit (deleting a namespace deletes its veth end).
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["NetNode", "Network", "node_network"]


def _ip(*args: str) -> None:
    r = subprocess.run(["ip", *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {r.stderr.strip()}")


@dataclass(frozen=True)
class NetNode:
    name: str
    addr: str
    netns: str

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` run in this node's network namespace and a new UTS namespace named after the
        node. nsenter (not ``ip netns exec``, which mounts a fresh /sys without /sys/fs/cgroup,
        where slurmd's cgroup plugin looks) and unshare exec in turn, so the pid is argv's."""
        inner = f"hostname {shlex.quote(self.name)} && exec {shlex.join(argv)}"
        return ["nsenter", f"--net=/run/netns/{self.netns}", "unshare", "--uts", "--", "sh", "-c", inner]


@dataclass(frozen=True)
class Network:
    bridge: str
    controller_addr: str
    nodes: tuple[NetNode, ...]


@contextmanager
def node_network(names: list[str], subnet: str = "10.213") -> Iterator[Network]:
    """A bridge with ``<subnet>.<k>.1`` and a namespace per node at ``.11``, ``.12``, ..."""
    tag = f"{os.getpid() % 100000}"
    k = os.getpid() % 200 + 20
    bridge = f"hwsb{tag}"
    made_ns: list[str] = []
    made_bridge = False
    try:
        _ip("link", "add", bridge, "type", "bridge")
        made_bridge = True
        _ip("addr", "add", f"{subnet}.{k}.1/24", "dev", bridge)
        _ip("link", "set", bridge, "up")
        nodes = []
        for i, name in enumerate(names, start=1):
            ns = f"hws{tag}-{name}"
            _ip("netns", "add", ns)
            made_ns.append(ns)
            veth = f"hwsv{tag}n{i}"
            _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("link", "set", veth, "master", bridge, "up")
            addr = f"{subnet}.{k}.{10 + i}"
            _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            nodes.append(NetNode(name, addr, ns))
        yield Network(bridge, f"{subnet}.{k}.1", tuple(nodes))
    finally:
        for ns in made_ns:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        if made_bridge:
            subprocess.run(["ip", "link", "del", bridge], capture_output=True)
