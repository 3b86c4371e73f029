"""The few bpf(2) and perf_event_open(2) calls the daemon needs once the probes are built.

The daemon never links bcc: the compile runs in a short-lived child
(agent.pressure.bpfbuild) that hands back file descriptors of loaded programs and
created maps. Attaching, detaching and reading maps are plain syscalls on those
descriptors, so the ~60 MB that LLVM and clang keep after a compile live and die
with the child. Only the kernel ABI (include/uapi/linux/bpf.h,
include/uapi/linux/perf_event.h) is assumed here, which is stable by contract.
"""

from __future__ import annotations

import ctypes
import errno as errno_mod
import fcntl
import os
import platform
from collections.abc import Iterator
from pathlib import Path

__all__ = [
    "BpfError",
    "BPF_PROG_TYPE_TRACEPOINT",
    "BPF_PROG_TYPE_TRACING",
    "BPF_TRACE_RAW_TP",
    "prog_load",
    "raw_tracepoint_open",
    "tracepoint_open",
    "map_lookup",
    "map_update",
    "map_delete",
    "map_keys",
    "map_lookup_batch",
    "fd_info",
]

#: (bpf, perf_event_open) syscall numbers per machine
_SYSCALLS = {"x86_64": (321, 298), "aarch64": (280, 241), "ppc64le": (361, 319), "s390x": (351, 331)}

BPF_MAP_LOOKUP_ELEM, BPF_MAP_UPDATE_ELEM, BPF_MAP_DELETE_ELEM, BPF_MAP_GET_NEXT_KEY, BPF_PROG_LOAD = 1, 2, 3, 4, 5
BPF_RAW_TRACEPOINT_OPEN = 17
BPF_MAP_LOOKUP_BATCH = 24

BPF_PROG_TYPE_TRACEPOINT = 5
BPF_PROG_TYPE_TRACING = 26
BPF_TRACE_RAW_TP = 23

PERF_TYPE_TRACEPOINT = 2
PERF_FLAG_FD_CLOEXEC = 8
PERF_EVENT_IOC_ENABLE = 0x2400
PERF_EVENT_IOC_SET_BPF = 0x40042408


class BpfError(OSError):
    """A bpf(2)/perf_event_open(2) call failed; errno and the verifier log (if any) say why."""


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _nr() -> tuple[int, int]:
    try:
        return _SYSCALLS[platform.machine()]
    except KeyError:
        raise BpfError(errno_mod.ENOSYS, f"no bpf syscall number known for {platform.machine()}") from None


def _bpf(cmd: int, attr: ctypes.Structure, what: str) -> int:
    ret = _libc.syscall(_nr()[0], ctypes.c_int(cmd), ctypes.byref(attr), ctypes.c_uint(ctypes.sizeof(attr)))
    if ret < 0:
        e = ctypes.get_errno()
        raise BpfError(e, f"{what}: {os.strerror(e)}")
    return int(ret)


class _ProgLoadAttr(ctypes.Structure):
    _fields_ = [
        ("prog_type", ctypes.c_uint32),
        ("insn_cnt", ctypes.c_uint32),
        ("insns", ctypes.c_uint64),
        ("license", ctypes.c_uint64),
        ("log_level", ctypes.c_uint32),
        ("log_size", ctypes.c_uint32),
        ("log_buf", ctypes.c_uint64),
        ("kern_version", ctypes.c_uint32),
        ("prog_flags", ctypes.c_uint32),
        ("prog_name", ctypes.c_char * 16),
        ("prog_ifindex", ctypes.c_uint32),
        ("expected_attach_type", ctypes.c_uint32),
        ("prog_btf_fd", ctypes.c_uint32),
        ("func_info_rec_size", ctypes.c_uint32),
        ("func_info", ctypes.c_uint64),
        ("func_info_cnt", ctypes.c_uint32),
        ("line_info_rec_size", ctypes.c_uint32),
        ("line_info", ctypes.c_uint64),
        ("line_info_cnt", ctypes.c_uint32),
        ("attach_btf_id", ctypes.c_uint32),
    ]


