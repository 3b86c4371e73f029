"""A device one pod holds is closed to every other pod (issue 32 item 8).

Loop devices made here stand for the node's hardware: two offered through DRA (``api = "dra"``,
claimed from a ResourceClaim file in ``<root>/dra/``) and one through a device plugin
(``--device``). Their nodes are made world-writable for the test, so that only the devices
cgroup (v1 on this host, or the BPF program on v2) can say no: a refusal must be ``EPERM``, the
cgroup's answer, not the file mode's ``EACCES``. No ``[runtime] managed_devices`` glob is set:
devices the rules offer are hwagent's to hand out, with or without one.

Before the fix a pod without a claim opened the claimed ``/dev/loopN`` (the claim's device nodes
came through CDI and were never counted as managed; both pods' ``devices.list`` read
``a *:* rwm``)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.security.support import ALICE, Box, as_user, home, security_box, until, write_as

pytestmark = [pytest.mark.timeout(600), pytest.mark.root]

DRA_RESOURCE = "example.com/scratch"
PLUGIN_RESOURCE = "example.com/plugged"
CLASS = "scratch.example.com"

#: opens each path given, prints "<path> ok" or "<path> <errno name>", then sleeps (a running pod)
PROBE = ("import errno, os, sys\n"
         "for p in sys.argv[1:]:\n"
         "    try:\n"
         "        os.close(os.open(p, os.O_RDONLY)); print(p, 'ok')\n"
         "    except OSError as e:\n"
         "        print(p, errno.errorcode[e.errno])\n"
         "print('done', flush=True)\n"
         "import time\n"
         "time.sleep(600)\n")


def _losetup(backing: Path) -> str:
    with open(backing, "wb") as f:
        f.truncate(1 << 20)
    r = subprocess.run(["losetup", "-f", "--show", str(backing)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"losetup failed: {r.stderr.strip()}")
    return r.stdout.strip()


@pytest.fixture(scope="module")
def loops() -> Iterator[list[str]]:
    """Three loop devices (two for DRA, one for the plugin), their nodes 0666 while the test runs."""
    tmp = Path(tempfile.mkdtemp(prefix="hwdevconf-"))
    devs: list[str] = []
    modes: dict[str, int] = {}
    try:
        for i in range(3):
            d = _losetup(tmp / f"disk{i}")
            devs.append(d)
            modes[d] = stat.S_IMODE(os.stat(d).st_mode)
            os.chmod(d, 0o666)
        yield devs
    finally:
        for d in devs:
            subprocess.run(["losetup", "-d", d], check=False, capture_output=True)
            if d in modes:
                os.chmod(d, modes[d])
        subprocess.run(["rm", "-rf", str(tmp)], check=False)


@pytest.fixture(scope="module")
def box(loops: list[str]) -> Iterator[Box]:
    dra_names = [Path(d).name for d in loops[:2]]
    cdi = Path(tempfile.mkdtemp(prefix="hwdevconf-cdi-"))
    os.chmod(cdi, 0o755)
    rules = (f'[{{name = "{DRA_RESOURCE}", block_name = {json.dumps(dra_names)}, api = "dra"}}, '
             f'{{name = "{PLUGIN_RESOURCE}", block_name = ["{Path(loops[2]).name}"]}}]')
    config = {
        "devices": {"enabled": "true", "default_rules": "false", "hotplug": "false", "resources": rules},
        "dra": {"cdi_dir": json.dumps(str(cdi))},
        "runtime": {"cdi_spec_dirs": json.dumps([str(cdi)])},
    }
    try:
        yield from security_box(config=config)
    finally:
        subprocess.run(["rm", "-rf", str(cdi)], check=False)


def _claim_files(root: Path) -> None:
    d = root / "dra"
    d.mkdir(exist_ok=True)
    (d / "class.yaml").write_text(
        f"apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {{name: {CLASS}}}\n"
        "spec:\n  selectors:\n  - cel: {expression: 'device.attributes[\"hwagent.io\"].resource == "
        f"\"{DRA_RESOURCE}\"'}}\n")
    (d / "disk.yaml").write_text(
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: disk, namespace: default}\n"
        f"spec:\n  devices:\n    requests:\n    - name: one\n      exactly: {{deviceClassName: {CLASS}}}\n")


def _probe_argv(paths: list[str]) -> list[str]:
    """The probe, from a file of alice's (a pod of root's reads it too)."""
    probe = home(ALICE) / "probe.py"
    if not probe.exists():
        write_as(ALICE, probe, PROBE)
    return ["/usr/bin/python3", "-S", str(probe), *paths]


def _results(box: Box, user: str | None, name: str) -> dict[str, str]:
    """path -> "ok" or the errno name, from the pod's log once its probe is done."""
    def done() -> dict[str, str] | None:
        r = box.cli(user, "logs", name)
        if r.returncode != 0 or "done" not in r.stdout.split():
            return None
        return dict(line.split(" ", 1) for line in r.stdout.splitlines() if line != "done")
    return until(done, f"the probe of pod {name}", box.daemon)


