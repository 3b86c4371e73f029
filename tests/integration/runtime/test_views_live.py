"""Issue 21's measure on the live machine: a real daemon with the runtime on, real
cgroups under a test-owned subtree. After each step of a seeded sequence (admissions
of shared pods in two pools, with init containers, and of dedicated pods; removals;
kill -9 of the daemon and a start again) every running container's CPUs are one set
in ``hwagent ps --format json``, ``hwagent describe``, pod-resources ``List`` (app
containers, as the kubelet's), the cgroup's ``cpuset.cpus`` and the kernel's
``Cpus_allowed_list`` of its process.

This machine has two CPUs and one NUMA node: a dedicated pod takes one CPU out of
the shared pools (``dedicated_numa`` "auto" is exclusive-cores standalone; it is
refused when it would leave shared pods no CPU), and the shared pools move when a
pool appears or goes, when a dedicated pod comes or goes and when a container's
ramp-up ends.

Also here: a process never starts on CPUs the policy does not give it (a restarted
container after its pool moved used to start on the admission's CPUs until the
enforcer's next pass)."""

from __future__ import annotations

import json
import os
import random
import signal
import time
from pathlib import Path

import grpc
import pytest

from agent.api.podresources.v1 import api_pb2 as pr
from agent.api.podresources.v1 import api_pb2_grpc as pr_grpc
from agent.cpuset import CPUSet
from agent.rootpaths import POD_RESOURCES, POD_RESOURCES_SOCKET
from tests.integration.daemon.test_lifecycle import Daemon
from tests.cgroup_support import kill_and_remove_subtree
from tests.integration.runtime.conftest import subtree_name
from tests.integration.runtime.test_end_to_end import cli, status_field

pytestmark = [pytest.mark.timeout(300), pytest.mark.root]

BUDGET_S = 90  # two shared cores under a full suite: generous, never a timing assertion
CPU_ENH = "katalyst.kubewharf.io/cpu_enhancement"
QOS = "katalyst.kubewharf.io/qos_level"


def _config(base: Path, sub: str, check_s: float, cpu_extra: str = "") -> Path:
    cfg = base / "hwagent.toml"
    cfg.write_text(f"""
[pressure]
enabled = false
[devices]
enabled = false
[cpu]
{cpu_extra}
reserved_cpus = 0
transition_period_s = 0
cpuset_check_interval_s = {check_s}
[cgroups]
runtime_subtree = "{sub}"
[runtime]
backoff_initial_s = 0.2
backoff_max_s = 0.5
""")
    return cfg


class Node:
    def __init__(self, base: Path, sub: str, check_s: float = 1.0) -> None:
        self.base = base
        self.root = base / "root"
        self.subtree = sub
        self.cfg = _config(base, sub, check_s)
        self.daemons: list[Daemon] = []

    @property
    def daemon(self) -> Daemon:
        return self.daemons[-1]

    def start(self) -> Daemon:
        d = Daemon(self.base / f"d{len(self.daemons)}", "--config", str(self.cfg), "--root-dir", str(self.root))
        self.daemons.append(d)
        self.until(lambda: "hwagent ready" in d.log(), "the daemon to be ready")
        return d

    def kill9(self) -> None:
        self.daemon.proc.send_signal(signal.SIGKILL)
        self.daemon.proc.wait(30)

    def until(self, cond, what: str):
        deadline = time.monotonic() + BUDGET_S
        last = None
        while time.monotonic() < deadline:
            try:
                v = cond()
            except AssertionError as e:  # a comparison that has not converged yet
                v, last = None, e
            if v:
                return v
            if self.daemons and self.daemon.proc.poll() is not None:
                raise AssertionError(f"daemon exited ({self.daemon.proc.returncode}) while waiting for {what}:\n"
                                     f"{self.daemon.log()[-4000:]}")
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}" + (f": {last}" if last else ""))

    def cli(self, *args: str):
        return cli(self.root, *args)

    def admit(self, manifest: dict) -> int:
        f = self.base / f"{manifest['metadata']['name']}.json"
        f.write_text(json.dumps(manifest))
        return self.cli("admit", "-f", str(f)).returncode

    def ps(self) -> list[dict]:
        r = self.cli("ps", "--format", "json")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)["pods"]

    def describe(self, name: str) -> dict:
        r = self.cli("describe", name, "--format", "json")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    def pod_resources(self) -> dict[tuple[str, str], CPUSet]:
        with grpc.insecure_channel(f"unix://{self.root / POD_RESOURCES / POD_RESOURCES_SOCKET}") as ch:
            res = pr_grpc.PodResourcesListerStub(ch).List(pr.ListPodResourcesRequest(), timeout=30)
        return {(p.name, c.name): CPUSet(c.cpu_ids) for p in res.pod_resources for c in p.containers}

    def cpuset(self, uid: str, container: str) -> CPUSet | None:
        f = Path("/sys/fs/cgroup/cpuset") / self.subtree.lstrip("/") / f"pod{uid}" / container / "cpuset.cpus"
        try:
            return CPUSet.parse(f.read_text().strip())
        except (OSError, ValueError):
            return None

    def cleanup(self) -> None:
        for d in self.daemons:
            d.cleanup()