def prog_load(
    prog_type: int,
    insns: bytes,
    name: str,
    *,
    license: str = "GPL",
    expected_attach_type: int = 0,
    attach_btf_id: int = 0,
    kern_version: int = 0,
) -> int:
    """Load bytecode (with map fds already in it); on rejection retry with the verifier log."""
    ibuf = ctypes.create_string_buffer(insns, len(insns))
    lic = ctypes.create_string_buffer(license.encode())
    attr = _ProgLoadAttr(
        prog_type=prog_type,
        insn_cnt=len(insns) // 8,
        insns=ctypes.addressof(ibuf),
        license=ctypes.addressof(lic),
        kern_version=kern_version,
        prog_name=name.encode()[:15],
        expected_attach_type=expected_attach_type,
        attach_btf_id=attach_btf_id,
    )
    try:
        return _bpf(BPF_PROG_LOAD, attr, f"load {name}")
    except BpfError as first:
        log = ctypes.create_string_buffer(1 << 20)
        attr.log_level, attr.log_size, attr.log_buf = 1, len(log), ctypes.addressof(log)
        try:
            return _bpf(BPF_PROG_LOAD, attr, f"load {name}")
        except BpfError:
            text = log.value.decode(errors="replace").strip().splitlines()
            raise BpfError(first.errno, f"load {name}: {first.strerror}; verifier: {' | '.join(text[-6:])}") from None


class _RawTpAttr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_uint64), ("prog_fd", ctypes.c_uint32), ("pad", ctypes.c_uint32)]


def raw_tracepoint_open(prog_fd: int, name: str | None = None) -> int:
    """Attach a raw or BTF tracepoint program; the returned fd is the attachment (close = detach).

    A tp_btf program carries its attach point from load time, so it passes no name.
    """
    nbuf = ctypes.create_string_buffer(name.encode()) if name else None
    attr = _RawTpAttr(name=ctypes.addressof(nbuf) if nbuf is not None else 0, prog_fd=prog_fd)
    return _bpf(BPF_RAW_TRACEPOINT_OPEN, attr, f"attach raw tracepoint {name or '(btf)'}")


class _PerfEventAttr(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_uint32),
        ("size", ctypes.c_uint32),
        ("config", ctypes.c_uint64),
        ("sample_period", ctypes.c_uint64),
        ("sample_type", ctypes.c_uint64),
        ("read_format", ctypes.c_uint64),
        ("flags", ctypes.c_uint64),
        ("wakeup_events", ctypes.c_uint32),
        ("bp_type", ctypes.c_uint32),
        ("config1", ctypes.c_uint64),
    ]


def tracepoint_open(prog_fd: int, tracefs: Path, tp: str) -> int:
    """Attach a classic tracepoint program (category:event); close the fd to detach.

    One perf event on CPU 0 suffices: the program hangs off the tracepoint, which
    calls it on every CPU.
    """
    cat, _, event = tp.partition(":")
    try:
        tp_id = int((tracefs / "events" / cat / event / "id").read_text())
    except (OSError, ValueError) as e:
        raise BpfError(errno_mod.ENOENT, f"tracepoint {tp} has no id in {tracefs}: {e}") from None
    attr = _PerfEventAttr(
        type=PERF_TYPE_TRACEPOINT, size=ctypes.sizeof(_PerfEventAttr), config=tp_id, sample_period=1, wakeup_events=1
    )
    fd = _libc.syscall(_nr()[1], ctypes.byref(attr), -1, 0, -1, PERF_FLAG_FD_CLOEXEC)
    if fd < 0:
        err = ctypes.get_errno()
        raise BpfError(err, f"perf_event_open {tp}: {os.strerror(err)}")
    try:
        fcntl.ioctl(fd, PERF_EVENT_IOC_SET_BPF, prog_fd)
        fcntl.ioctl(fd, PERF_EVENT_IOC_ENABLE, 0)
    except OSError as e:
        os.close(fd)
        raise BpfError(e.errno, f"attach {tp}: {e.strerror}") from None
    return int(fd)


class _ElemAttr(ctypes.Structure):
    _fields_ = [("map_fd", ctypes.c_uint32), ("pad", ctypes.c_uint32), ("key", ctypes.c_uint64),
                ("value", ctypes.c_uint64), ("flags", ctypes.c_uint64)]


