"""`hwagent devices --format resourceslice`: YAML that kubectl would take, valid against the
Kubernetes 1.34 OpenAPI schema (resource.k8s.io/v1), with the attributes and sizes of discovery."""

from __future__ import annotations

import copy
import shutil
import subprocess

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
    return list(yaml.safe_load_all(capsys.readouterr().out))


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


def _stream(tmp_path, capsys) -> str:
    """The raw output, as `hwagent devices --format resourceslice | kubectl apply -f -` reads it."""
    _slices(tmp_path, capsys)  # (consumes the first run's output)
    fs_root = tmp_path / "sys"
    assert main(["devices", "--config", str(tmp_path / "hwagent.toml"), "--sysfs-root", str(fs_root),
                 "--format", "resourceslice", "--node-name", "worker-1"]) == 0
    return capsys.readouterr().out


def test_output_is_a_stream_of_objects_as_kubectl_decodes_it(tmp_path, capsys) -> None:
    """kubectl's decoder takes each YAML document as one object with apiVersion and kind: a sequence
    in one document is refused ("cannot unmarshal array into ... unstructured.detector")."""
    docs = list(yaml.safe_load_all(_stream(tmp_path, capsys)))
    assert len(docs) == 2
    for doc in docs:
        assert isinstance(doc, dict), f"a document holds {type(doc).__name__}, not one object"
        assert doc["apiVersion"] == "resource.k8s.io/v1" and doc["kind"] == "ResourceSlice"
        assert doc["metadata"]["name"] and doc["spec"]["devices"]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="no kubectl")
def test_kubectl_reads_every_slice(tmp_path, capsys) -> None:
    """kubectl itself (offline: --local needs no API server) reads the output as two objects."""
    out = _stream(tmp_path, capsys)
    (tmp_path / "slices.yaml").write_text(out)
    got = subprocess.run(["kubectl", "annotate", "--local", "-f", str(tmp_path / "slices.yaml"), "checked=yes",
                          "-o", "name"], capture_output=True, text=True, timeout=60)
    assert got.returncode == 0, got.stderr
    names = got.stdout.split()
    assert len(names) == 2 and all(n.startswith("resourceslice.resource.k8s.io/") for n in names), got.stdout
