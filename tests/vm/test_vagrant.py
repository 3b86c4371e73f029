"""The users' Vagrantfile stays valid and describes the same machine as the qemu tier's
numa2 guest (whose guest tests then speak for it), and both provision with the same script.

A Vagrant VM cannot boot here (no box can be downloaded), so `vagrant validate` (with the
vagrant-libvirt plugin, which checks the provider block's settings) is the check; it is
skipped, with the reason, where vagrant is not installed.
"""

from __future__ import annotations

import ipaddress
import json
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


def test_vagrantfile_without_kvm_uses_domain_type_qemu_with_an_intel_model() -> None:
    """HWAGENT_VAGRANT_DRIVER=qemu is the one setting a user without usable KVM adds: libvirt's
    domain type qemu (TCG) and a named Intel model (host-passthrough needs KVM)."""
    vf = (VAGRANT_DIR / "Vagrantfile").read_text()
    branch = re.search(r'if ENV\.fetch\("HWAGENT_VAGRANT_DRIVER", "kvm"\) == "qemu"\n(.*?)\n\s*else\n(.*?)\n\s*end', vf,
                       re.DOTALL)
    assert branch, "the Vagrantfile picks the domain type from HWAGENT_VAGRANT_DRIVER"
    tcg, kvm = branch.groups()
    assert 'lv.driver = "qemu"' in tcg and 'lv.cpu_model = "Nehalem"' in tcg
    assert 'lv.cpu_mode = "host-passthrough"' in kvm
    assert "HWAGENT_VAGRANT_DRIVER=qemu" in (VAGRANT_DIR / "README.md").read_text()


def test_box_metadata_and_defaults_are_a_libvirt_box_of_the_tier_image() -> None:
    from tests.vm import vagrant_box

    assert json.loads(vagrant_box.metadata(16)) == {"provider": "libvirt", "format": "qcow2", "virtual_size": 16}
    vf = vagrant_box.box_vagrantfile(Path("/var/cache/hwagent-vm/abc/modules"))
    assert 'lv.kernel = File.join(__dir__, "vmlinuz")' in vf
    assert "vmbox.modules=/var/cache/hwagent-vm/abc/modules" in vf
    assert "path=/,security_model=none,readonly=on" in vf, "the host's / goes in read-only"
    assert vagrant_box.BOX_NAME in (VAGRANT_DIR / "Vagrantfile").read_text()


def test_test_network_avoids_every_route_of_the_host() -> None:
    from tests.vm.libvirt_host import free_subnet, network_xml

    used = [ipaddress.IPv4Network("192.168.0.0/17"), ipaddress.IPv4Network("10.0.0.0/8")]
    net = free_subnet(used, seed=0)
    assert not any(net.overlaps(u) for u in used)
    assert free_subnet([], seed=7) != free_subnet([], seed=8), "runs side by side pick different subnets"
    xml = network_xml("hwvt1-net", "hwvt1", net)
    assert f"<ip address='{net[1]}' netmask='255.255.255.0'>" in xml and "<forward mode='nat'/>" in xml
