"""Memory and hugepages per NUMA node on a real 2-node cgroup v2 kernel (numa2), end to end.

What only the guest shows: the host has one NUMA node and no cgroup v2 controllers. 2 MiB
pages are reserved on each node before the daemon starts (``nr_hugepages`` per node, as at
boot): 32 MiB on node 0, 128 MiB on node 1; a `hwagent run` daemon (single-numa-node, the
memory manager on) admits `hwagent launch --qos dedicated --numa-binding --memory 256Mi
--hugepages-2Mi 64Mi`, which only node 1 can hold (so nothing passes by landing on node 0, where CPU 0 and
the daemon's own memory are). Then, from inside the workload (``/proc/self/numa_maps``): its
ordinary memory and its hugepages come from node 1, and its hugetlb limit stops it at the requested size (one page more is
never handed out); from outside: `hwagent ps`, pod-resources and `hwagent memory` name the
same node and sizes, and its cgroup holds ``cpuset.mems``, ``memory.max`` and
``hugetlb.2MB.max``. Everything waits with generous budgets (TCG is slow).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cgroup_support import rmdir_cgroup_tree
from tests.vm.guest.test_workloads import (
    CGROUP_ROOT,
    CLI_TIMEOUT_S,
    HWAGENT,
    START_BUDGET_S,
    STEP_BUDGET_S,
    parse_list,
    wait_for,
)
from tests.vm.topologies import GuestTopology

pytestmark = pytest.mark.timeout(1500)

MI = 1 << 20
PAGE = 2 * MI
#: 2 MiB pages reserved per node: node 0 has fewer than the pod asks for, node 1 twice as many
PAGES_PER_NODE = {0: 16, 1: 64}
WANT_PAGES = 32  # the pod asks for 64 MiB
MEMORY = 256 * MI
SUBTREE = "/hwagent-vmmem.slice"
NODE_DIR = Path("/sys/devices/system/node")

#: runs in the pod: touches its memory and pages, records numa_maps, then tries one page past its limit
PROBE = r"""
import mmap, os, re, sys
out, want, memory = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
PAGE, HUGETLB = 2 << 20, 0x40000  # MAP_HUGETLB (x86)
def numa_maps(pred):
    rows = []
    for line in open("/proc/self/numa_maps"):
        if pred(line):
            rows.append({k: int(v) for k, v in re.findall(r"\bN(\d+)=(\d+)", line)})
    return rows
def write(name, text):
    with open(f"{out}/{name}.tmp", "w") as f:
        f.write(text)
    os.rename(f"{out}/{name}.tmp", f"{out}/{name}")
pages = mmap.mmap(-1, want, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | HUGETLB)
for i in range(0, want, PAGE):
    pages[i] = 1
