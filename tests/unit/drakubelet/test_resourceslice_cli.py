"""`hwagent devices --format resourceslice`: YAML that kubectl would take, valid against the
Kubernetes 1.34 OpenAPI schema (resource.k8s.io/v1), with the attributes and sizes of discovery."""

from __future__ import annotations

import copy

import pytest
import yaml

from agent.cli import main
from tests.unit.devices.fakesysfs import FakeSysfs

kubernetes_validate = pytest.importorskip("kubernetes_validate")
#: resource.k8s.io/v1 went GA in 1.34: the oldest schema that has it
K8S = "1.34.0"


#: both resources offered through DRA: the built-in NVMe rule re-declared with api = "dra"
DRA_RULES = ('[[devices.resources]]\nname = "example.com/scratch"\nblock_name = ["loop*"]\napi = "dra"\n'
             '[[devices.resources]]\nname = "hwagent.io/nvme"\npci_class = ["0108"]\ndriver = ["nvme"]\n'
             'api = "dra"\n')


def _slices(tmp_path, capsys, rules: str = DRA_RULES) -> list[dict]:
    fs = FakeSysfs(tmp_path / "sys")
    fs.pci("0000:5e:00.0", vendor="144d", device="a808", cls="010802", driver="nvme", numa=1)
    fs.child("0000:5e:00.0", "nvme/nvme0", dev="240:0", devname="nvme0")
    loop = fs.virtual_block("loop5", "7:5")
    (loop / "size").write_text("2048\n")
    cfg = tmp_path / "hwagent.toml"
    cfg.write_text(rules)
    assert main(["devices", "--config", str(cfg), "--sysfs-root", str(fs.root), "--format", "resourceslice",
                 "--node-name", "worker-1"]) == 0
    return yaml.safe_load(capsys.readouterr().out)


def test_slices_validate_against_the_schema(tmp_path, capsys) -> None:
    slices = _slices(tmp_path, capsys)
    assert [s["spec"]["pool"]["name"] for s in slices] == ["worker-1/example.com/scratch", "worker-1/hwagent.io/nvme"]
    for doc in slices:
        kubernetes_validate.validate(doc, K8S, strict=True)
        kubernetes_validate.validate(doc, kubernetes_validate.utils.latest_version(), strict=True)
    # the check is real: a wrong attribute type is refused
    bad = copy.deepcopy(slices[1])
    bad["spec"]["devices"][0]["attributes"]["numaNode"] = {"int": "one"}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S, strict=True)


def test_device_plugin_resources_are_not_in_the_slices(tmp_path, capsys) -> None:
    """A resource the device plugins offer (the default api) is not published to DRA too."""
    rules = DRA_RULES.replace('api = "dra"\n', "", 1)  # scratch back to the device plugins
    assert [s["spec"]["pool"]["name"] for s in _slices(tmp_path, capsys, rules)] == ["worker-1/hwagent.io/nvme"]


def test_attributes_and_capacity_from_discovery(tmp_path, capsys) -> None:
    scratch, nvme = _slices(tmp_path, capsys)
    loop = scratch["spec"]["devices"][0]
    assert loop["name"] == "loop5" and loop["capacity"] == {"size": {"value": str(2048 * 512)}}
    assert loop["attributes"]["kind"] == {"string": "block"}
    dev = nvme["spec"]["devices"][0]
    assert dev["name"] == "pci-0000-5e-00-0"
    attrs = dev["attributes"]
    assert attrs["numaNode"] == {"int": 1}
    # ids stay strings through YAML (quoted, so no reader takes "010802" for a number)
    assert attrs["vendorID"] == {"string": "144d"} and attrs["pciClass"] == {"string": "010802"}
    assert attrs["resource.kubernetes.io/pciBusID"] == {"string": "0000:5e:00.0"}
    assert nvme["spec"]["nodeName"] == "worker-1" and nvme["spec"]["driver"] == "hwagent.io"
