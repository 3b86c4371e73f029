"""Small helpers the VM tier's cgroup v2 guest tests share (tests/vm/guest/test_nri.py, test_slurm.py).

Why a module of its own: the host's peers (containerd, slurmd) are driven by helpers written
for this machine's hybrid v1 layout (tests/integration/nri, tests/integration/slurm); in the
v2 guest only the cgroup side differs, and that difference is all that lives here: where a
process's v2 cgroup is, what the kernel says of it, and waits scaled by the guest's measured
slowdown (tests/vm/calibrate.py) instead of the host's fixed budgets.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from agent.cpuset import CPUSet
from tests.vm import calibrate
from tests.vm.topologies import TOPOLOGIES

__all__ = ["CGROUP2", "SLOWDOWN", "budget", "is_v2_guest", "keep_artifacts", "skip_unless_named_here", "v2_cgroup_of", "v2_readback",
           "wait_until"]

CGROUP2 = Path("/sys/fs/cgroup")
#: how much slower this guest runs than the host that booted it, measured once per module import
SLOWDOWN = calibrate.slowdown()


def budget(host_seconds: float) -> float:
    """A host-side wait scaled to this guest (the ratio times calibrate.SAFETY)."""
    return calibrate.budget(host_seconds, SLOWDOWN)


def is_v2_guest() -> bool:
    """Booted by the tier with the unified hierarchy at /sys/fs/cgroup."""
    return os.environ.get("HWAGENT_VM_CGROUP") == "v2" and (CGROUP2 / "cgroup.controllers").is_file()


def skip_unless_named_here(module_file: str) -> str | None:
    """Why a peer module does not run in this guest, or None: it runs only in a guest whose
    topology names it in ``guest_tests`` (v2peers), not in every guest that collects all files
    (numa2's suite has no room for ten more minutes), and only on cgroup v2."""
    topo = TOPOLOGIES.get(os.environ.get("HWAGENT_VM_TOPOLOGY", ""))
    name = Path(module_file).name
    if topo is None or name not in topo.guest_tests:
        return f"{name} runs in the guest that names it (tests/vm/topologies.py: v2peers)"
    if not is_v2_guest():
        return f"{name} needs cgroup v2 at /sys/fs/cgroup (this guest: {os.environ.get('HWAGENT_VM_CGROUP')})"
    return None


def wait_until(what: str, check: Callable[[], Any], host_seconds: float,
               alive: Callable[[], str | None] | None = None, show: Callable[[], Any] | None = None) -> Any:
    """``check()``'s first truthy value within ``budget(host_seconds)``; ``alive()`` returning a
    message (a daemon died) fails at once with it instead of waiting the budget out; ``show()``
    is what the failure says was there instead."""
    limit = budget(host_seconds)
    deadline = time.monotonic() + limit
    while True:
        got = check()
        if got:
            return got
        if alive is not None and (dead := alive()):
            raise AssertionError(f"{what}: {dead}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {limit:.0f} s ({host_seconds} s on the host x "
                                 f"{SLOWDOWN:.1f} slowdown x {calibrate.SAFETY})"
                                 + ("" if show is None else f"; instead: {show()}"))
        time.sleep(0.1)


def keep_artifacts(name: str, files: Iterable[Path]) -> None:
    """Copy the peers' logs to the tier's /out/<name>/ (the host keeps them beside serial.log): a
    guest run takes minutes, and a failure must be readable without another one."""
    out = os.environ.get("HWAGENT_VM_OUT")
    if not out or not Path(out).is_dir():
        return
    dest = Path(out) / name
    dest.mkdir(parents=True, exist_ok=True)
    for f in files:
        if f.is_file():
            shutil.copyfile(f, dest / f"{f.parent.name}-{f.name}")


def v2_cgroup_of(pid: int) -> Path:
    """The process's cgroup directory in the unified hierarchy (its ``0::`` line)."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        if line.startswith("0::"):
            return CGROUP2 / line[3:].lstrip("/")
    raise AssertionError(f"process {pid} has no cgroup v2 line in /proc/{pid}/cgroup")


def _read(path: Path) -> str:
    return path.read_text().strip()


def v2_readback(pid: int) -> dict[str, Any]:
    """What the kernel says of a process's placement on cgroup v2: its cgroup's cpuset (asked and
    effective), cpu.idle and cpu.weight, and the affinity in /proc/<pid>/status."""
    cg = v2_cgroup_of(pid)
    status = dict(ln.split(":\t", 1) for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if ":\t" in ln)
    asked_mems = _read(cg / "cpuset.mems")
    return {
        "cgroup": cg,
        "cpus": CPUSet.parse(_read(cg / "cpuset.cpus")),
        "cpus_effective": CPUSet.parse(_read(cg / "cpuset.cpus.effective")),
        "mems": CPUSet.parse(asked_mems) if asked_mems else None,
        "mems_effective": CPUSet.parse(_read(cg / "cpuset.mems.effective")),
        "idle": int(_read(cg / "cpu.idle")),
        "weight": int(_read(cg / "cpu.weight")),
        "cpus_allowed": CPUSet.parse(status["Cpus_allowed_list"].strip()),
        "mems_allowed": CPUSet.parse(status["Mems_allowed_list"].strip()),
    }
