"""The DRA driver with an API server (``[dra] kubeconfig``): claims read from
``resource.k8s.io/v1``, the node's ResourceSlices published, against a fake API server on
127.0.0.1 (``fakekube``) through the official ``kubernetes`` client."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import pytest

pytest.importorskip("kubernetes", reason="the optional 'kube' dependency group is not installed (pip install .[kube])")

from agent.contracts import DRA_DRIVER, DaemonContext  # noqa: E402
from agent.contracts.dra import ClaimRef  # noqa: E402
from agent.config import Config, section_defaults  # noqa: E402
from agent.daemonconfig import DAEMON_SECTION, DaemonConfig  # noqa: E402
from agent.devices.config import DEVICES_SECTION, DevicesConfig, ResourceRule  # noqa: E402
from agent.dra.apisource import ApiClaimSource  # noqa: E402
from agent.dra.component import DraComponent  # noqa: E402
from agent.dra.config import DRA_SECTION, DraConfig  # noqa: E402
from agent.dra.driver import DraDriver  # noqa: E402
from agent.dra.kubeapi import connect  # noqa: E402
from agent.dra.publish import SlicePublisher, plan  # noqa: E402
from agent.topology.model import synthetic  # noqa: E402
from tests.unit.devices.fakesysfs import FakeSysfs  # noqa: E402
from tests.unit.dra.driver_support import claim_doc, node_devices  # noqa: E402
from tests.unit.dra.fakekube import FakeKube  # noqa: E402

#: the rule's devices offered through DRA (``api = "dra"`` where rules name their one API)
_DRA_API = {"api": "dra"} if "api" in {f.name for f in dataclasses.fields(ResourceRule)} else {}
A = ClaimRef("default", "a", "uid-a")
NODE, DRIVER = "node1", "hwagent.io"


@pytest.fixture
def kube(tmp_path):
    fake = FakeKube()
    yield fake
    fake.stop()


def _driver(tmp_path, kubeconfig) -> DraDriver:
    drv = DraDriver(DRIVER, tmp_path / "dra-state" / "prepared.json", str(tmp_path / "cdi"),
                    ApiClaimSource(lambda: connect(str(kubeconfig), timeout_s=2.0)), lambda: node_devices(4))
    drv.restore()
    return drv


def _slice(name: str, devices: list[str], node: str = NODE, driver: str = DRIVER, gen: int = 1) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": driver, "nodeName": node,
                     "pool": {"name": f"{node}/{name}", "generation": gen, "resourceSliceCount": 1},
                     "devices": [{"name": d} for d in devices]}}


def test_prepare_reads_the_claim_and_its_allocation_from_the_api_server(tmp_path, kube) -> None:
    doc = claim_doc("a", "uid-a", ["loop1"])
    # what an API server's claim carries and the file parser would refuse: hwagent only reads the allocation
    doc["metadata"].update(resourceVersion="7", managedFields=[{"manager": "kube-scheduler"}])
    doc["spec"]["devices"]["requests"][0]["exactly"]["adminAccess"] = False
    doc["status"]["allocation"]["nodeSelector"] = {"nodeSelectorTerms": []}
    kube.add_claim(doc)
    drv = _driver(tmp_path, kube.kubeconfig(tmp_path / "kubeconfig"))
    out = asyncio.run(drv.prepare([A]))["uid-a"]
    assert out.error == ""
    assert [(d.pool, d.device, d.cdi_device_ids) for d in out.devices] == \
        [("node1/example.com/scratch", "loop1", ("hwagent.io/claim=uid-a-loop1",))]
    assert ("GET", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/a") in kube.calls


def test_a_uid_mismatch_or_a_missing_claim_fails_that_claim_alone(tmp_path, kube) -> None:
    kube.add_claim(claim_doc("a", "uid-new", ["loop1"]))  # re-created since the kubelet asked
    kube.add_claim(claim_doc("b", "uid-b", ["loop2"]))
    drv = _driver(tmp_path, kube.kubeconfig(tmp_path / "kubeconfig"))
    out = asyncio.run(drv.prepare([A, ClaimRef("default", "b", "uid-b"), ClaimRef("default", "gone", "uid-c")]))
    assert "UID is uid-new, not uid-a" in out["uid-a"].error
    assert out["uid-b"].error == "" and [d.device for d in out["uid-b"].devices] == ["loop2"]
    assert "default/gone" in out["uid-c"].error and "not found" in out["uid-c"].error
    assert list(drv.prepared()) == ["uid-b"]


def test_an_unreachable_api_server_fails_each_claim_and_changes_nothing(tmp_path, kube) -> None:
    kubeconfig = kube.kubeconfig(tmp_path / "kubeconfig")
    kube.stop()
    drv = _driver(tmp_path, kubeconfig)
    out = asyncio.run(drv.prepare([A]))["uid-a"]
    assert "API server" in out.error and "retry" in out.error
    assert drv.prepared() == {} and not (tmp_path / "cdi").exists()


def test_plan_creates_updates_and_deletes_only_this_nodes_slices() -> None:
    existing = [dict(_slice("x", ["loop0"]), metadata={"name": "x", "resourceVersion": "5", "uid": "u1"}),
                dict(_slice("old", ["loop9"]), metadata={"name": "old", "resourceVersion": "6", "uid": "u2"})]
    p = plan([_slice("x", ["loop0", "loop1"]), _slice("y", ["loop2"])], existing, {})
    assert [d["metadata"]["name"] for d in p.create] == ["y"]
    assert [(d["metadata"]["name"], d["metadata"]["resourceVersion"], d["spec"]["pool"]["generation"])
            for d in p.update] == [("x", "5", 2)]
    assert [(n, u) for n, u in p.delete] == [("old", "u2")]
    # unchanged: nothing to do
    same = plan([_slice("x", ["loop0"])], existing[:1], {})
    assert not same.create and not same.update and not same.delete


def test_publish_on_start_update_on_change_delete_stale_and_retry_a_conflict(tmp_path, kube) -> None:
    kube.add_slice(_slice("stale", ["loop7"]))  # this node's, from an earlier configuration
    kube.add_slice(_slice("theirs", ["loop7"], node="node2"))  # another node's: never touched
    kube.add_slice(_slice("other-driver", ["x"], driver="gpu.example.com"))
    kube.nodes[NODE] = "node-uid-1"
    pub = SlicePublisher(lambda: connect(str(kube.kubeconfig(tmp_path / "kubeconfig")), timeout_s=2.0), NODE, DRIVER)
    pub.sync([_slice("scratch", ["loop0", "loop1"])])
    assert sorted(kube.slices) == ["other-driver", "scratch", "theirs"]
    assert [d["name"] for d in kube.slices["scratch"]["spec"]["devices"]] == ["loop0", "loop1"]
    assert kube.slices["scratch"]["spec"]["pool"]["generation"] == 1
    # owned by the Node, as upstream's kubelet plugin helper does: deleting the node collects them
    assert kube.slices["scratch"]["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": "node-uid-1", "controller": True}]
    listed = [c for c in kube.calls if c == ("GET", "/apis/resource.k8s.io/v1/resourceslices")]
    assert listed  # one list, by field selector (the fake filters on it)

    # a device went away (unhealthy, unplugged): the slice is updated, its pool's generation bumped;
    # another writer changed it first once, so the first update is a 409 and is retried
    kube.conflicts = 1
    pub.sync([_slice("scratch", ["loop0"])])
    assert [d["name"] for d in kube.slices["scratch"]["spec"]["devices"]] == ["loop0"]
    assert kube.slices["scratch"]["spec"]["pool"]["generation"] == 2
    assert [m for m, p in kube.calls if p.endswith("/resourceslices/scratch")].count("PUT") == 2
    assert kube.slices["scratch"]["metadata"]["ownerReferences"][0]["uid"] == "node-uid-1"
    assert [p for _, p in kube.calls].count("/api/v1/nodes/node1") == 1  # read once

    # nothing changed: no write at all
    before = len(kube.calls)
    pub.sync([_slice("scratch", ["loop0"])])
    assert [m for m, _ in kube.calls[before:]] == ["GET"]


def _component(tmp_path, kubeconfig) -> tuple[DraComponent, FakeSysfs, DaemonContext]:
    fs = FakeSysfs(tmp_path / "sys")
    for i in range(2):
        fs.virtual_block(f"loop{i}", f"7:{i}")
    dra = DraConfig(kubeconfig=str(kubeconfig), cdi_dir=str(tmp_path / "cdi"), publish_interval_s=0.05)
    sections = dict(section_defaults().sections)
    sections.update({DEVICES_SECTION.name: DevicesConfig(default_rules=False, hotplug=False, resources=(
        ResourceRule(name="example.com/scratch", block_name=("loop*",), **_DRA_API),)),
        DAEMON_SECTION.name: DaemonConfig(sysfs_root=str(fs.root)), DRA_SECTION.name: dra})
    cfg = Config(sections)
    ctx = DaemonContext(cfg, tmp_path / "root", synthetic(), mode="kubelet")
    return DraComponent(dra), fs, ctx


async def _until(cond, what, deadline_s: float = 30.0) -> None:
    end = time.monotonic() + deadline_s
    while not cond():
        assert time.monotonic() < end, f"timed out waiting for {what() if callable(what) else what}"
        await asyncio.sleep(0.02)


def test_the_daemon_component_publishes_follows_devices_and_survives_the_api_server_going_away(tmp_path, kube) -> None:
    comp, fs, ctx = _component(tmp_path, kube.kubeconfig(tmp_path / "kubeconfig"))

    def devices() -> list[str]:
        s = next(iter(kube.slices.values()), None)
        return [] if s is None else [d["name"] for d in s["spec"]["devices"]]

    async def run() -> None:
        await comp.start(ctx)
        try:
            await _until(lambda: devices() == ["loop0", "loop1"],
                         lambda: f"the slice published at start ({comp.publisher_state()})")
            assert "ownerReferences" not in next(iter(kube.slices.values()))["metadata"]  # no Node: unowned
            fs.virtual_block("loop2", "7:2")  # hot-plugged
            await _until(lambda: devices() == ["loop0", "loop1", "loop2"], "the slice updated")
            kube.stop()
            out = (await ctx.lookup(DRA_DRIVER).prepare([A]))["uid-a"]
            assert "API server" in out.error
            fs.virtual_block("loop3", "7:3")  # a change to publish while the server is away
            await _until(lambda: "API server" in comp.publisher_state()["error"], "the publish error reported")
            assert comp.healthy()  # the driver keeps serving (claims fail alone; slices are retried)
        finally:
            await comp.stop()

    asyncio.run(run())


def test_no_kubeconfig_no_client(tmp_path) -> None:
    """Without [dra] kubeconfig the component starts without importing the client at all."""
    import subprocess
    import sys

    code = ("import asyncio, sys\n"
            "from agent.config import section_defaults\n"
            "from agent.contracts import DaemonContext\n"
            "from agent.dra.component import DraComponent\n"
            "from agent.dra.config import DraConfig\n"
            "from agent.topology.model import synthetic\n"
            f"c = DraComponent(DraConfig(cdi_dir={str(tmp_path / 'cdi')!r}))\n"
            f"asyncio.run(c.start(DaemonContext(section_defaults(), __import__('pathlib').Path({str(tmp_path)!r}),"
            " synthetic(), mode='kubelet')))\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('kubernetes', 'urllib3', 'pydantic')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]"


def test_the_config_takes_a_kubeconfig_path_or_in_cluster() -> None:
    DraConfig(kubeconfig="in-cluster").validate()
    DraConfig(kubeconfig="/etc/kubernetes/hwagent.conf").validate()
    with pytest.raises(ValueError, match="kubeconfig"):
        DraConfig(kubeconfig="relative.conf").validate()
