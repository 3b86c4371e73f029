"""The advisor's memory.high squeeze of reclaimed pods on a real cgroup v2 kernel (numa2), end to end.

What only the guest shows: this host's memory controller is on cgroup v1, which has no
memory.high (there the option is inert). A `hwagent run` daemon with ``[advisor] enabled``
and ``memory_high`` runs two pods in a test-owned subtree:
a **reclaimed** pod that allocated ``HOLD`` MiB (anonymous, touched) and then sits on it, and a
**shared** pod limited to ``LIMIT`` MiB (``--memory``) that touches a working set of ``CHURN``
MiB over and over: it thrashes under its own limit, its task stalls on memory and the node's
``/proc/pressure/memory`` rises, as on a node short of memory (the guest has 4 GiB, too much
to fill under TCG). The reclaimed pod is in another cgroup with no limit, so nothing but the
advisor's ``memory.high`` takes its memory. Swap is a zram device made here (the guest has no
disk): anonymous pages can then be reclaimed, as transparent memory offloading needs.

Asserted: the advisor lowers the reclaimed pod's ``memory.high`` (decisions.jsonl says
``lower`` with the PSI that caused it) and its ``memory.current`` falls below what it held,
no task of either pod is OOM-killed (``memory.events``: ``oom_kill 0``, both still running);
then, once the shared pod stops churning and the pressure is gone, ``memory.high`` is raised
and lifted back to ``max`` (its own value), and `hwagent explain` names the pod's lowering.
Everything waits on events with generous budgets (TCG is slow).
"""

from __future__ import annotations

import json
import os
import re
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
from tests.vm.guest.test_workloads import CGROUP_ROOT, CLI_TIMEOUT_S, HWAGENT, START_BUDGET_S, STEP_BUDGET_S, wait_for
from tests.vm.topologies import GuestTopology

pytestmark = pytest.mark.timeout(1500)

MI = 1 << 20
HOLD = 240  # MiB the reclaimed pod holds
CHURN = 150  # MiB the shared pod touches over and over
LIMIT = 100  # MiB: the shared pod's own memory limit, under its working set
SUBTREE = "/hwagent-vmmh.slice"
#: where the runtime may put reclaimed pods: a sibling of its subtree (agent/cgroups/config.py)
RECLAIMED_SUBTREE = "/hwagent-vmmh-reclaimed.slice"
ZRAM = Path("/sys/block/zram0")

#: the reclaimed pod: allocate HOLD MiB, touch every page, say so, then sit on it
HOLDER = r"""
import os, sys, time
out, n = sys.argv[1], int(sys.argv[2]) << 20
buf = bytearray(n)
for i in range(0, n, 4096):
    buf[i] = 1
with open(out + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.rename(out + ".tmp", out)
while True:
    time.sleep(3600)
"""

#: the shared pod: touch a working set of CHURN MiB (over its limit) until the stop file appears,
#: then free it and idle
CHURNER = r"""
import os, sys, time
out, stop, n = sys.argv[1], sys.argv[2], int(sys.argv[3]) << 20
with open(out + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.rename(out + ".tmp", out)
b = bytearray(n)
k = 0
while not os.path.exists(stop):
    k = (k + 1) & 0xff
    for i in range(0, n, 4096):
        b[i] = k
del b
while True:
    time.sleep(3600)
"""


