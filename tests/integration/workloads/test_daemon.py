"""`hwagent run` as a real process on a 2-NUMA fixture topology (this machine has one
node), a test device plugin registered with its host, and the CLI over the socket:
launch, ps, describe, admit --dry-run, rm, pod-resources List, a refusal, a restart."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
import urllib.request
from pathlib import Path

import grpc
import pytest

from agent.api.podresources.v1 import api_pb2 as pr
from agent.api.podresources.v1 import api_pb2_grpc as pr_grpc
from agent.cli import main as cli
from agent.commands._exitcodes import EXIT_NOT_FOUND
from tests.integration.daemon.test_lifecycle import Daemon
from tests.integration.devicemanager.fakeplugin import FakePlugin, dev
from tests.unit.topology.fake_sysfs import FakeMachine

RES = "example.com/fake"
#: the real components admission needs, and only those: the fixture machine's CPUs are not this
#: machine's, so a workload runtime (when one is in COMPONENTS) could not run what is admitted here
COMPONENTS = ("agent.devicemanager.component:factory", "agent.cpu.component:create", "agent.workloads.component:factory")
START_TIMEOUT_S = 90  # two shared cores under a full suite: generous, never a timing assertion


class PluginThread:
    """The test device plugin on its own loop in a thread (the daemon is another process)."""

    def __init__(self, socket_path: Path, devices) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.plugin = FakePlugin(str(socket_path), devices, pre_start_required=True)
        self.call(self.plugin.start())

    def call(self, coro, timeout: float = 60):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        if not self.thread.is_alive():
            return
        self.call(self.plugin.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def _config(base: Path, machine: FakeMachine) -> Path:
    cfg = base / "hwagent.toml"
    cfg.write_text(
        f"""
[daemon]
sysfs_root = "{machine.sys}"
procfs_root = "{machine.proc}"

[cpu]
enforce_cgroups = false

[devices]
enabled = false

[pressure]
enabled = false

# the fixture topology's CPUs and NUMA nodes are not this machine's: admission only
# (tests/integration/runtime/test_end_to_end.py runs pods on the real topology)
[runtime]
enabled = false

[topology_manager]
policy = "single-numa-node"