@pytest.fixture
def node(tmp_path):
    """A node on a test-owned subtree; afterwards its daemons are killed, then every
    workload left in the subtree (they outlive a killed daemon), and the subtree is
    removed, waiting for the killed tasks to leave (an rmdir right after SIGKILL is EBUSY)."""
    if os.geteuid() != 0:
        pytest.skip("needs root")
    if not Path("/sys/fs/cgroup/cpuset/cpuset.cpus").is_file():
        pytest.skip("needs the v1 cpuset controller (hybrid or v1 hierarchy)")
    n = Node(tmp_path, subtree_name())
    yield n
    n.cleanup()
    kill_and_remove_subtree(n.subtree)


def _allowed(pid: int) -> CPUSet | None:
    try:
        return CPUSet.parse(status_field(pid, "Cpus_allowed_list"))
    except (OSError, KeyError):
        return None


def _manifest(name: str, *, pool: str = "", dedicated: bool = False, init: list[str] | None = None,
              command: list[str] | None = None, restart: str = "Always") -> dict:
    ann = {QOS: "dedicated_cores" if dedicated else "shared_cores"}
    if dedicated:
        ann["katalyst.kubewharf.io/memory_enhancement"] = json.dumps({"numa_binding": "true"})
    if pool:
        ann[CPU_ENH] = json.dumps({"cpuset_pool": pool})
    cpu = "1" if dedicated else "500m"
    spec: dict = {"restartPolicy": restart, "terminationGracePeriodSeconds": 1,
                  "containers": [{"name": "main", "command": command or ["sleep", "1000"],
                                  "resources": {"limits": {"cpu": cpu}}}]}
    if init:
        spec["initContainers"] = [{"name": "setup", "command": init}]
    return {"metadata": {"name": name, "annotations": ann}, "spec": spec}


def _disagreements(node: Node) -> list[str]:
    """Every running container whose views differ (empty when they all agree)."""
    out: list[str] = []
    listed = node.ps()
    podres = node.pod_resources()
    for p in listed:
        if p["phase"] not in ("Pending", "Running") or p["released"]:
            continue
        described = {c["name"]: c for c in node.describe(p["name"])["containers"]}
        for c in p["containers"]:
            if c["state"] != "running" or not c.get("pid"):
                continue
            seen = {"ps": CPUSet(c["cpu_ids"]), "describe": CPUSet(described[c["name"]]["cpu_ids"]),
                    "cpuset.cpus": node.cpuset(p["uid"], c["name"]), "Cpus_allowed_list": _allowed(c["pid"])}
            if c["kind"] == "app":  # pod-resources lists app containers, as the kubelet's
                seen["pod-resources"] = podres.get((p["name"], c["name"]))
            if len({str(v) for v in seen.values()}) != 1 or not seen["ps"]:
                out.append(f"{p['name']}/{c['name']}: {seen}")
    return out


