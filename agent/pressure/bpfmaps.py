"""Maps of the loaded probes, read with plain bpf(2) calls on descriptors from the build child.

Key and value layouts are not restated here: the build child passes bcc's own
description of each map's C types (a small JSON form such as
``["log2_hist", [["slots", "unsigned long long", [32]], ["sum_ns", "unsigned long long"]], "struct_packed"]``),
and :func:`ctype_from_desc` turns it into a ctypes type, so the C struct in
probes/*.c stays the one definition.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
from collections.abc import Iterator
from typing import Any

from agent.pressure import bpfsys

__all__ = ["BpfMap", "ctype_from_desc", "possible_cpus", "DescError"]

_SCALARS: dict[str, Any] = {
    "_Bool": ctypes.c_bool,
    "char": ctypes.c_char,
    "signed char": ctypes.c_byte,
    "unsigned char": ctypes.c_ubyte,
    "short": ctypes.c_short,
    "unsigned short": ctypes.c_ushort,
    "int": ctypes.c_int,
    "unsigned int": ctypes.c_uint,
    "long": ctypes.c_long,
    "unsigned long": ctypes.c_ulong,
    "long long": ctypes.c_longlong,
    "unsigned long long": ctypes.c_ulonglong,
}

#: map types whose values are one copy per possible CPU
_PERCPU_TYPES = {5, 6, 10, 21}  # PERCPU_HASH, PERCPU_ARRAY, LRU_PERCPU_HASH, PERCPU_CGROUP_STORAGE
_ARRAY_TYPES = {2, 6}  # ARRAY, PERCPU_ARRAY: every index exists, nothing to delete


class DescError(ValueError):
    """A type description this reader does not understand (a bcc upgrade changed the form)."""


def ctype_from_desc(desc: Any) -> Any:
    """ctypes type for one bcc type description (already JSON-decoded)."""
    if isinstance(desc, str):
        try:
            return _SCALARS[desc]
        except KeyError:
            raise DescError(f"unknown scalar type {desc!r}") from None
    if isinstance(desc, list) and len(desc) in (2, 3) and isinstance(desc[1], list):
        name = str(desc[0]) or "anon"
        kind = desc[2] if len(desc) == 3 else "struct"
        fields = []
        for f in desc[1]:
            if not (isinstance(f, list) and len(f) in (2, 3)):
                raise DescError(f"bad field {f!r} in {name}")
            t = ctype_from_desc(f[1])
            if len(f) == 3:
                for dim in reversed(f[2]):
                    t = t * int(dim)
            fields.append((str(f[0]), t))
        base: Any = ctypes.Union if kind.startswith("union") else ctypes.Structure
        attrs: dict[str, Any] = {"_fields_": fields}
        if kind.endswith("_packed"):
            attrs["_pack_"] = 1  # bcc spells the padding out as fields
        return type(name, (base,), attrs)
    raise DescError(f"unknown type description {desc!r}")


def possible_cpus(path: str = "/sys/devices/system/cpu/possible") -> int:
    """How many copies a per-CPU map value holds: the kernel sizes them by possible CPUs."""
    with open(path) as f:
        text = f.read().strip()
    n = 0
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        n = max(n, int(hi or lo) + 1)
    return n


def _plain(v: Any) -> Any:
    """Scalars as Python ints (as bcc gives them); structs stay ctypes objects with named fields."""
    return v.value if isinstance(v, ctypes._SimpleCData) else v


class BpfMap:
    """One map: typed items(), lookup, update, delete. Per-CPU values come back as lists."""

    def __init__(self, name: str, fd: int, key_desc: str, leaf_desc: str) -> None:
        self.name = name
        self.fd = fd
        info = bpfsys.fd_info(fd)
        self.map_type = int(info.get("map_type", "0"))
        self.key_size = int(info.get("key_size", "0"))
        self.value_size = int(info.get("value_size", "0"))
        self.max_entries = int(info.get("max_entries", "0"))
        self.Key = ctype_from_desc(json.loads(key_desc))
        self.Leaf = ctype_from_desc(json.loads(leaf_desc))
        if ctypes.sizeof(self.Key) != self.key_size or ctypes.sizeof(self.Leaf) != self.value_size:
            raise DescError(
                f"map {name}: described key/value {ctypes.sizeof(self.Key)}/{ctypes.sizeof(self.Leaf)} bytes, "
                f"kernel says {self.key_size}/{self.value_size}"
            )
        self.percpu = self.map_type in _PERCPU_TYPES
        self._ncpu = possible_cpus() if self.percpu else 1
        self._stride = (self.value_size + 7) // 8 * 8 if self.percpu else self.value_size
        self._batch = True

    # -- encoding ----------------------------------------------------------------
    def _key_bytes(self, key: Any) -> bytes:
        if not isinstance(key, self.Key):
            key = self.Key(key)
        return bytes(key)

    def _value(self, raw: bytes) -> Any:
        if not self.percpu:
            return _plain(self.Leaf.from_buffer_copy(raw))
        return [_plain(self.Leaf.from_buffer_copy(raw, i * self._stride)) for i in range(self._ncpu)]

    def _value_bytes(self, value: Any) -> bytes:
        if not isinstance(value, self.Leaf):
            value = self.Leaf(value)  # a plain int for a scalar value
        one = bytes(value)
        if not self.percpu:
            return one
        return (one.ljust(self._stride, b"\0")) * self._ncpu

    # -- operations --------------------------------------------------------------
    def _raw_items(self) -> list[tuple[bytes, bytes]]:
        size = self._stride * self._ncpu
        if self._batch:
            try:
                return bpfsys.map_lookup_batch(self.fd, self.key_size, size, self.max_entries)
            except bpfsys.BpfError as e:
                if e.errno not in (errno.EINVAL, errno.ENOTSUP, 524):  # 524: ENOTSUPP, kernel-internal
                    raise
                self._batch = False  # this kernel or map type has no batch lookup
        out = []
        for k in list(bpfsys.map_keys(self.fd, self.key_size)):
            v = bpfsys.map_lookup(self.fd, k, size)
            if v is not None:  # deleted between the two calls
                out.append((k, v))
        return out

    def items(self) -> list[tuple[Any, Any]]:
        return [(_plain(self.Key.from_buffer_copy(k)), self._value(v)) for k, v in self._raw_items()]

    def __iter__(self) -> Iterator[Any]:
        return (k for k, _ in self.items())

    def __getitem__(self, key: Any) -> Any:
        raw = bpfsys.map_lookup(self.fd, self._key_bytes(key), self._stride * self._ncpu)
        if raw is None:
            raise KeyError(key)
        return self._value(raw)

    def __setitem__(self, key: Any, value: Any) -> None:
        bpfsys.map_update(self.fd, self._key_bytes(key), self._value_bytes(value))

    def __delitem__(self, key: Any) -> None:
        if self.map_type in _ARRAY_TYPES:
            raise KeyError(f"{self.name} is an array: its entries cannot be deleted")
        if not bpfsys.map_delete(self.fd, self._key_bytes(key)):
            raise KeyError(key)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