[workloads]
manifest_poll_seconds = 0.2
# root only, whatever groups this machine has (the default `hwagent`, when it exists, makes it 0660)
socket_group = ""
"""
    )
    return cfg


def _wait(cond, what: str, timeout: float = START_TIMEOUT_S, proc=None) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"daemon exited ({proc.returncode}) while waiting for {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def node(sockdir):
    machine = FakeMachine(sockdir / "machine").build()
    cfg = _config(sockdir, machine)
    started: list[Daemon] = []
    plugins: list[PluginThread] = []

    class Node:
        root = sockdir / "root"

        def start(self) -> Daemon:
            d = Daemon(sockdir, "--config", str(cfg), components=COMPONENTS)
            started.append(d)
            _wait(lambda: (self.root / "admission.sock").is_socket() and
                  (self.root / "device-plugins" / "registration.sock").is_socket(), "admission socket", proc=d.proc)
            return d

        def plugin(self) -> PluginThread:
            p = PluginThread(self.root / "device-plugins" / "fake.sock", [dev("d0", numa=(0,)), dev("d1", numa=(1,))])
            plugins.append(p)
            p.call(p.plugin.register(str(self.root / "device-plugins" / "registration.sock"), RES))
            return p

        def pod_resources(self, method: str = "List", request=None):
            with grpc.insecure_channel(f"unix://{self.root / 'pod-resources' / 'pod-resources.sock'}") as ch:
                stub = pr_grpc.PodResourcesListerStub(ch)
                return getattr(stub, method)(request or pr.ListPodResourcesRequest(), timeout=30)

    yield Node()
    for d in started:
        d.cleanup()
    for p in plugins:
        p.close()


def _numa(cpu: int) -> int:
    return 0 if cpu in (0, 1, 4, 5) else 1


@pytest.mark.slow
def test_launch_aligns_cpus_and_device_survives_restart_and_refuses_the_impossible(node, capsys, tmp_path):
    d = node.start()
    root = str(node.root)
    plugin = node.plugin()
    assert (node.root / "admission.sock").stat().st_mode & 0o777 == 0o600

    # a device nobody registered yet / more CPUs than exist: refused, exit 1, one line, nothing allocated
    code, out, err = _cli(capsys, "launch", "--root-dir", root, "--name", "big", "--cpus", "64", "--qos", "dedicated",
                          "--numa-binding", "--", "sleep", "1000")
    assert code == 1 and "64" in err and err.count("\n") == 1, err
    assert "RESOURCE_EXHAUSTED" not in err, err  # the code is the exit status; the line is for a person

    empty = tmp_path / "empty.yaml"  # admit takes a regular file only (/dev/null is refused, exit 2)
    empty.write_text("")
    _wait(lambda: _cli(capsys, "admit", "--root-dir", root, "--dry-run", str(empty))[0] != 2, "daemon answering")
    code, out, err = _cli(capsys, "launch", "--root-dir", root, "--name", "web", "--cpus", "2", "--qos", "dedicated",
                          "--numa-binding", "--device", f"{RES}=1", "--", "sleep", "1000")
    assert code == 0, err
    assert out.startswith("admitted default/web")

    code, out, err = _cli(capsys, "ps", "--root-dir", root, "--format", "json")
    assert code == 0, err
    (pod,) = json.loads(out)["pods"]
    (c,) = pod["containers"]
    assert len(c["cpu_ids"]) == 2
    nodes = {_numa(x) for x in c["cpu_ids"]}
    assert len(nodes) == 1
    (n,) = nodes
    assert c["devices"] == [{"resource": RES, "id": f"d{n}", "numa_nodes": [n]}]
    assert c["numa_affinity"] == [n] and c["mems"] == [n]
    assert pod["phase"] == "Pending" and pod["reason"] == "Admitted" and pod["qos"] == "dedicated"
    assert plugin.plugin.calls.prestart == [[f"d{n}"]]
    code, text, _ = _cli(capsys, "ps", "--root-dir", root)
    assert "web" in text and f"{RES}=d{n}" in text

    # pod-resources shows the same CPUs and the device with its topology
    (prp,) = node.pod_resources().pod_resources
    assert (prp.name, prp.namespace) == ("web", "default")
    (prc,) = prp.containers
    assert sorted(prc.cpu_ids) == sorted(c["cpu_ids"])
    assert [(x.resource_name, list(x.device_ids), [t.ID for t in x.topology.nodes]) for x in prc.devices] == [
        (RES, [f"d{n}"], [n])
    ]

    got = node.pod_resources("Get", pr.GetPodResourcesRequest(pod_name="web", pod_namespace="default"))
    assert sorted(got.pod_resources.containers[0].cpu_ids) == sorted(c["cpu_ids"])
    alloc = node.pod_resources("GetAllocatableResources", pr.AllocatableResourcesRequest())
    assert list(alloc.cpu_ids) == list(range(8))  # no reserved cpus configured
    assert sorted((d.device_ids[0], d.topology.nodes[0].ID) for d in alloc.devices) == [("d0", 0), ("d1", 1)]

    # the other node still fits one more; then single-numa-node cannot place a third
    code, out, err = _cli(capsys, "launch", "--root-dir", root, "--name", "web2", "--cpus", "2", "--qos", "dedicated",
                          "--numa-binding", "--device", f"{RES}=1", "--", "sleep", "1000")
    assert code == 0, err
    manifest = node.root.parent / "third.yaml"
    manifest.write_text(
        "metadata: {name: third, annotations: {katalyst.kubewharf.io/qos_level: dedicated_cores, "
        "katalyst.kubewharf.io/memory_enhancement: '{\"numa_binding\": \"true\"}'}}\n"
        f"spec: {{containers: [{{name: c, command: [sleep, '1'], resources: {{limits: {{cpu: 1, {RES}: 1}}}}}}]}}\n"
    )
    code, out, err = _cli(capsys, "admit", "--root-dir", root, "--dry-run", str(manifest))
    # no device left on either node (the CPUs free beside them are the fixture's business)
    assert code == 1 and "would be refused" in out, out
    assert re.search(rf"node 0: \d+ CPUs?, 0 {re.escape(RES)}; node 1: \d+ CPUs?, 0 {re.escape(RES)}", out), out
    before = node.pod_resources()
    code, out, err = _cli(capsys, "launch", "--root-dir", root, "-f", str(manifest))
    assert code == 1 and RES in err and "free per NUMA node" in err and "RESOURCE_EXHAUSTED" not in err, err
    assert node.pod_resources() == before

    # metrics: admitted pods by QoS, the refusal counted with its code, the topology manager's counters
    port = re.search(r'msg="metrics endpoint listening" address=127\.0\.0\.1:(\d+)', d.log()).group(1)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        metrics = r.read().decode()
    assert 'hwagent_workloads_admitted_pods{qos="dedicated"} 2.0' in metrics
    assert 'hwagent_workloads_admissions_total{code="RESOURCE_EXHAUSTED",outcome="refused"}' in metrics
    assert "hwagent_topology_manager_admission_requests_total" in metrics

    code, out, err = _cli(capsys, "describe", "--root-dir", root, "web")
    assert code == 0 and "admitted" in out and f"FAKE_DEVICES=d{n}" in out, out
    code, out, err = _cli(capsys, "stop", "--root-dir", root, "web")
    assert code == 1 and "no workload runtime" in err and "FAILED_PRECONDITION" not in err, err

    # a restart keeps every admission, and every allocation
    listed = json.loads(_cli(capsys, "ps", "--root-dir", root, "--format", "json")[1])["pods"]
    assert d.stop() == 0
    node.start()
    after = json.loads(_cli(capsys, "ps", "--root-dir", root, "--format", "json")[1])["pods"]
    assert [(p["uid"], p["containers"][0]["cpu_ids"], p["containers"][0]["devices"]) for p in after] == [
        (p["uid"], p["containers"][0]["cpu_ids"], p["containers"][0]["devices"]) for p in listed
    ]
    assert sorted((p.name, tuple(p.containers[0].cpu_ids)) for p in node.pod_resources().pod_resources) == sorted(
        (p["name"], tuple(p["containers"][0]["cpu_ids"])) for p in listed
    )

    # rm releases: the freed node takes the third pod
    code, out, err = _cli(capsys, "rm", "--root-dir", root, "web")
    assert code == 0 and "removed default/web" in out
    # the restarted host removed the plugin's socket, as a kubelet does: the plugin comes back and registers
    plugin.close()
    node.plugin()
    _wait(lambda: _cli(capsys, "launch", "--root-dir", root, "-f", str(manifest))[0] == 0, "third admitted", 30)
    code, out, err = _cli(capsys, "rm", "--root-dir", root, "web")
    assert code == EXIT_NOT_FOUND and "no pod default/web" in err and "hwagent ps" in err, err


@pytest.mark.slow
def test_static_manifests_and_bad_files(node, capsys):
    node.start()
    root = str(node.root)
    mdir = node.root / "manifests"
    (mdir / "good.yaml").write_text("metadata: {name: good}\nspec: {containers: [{name: c, command: [sleep, '1']}]}\n")
    (mdir / "bad.yaml").write_text("metadata: {name: Bad}\nspec: {containers: [{name: c, command: [x]}]}\n")
    (mdir / ".swap.yaml").write_text("garbage: [")

    def ps():
        return json.loads(_cli(capsys, "ps", "--root-dir", root, "--format", "json")[1])

    _wait(lambda: [p["name"] for p in ps()["pods"]] == ["good"] and ps()["manifest_errors"], "static pod", 30)
    (err,) = ps()["manifest_errors"]
    assert err["path"].endswith("bad.yaml") and "metadata.name" in err["error"]
    (pod,) = ps()["pods"]
    assert pod["source"] == f"file:{mdir / 'good.yaml'}" and len(pod["uid"]) == 36
    # changed: replaced (new content, new uid); removed: removed
    (mdir / "good.yaml").write_text("metadata: {name: good}\nspec: {containers: [{name: c, command: [sleep, '2']}]}\n")
    _wait(lambda: [p["uid"] for p in ps()["pods"]] not in ([pod["uid"]], []), "replaced", 30)
    (mdir / "good.yaml").unlink()
    (mdir / "bad.yaml").unlink()
    _wait(lambda: ps() == {"pods": [], "manifest_errors": []}, "removed", 30)
