"""`hwagent slurm conf` as an administrator runs it: on a snapshot (--sysfs-root), with rules and
reservations from --config, the parts alone (--only), and its errors.

Expected values come from the snapshot: 32em64t-2n8c+dax+nvme+mic+dimms has 2 NUMA nodes of 8
cores (CPUs 0-7 and 8-15) with eight ioatdma DMA functions on each.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

SNAP = "32em64t-2n8c+dax+nvme+mic+dimms"
DMA = ('[devices]\ndefault_rules = false\n[[devices.resources]]\nname = "example.com/dma"\n'
       'pci_class = ["0880"]\ndriver = ["ioatdma"]\n')


def _conf(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agent", "slurm", "conf", *args],
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def snapshot(hwloc_extract):
    return hwloc_extract(SNAP)


def _memtotal_kib(root) -> int:
    line = next(x for x in (root / "proc" / "meminfo").read_text().splitlines() if x.startswith("MemTotal:"))
    return int(line.split()[1])


def test_snapshot_node_line_and_gres_per_numa_node(snapshot, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(DMA)
    r = _conf("--config", str(cfg), "--sysfs-root", str(snapshot / "sys"), "--node-name", "n32")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "GresTypes=dma" in lines
    node = next(x for x in lines if x.startswith("NodeName=n32 CPUs="))
    # MemTotal of the snapshot's /proc/meminfo, in MiB (below 64 GiB the float is exact)
    mib = _memtotal_kib(snapshot) // 1024
    assert node.startswith("NodeName=n32 CPUs=16 Boards=1 SocketsPerBoard=2 CoresPerSocket=8 ThreadsPerCore=1 "
                           f"RealMemory={mib} Gres=")
    gres = [x for x in lines if " Name=dma " in x]
    assert len(gres) == 16
    assert sum(x.endswith(" Cores=0-7") for x in gres) == 8 and sum(x.endswith(" Cores=8-15") for x in gres) == 8
    assert all(" Count=1 " in x and " Type=pci_8086_3c2" in x for x in gres)
    # the node's Gres= adds up to the lines
    spec = node.split(" Gres=", 1)[1].split(",")
    assert sum(int(s.rsplit(":", 1)[1]) for s in spec) == 16


def test_only_parts_and_reservations(snapshot, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[cpu]\nreserved_cpu_list = "8"\n[memory]\nreserved_memory = ["0:memory=1536Mi"]\n' + DMA)
    base = ("--config", str(cfg), "--sysfs-root", str(snapshot / "sys"), "--node-name", "n32")
    node = _conf(*base, "--only", "node")
    assert node.returncode == 0, node.stderr
    assert len(node.stdout.splitlines()) == 1
    # kernel CPU 8 is the first core of the second socket: abstract CPU 8 too here (cores 0-7, 8-15)
    assert " CpuSpecList=8 MemSpecLimit=1536 " in node.stdout
    assert "reserved CPUs 8" in node.stderr
    count = _conf(*base, "--only", "node", "--cpu-spec", "count")
    assert " CoreSpecCount=1 MemSpecLimit=1536 " in count.stdout
    gres = _conf(*base, "--only", "gres")
    assert gres.stdout.splitlines() and all(x.startswith("NodeName=n32 Name=dma ") for x in gres.stdout.splitlines())


@pytest.mark.parametrize("args, why", [
    (("--gres-name", "example.com/dma=bad:name"), "use a letter"),
    (("--gres-name", "nonsense"), "write RESOURCE=NAME"),
])
def test_bad_names_are_refused(snapshot, tmp_path, args, why):
    cfg = tmp_path / "c.toml"
    cfg.write_text(DMA)
    r = _conf("--config", str(cfg), "--sysfs-root", str(snapshot / "sys"), *args)
    assert r.returncode == 2 and why in r.stderr and r.stdout == ""


def test_reserving_all_memory_is_refused(snapshot, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[memory]\nreserved_memory = ["0:memory=1Ti"]\n')
    r = _conf("--config", str(cfg), "--sysfs-root", str(snapshot / "sys"))
    assert r.returncode == 2 and "MemSpecLimit" in r.stderr and r.stdout == ""
