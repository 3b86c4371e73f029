"""Two real ``hwagent run`` processes on one machine: one daemon per cgroup subtree and per CPU.

A second daemon with its own root dir and port used to start beside the first,
share the workload subtree and every CPU, and only log "foreign pod cgroups left".
Now it refuses (exit 2, the first's pid and root dir named) unless the two are
configured with disjoint subtrees and disjoint CPUs; the claim goes when its
daemon goes, kill -9 included (flock).

The daemons run no components (nothing here touches a cgroup): the claim is
taken at start whatever the components are. Each test has its lock dir, shared
by its daemons, so that other suites' daemons on this machine are not in the way.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
import uuid
from pathlib import Path

import pytest

from agent.daemon.daemon import EXIT_CONFIG
from tests.integration.daemon.test_lifecycle import START_TIMEOUT_S, Daemon

#: the fake components' module: none is started, the claim does not depend on them
NO_COMPONENTS: tuple[str, ...] = ()


@pytest.fixture
def daemons(tmp_path):
    started: list[Daemon] = []
    locks = tmp_path / "locks"

    def start(name: str, config: str = "") -> Daemon:
        cfg = tmp_path / f"{name}.toml"
        cfg.write_text(config)
        d = Daemon(tmp_path / name, "--config", str(cfg), "--lock-dir", str(locks), components=NO_COMPONENTS)
        started.append(d)
        return d

    start.locks = locks  # type: ignore[attr-defined]
    yield start
    for d in started:
        d.cleanup()


def ready(d: Daemon) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while 'msg="hwagent ready"' not in d.log():
        if d.proc.poll() is not None:
            raise AssertionError(f"daemon exited ({d.proc.returncode}):\n{d.log()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"not ready within {START_TIMEOUT_S} s:\n{d.log()}")
        time.sleep(0.05)


def refused(d: Daemon) -> str:
    """The refusing daemon's one error line (it exits 2, a configuration matter: systemd does not retry)."""
    assert d.proc.wait(START_TIMEOUT_S) == EXIT_CONFIG, d.log()
    (line,) = [x for x in d.log().splitlines() if "level=error" in x]
    return line


def subtree_config(subtree: str, reserved: str | None = None) -> str:
    cpu = f'[cpu]\nreserved_cpu_list = "{reserved}"\n' if reserved is not None else ""
    return f'[cgroups]\nworkload_roots = ["{subtree}"]\nruntime_subtree = "{subtree}"\n{cpu}'


def claims(locks: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(locks.glob("*.lock")) if p.name != ".lock"]


def test_a_second_daemon_on_the_same_subtree_refuses_naming_the_first(daemons):
    first = daemons("first")
    ready(first)
    held = claims(daemons.locks)
    assert held and {c["pid"] for c in held} == {first.proc.pid}
    assert {c["root_dir"] for c in held} == {str(first.root)}
    assert "/hwagent.slice" in held[0]["subtrees"] and held[0]["cpus"]

    second = daemons("second")  # another root dir and port, the same (default) subtrees
    line = refused(second)
    assert f"pid {first.proc.pid}" in line and f"root dir {first.root}" in line, line
    assert "cgroup subtree" in line and "workload_roots" in line, line
    assert first.proc.poll() is None  # the first runs on, its claim untouched
    assert claims(daemons.locks) == held
    assert first.stop() == 0


@pytest.mark.parametrize("case", ["nested subtree", "overlapping cpus"])
def test_overlap_is_refused(daemons, case):
    name = f"/hwagent-test-{uuid.uuid4().hex[:8]}"
    first = daemons("first", subtree_config(name))
    ready(first)
    if case == "nested subtree":
        second = daemons("second", subtree_config(f"{name}/inner"))
        want = f"cgroup subtree {name} (this daemon's {name}/inner overlaps it)"
    else:
        second = daemons("second", subtree_config(name + "-other"))  # disjoint subtree, every CPU again
        want = "already manages CPUs"
    line = refused(second)
    assert want in line and f"pid {first.proc.pid}" in line and f"root dir {first.root}" in line, line
    assert first.stop() == 0


def test_disjoint_subtrees_and_cpus_run_side_by_side(daemons):
    if (os.cpu_count() or 1) < 2:
        pytest.skip("two daemons with disjoint CPUs need two CPUs")
    tag = uuid.uuid4().hex[:8]
    a = daemons("a", subtree_config(f"/hwagent-test-{tag}-a", reserved="1"))  # manages CPU 0
    b = daemons("b", subtree_config(f"/hwagent-test-{tag}-b", reserved="0"))  # manages CPU 1
    ready(a)
    ready(b)
    held = {c["pid"]: c for c in claims(daemons.locks)}
    assert held[a.proc.pid]["cpus"] == "0" and held[b.proc.pid]["cpus"] == "1", held
    assert a.stop() == 0 and b.stop() == 0
    assert claims(daemons.locks) == []  # a clean stop removes its claim


def test_the_claim_goes_with_its_daemon_on_exit_and_on_kill_9(daemons):
    first = daemons("first")
    ready(first)
    assert first.stop(signal.SIGTERM) == 0
    second = daemons("second")
    ready(second)  # the first's claim went with it
    second.proc.send_signal(signal.SIGKILL)
    second.proc.wait(START_TIMEOUT_S)
    # kill -9 leaves the files; the kernel dropped their flock, so they are stale and taken over
    assert {c["pid"] for c in claims(daemons.locks)} == {second.proc.pid}
    third = daemons("third")
    ready(third)
    assert {c["pid"] for c in claims(daemons.locks)} == {third.proc.pid}
    assert re.search(r'msg=claimed lock_dir=\S+ subtrees=\S*/hwagent\.slice', third.log()), third.log()
    assert third.stop() == 0
