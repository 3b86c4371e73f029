"""Struct member offsets and enum values from the running kernel's BTF.

The installed kernel headers need not match the running kernel (on the CI VM
they are 6.1 headers for a 6.18 kernel and every task_struct offset is wrong,
silently). The kernel describes its own types in /sys/kernel/btf/vmlinux, so the
probes read the few offsets they need from there and pass them to the BPF
compiler as macros. This is a minimal reader of the BTF format
(include/uapi/linux/btf.h): only what member/enum lookup needs.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BTF", "BTFError", "load_btf", "cgroup_offsets", "CgroupOffsets", "offset_macros", "hierarchy_macros"]

BTF_MAGIC = 0xEB9F

# kinds
INT, PTR, ARRAY, STRUCT, UNION, ENUM, FWD, TYPEDEF, VOLATILE, CONST, RESTRICT = range(1, 12)
FUNC, FUNC_PROTO, VAR, DATASEC, FLOAT, DECL_TAG, TYPE_TAG, ENUM64 = range(12, 20)

_MODIFIERS = {TYPEDEF, VOLATILE, CONST, RESTRICT, TYPE_TAG}


class BTFError(RuntimeError):
    """BTF is missing, malformed, or lacks a type/member a probe needs."""


@dataclass(frozen=True)
class _Type:
    kind: int
    name: str
    vlen: int
    kind_flag: bool
    size_or_type: int
    extra: int  # byte offset of the kind-specific trailer in the type section


class BTF:
    """Parsed type table. Lookups by name are for STRUCT/UNION/ENUM only."""

    def __init__(self, data: bytes) -> None:
        if len(data) < 24:
            raise BTFError("BTF blob too short")
        magic, version, _flags, hdr_len = struct.unpack_from("<HBBI", data, 0)
        if magic != BTF_MAGIC:
            raise BTFError(f"bad BTF magic {magic:#x} (big-endian or not BTF)")
        type_off, type_len, str_off, str_len = struct.unpack_from("<IIII", data, 8)
        self._types_blob = memoryview(data)[hdr_len + type_off : hdr_len + type_off + type_len]
        self._strings = bytes(data[hdr_len + str_off : hdr_len + str_off + str_len])
        self._types: list[_Type | None] = [None]  # id 0 is void
        self._by_name: dict[tuple[int, str], int] = {}
        self._parse()

    def _str(self, off: int) -> str:
        end = self._strings.index(b"\0", off)
        return self._strings[off:end].decode()

    def _parse(self) -> None:
        blob = self._types_blob
        n = len(blob)
        pos = 0
        unpack = struct.unpack_from
        types = self._types
        named = (STRUCT, UNION, ENUM, ENUM64, TYPEDEF)
        while pos < n:
            name_off, info, st = unpack("<III", blob, pos)
            kind = (info >> 24) & 0x1F
            vlen = info & 0xFFFF
            extra = pos + 12
            if kind == INT or kind == VAR or kind == DECL_TAG:
                size = 4
            elif kind == ARRAY:
                size = 12
            elif kind in (STRUCT, UNION, DATASEC, ENUM64):
                size = 12 * vlen
            elif kind in (ENUM, FUNC_PROTO):
                size = 8 * vlen
            elif kind in (PTR, FWD, TYPEDEF, VOLATILE, CONST, RESTRICT, FUNC, FLOAT, TYPE_TAG):
                size = 0
            else:
                raise BTFError(f"unknown BTF kind {kind} at type {len(types)}")
            name = self._str(name_off) if (name_off and kind in named) else ""
            t = _Type(kind, name, vlen, bool(info >> 31), st, extra)
            if name and (kind, name) not in self._by_name and (vlen or kind not in (STRUCT, UNION)):
                self._by_name[(kind, name)] = len(types)
            types.append(t)
            pos = extra + size

    def __len__(self) -> int:
        return len(self._types) - 1

    def _type(self, tid: int) -> _Type:
        t = self._types[tid]
        if t is None:
            raise BTFError("void type has no members")
        return t

    def _resolve(self, tid: int) -> int:
        while tid and self._type(tid).kind in _MODIFIERS:
            tid = self._type(tid).size_or_type
        return tid

    def struct_id(self, name: str) -> int:
        for kind in (STRUCT, UNION):
            tid = self._by_name.get((kind, name))
            if tid:
                return tid
        raise BTFError(f"struct {name} not in kernel BTF")

    def _members(self, tid: int) -> list[tuple[str, int, int]]:
        """(name, type id, bit offset) of a struct/union's direct members."""
        t = self._type(tid)
        if t.kind not in (STRUCT, UNION):
            raise BTFError(f"type {tid} is not a struct or union")
        out = []
        for i in range(t.vlen):
            name_off, mtype, off = struct.unpack_from("<III", self._types_blob, t.extra + 12 * i)
            bit = off & 0xFFFFFF if t.kind_flag else off
            out.append((self._str(name_off) if name_off else "", mtype, bit))
        return out

    def _find_member(self, tid: int, member: str) -> tuple[int, int] | None:
        """(bit offset, member type id), searching anonymous struct/union members too."""
        for name, mtype, bit in self._members(tid):
            if name == member:
                return bit, mtype
            if not name:
                inner = self._resolve(mtype)
                if inner and self._type(inner).kind in (STRUCT, UNION):
                    found = self._find_member(inner, member)
                    if found:
                        return bit + found[0], found[1]
        return None

    def member_offset(self, struct_name: str, member: str) -> int:
        """Byte offset of ``struct_name.member``; raises BTFError naming what is missing."""
        found = self._find_member(self.struct_id(struct_name), member)
        if found is None:
            raise BTFError(f"struct {struct_name} has no member {member} in kernel BTF")
        bit, _ = found
        if bit % 8:
            raise BTFError(f"{struct_name}.{member} is a bitfield")
        return bit // 8

    def path_offset(self, struct_name: str, path: str) -> tuple[int, int]:
        """(byte offset, size) of a dotted member path such as ``sched_info.run_delay`` in a struct."""
        tid = self.struct_id(struct_name)
        where, off = struct_name, 0
        for i, member in enumerate(path.split(".")):
            found = self._find_member(tid, member)
            if found is None:
                raise BTFError(f"struct {where} has no member {member} in kernel BTF")
            bit, mtype = found
            if bit % 8:
                raise BTFError(f"{where}.{member} is a bitfield")
            off += bit // 8
            where = f"{where}.{member}"
            tid = self._resolve(mtype)
            if i < path.count(".") and self._type(tid).kind not in (STRUCT, UNION):
                raise BTFError(f"{where} is not a struct")
        return off, self.type_size(tid)

    def member_size(self, struct_name: str, member: str) -> int:
        found = self._find_member(self.struct_id(struct_name), member)
        if found is None:
            raise BTFError(f"struct {struct_name} has no member {member} in kernel BTF")
        return self.type_size(found[1])

    def type_size(self, tid: int) -> int:
        tid = self._resolve(tid)
        t = self._type(tid)
        if t.kind == PTR:
            return 8
        if t.kind == ARRAY:
            elem, _idx, nelems = struct.unpack_from("<III", self._types_blob, t.extra)
            return self.type_size(elem) * nelems
        if t.kind in (INT, STRUCT, UNION, ENUM, ENUM64, FLOAT):
            return t.size_or_type
        raise BTFError(f"type {tid} (kind {t.kind}) has no size")

    def typedef_id(self, name: str) -> int:
        """Type id of a typedef: what a BTF tracepoint program names as its attach target."""
        tid = self._by_name.get((TYPEDEF, name))
        if not tid:
            raise BTFError(f"typedef {name} not in kernel BTF")
        return tid

    def type_name(self, tid: int) -> str:
        """C spelling of a type, modifiers dropped: "struct task_struct *", "unsigned int", "bool"."""
        tid = self._resolve(tid)
        if not tid:
            return "void"
        t = self._type(tid)
        if t.kind == PTR:
            return self.type_name(t.size_or_type) + " *"
        name_off = struct.unpack_from("<I", self._types_blob, t.extra - 12)[0]
        name = self._str(name_off) if name_off else ""
        prefix = {STRUCT: "struct ", UNION: "union ", ENUM: "enum ", ENUM64: "enum "}.get(t.kind, "")
        return prefix + name

    def raw_tracepoint_params(self, event: str) -> list[str]:
        """Argument types of a tracepoint's TP_PROTO, in ctx order, from its btf_trace_<event> typedef.

        The typedef is a pointer to a function whose first parameter is the
        tracepoint's private data, which a BTF tracepoint program does not see.
        BTF keeps no parameter names here, so the types are what a probe checks.
        """
        tid = self._resolve(self._type(self.typedef_id(f"btf_trace_{event}")).size_or_type)
        ptr = self._type(tid)
        if ptr.kind != PTR:
            raise BTFError(f"btf_trace_{event} is not a function pointer")
        proto = self._type(ptr.size_or_type)
        if proto.kind != FUNC_PROTO:
            raise BTFError(f"btf_trace_{event} does not point to a function prototype")
        names = []
        for i in range(proto.vlen):
            _name_off, ptype = struct.unpack_from("<II", self._types_blob, proto.extra + 8 * i)
            names.append(self.type_name(ptype))
        return names[1:]

    def enum_value(self, enum_name: str, value_name: str) -> int:
        tid = self._by_name.get((ENUM, enum_name)) or self._by_name.get((ENUM64, enum_name))
        if not tid:
            raise BTFError(f"enum {enum_name} not in kernel BTF")
        t = self._type(tid)
        step = 8 if t.kind == ENUM else 12
        for i in range(t.vlen):
            name_off, lo = struct.unpack_from("<Ii", self._types_blob, t.extra + step * i)
            if self._str(name_off) == value_name:
                if t.kind == ENUM64:
                    lo32, hi32 = struct.unpack_from("<II", self._types_blob, t.extra + step * i + 4)
                    return (hi32 << 32) | lo32
                return lo
        raise BTFError(f"enum {enum_name} has no value {value_name} in kernel BTF")


