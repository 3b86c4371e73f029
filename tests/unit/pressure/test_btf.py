"""The BTF reader on a hand-built blob (layout per include/uapi/linux/btf.h)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from agent.pressure.btf import BTF, BTFError, cgroup_offsets, hierarchy_macros, load_btf, offset_macros


class Blob:
    def __init__(self) -> None:
        self.strings = b"\0"
        self.types = b""
        self.n = 0

    def s(self, name: str) -> int:
        off = len(self.strings)
        self.strings += name.encode() + b"\0"
        return off

    def add(self, name: str, kind: int, vlen: int, st: int, trailer: bytes = b"", kflag: int = 0) -> int:
        self.types += struct.pack("<III", self.s(name) if name else 0, (kflag << 31) | (kind << 24) | vlen, st)
        self.types += trailer
        self.n += 1
        return self.n

    def struct(self, name: str, size: int, members: list[tuple[str, int, int]], kind: int = 4) -> int:
        tr = b"".join(struct.pack("<III", self.s(m) if m else 0, t, bit) for m, t, bit in members)
        return self.add(name, kind, len(members), size, tr)

    def bytes(self) -> bytes:
        hdr = struct.pack("<HBBIIIII", 0xEB9F, 1, 0, 24, 0, len(self.types), len(self.types), len(self.strings))
        return hdr + self.types + self.strings


def kernelish() -> bytes:
    b = Blob()
    u64 = b.add("unsigned long long", 1, 0, 8, struct.pack("<I", 64))  # 1
    ptr = b.add("", 2, 0, 0)  # 2: void *
    arr = b.add("", 3, 0, 0, struct.pack("<III", ptr, u64, 14))  # 3: void *[14]
    b.add("kernfs_node", 4, 0, 0)  # a forward-ish empty struct of the same name comes first: must be skipped
    b.struct("kernfs_node", 128, [("parent", ptr, 0), ("id", u64, 96 * 8)])
    b.struct("cgroup", 512, [("self", u64, 0), ("kn", ptr, 256 * 8)])
    b.struct("cgroup_subsys_state", 200, [("cgroup", ptr, 0)])
    b.struct("css_set", 300, [("subsys", arr, 0), ("dfl_cgrp", ptr, 112 * 8)])
    inner = b.struct("", 16, [("pid", u64, 0), ("cgroups", ptr, 64)])  # anonymous struct
    b.struct("task_struct", 3000, [("state", u64, 0), ("", inner, 2368 * 8)])
    enum = b"".join(struct.pack("<Ii", b.s(n), v) for n, v in (("cpuset_cgrp_id", 0), ("cpu_cgrp_id", 1)))
    b.add("cgroup_subsys_id", 6, 2, 4, enum)
    # a bitfield member (kind_flag set: offset = bitsize << 24 | bit offset)
    b.add("flags", 4, 1, 4, struct.pack("<III", b.s("f"), u64, (3 << 24) | 5), kflag=1)
    return b.bytes()


def test_offsets_through_anonymous_members_and_enums():
    btf = BTF(kernelish())
    off = cgroup_offsets(btf)
    assert off.task_cgroups == 2376  # 2368 (anonymous struct) + 8
    assert (off.css_set_dfl_cgrp, off.css_set_subsys, off.css_cgroup, off.cgroup_kn, off.kn_id) == (112, 0, 0, 256, 96)
    assert off.subsys_ids == {"cpuset": 0, "cpu": 1}
    assert "-DCGROUP_SUBSYS_ID=1" in off.macros("cpu")
    assert "-DCGROUP_V2=1" in off.macros("v2")
    with pytest.raises(BTFError, match="memory"):
        off.macros("memory")


def test_missing_member_and_bitfield_are_named():
    btf = BTF(kernelish())
    with pytest.raises(BTFError, match="task_struct has no member nope"):
        btf.member_offset("task_struct", "nope")
    with pytest.raises(BTFError, match="struct absent"):
        btf.member_offset("absent", "x")
    with pytest.raises(BTFError, match="bitfield"):
        btf.member_offset("flags", "f")


def test_bad_blobs_are_refused(tmp_path):
    with pytest.raises(BTFError, match="magic"):
        BTF(b"\0" * 64)
    with pytest.raises(BTFError, match="cannot read"):
        load_btf(tmp_path / "nope")


@pytest.mark.skipif(not Path("/sys/kernel/btf/vmlinux").exists(), reason="kernel without BTF")
def test_running_kernel_btf_agrees_with_itself():
    btf = load_btf()
    off = cgroup_offsets(btf)
    # the layout facts the probe relies on, checked against independent lookups
    assert off.task_cgroups == btf.member_offset("task_struct", "cgroups")
    assert btf.member_size("kernfs_node", "id") == 8
    assert "cpu" in off.subsys_ids


def tracepointish() -> bytes:
    """kernelish() plus btf_trace_sched_switch: typedef -> pointer -> func proto (void *, bool, task *, task *, u32)."""
    b = Blob()
    u32 = b.add("unsigned int", 1, 0, 4, struct.pack("<I", 32))  # 1
    boolean = b.add("_Bool", 1, 0, 1, struct.pack("<I", 8))  # 2
    void_ptr = b.add("", 2, 0, 0)  # 3
    task = b.struct("task_struct", 64, [("pid", u32, 0)])  # 4
    task_ptr = b.add("", 2, 0, task)  # 5
    const_task = b.add("", 10, 0, task)  # 6: const struct task_struct
    const_task_ptr = b.add("", 2, 0, const_task)  # 7
    params = [(0, void_ptr), (b.s("preempt"), boolean), (0, task_ptr), (0, const_task_ptr), (0, u32)]
    proto = b.add("", 13, len(params), 0, b"".join(struct.pack("<II", n, t) for n, t in params))  # 8
    fn_ptr = b.add("", 2, 0, proto)  # 9
    b.add("btf_trace_sched_switch", 8, 0, fn_ptr)  # 10
    b.add("btf_trace_broken", 8, 0, u32)  # 11: not a function pointer
    return b.bytes()


def test_tracepoint_prototypes_and_typedef_ids():
    btf = BTF(tracepointish())
    assert btf.typedef_id("btf_trace_sched_switch") == 10
    # the tracepoint's private data (first parameter) is not the program's; modifiers are dropped
    assert btf.raw_tracepoint_params("sched_switch") == [
        "_Bool", "struct task_struct *", "struct task_struct *", "unsigned int"]
    with pytest.raises(BTFError, match="typedef btf_trace_nope"):
        btf.raw_tracepoint_params("nope")
    with pytest.raises(BTFError, match="not a function pointer"):
        btf.raw_tracepoint_params("broken")


def test_offset_macros_check_sizes_and_name_the_member():
    btf = BTF(kernelish())
    assert offset_macros(btf, {"OFF_KN_ID": "kernfs_node.id:8", "OFF_CGROUP_KN": "cgroup.kn"}) == [
        "-DOFF_KN_ID=96", "-DOFF_CGROUP_KN=256"]
    with pytest.raises(BTFError, match="kernfs_node.id is 8 bytes in this kernel; the probe expects 4"):
        offset_macros(btf, {"OFF_KN_ID": "kernfs_node.id:4"})
    with pytest.raises(BTFError, match="not struct.member"):
        offset_macros(btf, {"OFF_X": "kernfs_node"})
    with pytest.raises(BTFError, match="has no member nope"):
        offset_macros(btf, {"OFF_X": "cgroup.nope"})


def test_hierarchy_macros():
    btf = BTF(kernelish())
    assert hierarchy_macros(btf, "v2") == ["-DCGROUP_V2=1"]
    assert hierarchy_macros(btf, "cpu") == ["-DCGROUP_SUBSYS_ID=1"]
    with pytest.raises(BTFError, match="memory"):
        hierarchy_macros(btf, "memory")


@pytest.mark.skipif(not Path("/sys/kernel/btf/vmlinux").exists(), reason="kernel without BTF")
def test_running_kernel_has_the_prototypes_the_run_queue_probe_assumes():
    from agent.pressure.probes import PROBES

    btf = load_btf()
    for p in PROBES["runqlat"].points:
        assert tuple(btf.raw_tracepoint_params(p.event)) == p.args, p.point
