"""The users' Vagrantfile stays valid and describes the same machine as the qemu tier's
numa2 guest (whose guest tests then speak for it), and both provision with the same script.

A Vagrant VM cannot boot here (no box can be downloaded), so `vagrant validate` (with the
vagrant-libvirt plugin, which checks the provider block's settings) is the check; it is
skipped, with the reason, where vagrant is not installed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.vm.topologies import TOPOLOGIES

VAGRANT_DIR = Path(__file__).resolve().parents[2] / "vagrant"


def constants() -> dict[str, int]:
    text = (VAGRANT_DIR / "Vagrantfile").read_text()
    return {k: int(v) for k, v in re.findall(r"^([A-Z_]+) = (\d+)", text, re.MULTILINE)}


def test_vagrantfile_machine_is_the_numa2_guest() -> None:
    c, numa2 = constants(), TOPOLOGIES["numa2"]
    assert (c["SOCKETS"], c["CORES"], c["THREADS"]) == (numa2.sockets, numa2.cores, numa2.threads)
    assert c["MEMORY_MIB"] == numa2.mem_mib
    assert len(numa2.nodes) == c["SOCKETS"], "the Vagrantfile puts one NUMA node on each socket"


def test_vagrant_and_qemu_tier_provision_with_the_same_script() -> None:
    vf = (VAGRANT_DIR / "Vagrantfile").read_text()
    assert re.search(r'provision\s+"hwagent",\s*type:\s*"shell",\s*path:\s*"provision.sh"', vf)
    guest = (Path(__file__).parent / "guest" / "test_hwagent_run.py").read_text()
    assert 'REPO / "vagrant" / "provision.sh"' in guest
    assert subprocess.run(["bash", "-n", str(VAGRANT_DIR / "provision.sh")]).returncode == 0


@pytest.mark.slow
def test_vagrant_validate(tmp_path: Path) -> None:
    vagrant = shutil.which("vagrant")
    if vagrant is None:
        pytest.skip("vagrant is not installed (apt-get install vagrant vagrant-libvirt to validate the Vagrantfile)")
    plugins = subprocess.run([vagrant, "plugin", "list"], capture_output=True, text=True, timeout=120).stdout
    if "vagrant-libvirt" not in plugins:
        pytest.skip("vagrant-libvirt plugin missing: the libvirt provider block cannot be validated")
    # a copy: validate writes .vagrant/ beside the Vagrantfile
    work = tmp_path / "vagrant"
    shutil.copytree(VAGRANT_DIR, work, ignore=shutil.ignore_patterns(".vagrant"))
    p = subprocess.run([vagrant, "validate"], cwd=work, capture_output=True, text=True, timeout=300,
                       env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "VAGRANT_CHECKPOINT_DISABLE": "1"})
    assert p.returncode == 0, p.stdout + p.stderr
    assert "validated successfully" in p.stdout
