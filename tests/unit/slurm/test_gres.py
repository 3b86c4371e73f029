"""gres.conf lines from the inventory, the rules and the topology (pure, synthetic devices).

The machine: 2 sockets x 1 NUMA node x 2 cores x 2 threads, siblings spread (synthetic):
node 0 holds cores 0,1 (kernel CPUs 0,1,4,5), node 1 holds cores 2,3 (CPUs 2,3,6,7), so a
device on node 1 is ``Cores=2-3`` in Slurm's numbering, not its kernel CPU ids.
"""

from __future__ import annotations

import pytest

from agent.cpuset import CPUSet
from agent.devices.config import ResourceRule
from agent.devices.model import Device, DevNode, Inventory, PCIInfo
from agent.devices.rules import assign
from agent.slurm.gres import GresNameError, gres_conf, gres_name, render_gres_line
from agent.topology.model import synthetic

TOPO = synthetic(sockets=2, numa_per_socket=1, cores_per_numa=2, threads_per_core=2)


def _block(name: str, numa: int | None) -> Device:
    return Device(name, "block", name, f"/sys/block/{name}", numa_node=numa,
                  dev_nodes=(DevNode(f"/dev/{name}", "block", 7, 0),))


def _gpu(addr: str, numa: int | None, device: str = "2330") -> Device:
    return Device(addr, "pci", addr, f"/sys/bus/pci/devices/{addr}", driver="nvidia", numa_node=numa,
                  pci=PCIInfo(addr, "10de", device, "030200"),
                  dev_nodes=(DevNode(f"/dev/dri/renderD{128 + int(addr[5:7], 16)}", "drm-render"),
                             DevNode(f"/dev/dri/card{int(addr[5:7], 16)}", "drm-card")))


def _net(name: str, numa: int | None) -> Device:
    return Device(name, "net", name, f"/sys/class/net/{name}", numa_node=numa)


def _conf(devs, rules, names=None):
    inv = Inventory({d.id: d for d in devs})
    return gres_conf(TOPO, inv, assign(inv, rules), rules, names)


def test_block_devices_one_file_each_cores_of_their_numa_node():
    rules = (ResourceRule(name="example.com/scratch", block_name=("loop*",)),)
    g = _conf([_block("loop0", 0), _block("loop1", 1), _block("loop2", None)], rules)
    lines = [render_gres_line("n1", x) for x in g.lines]
    assert lines == [
        "NodeName=n1 Name=scratch File=/dev/loop0 Cores=0-1",
        "NodeName=n1 Name=scratch File=/dev/loop1 Cores=2-3",
        "NodeName=n1 Name=scratch File=/dev/loop2",           # no NUMA node: any core
    ]
    assert g.node_gres == ("scratch:3",) and g.types == ("scratch",)


def test_pci_devices_are_typed_and_several_nodes_are_one_unit():
    rules = (ResourceRule(name="hwagent.io/gpu-nvidia", pci_class=("03",), vendor=("10de",),
                          dev_nodes=("drm-render", "drm-card"), extra_dev_nodes=("/dev/nvidiactl",)),)
    g = _conf([_gpu("0000:3b:00.0", 1), _gpu("0000:af:00.0", 0, "20b0")], rules)
    lines = [render_gres_line("n1", x) for x in g.lines]
    assert lines == [
        "NodeName=n1 Name=gpu_nvidia Type=pci_10de_2330 MultipleFiles=/dev/dri/renderD187,/dev/dri/card59 Cores=2-3",
        "NodeName=n1 Name=gpu_nvidia Type=pci_10de_20b0 MultipleFiles=/dev/dri/renderD303,/dev/dri/card175 Cores=0-1",
    ]
    assert g.node_gres == ("gpu_nvidia:pci_10de_20b0:1", "gpu_nvidia:pci_10de_2330:1")
    # the node every device shares is not a unit of its own
    assert any("/dev/nvidiactl" in n for n in g.notes)


def test_devices_without_files_are_counted_per_numa_node():
    rules = (ResourceRule(name="example.com/fast-net", net_name=("eth*",)),)
    g = _conf([_net("eth0", 0), _net("eth1", 0), _net("eth2", 1)], rules)
    assert [render_gres_line("n1", x) for x in g.lines] == [
        "NodeName=n1 Name=fast_net Count=2 Cores=0-1",
        "NodeName=n1 Name=fast_net Count=1 Cores=2-3",
    ]
    assert g.node_gres == ("fast_net:3",)


def test_names_collide_unless_given():
    rules = (ResourceRule(name="a.example/scratch", block_name=("loop0",)),
             ResourceRule(name="b.example/scratch", block_name=("loop1",)))
    devs = [_block("loop0", 0), _block("loop1", 0)]
    with pytest.raises(GresNameError, match="would both be GRES 'scratch'"):
        _conf(devs, rules)
    g = _conf(devs, rules, {"b.example/scratch": "scratch2"})
    assert g.types == ("scratch", "scratch2")
    with pytest.raises(GresNameError, match="use a letter"):
        _conf(devs, rules, {"b.example/scratch": "bad:name"})


def test_gres_name():
    assert gres_name("example.com/fast-nvme") == "fast_nvme"
    assert gres_name("hwagent.io/nvme") == "nvme"
    assert gres_name("example.com/3d") == "r_3d"


def test_cores_of_a_node_use_abstract_numbers_not_kernel_ids():
    # kernel CPUs of node 1 are 2,3,6,7; Slurm's cores of node 1 are 2,3
    assert TOPO.cpus_of_numa(1) == CPUSet([2, 3, 6, 7])
    g = _conf([_block("loop1", 1)], (ResourceRule(name="example.com/scratch", block_name=("loop*",)),))
    assert g.lines[0].cores == CPUSet([2, 3])


def test_interleaved_numbering_gives_contiguous_abstract_cores(hwloc_extract):
    # 4 sockets of 10 cores, kernel CPUs dealt round-robin: node 1 is CPUs 1,5,9,...,37. In
    # Slurm's numbering (socket-major) those are cores 10-19; "Cores=1,5,9,..." would name
    # cores of three other sockets
    from agent.topology.sysfs import read_topology

    root = hwloc_extract("40intel64-2g2n4c+pcilocality")
    topo = read_topology(str(root / "sys"), str(root / "proc"), log_warnings=False)
    assert topo.cpus_of_numa(1) == CPUSet(range(1, 40, 4))
    rules = (ResourceRule(name="example.com/scratch", block_name=("loop*",)),)
    inv = Inventory({"loop0": _block("loop0", 1)})
    g = gres_conf(topo, inv, assign(inv, rules), rules)
    assert render_gres_line("n40", g.lines[0]) == "NodeName=n40 Name=scratch File=/dev/loop0 Cores=10-19"