def _zram_swap() -> str | None:
    """A 1 GiB zram swap device; None when made, else why not."""
    if subprocess.run(["modprobe", "zram"], capture_output=True).returncode != 0 or not ZRAM.exists():
        return "no zram module in this guest"
    (ZRAM / "disksize").write_text(str(1 << 30))
    for cmd in (["mkswap", "/dev/zram0"], ["swapon", "/dev/zram0"]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            return f"{' '.join(cmd)}: {r.stderr.strip()}"
    return None


@pytest.fixture
def swap(topo: GuestTopology, cgroup_layout: str) -> Iterator[None]:
    if topo.name != "numa2":
        pytest.skip("the memory.high proof runs once, on numa2 (cgroup v2)")
    if cgroup_layout != "v2":
        pytest.skip(f"needs cgroup v2, this guest has {cgroup_layout}")
    if not Path("/proc/pressure/memory").exists():
        pytest.skip("the guest kernel has no memory PSI")
    why = _zram_swap()
    assert why is None, why
    try:
        yield
    finally:
        subprocess.run(["swapoff", "/dev/zram0"], capture_output=True)
        (ZRAM / "reset").write_text("1")


@pytest.fixture
def daemon(swap: None) -> Iterator[dict[str, Any]]:
    base = Path(tempfile.mkdtemp(prefix="hwvmmh", dir="/tmp"))  # short: AF_UNIX paths
    root, config, log = base / "root", base / "hwagent.toml", base / "daemon.log"
    config.write_text(f"""
[daemon]
root_dir = "{root}"
mode = "standalone"
metrics_address = "127.0.0.1:0"

[pressure]
enabled = false

[devices]
default_rules = false

[runtime]
cgroup_subtree = "{SUBTREE}"

[advisor]
enabled = true
hold_record_s = 0.0
memory_high = true
memory_high_psi = 0.01
memory_high_confirm = 2
memory_high_relax_after = 4
memory_high_lower_cooldown_s = 2.0
memory_high_raise_cooldown_s = 2.0
memory_high_factor = 0.7
memory_high_floor_bytes = {32 * MI}
""")
    with open(log, "wb") as f:
        proc = subprocess.Popen([str(HWAGENT), "run", "--config", str(config)], stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)

    def tail() -> str:
        return "\n".join(log.read_text(errors="replace").splitlines()[-40:])

    def alive() -> None:
        if proc.poll() is not None:
            raise AssertionError(f"daemon exited ({proc.returncode})\n{tail()}")

    d = {"base": base, "root": root, "proc": proc, "tail": tail, "alive": alive, "log": log}
    try:
        wait_for(lambda: alive() or b"hwagent ready" in log.read_bytes(), "daemon ready", START_BUDGET_S)
        yield d
    finally:
        try:
            cli(d, "rm", "churn", "holder")
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(STEP_BUDGET_S)
            except subprocess.TimeoutExpired:
                proc.kill()
            for cg in (CGROUP_ROOT / SUBTREE.lstrip("/"), CGROUP_ROOT / RECLAIMED_SUBTREE.lstrip("/")):
                if cg.exists():
                    try:
                        (cg / "cgroup.kill").write_text("1")
                    except OSError:
                        pass
                    rmdir_cgroup_tree(cg)
            out = os.environ.get("HWAGENT_VM_OUT")
            if out:
                shutil.copy(log, Path(out) / "memory-high-daemon.log")
                dec = root / "advisor" / "decisions.jsonl"
                if dec.exists():
                    shutil.copy(dec, Path(out) / "memory-high-decisions.jsonl")
            shutil.rmtree(base, ignore_errors=True)


def cli(d: dict[str, Any], *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(HWAGENT), argv[0], "--root-dir", str(d["root"]), *argv[1:]], capture_output=True,
                          text=True, timeout=CLI_TIMEOUT_S)


def pod_cgroup(pid: int) -> Path:
    """The pod's cgroup: the parent of the container's, where the advisor writes memory.high."""
    (line,) = [ln for ln in Path(f"/proc/{pid}/cgroup").read_text().splitlines() if ln.startswith("0::")]
    path = CGROUP_ROOT / line[3:].lstrip("/")
    assert any(str(path).startswith(str(CGROUP_ROOT / t.lstrip("/")) + "/") for t in (SUBTREE, RECLAIMED_SUBTREE)), path
    return path.parent


def read_int(p: Path) -> int:
    return int(p.read_text().strip())


def oom_kills(cg: Path) -> int:
    m = re.search(r"^oom_kill (\d+)$", (cg / "memory.events").read_text(), re.M)
    return int(m.group(1)) if m else 0


