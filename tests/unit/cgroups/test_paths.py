"""The one gate for cgroup paths from outside: what passes, normalised, and what is refused."""

from __future__ import annotations

import pytest

from agent.cgroups.config import CgroupsConfig
from agent.cgroups.paths import (
    DEFAULT_WORKLOAD_ROOTS,
    CgroupPathError,
    find_pod_cgroup,
    pod_cgroup_candidates,
    validate_rel_path,
)


@pytest.mark.parametrize(
    "path, want",
    [
        ("/kubepods/pod1/c1", "/kubepods/pod1/c1"),
        ("/kubepods//burstable/pod1/", "/kubepods/burstable/pod1"),
        ("/kubepods.slice/kubepods-podx.slice/cri-containerd-ab.scope", "/kubepods.slice/kubepods-podx.slice/cri-containerd-ab.scope"),
        ("/hwagent.slice/pod-a/app", "/hwagent.slice/pod-a/app"),
    ],
)
def test_paths_below_the_workload_roots_pass_normalised(path: str, want: str) -> None:
    assert validate_rel_path(path) == want


@pytest.mark.parametrize(
    "path",
    [
        "/kubepods/..",  # the kernel resolves this to the root: the reported escape
        "/kubepods/../system.slice",
        "/kubepods/pod1/../../system.slice/sshd.service",
        "/kubepods/./pod1",
        "/kubepods",  # the root of the subtree itself: every pod at once
        "/kubepods.slice",
        "/",
        "",
        "kubepods/pod1",  # relative
        "/system.slice/sshd.service",
        "/kubepodsX/pod1",  # a prefix of a root's name is not the root
        "/user.slice/kubepods/pod1",
        "/kubepods/pod1\0/c",
        "/kubepods/pod1\n/c",
        "/kubepods/" + "x" * 256,
        "/kubepods/" + "a/" * 2100,
    ],
)
def test_anything_else_is_refused(path: str) -> None:
    with pytest.raises(CgroupPathError):
        validate_rel_path(path)


def test_not_a_string_is_refused() -> None:
    for bad in (None, 3, b"/kubepods/x", ["/kubepods/x"]):
        with pytest.raises(CgroupPathError, match="string"):
            validate_rel_path(bad)


def test_mount_prefix_is_stripped_before_the_subtree_check() -> None:
    mounts = ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/unified"]
    assert validate_rel_path("/sys/fs/cgroup/cpu/kubepods/pod1", mounts=mounts) == "/kubepods/pod1"
    with pytest.raises(CgroupPathError):
        validate_rel_path("/sys/fs/cgroup/cpu/../cpu/system.slice", mounts=mounts)
    with pytest.raises(CgroupPathError, match="outside"):
        validate_rel_path("/sys/fs/cgroup/cpu/system.slice", mounts=mounts)
    with pytest.raises(CgroupPathError, match="outside"):
        validate_rel_path("/sys/fs/cgroup/cpu", mounts=mounts)


def test_roots_are_a_parameter_and_none_means_format_only() -> None:
    assert validate_rel_path("/runtime/p/c", under=["/runtime"]) == "/runtime/p/c"
    with pytest.raises(CgroupPathError, match="outside"):
        validate_rel_path("/kubepods/p", under=["/runtime"])
    assert validate_rel_path("/system.slice", under=None) == "/system.slice"
    with pytest.raises(CgroupPathError):
        validate_rel_path("/a/../b", under=None)
    with pytest.raises(CgroupPathError, match="none configured"):
        validate_rel_path("/kubepods/p", under=[])


def test_pod_uids_cannot_carry_path_components() -> None:
    for uid in ("x/../../system.slice", "a/b", "..", ""):
        with pytest.raises(CgroupPathError):
            pod_cgroup_candidates(uid)


def test_find_pod_cgroup_refuses_a_uid_that_walks_out(tmp_path) -> None:
    (tmp_path / "system.slice").mkdir()
    (tmp_path / "kubepods").mkdir()
    with pytest.raises(CgroupPathError):
        find_pod_cgroup(tmp_path, "/../../system.slice")


def test_cgroups_config_defaults_and_refusals() -> None:
    assert CgroupsConfig().workload_roots == DEFAULT_WORKLOAD_ROOTS
    for bad in (("/",), ("/a/..",), ("rel",)):
        with pytest.raises(ValueError, match="workload_roots"):
            CgroupsConfig(workload_roots=bad).validate()
