"""The NRI bench's floors and driver are real NRI peers, checked against the real containerd.

bench/nri.py compares hwagent's plugin with two floor plugins and times them
through nripeer's runtime side; a floor that did not really register, or
whose adjustment the runtime did not apply, would make every ratio a lie. So:

- the Python floor (bench/nri_floor/floor.py) and the Go floor (``nripeer floor``,
  NRI's own stub) each register with a private containerd (1.7 on PATH, or
  ``HWAGENT_CONTAINERD``), and a pod's container run through the CRI gets the
  cpuset they answer (``Cpus_allowed_list`` of its process, as the kernel applies it);
- ``nripeer drive`` (containerd's NRI adaptation) synchronizes a plugin with the
  containers it was asked for, and every timed CreateContainer comes back with
  that plugin's adjustment.

The Go parts need nripeer (tests/peer/nri/build.sh, which needs Go and a containerd
git dir): ``HWAGENT_NRIPEER`` names it, default /tmp/nri-peer-build/bin/nripeer;
without it they are skipped with that reason (CI has no Go).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cgroup_support import rmdir_cgroup_tree
from tests.integration.nri.containerd import Containerd, skip_reason
from tests.integration.nri.cri import CriClient
from tests.integration.nri.image import IMAGE, build_pause_archive

pytestmark = [pytest.mark.root, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[3]
FLOOR_PY = REPO / "bench" / "nri_floor" / "floor.py"
NRIPEER = Path(os.environ.get("HWAGENT_NRIPEER", "/tmp/nri-peer-build/bin/nripeer"))
_SKIP = skip_reason() or (None if shutil.which("gcc") else "needs gcc (the pause image)")
if _SKIP:
    pytestmark.append(pytest.mark.skip(reason=_SKIP))
needs_nripeer = pytest.mark.skipif(not NRIPEER.is_file(),
                                   reason=f"no {NRIPEER} (tests/peer/nri/build.sh builds it; needs Go)")


def floor_argv(kind: str, socket: Path, cpus: str, mems: str) -> list[str]:
    if kind == "go":
        return [str(NRIPEER), "floor", "--socket", str(socket), "--cpus", cpus, "--mems", mems]
    return [sys.executable, str(FLOOR_PY), "--socket", str(socket), "--cpus", cpus, "--mems", mems]


@pytest.fixture
def world() -> Iterator[dict[str, Any]]:
    base = Path(tempfile.mkdtemp(prefix="nri-floor-", dir="/tmp"))
    ctd = Containerd(base)
    parent = f"/hwagent-nri-floor-test-{uuid.uuid4().hex[:8]}"
    procs: list[subprocess.Popen[bytes]] = []
    cri: CriClient | None = None
    try:
        archive = build_pause_archive(base)
        ctd.start()
        ctd.ctr("images", "import", str(archive))
        cri = CriClient(ctd.cri_socket)
        yield {"containerd": ctd, "cri": cri, "parent": parent, "procs": procs, "base": base}
    finally:
        if cri is not None:
            for pod_id in cri.pod_ids():
                cri.remove_pod(pod_id)
            cri.close()
        for p in procs:
            p.kill()
            p.wait()
        ctd.stop()
        for h in Path("/sys/fs/cgroup").iterdir():
            if (h / parent.lstrip("/")).is_dir():
                rmdir_cgroup_tree(h / parent.lstrip("/"))
        shutil.rmtree(base, ignore_errors=True)


def _allowed(pid: int) -> tuple[str, str]:
    status = dict(line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":\t" in line)
    return status["Cpus_allowed_list"].strip(), status["Mems_allowed_list"].strip()


@pytest.mark.parametrize("kind", ["py", pytest.param("go", marks=needs_nripeer)])
def test_floor_registers_and_its_cpuset_reaches_the_container(world: dict[str, Any], kind: str) -> None:
    ctd: Containerd = world["containerd"]
    cri: CriClient = world["cri"]
    name = "floor" if kind == "go" else "pyfloor"
    world["procs"].append(subprocess.Popen(floor_argv(kind, ctd.nri_socket, "0", "0"), cwd=REPO,
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    ctd.wait_log(rf'plugin \\?"90-{name}\\?" connected', timeout=20)

    pod = cri.run_pod("floor-1", "default", "uid-floor-1", cgroup_parent=world["parent"],
                      log_dir=world["base"] / "logs")
    cid = cri.create_container(pod, "main", IMAGE, cpu_shares=256, memory_limit=64 << 20)
    cri.start_container(cid)
    assert _allowed(cri.container_pid(cid)) == ("0", "0")


@needs_nripeer
@pytest.mark.parametrize("known", [3, 1000])
def test_driver_synchronizes_the_plugin_and_times_each_create_with_its_adjustment(tmp_path: Path,
                                                                                   known: int) -> None:
    socket = Path(tempfile.mkdtemp(prefix="nri-drive-", dir="/tmp")) / "nri.sock"
    pid_file = socket.parent / "pid"
    drive = subprocess.Popen([str(NRIPEER), "drive", "--socket", str(socket), "--known", str(known), "--rounds", "3",
                              "--batch", "4", "--plugin-pid-file", str(pid_file)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    floor = None
    try:
        deadline = time.monotonic() + 20
        while not socket.is_socket():
            assert drive.poll() is None and time.monotonic() < deadline, drive.stderr.read() if drive.stderr else ""
            time.sleep(0.02)
        # the floor reads its pid file only after the sync: write it as soon as the floor exists
        floor = subprocess.Popen(floor_argv("py", socket, "0-1", "0"), cwd=REPO)
        pid_file.write_text(str(floor.pid))
        out, err = drive.communicate(timeout=120)
    finally:
        if drive.poll() is None:
            drive.kill()
        if floor is not None:
            floor.kill()
            floor.wait()
        shutil.rmtree(socket.parent, ignore_errors=True)
    assert drive.returncode == 0, err.decode()[-2000:]
    res = json.loads(out)
    assert res["known"] == known and res["sync_failures"] == [] and res["errors"] == []
    assert len(res["round_trip_us"]) == 12 and all(us > 0 for us in res["round_trip_us"])
    assert res["adjustments"] == {"cpus=0-1 mems=0": 12}  # the plugin's answer, every time
    assert res["plugin_pid"] > 0 and res["plugin_cpu_ns"] > 0  # the plugin's CPU was read, not assumed
