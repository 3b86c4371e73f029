"""A standalone pod with a ResourceClaim for one loop device (issue 27), on this
machine: the claim is allocated into its file, prepared (CDI spec), the
container opens its device and gets EPERM on the other loop devices the rule
offers (the devices cgroup), and removing the pod unprepares and deallocates."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import uuid
from pathlib import Path

import pytest
import yaml

from tests.cgroup_support import kill_and_remove_subtree
from tests.integration.daemon.test_lifecycle import Daemon
from tests.integration.runtime.test_end_to_end import cli, pod, until

pytestmark = [pytest.mark.timeout(300), pytest.mark.root]

PROBE = ("import errno, os, sys\n"
         "for p in sys.argv[1:]:\n"
         "    try:\n"
         "        os.close(os.open(p, os.O_RDONLY)); print(p, 'ok')\n"
         "    except OSError as e:\n"
         "        print(p, errno.errorcode[e.errno])\n"
         "print('env', os.environ.get('SCRATCH', '-'), flush=True)\n"
         "import time\n"
         "time.sleep(300)\n")


def pod_resources(root: Path) -> dict:
    """pod name -> its first container's dynamic_resources, from pod-resources v1 List."""
    import grpc

    from agent.api.podresources.v1 import api_pb2 as pr
    from agent.api.podresources.v1 import api_pb2_grpc as pr_grpc

    with grpc.insecure_channel(f"unix://{root / 'pod-resources' / 'pod-resources.sock'}") as ch:
        resp = pr_grpc.PodResourcesListerStub(ch).List(pr.ListPodResourcesRequest(), timeout=30)
    return {p.name: list(p.containers[0].dynamic_resources) for p in resp.pod_resources}


@pytest.fixture
def loops(tmp_path):
    devs: list[str] = []
    try:
        for i in range(3):
            backing = tmp_path / f"disk{i}"
            with open(backing, "wb") as f:
                f.truncate(1 << 20)
            r = subprocess.run(["losetup", "-f", "--show", str(backing)], capture_output=True, text=True)
            if r.returncode != 0:
                pytest.skip(f"losetup failed: {r.stderr.strip()}")
            devs.append(r.stdout.strip())
        yield devs
    finally:
        for d in devs:
            subprocess.run(["losetup", "-d", d], check=False)


@pytest.fixture
def subtree():
    name = f"/hwagent-test-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    yield name
    kill_and_remove_subtree(name)


def test_pod_with_a_claim_gets_exactly_its_loop_device(tmp_path, loops, subtree):
    names = [Path(d).name for d in loops]
    cdi = tmp_path / "cdi"
    cfg = tmp_path / "hwagent.toml"
    cfg.write_text(
        "[pressure]\nenabled = false\n"
        "[devices]\nenabled = false\ndefault_rules = false\n"
        "[[devices.resources]]\nname = \"example.com/scratch\"\n"
        f"block_name = {json.dumps(names)}\nenv = {{ SCRATCH = \"{{dev_nodes}}\" }}\napi = \"dra\"\n"
        f"[dra]\ncdi_dir = \"{cdi}\"\n"
        # no managed_devices glob: the devices a DRA rule offers are managed by themselves (issue 32)
        f"[runtime]\ncgroup_subtree = \"{subtree}\"\ncdi_spec_dirs = [\"{cdi}\"]\n")
    root = tmp_path / "root"
    (root / "dra").mkdir(parents=True)
    (root / "dra" / "class.yaml").write_text(
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: scratch.example.com}\n"
        "spec:\n  selectors:\n  - cel: {expression: 'device.attributes[\"hwagent.io\"].resource == "
        "\"example.com/scratch\"'}\n")
    (root / "dra" / "disk.yaml").write_text(
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: disk, namespace: default}\n"
        "spec:\n  devices:\n    requests:\n    - name: one\n      exactly: {deviceClassName: scratch.example.com}\n")
    manifest = tmp_path / "pod.json"
    manifest.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "claimer"},
        "spec": {"restartPolicy": "Never", "resourceClaims": [{"name": "scratch", "resourceClaimName": "disk"}],
                 "containers": [{"name": "main", "command": ["/usr/bin/python3", "-S", "-c", PROBE, *loops],
                                 "resources": {"claims": [{"name": "scratch"}]}}]}}))
    d = Daemon(tmp_path / "d", "--config", str(cfg), "--root-dir", str(root))
    try:
        until(lambda: "hwagent ready" in d.log(), "the daemon to be ready", d)
        r = cli(root, "admit", str(manifest))
        assert r.returncode == 0, r.stdout + r.stderr + d.log()
        logf = root / "logs" / "default_claimer" / "main.log"
        until(lambda: logf.exists() and "env " in logf.read_text(), "the probe's output", d)
        out = dict(line.split(" ", 1) for line in logf.read_text().splitlines())
        got = [p_ for p_, v in out.items() if v == "ok"]
        assert len(got) == 1 and got[0] in loops, out
        assert all(out[o] == "EPERM" for o in loops if o != got[0]), out
        assert out["env"] == got[0], out
        dev = Path(got[0]).name
        # the claim's file holds the allocation and the pod; the CDI spec is there
        claim = yaml.safe_load((root / "dra" / "disk.yaml").read_text())
        (res,) = claim["status"]["allocation"]["devices"]["results"]
        assert res["device"] == dev and res["driver"] == "hwagent.io", claim
        assert [r["name"] for r in claim["status"]["reservedFor"]] == ["claimer"]
        assert len(list(cdi.glob("*.json"))) == 1
        # ps, describe and pod-resources show the claim and its device
        p = pod(root, "claimer")
        assert {"resource": "resourceclaim/disk", "id": dev, "numa_nodes": []} in p["containers"][0]["devices"], p
        r = cli(root, "describe", "claimer")
        assert r.returncode == 0 and f"resourceclaim/disk={dev}" in r.stdout and "CDI device: hwagent.io/claim=" \
            in r.stdout, r.stdout
        (dyn,) = pod_resources(root)["claimer"]
        assert (dyn.claim_name, dyn.claim_namespace) == ("disk", "default")
        assert [(c.driver_name, c.device_name) for c in dyn.claim_resources] == [("hwagent.io", dev)]
        assert dyn.claim_resources[0].cdi_devices[0].name.startswith("hwagent.io/claim=")
        # kill -9 of the daemon and a restart: the claim stays prepared for the running pod
        spec = next(cdi.glob("*.json")).read_bytes()
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait(30)
        d.cleanup()
        d = Daemon(tmp_path / "d2", "--config", str(cfg), "--root-dir", str(root))
        until(lambda: "hwagent ready" in d.log(), "the daemon to be ready again", d)
        assert 'msg="dra driver started"' in d.log() and "prepared=1" in d.log(), d.log()
        assert next(cdi.glob("*.json")).read_bytes() == spec
        p = until(lambda: (q := pod(root, "claimer")) and q["phase"] == "Running" and q, "the pod after restart", d)
        assert {"resource": "resourceclaim/disk", "id": dev, "numa_nodes": []} in p["containers"][0]["devices"], p
        # removal: unprepared (no CDI spec) and deallocated
        r = cli(root, "rm", "claimer")
        assert r.returncode == 0, r.stdout + r.stderr
        until(lambda: "allocation" not in (yaml.safe_load((root / "dra" / "disk.yaml").read_text()).get("status")
                                           or {}), "the claim to be deallocated", d)
        assert not list(cdi.glob("*.json")), list(cdi.iterdir())
        assert d.stop() == 0
    finally:
        d.cleanup()