def _held(box: Box, name: str, user: str | None, resource: str) -> str:
    p = box.pod(name, user)
    assert p is not None
    ids = [d["id"] for d in p["containers"][0]["devices"] if d["resource"] == resource]
    assert len(ids) == 1, p
    return "/dev/" + ids[0]


def test_a_claimed_dra_device_is_denied_to_every_pod_without_the_claim(box: Box, loops: list[str]) -> None:
    dra = loops[:2]
    _claim_files(box.root)
    # a pod that started before anyone held the device, and opens it only afterwards
    go = home(ALICE) / "go"
    r = box.cli(ALICE, "launch", "--name", "early", "--", "sh", "-c",
                f"while [ ! -e {go} ]; do sleep 0.1; done; exec " + " ".join(_probe_argv(dra)))
    assert r.returncode == 0, r.stderr
    box.running("early", ALICE)
    manifest = write_as(ALICE, home(ALICE) / "holder.json", json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "holder"},
        "spec": {"restartPolicy": "Never", "resourceClaims": [{"name": "scratch", "resourceClaimName": "disk"}],
                 "containers": [{"name": "main", "command": _probe_argv(dra),
                                 "resources": {"claims": [{"name": "scratch"}]}}]}}))
    r = box.cli(ALICE, "admit", str(manifest))
    assert r.returncode == 0, r.stdout + r.stderr + box.daemon.log()
    holder = _results(box, ALICE, "holder")
    held = [p for p, v in holder.items() if v == "ok"]
    assert len(held) == 1 and held[0] in dra, holder
    (loop,) = held
    assert _held(box, "holder", ALICE, "resourceclaim/disk") == loop
    # pods without the claim, started after it was taken: alice's and root's
    for user, name in ((ALICE, "noclaim"), (None, "rootnoclaim")):
        r = box.cli(user, "launch", "--name", name, "--", *_probe_argv([loop]))
        assert r.returncode == 0, r.stderr
        assert _results(box, user, name) == {loop: "EPERM"}, name
    # and the one that was already running when the claim was taken
    write_as(ALICE, go, "")
    assert _results(box, ALICE, "early")[loop] == "EPERM"
    # the node's mode lets anyone open it outside a pod: only the cgroup said no
    r = as_user(ALICE, "/usr/bin/python3", "-S", "-c", f"import os; os.close(os.open({loop!r}, os.O_RDONLY))")
    assert r.returncode == 0, r.stderr
    for name, user in (("holder", ALICE), ("noclaim", ALICE), ("rootnoclaim", None), ("early", ALICE)):
        assert box.cli(user, "rm", name).returncode == 0


