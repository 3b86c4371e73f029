"""The built wheel works outside the checkout: probes in BPF mode, unit, config.

This is what an operator does on a fresh node: build (or download) the wheel,
install it into a venv (with system site-packages, for Debian's bcc), and run
it from anywhere. Nothing here may find the checkout: the commands run from /
with the wheel's own files, so a data file left out of the wheel fails here.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _git_files() -> list[str]:
    r = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO, capture_output=True, check=True)
    return [f for f in r.stdout.decode().split("\0") if f]


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> dict[str, Path]:
    """sdist and wheel built from a copy of the files git knows (what a clean clone has once committed)."""
    src = tmp_path_factory.mktemp("src")
    for f in _git_files():
        if (REPO / f).is_file():
            (src / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / f, src / f)
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out), str(src)],
        check=True, timeout=300,
    )
    subprocess.run(
        [sys.executable, "-c", f"from setuptools import build_meta as b; b.build_sdist({str(out)!r})"],
        cwd=src, check=True, timeout=300, capture_output=True,
    )
    (wheel,) = out.glob("hwagent-*.whl")
    (sdist,) = out.glob("hwagent-*.tar.gz")
    return {"wheel": wheel, "sdist": sdist}


def _data_files(names: list[str]) -> set[str]:
    marker = ".data/data/share/hwagent/"
    return {n.split(marker, 1)[1] for n in names if marker in n}


def test_wheel_carries_probes_unit_docs_and_generated_protos(dist):
    names = zipfile.ZipFile(dist["wheel"]).namelist()
    data = _data_files(names)
    probes = sorted(p.name for p in (REPO / "probes").iterdir() if p.suffix in (".c", ".h"))
    assert probes and {f"probes/{p}" for p in probes} <= data
    assert "systemd/hwagent.service" in data
    assert "docs/config.md" in data
    assert any(n.startswith("agent/api/deviceplugin/v1beta1/api_pb2") for n in names)
    assert "agent/py.typed" in names


def test_sdist_builds_a_wheel_with_the_same_files(dist, tmp_path):
    """The sdist is complete: a wheel built from it (isolated build) has the same content."""
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(dist["sdist"])],
        check=True, timeout=600,
    )
    (rebuilt,) = tmp_path.glob("hwagent-*.whl")
    assert sorted(zipfile.ZipFile(rebuilt).namelist()) == sorted(zipfile.ZipFile(dist["wheel"]).namelist())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def venv(dist, tmp_path_factory) -> Path:
    """A fresh venv on Debian's python with system site-packages (bcc), the wheel installed."""
    v = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(v)], check=True, timeout=120)
    subprocess.run([str(v / "bin/python"), "-m", "pip", "install", "-q", str(dist["wheel"])], check=True, timeout=600)
    return v


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("HWAGENT_", "PYTHON", "VIRTUAL_ENV"))}


@pytest.mark.root
@pytest.mark.bpf
def test_installed_daemon_runs_its_probes_in_bpf_mode(venv, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root for BPF")
    hwagent = venv / "bin/hwagent"
    r = subprocess.run([str(hwagent), "doctor"], cwd="/", env=_clean_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    port = _free_port()
    root = tmp_path / "root"
    proc = subprocess.Popen(
        # a lock dir of its own: daemons of other suites on this machine claim every CPU too
        [str(hwagent), "run", "--root-dir", str(root), "--metrics-address", f"127.0.0.1:{port}", "--mode", "standalone",
         "--lock-dir", str(tmp_path / "locks")],
        cwd="/", env=_clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        deadline = time.monotonic() + 240
        attached: dict[str, str] = {}
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            except OSError:
                time.sleep(0.5)
                continue
            attached = {
                line.split('probe="')[1].split('"')[0]: line.rsplit(" ", 1)[1]
                for line in text.splitlines()
                if line.startswith("hwagent_pressure_probe_attached{") and 'mode="bpf"' in line
            }
            if attached and all(v == "1.0" for v in attached.values()):
                break
            time.sleep(0.5)
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        assert attached.get("runqlat") == "1.0", attached
        assert all(v == "1.0" for v in attached.values()), attached
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    # the probes were found in the venv's share dir, not in a checkout
    assert (venv / "share/hwagent/probes/runqlat.c").is_file()


def test_install_unit_points_at_the_installed_entry_point(venv, tmp_path):
    hwagent = venv / "bin/hwagent"
    r = subprocess.run(
        [str(hwagent), "install-unit", "--dest", str(tmp_path)], cwd="/", env=_clean_env(),
        capture_output=True, text=True, timeout=60,
    )
    assert r.returncode == 0, r.stderr
    unit = (tmp_path / "etc/systemd/system/hwagent.service").read_text()
    (exec_start,) = [line for line in unit.splitlines() if line.startswith("ExecStart=")]
    assert exec_start.split()[0] == f"ExecStart={hwagent}"
    assert "--config /etc/hwagent/config.toml" in exec_start
    assert str(REPO) not in unit
    config = tmp_path / "etc/hwagent/config.toml"
    # the commented defaults load, and mean exactly the defaults
    shown = subprocess.run(
        [str(hwagent), "run", "--config", str(config), "--print-config"], cwd="/", env=_clean_env(),
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout
    defaults = subprocess.run(
        [str(hwagent), "run", "--print-config"], cwd="/", env=_clean_env(), capture_output=True, text=True,
        timeout=60, check=True,
    ).stdout
    assert shown == defaults
    if shutil.which("systemd-analyze"):
        v = subprocess.run(
            ["systemd-analyze", "verify", str(tmp_path / "etc/systemd/system/hwagent.service")],
            capture_output=True, text=True, timeout=60,
        )
        assert v.returncode == 0 and not v.stdout.strip() and not v.stderr.strip(), v.stdout + v.stderr
