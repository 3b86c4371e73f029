"""Detection, kubepods path resolution and v2 semantics on fake trees (this
machine has no cgroup v2 controllers; the VM tier covers a real v2 kernel)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.cgroups.detect import CgroupError, detect
from agent.cgroups.fs import CgroupFS, CgroupVanished
from agent.cgroups.paths import (
    container_dirs,
    container_id_of,
    find_container_cgroup,
    find_pod_cgroup,
    pod_cgroup_candidates,
    safe_rel,
    self_cgroups,
)
from agent.cpuset import CPUSet

UID = "0f2a7c1e-1111-2222-3333-444455556666"
CID = "a" * 64
C = CPUSet.parse


def make_v2(root: Path, rel: str = "", controllers: str = "cpuset cpu io memory pids") -> Path:
    d = root / rel.lstrip("/") if rel else root
    d.mkdir(parents=True, exist_ok=True)
    (d / "cgroup.controllers").write_text(controllers + "\n")
    for f, v in (("cpuset.cpus", ""), ("cpuset.mems", ""), ("cpuset.cpus.effective", "0-7"), ("cpu.idle", "0")):
        (d / f).write_text(v + "\n")
    return d


def test_detect_modes(tmp_path):
    v2 = tmp_path / "v2"
    make_v2(v2)
    assert detect(v2).mode == "v2" and detect(v2).is_v2("cpuset")
    v1 = tmp_path / "v1"
    (v1 / "cpuset").mkdir(parents=True)
    (v1 / "cpu").mkdir()
    assert detect(v1).mode == "v1" and detect(v1).controller_root("cpu") == v1 / "cpu"
    hy = tmp_path / "hy"
    (hy / "cpuset").mkdir(parents=True)
    make_v2(hy / "unified", controllers="")
    lay = detect(hy)
    assert lay.mode == "hybrid" and not lay.is_v2("cpuset") and lay.controller_root("cpuset") == hy / "cpuset"
    with pytest.raises(CgroupError):
        detect(tmp_path / "empty")


@pytest.mark.parametrize(
    "pod_rel,cont_name",
    [
        (f"/kubepods/pod{UID}", CID),  # cgroupfs + containerd
        (f"/kubepods/burstable/pod{UID}", f"crio-{CID}"),  # cgroupfs + CRI-O
        (f"/kubepods.slice/kubepods-pod{UID.replace('-', '_')}.slice", f"cri-containerd-{CID}.scope"),
        (
            f"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID.replace('-', '_')}.slice",
            f"crio-{CID}.scope",
        ),
    ],
)
def test_resolve_kubepods_layouts(tmp_path, pod_rel, cont_name):
    (tmp_path / pod_rel.lstrip("/") / cont_name).mkdir(parents=True)
    (tmp_path / pod_rel.lstrip("/") / "not-a-container").mkdir()
    assert find_pod_cgroup(tmp_path, UID) == pod_rel
    assert find_container_cgroup(tmp_path, UID, CID) == f"{pod_rel}/{cont_name}"
    assert container_dirs(tmp_path, pod_rel) == {CID: f"{pod_rel}/{cont_name}"}
    assert find_pod_cgroup(tmp_path, "other") is None


def test_container_id_parsing():
    assert container_id_of(f"docker-{CID}.scope") == CID
    assert container_id_of("kubepods.slice") is None
    assert container_id_of("abc") is None
    assert len(pod_cgroup_candidates(UID)) == 6


def test_self_cgroups(tmp_path):
    (tmp_path / "self").mkdir()
    (tmp_path / "self" / "cgroup").write_text("9:name=systemd:/\n3:cpuset:/hwagent\n1:cpu,cpuacct:/sys\n0::/x.slice\n")
    cg = self_cgroups(tmp_path)
    assert cg["cpuset"] == "/hwagent" and cg["cpuacct"] == "/sys" and cg[""] == "/x.slice"


def test_safe_rel_refuses_escape():
    assert safe_rel("/a//b/") == "/a/b"
    for bad in ("a/b", "/a/../b", "/./a"):
        with pytest.raises(ValueError):
            safe_rel(bad)


def test_v2_apply_and_drift_semantics(tmp_path):
    pod = "/kubepods.slice/kubepods-podx.slice"
    make_v2(tmp_path)
    make_v2(tmp_path, "/kubepods.slice")
    make_v2(tmp_path, pod)
    make_v2(tmp_path, f"{pod}/cri-containerd-{CID}.scope")
    fs = CgroupFS(detect(tmp_path))
    assert fs.cpuset_v2 and fs.cpuset_root == tmp_path
    cont = f"{pod}/cri-containerd-{CID}.scope"
    assert fs.read_cpus(cont) == CPUSet()  # "" = inherit on v2
    rep = fs.apply_cpusets({cont: C("2-3")})
    assert rep.written == [cont] and rep.errors == []
    assert (tmp_path / cont.lstrip("/") / "cpuset.cpus").read_text() == "2-3"
    # v2: ancestors are not widened and not written (no hierarchy constraint on writes)
    assert (tmp_path / pod.lstrip("/") / "cpuset.cpus").read_text().strip() == ""
    assert fs.read_effective_cpus(cont) == C("0-7")


def test_v2_vanished_and_cpu_idle(tmp_path):
    make_v2(tmp_path)
    make_v2(tmp_path, "/kubepods.slice/kubepods-besteffort.slice")
    fs = CgroupFS(detect(tmp_path))
    rep = fs.apply_cpusets({"/kubepods.slice/gone": C("1")})
    assert rep.vanished == ["/kubepods.slice/gone"]
    be = "/kubepods.slice/kubepods-besteffort.slice"
    assert fs.write_cpu_idle(be, 1) is True
    assert (tmp_path / be.lstrip("/") / "cpu.idle").read_text() == "1"
    assert fs.write_cpu_idle(be, 1) is False
    with pytest.raises(CgroupVanished):
        fs.read_cpu_idle("/kubepods.slice/missing")
    with pytest.raises(ValueError):
        fs.write_cpu_idle(be, 2)