def load_btf(path: str | Path = "/sys/kernel/btf/vmlinux") -> BTF:
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise BTFError(f"cannot read {path}: {e.strerror} (kernel needs CONFIG_DEBUG_INFO_BTF=y)") from None
    return BTF(data)


@dataclass(frozen=True)
class CgroupOffsets:
    """Everything the run-queue probe needs to walk task -> cgroup id."""

    task_cgroups: int  # task_struct.cgroups (struct css_set *)
    css_set_dfl_cgrp: int  # css_set.dfl_cgrp (struct cgroup *)
    css_set_subsys: int  # css_set.subsys[] (struct cgroup_subsys_state *[])
    css_cgroup: int  # cgroup_subsys_state.cgroup (struct cgroup *)
    cgroup_kn: int  # cgroup.kn (struct kernfs_node *)
    kn_id: int  # kernfs_node.id (u64; == inode number of the cgroup dir)
    subsys_ids: dict[str, int]  # controller name -> enum cgroup_subsys_id value

    def macros(self, hierarchy: str) -> list[str]:
        """-D flags for the BPF compiler; hierarchy is "v2" or a v1 controller name."""
        flags = [
            f"-DOFF_TASK_CGROUPS={self.task_cgroups}",
            f"-DOFF_CSS_SET_DFL_CGRP={self.css_set_dfl_cgrp}",
            f"-DOFF_CSS_SET_SUBSYS={self.css_set_subsys}",
            f"-DOFF_CSS_CGROUP={self.css_cgroup}",
            f"-DOFF_CGROUP_KN={self.cgroup_kn}",
            f"-DOFF_KN_ID={self.kn_id}",
        ]
        return flags + _hierarchy_flags(self.subsys_ids, hierarchy)


