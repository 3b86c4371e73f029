"""`hwagent devices` on fixture trees: text/json output, rules from a config,
conflicts and bad input."""

from __future__ import annotations

import json

from agent.cli import main
from tests.unit.devices.fakesysfs import FakeSysfs


def _tree(tmp_path):
    fs = FakeSysfs(tmp_path / "sys")
    fs.pci("0000:5e:00.0", vendor="144d", device="a808", cls="010802", driver="nvme", numa=1)
    fs.child("0000:5e:00.0", "nvme/nvme0", dev="240:0", devname="nvme0")
    fs.pci("0000:3b:00.0", vendor="15b3", device="1017", driver="mlx5_core", numa=0, totalvfs=2)
    fs.vf("0000:3b:00.0", 0, "0000:3b:00.2", vendor="15b3", device="1018", driver="vfio-pci", numa=0, iommu=7)
    fs.virtual_block("loop5", "7:5")
    return fs


def test_json_lists_devices_numa_resource_health(tmp_path, capsys):
    fs = _tree(tmp_path)
    assert main(["devices", "--sysfs-root", str(fs.root), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = {r["id"]: r for r in out["devices"]}
    assert rows["0000:5e:00.0"]["resource"] == "hwagent.io/nvme" and rows["0000:5e:00.0"]["numa_node"] == 1
    assert rows["0000:5e:00.0"]["health"] == "Healthy" and rows["0000:5e:00.0"]["dev_nodes"] == ["/dev/nvme0"]
    assert rows["0000:3b:00.2"]["resource"] == "hwagent.io/sriov-vf"
    assert rows["0000:3b:00.2"]["sriov"] == "vf of 0000:3b:00.0" and rows["0000:3b:00.2"]["iommu_group"] == 7
    assert rows["0000:3b:00.0"]["sriov"] == "pf 1/2 vfs" and rows["0000:3b:00.0"]["resource"] is None
    assert rows["loop5"]["resource"] is None
    assert out["resources"] == {"hwagent.io/nvme": ["0000:5e:00.0"], "hwagent.io/sriov-vf": ["0000:3b:00.2"]}


def test_text_with_config_rules(tmp_path, capsys):
    fs = _tree(tmp_path)
    cfg = tmp_path / "hwagent.toml"
    cfg.write_text('[[devices.resources]]\nname = "example.com/scratch"\nblock_name = ["loop*"]\n')
    assert main(["devices", "--config", str(cfg), "--sysfs-root", str(fs.root), "--offered"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:2] == ["ID", "KIND"]
    loop = next(line for line in lines if line.startswith("loop5"))
    assert "example.com/scratch" in loop and "Healthy" in loop and "/dev/loop5" in loop
    assert len(lines) == 4  # header + nvme + vf + loop5 (--offered)


def test_conflict_exits_1_and_bad_input_exits_2(tmp_path, capsys):
    fs = _tree(tmp_path)
    cfg = tmp_path / "c.toml"
    cfg.write_text('[[devices.resources]]\nname = "example.com/vf"\nvendor = ["15b3"]\nsriov = "vf"\n')
    assert main(["devices", "--config", str(cfg), "--sysfs-root", str(fs.root)]) == 1
    err = capsys.readouterr().err
    assert "0000:3b:00.2 is matched by hwagent.io/sriov-vf and example.com/vf" in err
    assert main(["devices", "--sysfs-root", str(tmp_path / "nope")]) == 2
    assert "does not look like a sysfs tree" in capsys.readouterr().err
    cfg.write_text('[[devices.resources]]\nname = "vf"\nvendor = ["15b3"]\n')
    assert main(["devices", "--config", str(cfg), "--sysfs-root", str(fs.root)]) == 2
    assert "domain prefix" in capsys.readouterr().err


PCI_IDS = """# a few lines in pci.ids format
144d  Samsung Electronics Co Ltd
\ta808  NVMe SSD Controller SM981/PM981/PM983
15b3  Mellanox Technologies
\t1017  MT27800 Family [ConnectX-5]
\t\t15b3 0020  ConnectX-5 EN
\t1018  MT27800 Family [ConnectX-5 Virtual Function]
C 01  Mass storage controller
\t08  Non-Volatile memory controller
\t\t02  NVM Express
C 02  Network controller
\t00  Ethernet controller
"""


def test_default_view_groups_by_numa_node_and_resource_with_names(tmp_path, capsys, monkeypatch):
    ids = tmp_path / "pci.ids"
    ids.write_text(PCI_IDS)
    monkeypatch.setenv("HWAGENT_PCI_IDS", str(ids))
    fs = _tree(tmp_path)
    assert main(["devices", "--sysfs-root", str(fs.root)]) == 0
    out = capsys.readouterr().out
    node0, node1 = out.index("NUMA node 0"), out.index("NUMA node 1")
    vf = out.index("hwagent.io/sriov-vf: 1 device")
    nvme = out.index("hwagent.io/nvme: 1 device")
    assert node0 < vf < node1 < nvme < out.index("no NUMA node")
    assert "Samsung Electronics Co Ltd NVMe SSD Controller SM981/PM981/PM983 [144d:a808]" in out
    assert "Mellanox MT27800 Family [ConnectX-5 Virtual Function] [15b3:1018]" in out
    assert "not offered: 1 (1 block)" in out  # loop5 under no NUMA node
    assert main(["devices", "--sysfs-root", str(fs.root), "--format", "json"]) == 0
    rows = {r["id"]: r for r in json.loads(capsys.readouterr().out)["devices"]}
    assert rows["0000:5e:00.0"]["class_name"] == "Non-Volatile memory controller"
    assert rows["0000:3b:00.0"]["vendor_name"] == "Mellanox Technologies"
    assert main(["devices", "--sysfs-root", str(fs.root), "--all"]) == 0
    assert capsys.readouterr().out.splitlines()[0].split()[:2] == ["ID", "KIND"]


def test_without_pci_ids_the_hex_ids_are_printed(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HWAGENT_PCI_IDS", str(tmp_path / "none"))
    monkeypatch.setattr("agent.devices.pciids.PCI_IDS_PATHS", ())
    fs = _tree(tmp_path)
    assert main(["devices", "--sysfs-root", str(fs.root)]) == 0
    out = capsys.readouterr().out
    assert "  144d:a808  " in out or " 144d:a808 " in out
    assert "Samsung" not in out