def memory_decisions(d: dict[str, Any]) -> list[dict]:
    path = d["root"] / "advisor" / "decisions.jsonl"
    if not path.exists():
        return []
    return [r["memory"] for r in map(json.loads, path.read_text().splitlines()) if isinstance(r.get("memory"), dict)]


def launch(d: dict[str, Any], name: str, qos: str, *argv: str, memory: str | None = None) -> None:
    p = cli(d, "launch", "--name", name, "--qos", qos, "--cpu-request", "100m",
            *(("--memory", memory) if memory else ()), "--", sys.executable, "-S", *argv)
    assert p.returncode == 0, f"launch {name}: rc {p.returncode}\n{p.stdout}\n{p.stderr}\n{d['tail']()}"


def test_reclaimed_pod_memory_high_lowered_under_pressure_and_lifted_after(daemon: dict[str, Any]) -> None:
    base = daemon["base"]
    (base / "holder.py").write_text(HOLDER)
    (base / "churn.py").write_text(CHURNER)
    hpid_f, cpid_f, stop = base / "holder.pid", base / "churn.pid", base / "stop"

    launch(daemon, "holder", "reclaimed", str(base / "holder.py"), str(hpid_f), str(HOLD))
    wait_for(lambda: daemon["alive"]() or hpid_f.exists(), "the reclaimed pod to hold its memory", STEP_BUDGET_S)
    hpid = int(hpid_f.read_text())
    hcg = pod_cgroup(hpid)
    held = read_int(hcg / "memory.current")
    assert held >= HOLD * MI * 0.9, f"the reclaimed pod holds {held >> 20} MiB"
    assert (hcg / "memory.high").read_text().strip() == "max"

    launch(daemon, "churn", "shared", str(base / "churn.py"), str(cpid_f), str(stop), str(CHURN),
           memory=f"{LIMIT}Mi")
    wait_for(lambda: daemon["alive"]() or cpid_f.exists(), "the shared pod to start churning", STEP_BUDGET_S)
    ccg = pod_cgroup(int(cpid_f.read_text()))

    def lowered() -> bool:
        daemon["alive"]()
        h = (hcg / "memory.high").read_text().strip()
        return h != "max" and any(m["action"] == "lower" for m in memory_decisions(daemon))

    wait_for(lowered, "the advisor to lower the reclaimed pod's memory.high", STEP_BUDGET_S)
    lowers = [m for m in memory_decisions(daemon) if m["action"] == "lower"]
    assert lowers[0]["inputs"]["psi_some"] > 0.01, lowers[0]
    assert "/" + str(hcg.relative_to(CGROUP_ROOT)) in lowers[0]["highs"], lowers[0]

    # the kernel takes the reclaimed pod's memory down to its high: memory.current falls
    wait_for(lambda: read_int(hcg / "memory.current") < held * 0.8, "the reclaimed pod's memory.current to fall",
             STEP_BUDGET_S)
    assert Path(f"/proc/{hpid}").exists(), "the reclaimed pod was killed"
    assert oom_kills(hcg) == 0 and oom_kills(ccg) == 0, ((hcg / "memory.events").read_text(),
                                                        (ccg / "memory.events").read_text())
    ex = cli(daemon, "explain", "holder")
    assert ex.returncode == 0 and "memory.high" in ex.stdout and "memory lower" in ex.stdout, ex.stdout + ex.stderr

    # the pressure ends: raised in steps, then lifted (its own value back)
    stop.write_text("")

    def lifted() -> bool:
        daemon["alive"]()
        return (hcg / "memory.high").read_text().strip() == "max"

    wait_for(lifted, "the advisor to lift the reclaimed pod's memory.high", STEP_BUDGET_S)
    acts = [m["action"] for m in memory_decisions(daemon)]
    assert "lift" in acts[acts.index("lower"):], acts
    assert Path(f"/proc/{hpid}").exists() and oom_kills(hcg) == 0 and oom_kills(ccg) == 0
    st = cli(daemon, "explain")
    assert st.returncode == 0 and "memory:" in st.stdout, st.stdout + st.stderr
