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
        run = subprocess.run([str(HARNESS), "--kubelet-root", str(kubelet), "--claim", str(tmp_path / "claim.json"),
                              "--cdi-dir", str(cdi), "--want-nodes", "/dev/loop1,/dev/loop2"],
                             capture_output=True, text=True, timeout=150)
    finally:
        hw.send_signal(signal.SIGTERM)
        hw.wait(timeout=30)
        log.close()
    lines = run.stdout.splitlines()
    verdicts = {line.split(":", 1)[0].split(" ", 1)[1]: line.split(" ", 1)[0] for line in lines if " " in line}
    assert run.returncode == 0 and set(verdicts.values()) == {"PASS"}, run.stdout + run.stderr[-2000:]
    for check in ("register", "prepare", "container-cdi-devices", "cdi-resolves", "container-device-nodes",
                  "prepare-again-same-answer", "unprepare", "unknown-claim-per-claim-error"):
        assert check in verdicts, f"the harness did not run {check}: {run.stdout}"
    # the kubelet told hwagent its registration stands
    assert '"registered": true' in (tmp_path / "hwside.log").read_text()