def _hierarchy_flags(subsys_ids: dict[str, int], hierarchy: str) -> list[str]:
    if hierarchy == "v2":
        return ["-DCGROUP_V2=1"]
    if hierarchy not in subsys_ids:
        raise BTFError(f"kernel has no cgroup controller {hierarchy!r} in enum cgroup_subsys_id")
    return [f"-DCGROUP_SUBSYS_ID={subsys_ids[hierarchy]}"]


def hierarchy_macros(btf: BTF, hierarchy: str) -> list[str]:
    """-D flags selecting the cgroup hierarchy a task -> cgroup walk follows ("v2" or a v1 controller)."""
    if hierarchy == "v2":
        return _hierarchy_flags({}, hierarchy)
    return _hierarchy_flags({hierarchy: btf.enum_value("cgroup_subsys_id", f"{hierarchy}_cgrp_id")}, hierarchy)


def offset_macros(btf: BTF, wanted: dict[str, str]) -> list[str]:
    """-D flags for a probe's ``{MACRO: "struct.member[.member...][:size]"}`` table (its descriptor's btf_offsets).

    A size, where given, is checked, so a member that changed width is refused
    instead of read half or twice.
    """
    flags = []
    for macro, where in wanted.items():
        path, _, size = where.partition(":")
        struct_name, dot, member = path.partition(".")
        if not dot or not member:
            raise BTFError(f"{macro}: {where!r} is not struct.member")
        off, have = btf.path_offset(struct_name, member)
        if size and have != int(size):
            raise BTFError(f"{path} is {have} bytes in this kernel; the probe expects {size}")
        flags.append(f"-D{macro}={off}")
    return flags


def cgroup_offsets(btf: BTF) -> CgroupOffsets:
    kn_id_size = btf.member_size("kernfs_node", "id")
    if kn_id_size != 8:
        raise BTFError(f"kernfs_node.id is {kn_id_size} bytes; the probe expects a u64 (kernel >= 5.5)")
    subsys = {}
    for ctl in ("cpu", "cpuset", "cpuacct", "memory", "pids", "blkio", "io"):
        try:
            subsys[ctl] = btf.enum_value("cgroup_subsys_id", f"{ctl}_cgrp_id")
        except BTFError:
            pass
    return CgroupOffsets(
        task_cgroups=btf.member_offset("task_struct", "cgroups"),
        css_set_dfl_cgrp=btf.member_offset("css_set", "dfl_cgrp"),
        css_set_subsys=btf.member_offset("css_set", "subsys"),
        css_cgroup=btf.member_offset("cgroup_subsys_state", "cgroup"),
        cgroup_kn=btf.member_offset("cgroup", "kn"),
        kn_id=btf.member_offset("kernfs_node", "id"),
        subsys_ids=subsys,
    )
