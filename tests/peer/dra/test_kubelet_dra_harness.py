"""Optional tier: the kubelet's own DRA manager and plugin watcher (Kubernetes 1.32, built from
kubeedge's vendored tree by tests/peer/dra/build.sh) against hwagent's DRA driver.

Skips with the reason when the harness binary is absent (CI has no fetched Go tree): set
HWAGENT_DRA_HARNESS to the binary, or build it to the default /tmp/hwagent-dra-peer/draharness.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
HARNESS = Path(os.environ.get("HWAGENT_DRA_HARNESS", "/tmp/hwagent-dra-peer/draharness"))

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(not os.access(HARNESS, os.X_OK),
                       reason=f"no DRA harness binary at {HARNESS} (build it with tests/peer/dra/build.sh "
                              "KUBEEDGE_GIT_DIR GO, or set HWAGENT_DRA_HARNESS)"),
]


def _harness(kubelet: Path, claim: Path, cdi: Path) -> tuple[subprocess.CompletedProcess, dict[str, str]]:
    run = subprocess.run([str(HARNESS), "--kubelet-root", str(kubelet), "--claim", str(claim),
                          "--cdi-dir", str(cdi), "--want-nodes", "/dev/loop1,/dev/loop2"],
                         capture_output=True, text=True, timeout=150)
    lines = run.stdout.splitlines()
    verdicts = {line.split(":", 1)[0].split(" ", 1)[1]: line.split(" ", 1)[0] for line in lines if " " in line}
    assert run.returncode == 0 and set(verdicts.values()) == {"PASS"}, run.stdout + run.stderr[-2000:]
    for check in ("register", "prepare", "container-cdi-devices", "cdi-resolves", "container-device-nodes",
                  "prepare-again-same-answer", "unprepare", "unknown-claim-per-claim-error"):
        assert check in verdicts, f"the harness did not run {check}: {run.stdout}"
    return run, verdicts


def test_the_kubelets_dra_manager_prepares_through_hwagent(tmp_path: Path) -> None:
    kubelet, root, cdi = tmp_path / "kubelet", tmp_path / "root", tmp_path / "cdi"
    for d in (kubelet, root, cdi):
        d.mkdir()
    log = (tmp_path / "hwside.log").open("w")
    hw = subprocess.Popen([sys.executable, str(REPO / "tests/peer/dra/hwside.py"), str(kubelet), str(root), str(cdi),
                           str(tmp_path / "claim.json")], cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    try:
        deadline = time.monotonic() + 60
        while "READY" not in (tmp_path / "hwside.log").read_text():
            assert hw.poll() is None, (tmp_path / "hwside.log").read_text()
            assert time.monotonic() < deadline, "hwagent's side did not come up"
            time.sleep(0.05)
        _harness(kubelet, tmp_path / "claim.json", cdi)
    finally:
        hw.send_signal(signal.SIGTERM)
        hw.wait(timeout=30)
        log.close()
    # the kubelet told hwagent its registration stands
    assert '"registered": true' in (tmp_path / "hwside.log").read_text()


CONFIG = """[daemon]
root_dir = "{root}"
lock_dir = "{locks}"
mode = "kubelet"
kubelet_root_dir = "{kubelet}"
metrics_address = "127.0.0.1:0"
sysfs_root = "{sysfs}"

[devices]
hotplug = false

[[devices.resources]]
name = "example.com/scratch"
block_name = ["loop*"]
api = "dra"

[cpu]
enabled = false

[pressure]
enabled = false

[memory]
enabled = false

[kubelet]
pod_awareness = false
eviction_plugin = false

[dra]
cdi_dir = "{cdi}"
"""


def test_the_kubelets_dra_manager_prepares_through_hwagent_run(tmp_path: Path) -> None:
    """The same checks against a whole daemon (`hwagent run --mode kubelet`): the DRA driver
    component, the kubelet plugin component, discovery of four loop disks from a sysfs tree."""
    pytest.importorskip("agent.dra.component", reason="the DRA driver component is not in this tree")
    sys.path.insert(0, str(REPO))
    from tests.peer.dra import hwside
    from tests.unit.devices.fakesysfs import FakeSysfs

    import shutil
    import tarfile
    import tempfile

    short = Path(tempfile.mkdtemp(prefix="hwdra-"))  # socket paths must fit in 107 bytes
    kubelet, root, cdi = short / "k", short / "r", tmp_path / "cdi"
    for d in (kubelet, root, cdi):
        d.mkdir()

    # a real machine's CPU topology (the daemon reads it at start), four loop disks added
    with tarfile.open(REPO / "tests/fixtures/hwloc-linux/2i386-2c-nohugepage.tar.bz2") as tf:
        tf.extractall(tmp_path / "snap")  # noqa: S202 - the project's own fixture
    fs = FakeSysfs(next((tmp_path / "snap").glob("*/sys")))
    for i in range(4):
        fs.virtual_block(f"loop{i}", f"7:{i}")
    hwside.write_files(root, tmp_path / "claim.json")
    cfg = tmp_path / "hwagent.toml"
    cfg.write_text(CONFIG.format(root=root, kubelet=kubelet, sysfs=fs.root, cdi=cdi, locks=tmp_path / "locks"))
    log = (tmp_path / "hwagent.log").open("w")
    hw = subprocess.Popen([sys.executable, "-m", "agent", "run", "--config", str(cfg)], cwd=REPO, stdout=log,
                          stderr=subprocess.STDOUT, env=dict(os.environ, NODE_NAME=hwside.NODE))
    reg = kubelet / "plugins_registry" / f"{hwside.DRIVER}-reg.sock"
    try:
        deadline = time.monotonic() + 90
        while not reg.exists():
            assert hw.poll() is None, (tmp_path / "hwagent.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "hwagent run did not bind its DRA registration socket"
            time.sleep(0.05)
        _harness(kubelet, tmp_path / "claim.json", cdi)
        status = subprocess.run([sys.executable, "-m", "agent", "status", "--config", str(cfg)], cwd=REPO,
                                capture_output=True, text=True, timeout=60)
    finally:
        hw.send_signal(signal.SIGTERM)
        hw.wait(timeout=60)
        log.close()
        shutil.rmtree(short, ignore_errors=True)
    assert hw.returncode == 0, (tmp_path / "hwagent.log").read_text()[-3000:]
    assert "registered, 4 prepare calls" in status.stdout, status.stdout + status.stderr
    assert not reg.exists()