anon = mmap.mmap(-1, memory // 2, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
for i in range(0, memory // 2, 4096):
    anon[i] = 1
huge = numa_maps(lambda l: "huge" in l and "dirty=" in l)
big = numa_maps(lambda l: "huge" not in l and "anon=" in l and int(re.search(r"anon=(\d+)", l).group(1)) >= memory // 8192)
write("numa_maps", __import__("json").dumps({"huge": huge, "anon": big, "mems": open("/proc/self/status").read()}))
pages.close()
r, w = os.pipe()
pid = os.fork()
if pid == 0:  # one page more than the limit: the cgroup must stop it (SIGBUS on the fault, or ENOMEM at mmap)
    os.close(r)
    try:
        more = mmap.mmap(-1, want + PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | HUGETLB)
    except OSError as e:
        os.write(w, f"mmap {e.errno}\n".encode()); os._exit(0)
    for i in range(0, want + PAGE, PAGE):
        more[i] = 1
        os.write(w, b"page\n")
    os._exit(0)
os.close(w)
got = b""
while True:
    chunk = os.read(r, 4096)
    if not chunk:
        break
    got += chunk
_, status = os.waitpid(pid, 0)
write("limit", __import__("json").dumps({"touched": got.count(b"page\n"), "mmap": got.decode().startswith("mmap"),
                                          "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0}))
os.execvp("sleep", ["sleep", "100000"])
"""


def _pool(node: int) -> Path:
    return NODE_DIR / f"node{node}" / "hugepages" / "hugepages-2048kB" / "nr_hugepages"


@pytest.fixture
def reserved_pages(topo: GuestTopology, cgroup_layout: str) -> Iterator[list[int]]:
    """2 MiB pages on every node, reserved before the daemon reads the machine."""
    if topo.name != "numa2":
        pytest.skip("the memory proof runs once, on numa2 (2 nodes, cgroup v2)")
    if cgroup_layout != "v2":
        pytest.skip(f"needs cgroup v2, this guest has {cgroup_layout}")
    nodes = sorted(int(p.name[4:]) for p in NODE_DIR.glob("node[0-9]*"))
    before = {n: _pool(n).read_text().strip() for n in nodes}
    try:
        for n in nodes:
            _pool(n).write_text(str(PAGES_PER_NODE[n]))
        got = {n: int(_pool(n).read_text()) for n in nodes}
        assert got == PAGES_PER_NODE, f"the guest kernel reserved {got} 2 MiB pages per node"
        yield nodes
    finally:
        for n, v in before.items():
            _pool(n).write_text(v)


@pytest.fixture
def daemon(reserved_pages: list[int]) -> Iterator[dict[str, Any]]:
    base = Path(tempfile.mkdtemp(prefix="hwvmmem", dir="/tmp"))  # short: AF_UNIX paths
    root, config, log = base / "root", base / "hwagent.toml", base / "daemon.log"
    config.write_text(f"""
[daemon]
root_dir = "{root}"
mode = "standalone"
metrics_address = "127.0.0.1:0"

[pressure]
enabled = false

[topology_manager]
policy = "single-numa-node"

[devices]
default_rules = false

[runtime]
cgroup_subtree = "{SUBTREE}"
""")
    with open(log, "wb") as f:
        proc = subprocess.Popen([str(HWAGENT), "run", "--config", str(config)], stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)

    def tail() -> str:
        return "\n".join(log.read_text(errors="replace").splitlines()[-40:])

    def alive() -> None:
        if proc.poll() is not None:
            raise AssertionError(f"daemon exited ({proc.returncode})\n{tail()}")

    d = {"base": base, "root": root, "proc": proc, "tail": tail, "alive": alive}
    try:
        wait_for(lambda: alive() or b"hwagent ready" in log.read_bytes(), "daemon ready", START_BUDGET_S)
        yield d
    finally:
        try:
            cli(d, "rm", "hpage")
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(STEP_BUDGET_S)
            except subprocess.TimeoutExpired:
                proc.kill()
            cg = CGROUP_ROOT / SUBTREE.lstrip("/")
            if cg.exists():
                try:
                    (cg / "cgroup.kill").write_text("1")
                except OSError:
                    pass
                rmdir_cgroup_tree(cg)
            out = os.environ.get("HWAGENT_VM_OUT")
            if out:
                shutil.copy(log, Path(out) / "memory-daemon.log")
            shutil.rmtree(base, ignore_errors=True)


def cli(d: dict[str, Any], *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(HWAGENT), argv[0], "--root-dir", str(d["root"]), *argv[1:]], capture_output=True,
                          text=True, timeout=CLI_TIMEOUT_S)


def test_memory_and_hugepages_come_from_the_pods_node_and_the_limit_holds(daemon: dict[str, Any]) -> None:
    out = daemon["base"] / "out"
    out.mkdir()
    script = daemon["base"] / "probe.py"
    script.write_text(PROBE)
    p = cli(daemon, "launch", "--name", "hpage", "--cpus", "1", "--qos", "dedicated", "--numa-binding",
            "--memory", "256Mi", "--hugepages-2Mi", "64Mi", "--",
            sys.executable, "-S", str(script), str(out), str(WANT_PAGES * PAGE), str(MEMORY))
    assert p.returncode == 0, f"launch: rc {p.returncode}\n{p.stdout}\n{p.stderr}\n{daemon['tail']()}"

    def pod() -> dict[str, Any] | None:
        daemon["alive"]()
        q = cli(daemon, "describe", "hpage", "--format", "json")
        assert q.returncode == 0, q.stderr
        got = json.loads(q.stdout)
        assert got["phase"] not in ("Failed", "Succeeded"), f"hpage ended: {got}\n{daemon['tail']()}"
        return got if got["phase"] == "Running" and (out / "limit").exists() else None

    got = wait_for(pod, "hpage running with its probe's results", STEP_BUDGET_S)
    (c,) = got["containers"]
    (node,) = c["numa_affinity"]
    assert node == 1 and c["mems"] == [node], c  # node 0's 16 pages cannot hold 32

    # describe: the memory manager's blocks, on the pod's node
    assert sorted((b["resource"], b["size"], b["numa_nodes"]) for b in c["memory"]) == [
        ("hugepages-2Mi", WANT_PAGES * PAGE, [node]), ("memory", MEMORY, [node])], c

    # inside the workload: its hugepages and its anonymous memory are on that node only
    maps = json.loads((out / "numa_maps").read_text())
    assert maps["huge"] and all(set(r) == {str(node)} for r in maps["huge"]), maps["huge"]
    assert sum(r[str(node)] for r in maps["huge"]) == WANT_PAGES, maps["huge"]
    assert maps["anon"] and all(set(r) == {str(node)} for r in maps["anon"]), maps["anon"]
    mems = dict(ln.split(":\t", 1) for ln in maps["mems"].splitlines() if ":\t" in ln)
    assert parse_list(mems["Mems_allowed_list"]) == {node}, mems["Mems_allowed_list"]

    # one page past the limit: never handed out (the fault is SIGBUS, or the mmap is refused)
    limit = json.loads((out / "limit").read_text())
    print(f"node {node}; hugepages per numa_maps {maps['huge']}; anon {maps['anon']}; past the limit {limit}")
    assert limit["mmap"] or (limit["signal"] == signal.SIGBUS and limit["touched"] == WANT_PAGES), limit

    # its cgroup v2 holds the placement and the limits
    cg = cgroup_dir_of_pid(c["pid"])
    assert parse_list((cg / "cpuset.mems").read_text()) == {node}
    assert int((cg / "memory.max").read_text()) == MEMORY
    assert int((cg / "hugetlb.2MB.max").read_text()) == WANT_PAGES * PAGE

    # hwagent memory and pod-resources name the same node and sizes
    m = cli(daemon, "memory", "--format", "json")
    assert m.returncode == 0, m.stderr
    view = json.loads(m.stdout)
    (row,) = [r for r in view["containers"] if r["pod"] == "hpage"]
    assert sorted((b["resource"], b["numa_nodes"]) for b in row["blocks"]) == [("hugepages-2Mi", [node]),
                                                                                ("memory", [node])]
    acc = {n["node"]: n["resources"] for n in view["nodes"]}
    assert acc[node]["hugepages-2Mi"]["allocated"] == WANT_PAGES * PAGE
    assert {n: acc[n]["hugepages-2Mi"]["total"] for n in acc} == {n: v * PAGE for n, v in PAGES_PER_NODE.items()}
    listed = pod_resources_memory(daemon)
    assert listed == {("hugepages-2Mi", WANT_PAGES * PAGE, (node,)), ("memory", MEMORY, (node,))}


def cgroup_dir_of_pid(pid: int) -> Path:
    (line,) = [ln for ln in Path(f"/proc/{pid}/cgroup").read_text().splitlines() if ln.startswith("0::")]
    path = CGROUP_ROOT / line[3:].lstrip("/")
    assert str(path).startswith(str(CGROUP_ROOT / SUBTREE.lstrip("/")) + "/"), path
    return path


def pod_resources_memory(d: dict[str, Any]) -> set[tuple[str, int, tuple[int, ...]]]:
    import grpc

    from agent.api.podresources.v1 import api_pb2 as pr
    from agent.api.podresources.v1 import api_pb2_grpc as pr_grpc

    with grpc.insecure_channel(f"unix://{d['root'] / 'pod-resources' / 'pod-resources.sock'}") as ch:
        res = pr_grpc.PodResourcesListerStub(ch).List(pr.ListPodResourcesRequest(), timeout=60)
    return {(m.memory_type, m.size, tuple(n.ID for n in m.topology.nodes))
            for p in res.pod_resources if p.name == "hpage" for c in p.containers for m in c.memory}