def test_a_restarted_container_starts_on_the_cpus_it_has_now(node):
    """A shared container in a crash loop: its pool moves (its ramp-up ends, then a
    second pool takes a CPU); every later run must start on the CPUs the policy gives it
    now. Before the fix the runtime wrote the admission's CPUs (0-1) into each new run's
    cgroup, and the process ran there until the enforcer's next pass."""
    node.cfg = _config(node.base, node.subtree, check_s=5.0)  # a pass rarely lands in the window
    node.start()
    script = "grep Cpus_allowed_list: /proc/self/status; sleep 0.3; exit 1"
    assert node.admit(_manifest("loop", command=["sh", "-c", script])) == 0
    assert node.admit(_manifest("other", pool="b")) == 0

    def settled():
        pods = {p["name"]: p for p in node.ps()}
        cpus = CPUSet(pods["loop"]["containers"][0]["cpu_ids"])
        other = CPUSet(pods["other"]["containers"][0]["cpu_ids"])
        return len(cpus) == 1 and len(other) == 1 and cpus != other and (pods["loop"], cpus)

    p, want = node.until(settled, "both pools to hold one CPU each (ramp-up ended)")
    log = node.root / "logs" / "default_loop" / "main.log"
    seen = len(log.read_text().splitlines())
    r0 = p["containers"][0]["restart_count"]
    node.until(lambda: next(q for q in node.ps() if q["name"] == "loop")["containers"][0]["restart_count"] >= r0 + 3,
               "three more runs of the crash-looping container")
    later = [ln.split(":", 1)[1].strip() for ln in log.read_text().splitlines()[seen + 1:]
             if ln.startswith("Cpus_allowed_list:")]
    assert later, log.read_text()
    assert {CPUSet.parse(x) for x in later} == {want}, f"runs after the move started on {later}, the policy gives {want}"



def _step(node: Node, rng: random.Random, step: int, live: list[str]) -> str:
    """One random step; returns what it did (for the failure message). A pod with an
    init container is checked while the init container runs (it waits for a file the
    test makes once the views agreed), then let go."""
    roll = rng.random()
    if roll < 0.5 or not live:
        name = f"p{step}"
        kind = rng.choice(["share", "pool-b", "init", "dedicated"])
        gate = node.base / f"{name}.go"
        init = ["sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done"] if kind == "init" else None
        code = node.admit(_manifest(name, pool="b" if kind == "pool-b" else "", dedicated=kind == "dedicated",
                                    init=init))
        if code == 0:
            live.append(name)
            if init is not None:
                node.until(lambda: _init_running(node, name) and not _disagreements(node),
                           f"{name}'s init container to run, every view agreeing")
                gate.touch()
        return f"admit {name} {kind}: exit {code}"
    if roll < 0.8:
        name = live.pop(rng.randrange(len(live)))
        r = node.cli("rm", name)
        assert r.returncode == 0, r.stderr
        return f"rm {name}"
    node.kill9()
    node.start()
    return "kill -9 and start"


def _init_running(node: Node, name: str) -> bool:
    p = next((q for q in node.ps() if q["name"] == name), None)
    return p is not None and any(c["kind"] == "init" and c["state"] == "running" and c.get("pid")
                                 for c in p["containers"])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_view_agrees_on_the_live_machine(node, seed):
    """A seeded sequence of 6 steps; after each, every live pod runs and every running
    container's CPUs converge (the enforcer writes at once, a ramp-up ends at its next
    pass) to one set in every view."""
    rng = random.Random(seed)
    node.start()
    live: list[str] = []
    done: list[str] = []
    for step in range(6):
        done.append(_step(node, rng, step, live))
        node.until(lambda: _all_running(node, live) and not _disagreements(node), f"views to agree after {done}")
    for name in live:
        assert node.cli("rm", name).returncode == 0
    assert not [d for d in Path("/sys/fs/cgroup/cpuset", node.subtree.lstrip("/")).glob("pod*")]


def _all_running(node: Node, live: list[str]) -> bool:
    phases = {p["name"]: p["phase"] for p in node.ps()}
    return all(phases.get(n) == "Running" for n in live)
