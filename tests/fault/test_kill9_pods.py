"""kill -9 of a real daemon right after it acknowledged an Admit, a Stop or a
Remove (and in the middle of a Remove): after the restart every pod ends where
the acknowledged call left it, never stuck in between.

- after an Admit: Running, with the pid of a live process in the pod's cgroup
  (the kill lands while the runtime starts the workload: before or after the
  shim, pod.json and the registry heard of the start);
- after a Stop: terminal, reason Stopped, nothing of it left running;
- after a Remove, or during one (a workload that ignores SIGTERM, so the kill
  lands in its grace period): gone from List, nothing of it left running.

Each kill lands 0-40 ms after the acknowledgement (for the interrupted Remove:
after the call was sent), spread evenly over the trials. The daemon is
``hwagent run`` (tests/fault/daemon.py) with its runtime in a test-owned cgroup
subtree; the client is the admission API over its socket.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from pathlib import Path

import grpc
import pytest

from agent.api.admission.v1 import api_pb2 as pb
from agent.api.admission.v1 import api_pb2_grpc as pb_grpc
from agent.cgroups.config import derived_reclaimed_subtree
from agent.config import section_defaults
from agent.runtime.state import PodFiles
from agent.workloads.component import socket_path_for
from tests.cgroup_support import kill_and_remove_subtree
from tests.fault.conftest import COUNTS
from tests.fault.daemon import CONFIG

pytestmark = pytest.mark.timeout(400)

ADMIT_TRIALS = 12
STOP_TRIALS = 4
REMOVE_TRIALS = 4
REMOVE_MID_TRIALS = 4
KILL_WINDOW_S = 0.040
SETTLE_S = 60.0  # two shared cores under load: generous, never a timing assertion
CALL_S = 60.0
#: the interrupted Remove's workload ignores SIGTERM: the kill lands in this grace period
REMOVE_GRACE_S = 3

POLITE = "trap 'exit 0' TERM; while :; do sleep 0.05; done"
STUBBORN = "trap '' TERM; while :; do sleep 0.05; done"


def _manifest(name: str, script: str, grace: int = 5, qos: str = "") -> bytes:
    ann = f", annotations: {{katalyst.kubewharf.io/qos_level: {qos}}}" if qos else ""
    return (f"metadata: {{name: {name}{ann}}}\n"
            f"spec:\n  restartPolicy: Never\n  terminationGracePeriodSeconds: {grace}\n"
            f"  containers:\n  - name: main\n    command: [sh, -c, \"{script}\"]\n"
            f"    resources: {{requests: {{cpu: 100m}}}}\n").encode()


def _delays(n: int) -> list[float]:
    return [KILL_WINDOW_S * i / max(1, n - 1) for i in range(n)]


class Client:
    def __init__(self, root: Path) -> None:
        sock = socket_path_for(section_defaults().sections["workloads"], root)
        self.channel = grpc.insecure_channel(f"unix://{sock}")
        self.stub = pb_grpc.AdmissionStub(self.channel)

    def close(self) -> None:
        self.channel.close()

    def admit(self, name: str, script: str, grace: int = 5, qos: str = "") -> pb.Pod:
        return self.stub.Admit(pb.AdmitRequest(manifest=_manifest(name, script, grace, qos)), timeout=CALL_S).pod

    def pods(self) -> dict[str, pb.Pod]:
        return {p.name: p for p in self.stub.List(pb.ListRequest(), timeout=CALL_S).pods}

    def stop(self, name: str) -> None:
        self.stub.Stop(pb.StopRequest(pod=pb.PodRef(name=name), grace_seconds=5), timeout=CALL_S)

    def remove(self, name: str) -> None:
        self.stub.Remove(pb.RemoveRequest(pod=pb.PodRef(name=name)), timeout=CALL_S)


def _cgroup_of(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return ""


def _live(pid: int) -> bool:
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def _pod_processes(subtree: str, uid: str) -> list[int]:
    """Live processes in any cgroup of the pod (v1 hierarchies and the v2 one)."""
    out: set[int] = set()
    for ctl in Path("/sys/fs/cgroup").iterdir():
        d = ctl / subtree.lstrip("/") / f"pod{uid}"
        for p, _dirs, files in os.walk(d):
            if "cgroup.procs" in files:
                try:
                    out |= {int(x) for x in Path(p, "cgroup.procs").read_text().split()}
                except OSError:
                    pass
    return sorted(p for p in out if _live(p))


def _roots(pids: list[int]) -> list[int]:
    """The processes among ``pids`` whose parent is not among them (the workloads' mains)."""

    def parent(pid: int) -> int | None:
        try:
            return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            return None

    return [p for p in pids if parent(p) not in pids]


class Node:
    """One root dir and cgroup subtree; the daemon restarted on it at each kill."""

    def __init__(self, base: Path, subtree: str, daemon_factory) -> None:
        self.base, self.subtree, self.factory = base, subtree, daemon_factory
        self.config = CONFIG + f'[runtime]\ncgroup_subtree = "{subtree}"\n'
        self.daemon = None
        self.client: Client | None = None
        self.start()

    def start(self) -> None:
        self.daemon = self.factory(self.base, config=self.config)
        self.client = Client(self.daemon.root)
        COUNTS["kill9 pods: daemon starts"] += 1

    def kill_and_restart(self) -> None:
        assert self.daemon is not None and self.client is not None
        self.daemon.kill9()
        self.client.close()
        self.daemon.cleanup()
        self.start()

    def settle(self, what: str, check) -> pb.Pod | None:
        """Wait (generously) until ``check(pods)`` holds; fail saying what the pods are."""
        assert self.client is not None
        deadline = time.monotonic() + SETTLE_S
        while True:
            pods = self.client.pods()
            ok = check(pods)
            if ok:
                return ok if isinstance(ok, pb.Pod) else None
            if time.monotonic() > deadline:
                seen = {n: (p.phase, p.reason, [c.pid for c in p.containers]) for n, p in pods.items()}
                said = "\n".join(line for line in self.daemon.log().splitlines()
                                 if "pod=" in line or "error" in line)[-6000:]
                raise AssertionError(f"stuck: {what}; pods now {seen}; the daemon said:\n{said}")
            time.sleep(0.05)

    def running(self, name: str, subtree: str | None = None) -> pb.Pod:
        """Running with the pid of a live process that is in the pod's cgroup (under ``subtree``,
        default the runtime subtree)."""

        def check(pods):
            p = pods.get(name)
            if p is None or p.phase != "Running" or not p.containers or not p.containers[0].pid:
                return None
            pid = p.containers[0].pid
            return p if _live(pid) and f"{subtree or self.subtree}/pod{p.uid}/main" in _cgroup_of(pid) else None

        pod = self.settle(f"{name} Running with its pid", check)
        assert pod is not None
        return pod


@pytest.fixture
def node(short_dir, daemon_factory):
    if os.geteuid() != 0:
        pytest.skip("needs root")
    subtree = f"/hwagent-test-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    n = Node(short_dir, subtree, daemon_factory)
    try:
        yield n
    finally:
        if n.client is not None:
            n.client.close()
        kill_and_remove_subtree(subtree, tries=100)


def test_kill9_after_an_acknowledged_admit_ends_running_with_its_pid(node):
    for i, delay in enumerate(_delays(ADMIT_TRIALS)):
        name = f"admit{i}"
        node.client.admit(name, POLITE)
        time.sleep(delay)
        node.kill_and_restart()
        pod = node.running(name)
        # one workload, the one List names: never a second one started beside it
        assert _roots(_pod_processes(node.subtree, pod.uid)) == [pod.containers[0].pid], pod
        COUNTS["kill9 pods: admit trials"] += 1
        COUNTS["kill9 pods: admitted pods running with their pid after the restart"] += 1
        # where the kill landed: the workload already started (re-attached) or not yet (started by restore)
        restored = [line for line in node.daemon.log().splitlines()
                    if 'msg="pod restored"' in line and f"pod=default/{name} " in line]
        COUNTS["kill9 pods: admits whose workload the restore re-attached"] += any(
            "running=main" in line for line in restored)
        node.client.remove(name)  # keep the two cores for the next trial


def test_kill9_finds_a_reclaimed_pod_in_the_reclaimed_subtree(node):
    """Reclaimed pods live in their own idle subtree (``<subtree>-reclaimed`` here, derived from
    the test's): after a kill -9 the restarted daemon re-attaches the pod there, with the same
    process, and its removal leaves nothing running in either subtree."""
    reclaimed = derived_reclaimed_subtree(node.subtree)
    for i, delay in enumerate(_delays(REMOVE_TRIALS)):
        name = f"rec{i}"
        node.client.admit(name, POLITE, qos="reclaimed_cores")
        before = node.running(name, reclaimed)
        time.sleep(delay)
        node.kill_and_restart()
        after = node.running(name, reclaimed)
        assert after.containers[0].pid == before.containers[0].pid, (before, after)
        assert _roots(_pod_processes(reclaimed, after.uid)) == [after.containers[0].pid]
        assert _pod_processes(node.subtree, after.uid) == []
        node.client.remove(name)
        node.settle(f"{name} removed", lambda pods, n=name: n not in pods)
        assert _pod_processes(reclaimed, after.uid) == []
        COUNTS["kill9 pods: reclaimed pods re-attached in their subtree"] += 1


def test_kill9_after_an_acknowledged_stop_or_remove_ends_stopped_or_removed(node):
    for i, delay in enumerate(_delays(STOP_TRIALS)):
        name = f"stop{i}"
        node.client.admit(name, POLITE)
        uid = node.running(name).uid
        node.client.stop(name)
        time.sleep(delay)
        node.kill_and_restart()
        pod = node.settle(f"{name} stopped", lambda pods, n=name: (p := pods.get(n)) and p.phase in (
            "Failed", "Succeeded") and p.released and p)
        assert pod.reason == "Stopped" and _pod_processes(node.subtree, uid) == [], pod
        COUNTS["kill9 pods: stop trials"] += 1
        node.client.remove(name)
    for i, delay in enumerate(_delays(REMOVE_TRIALS)):
        name = f"rm{i}"
        node.client.admit(name, POLITE)
        uid = node.running(name).uid
        node.client.remove(name)
        time.sleep(delay)
        node.kill_and_restart()
        node.settle(f"{name} removed", lambda pods, n=name: n not in pods)
        assert _pod_processes(node.subtree, uid) == []
        COUNTS["kill9 pods: remove trials"] += 1


def test_kill9_in_the_middle_of_a_remove_finishes_it_after_the_restart(node):
    for i, delay in enumerate(_delays(REMOVE_MID_TRIALS)):
        name = f"mid{i}"
        node.client.admit(name, STUBBORN, grace=REMOVE_GRACE_S)
        uid = node.running(name).uid
        errors: list[BaseException] = []

        def remove(n: str = name, errors: list[BaseException] = errors) -> None:
            try:
                node.client.remove(n)
            except grpc.RpcError as e:  # the daemon died under the call: expected
                errors.append(e)

        t = threading.Thread(target=remove, daemon=True)
        t.start()
        # the Remove is under way: its intent is on disk and the runtime has recorded its stop
        # (the workload ignores SIGTERM: its grace period runs)
        files = PodFiles(node.daemon.root / "runtime", uid)
        node.settle(f"{name} being stopped for its removal",
                    lambda pods, files=files: (rec := files.load()) is not None and rec.stopping is not None)
        time.sleep(delay)
        node.kill_and_restart()
        t.join(CALL_S)
        node.settle(f"{name} removed after the restart", lambda pods, n=name: n not in pods)
        assert _pod_processes(node.subtree, uid) == []
        COUNTS["kill9 pods: interrupted remove trials"] += 1
        COUNTS["kill9 pods: interrupted removes the kill cut short"] += bool(errors)