class _BatchAttr(ctypes.Structure):
    _fields_ = [("in_batch", ctypes.c_uint64), ("out_batch", ctypes.c_uint64), ("keys", ctypes.c_uint64),
                ("values", ctypes.c_uint64), ("count", ctypes.c_uint32), ("map_fd", ctypes.c_uint32),
                ("elem_flags", ctypes.c_uint64), ("flags", ctypes.c_uint64)]


def _elem(fd: int, key: ctypes.Array | None, value: ctypes.Array | None, flags: int = 0) -> _ElemAttr:
    return _ElemAttr(map_fd=fd, key=ctypes.addressof(key) if key is not None else 0,
                     value=ctypes.addressof(value) if value is not None else 0, flags=flags)


def map_lookup(fd: int, key: bytes, value_size: int) -> bytes | None:
    k = ctypes.create_string_buffer(key, len(key))
    v = ctypes.create_string_buffer(value_size)
    try:
        _bpf(BPF_MAP_LOOKUP_ELEM, _elem(fd, k, v), "map lookup")
    except BpfError as e:
        if e.errno == errno_mod.ENOENT:
            return None
        raise
    return v.raw


def map_update(fd: int, key: bytes, value: bytes, flags: int = 0) -> None:
    k = ctypes.create_string_buffer(key, len(key))
    v = ctypes.create_string_buffer(value, len(value))
    _bpf(BPF_MAP_UPDATE_ELEM, _elem(fd, k, v, flags), "map update")


def map_delete(fd: int, key: bytes) -> bool:
    """False when the key was already gone."""
    k = ctypes.create_string_buffer(key, len(key))
    try:
        _bpf(BPF_MAP_DELETE_ELEM, _elem(fd, k, None), "map delete")
    except BpfError as e:
        if e.errno == errno_mod.ENOENT:
            return False
        raise
    return True


def map_keys(fd: int, key_size: int) -> Iterator[bytes]:
    cur: ctypes.Array | None = None
    nxt = ctypes.create_string_buffer(key_size)
    while True:
        try:
            _bpf(BPF_MAP_GET_NEXT_KEY, _elem(fd, cur, nxt), "map next key")
        except BpfError as e:
            if e.errno == errno_mod.ENOENT:
                return
            raise
        yield nxt.raw
        cur = ctypes.create_string_buffer(nxt.raw, key_size)


def map_lookup_batch(fd: int, key_size: int, value_size: int, max_entries: int) -> list[tuple[bytes, bytes]]:
    """Every (key, value) in one or a few syscalls (kernel >= 5.6); EINVAL/ENOTSUPP where the map cannot."""
    n = max(1, max_entries)
    keys = ctypes.create_string_buffer(key_size * n)
    values = ctypes.create_string_buffer(value_size * n)
    in_b = ctypes.create_string_buffer(max(8, key_size))
    out_b = ctypes.create_string_buffer(max(8, key_size))
    out: list[tuple[bytes, bytes]] = []
    first = True
    while True:
        attr = _BatchAttr(in_batch=0 if first else ctypes.addressof(in_b), out_batch=ctypes.addressof(out_b),
                          keys=ctypes.addressof(keys), values=ctypes.addressof(values), count=n, map_fd=fd)
        done = False
        try:
            _bpf(BPF_MAP_LOOKUP_BATCH, attr, "map lookup batch")
        except BpfError as e:
            if e.errno != errno_mod.ENOENT:
                raise
            done = True
        kraw, vraw = keys.raw, values.raw
        for i in range(attr.count):
            out.append((kraw[i * key_size:(i + 1) * key_size], vraw[i * value_size:(i + 1) * value_size]))
        if done:
            return out
        ctypes.memmove(in_b, out_b, len(out_b))
        first = False


def fd_info(fd: int) -> dict[str, str]:
    """/proc/self/fdinfo/<fd> as a dict: map_type, key_size, value_size, max_entries, prog run_cnt, ..."""
    out = {}
    for line in Path(f"/proc/self/fdinfo/{fd}").read_text().splitlines():
        k, sep, v = line.partition(":")
        if sep:
            out[k.strip()] = v.strip()
    return out