def test_a_plugin_device_is_denied_to_every_pod_that_was_not_given_it(box: Box, loops: list[str]) -> None:
    dev = loops[2]
    r = box.cli(ALICE, "launch", "--name", "given", "--device", f"{PLUGIN_RESOURCE}=1", "--", *_probe_argv([dev]))
    assert r.returncode == 0, r.stderr + box.daemon.log()
    assert _results(box, ALICE, "given") == {dev: "ok"}
    assert _held(box, "given", ALICE, PLUGIN_RESOURCE) == dev
    r = box.cli(ALICE, "launch", "--name", "notgiven", "--", *_probe_argv([dev]))
    assert r.returncode == 0, r.stderr
    assert _results(box, ALICE, "notgiven") == {dev: "EPERM"}
    for name in ("given", "notgiven"):
        assert box.cli(ALICE, "rm", name).returncode == 0


def _claim_file(root: Path, name: str) -> Path:
    """A ResourceClaim of root's for one of the DRA loop devices (the class comes from _claim_files)."""
    _claim_files(root)
    path = root / "dra" / f"{name}.yaml"
    path.write_text(
        f"apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {{name: {name}, namespace: default}}\n"
        f"spec:\n  devices:\n    requests:\n    - name: one\n      exactly: {{deviceClassName: {CLASS}}}\n")
    return path


def _claim_pod(path: Path, name: str, claim: str, paths: list[str], owner: str | None) -> Path:
    doc = json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"restartPolicy": "Never", "resourceClaims": [{"name": "c", "resourceClaimName": claim}],
                 "containers": [{"name": "main", "command": _probe_argv(paths),
                                 "resources": {"claims": [{"name": "c"}]}}]}})
    return write_as(owner, path, doc) if owner is not None else (path.write_text(doc), path)[1]


def test_a_claim_another_users_pod_holds_is_refused_to_a_member(box: Box, loops: list[str], tmp_path: Path) -> None:
    """Before the fix, naming the claim that root's (or another member's) running pod holds in her
    own manifest gave alice that pod's device: her pod opened the claimed loop device. A claim is
    shared among one user's pods only (root decides otherwise); an unheld claim is hers to take."""
    dra = loops[:2]
    claim_path = _claim_file(box.root, "held")
    r = box.cli(None, "admit", str(_claim_pod(tmp_path / "rootheld.json", "rootheld", "held", dra, None)))
    assert r.returncode == 0, r.stdout + r.stderr + box.daemon.log()
    (loop,) = [p for p, v in _results(box, None, "rootheld").items() if v == "ok"]
    before = claim_path.read_text()
    mine = _claim_pod(home(ALICE) / "sharer.json", "sharer", "held", [loop], ALICE)
    r = box.cli(ALICE, "admit", "--dry-run", str(mine))  # the dry run says what the admission would
    assert r.returncode != 0 and "permission denied" in r.stderr.lower(), r.stdout + r.stderr
    r = box.cli(ALICE, "admit", str(mine))
    assert r.returncode != 0, f"alice shared root's claim: {r.stdout}{box.cli(ALICE, 'logs', 'sharer').stdout}"
    assert "permission denied" in r.stderr.lower() and "held" in r.stderr, r.stderr
    assert box.pod("sharer", ALICE) is None
    assert claim_path.read_text() == before  # nothing reserved, nothing written
    # once root's pod let it go, the claim is alice's to take
    assert box.cli(None, "rm", "rootheld").returncode == 0
    r = box.cli(ALICE, "admit", str(mine))
    assert r.returncode == 0, r.stdout + r.stderr
    assert _results(box, ALICE, "sharer") == {loop: "ok"}
    # and root may still share a member's claim (root's choice)
    r = box.cli(None, "admit", str(_claim_pod(tmp_path / "rootshare.json", "rootshare", "held", [loop], None)))
    assert r.returncode == 0, r.stdout + r.stderr
    assert _results(box, None, "rootshare") == {loop: "ok"}
    for name, user in (("sharer", ALICE), ("rootshare", None)):
        assert box.cli(user, "rm", name).returncode == 0
