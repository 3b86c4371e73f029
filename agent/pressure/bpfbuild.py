"""The BPF compile, in a short-lived child process that hands back descriptors.

bcc compiles through LLVM/clang in-process; after one compile the process keeps
~60 MB of LLVM state and touched library pages that nothing frees. The daemon
therefore never imports bcc: it runs ``python -m agent.pressure.bpfbuild FD``,
writes a build request (sources, flags, programs to load) on the child's stdin,
and receives over the socket FD one message with the metadata as JSON and the
file descriptors of every created map and loaded program (SCM_RIGHTS). The
kernel objects live as long as the daemon holds those descriptors; the child
exits and its memory goes with it.

One compile serves every probe; if it fails, each probe is compiled alone to
find the culprit(s) so one bad probe does not take the rest down.
"""

from __future__ import annotations

import ctypes
import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["BuildRequest", "BuildResult", "build_in_child", "BuildError"]

PRELUDE = "#include <uapi/linux/ptrace.h>\n"
#: the one message the child sends; metadata is a few KB, the socket preserves boundaries
_MAX_MSG = 1 << 20
_MAX_FDS = 250  # SCM_RIGHTS limit is 253 per message


class BuildError(RuntimeError):
    """The child could not run or answer (not a compile error: those are per probe)."""


@dataclass
class ProgramLoad:
    probe: str
    program: str
    prog_type: int
    attach_type: int = 0
    attach_btf_id: int = 0


@dataclass
class BuildRequest:
    header: str  # probes/common.h, compiled before every unit
    units: dict[str, str]  # probe -> its C source
    cflags: list[str]
    programs: list[ProgramLoad]
    maps: dict[str, list[str]]  # probe -> map names


@dataclass
class BuildResult:
    failed: dict[str, str] = field(default_factory=dict)  # probe -> why
    programs: dict[str, int] = field(default_factory=dict)  # program -> fd
    maps: dict[str, tuple[int, str, str]] = field(default_factory=dict)  # map -> (fd, key desc, leaf desc)
    compile_s: float = 0.0
    child_s: float = 0.0
    log: str = ""


def build_in_child(req: BuildRequest, timeout_s: float = 600.0) -> BuildResult:
    """Run the compile in a fresh interpreter and collect the descriptors it sends back."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    t0 = time.perf_counter()
    payload = json.dumps({
        "header": req.header, "units": req.units, "cflags": req.cflags,
        "programs": [p.__dict__ for p in req.programs], "maps": req.maps,
    })
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agent.pressure.bpfbuild", str(theirs.fileno())],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            pass_fds=[theirs.fileno()], env=_child_env(),
        )
    except OSError as e:
        ours.close()
        theirs.close()
        raise BuildError(f"cannot start the BPF build child: {e}") from None
    theirs.close()
    try:
        _out, err = proc.communicate(payload.encode(), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        ours.close()
        raise BuildError(f"BPF build child did not finish in {timeout_s:.0f} s") from None
    log = err.decode(errors="replace")
    ours.setblocking(False)
    try:
        msg, fds = _recv_fds_cloexec(ours)
    except BlockingIOError:
        msg, fds = b"", []
    finally:
        ours.close()
    if not msg:
        tail = " | ".join(log.strip().splitlines()[-5:])
        raise BuildError(f"BPF build child exited {proc.returncode} without an answer: {tail}")
    meta = json.loads(msg)
    errors = [ln.strip() for ln in log.splitlines() if "error:" in ln]
    failed = {n: why + (f" ({'; '.join(errors[:3])})" if errors and "compile failed" in why else "")
              for n, why in meta["failed"].items()}
    res = BuildResult(failed=failed, compile_s=meta["compile_s"], log=log)
    for name, idx in meta["programs"].items():
        res.programs[name] = fds[idx]
    for name, (idx, kdesc, ldesc) in meta["maps"].items():
        res.maps[name] = (fds[idx], kdesc, ldesc)
    res.child_s = time.perf_counter() - t0
    return res


def _recv_fds_cloexec(sock: socket.socket) -> tuple[bytes, list[int]]:
    """The message and the descriptors it carries, close-on-exec as they arrive: a descriptor
    passed over a socket is inheritable unless asked, and every process the daemon starts (the
    shims) would hold the probes' programs and maps. (``socket.recv_fds`` drops its ``flags``
    before Python 3.12, so ``recvmsg`` itself.)"""
    import array

    fds = array.array("i")
    msg, ancdata, _flags, _addr = sock.recvmsg(_MAX_MSG, socket.CMSG_LEN(_MAX_FDS * fds.itemsize),
                                               socket.MSG_CMSG_CLOEXEC)
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    return msg, list(fds)


def _child_env() -> dict[str, str]:
    """The child imports agent from wherever this process did, checkout or installed."""
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


# -- the child ---------------------------------------------------------------------


def _compile(bpf_cls: Any, header: str, sources: list[str], cflags: list[str]) -> Any:
    return bpf_cls(text=(PRELUDE + header + "\n" + "\n".join(sources)).encode(), cflags=cflags)


def _child_main(sock_fd: int) -> int:
    from bcc import BPF  # noqa: PLC0415 - only the child links LLVM
    from bcc.libbcc import lib  # noqa: PLC0415

    from agent.pressure import bpfsys  # noqa: PLC0415

    req = json.loads(sys.stdin.read())
    header, units, cflags = req["header"], req["units"], req["cflags"]
    failed: dict[str, str] = {}
    t0 = time.perf_counter()
    names = list(units)
    bpf = None
    try:
        bpf = _compile(BPF, header, [units[n] for n in names], cflags)
    except Exception as e:  # bcc raises bare Exception on compile failure
        reason = f"BPF compile failed: {str(e).strip()[:300]}"
        if len(names) == 1:
            failed[names[0]] = reason
            names = []
        else:
            good = []
            for n in names:
                try:
                    _compile(BPF, header, [units[n]], cflags).cleanup()
                    good.append(n)
                except Exception as e1:
                    failed[n] = f"BPF compile failed: {str(e1).strip()[:200]}"
            names = good
            if names:
                bpf = _compile(BPF, header, [units[n] for n in names], cflags)
    compile_s = time.perf_counter() - t0
    fds: list[int] = []
    programs: dict[str, int] = {}
    maps: dict[str, tuple[int, str, str]] = {}
    if bpf is not None:
        for p in req["programs"]:
            if p["probe"] not in names or p["probe"] in failed:
                continue
            name = p["program"].encode()
            start = lib.bpf_function_start(bpf.module, name)
            if not start:
                failed[p["probe"]] = f"program {p['program']} not in the compiled source"
                continue
            insns = ctypes.string_at(start, lib.bpf_function_size(bpf.module, name))
            try:
                fd = bpfsys.prog_load(p["prog_type"], insns, p["program"],
                                      expected_attach_type=p["attach_type"], attach_btf_id=p["attach_btf_id"])
            except bpfsys.BpfError as e:
                failed[p["probe"]] = str(e)[:400]
                continue
            programs[p["program"]] = len(fds)
            fds.append(fd)
        for probe, mnames in req["maps"].items():
            if probe not in names or probe in failed:
                continue
            for m in mnames:
                mb = m.encode()
                fd = lib.bpf_table_fd(bpf.module, mb)
                if fd < 0:
                    failed[probe] = f"map {m} not in the compiled source"
                    break
                maps[m] = (len(fds), lib.bpf_table_key_desc(bpf.module, mb).decode(),
                           lib.bpf_table_leaf_desc(bpf.module, mb).decode())
                fds.append(fd)
    # a probe that failed late gives back what it had
    msg = json.dumps({"failed": failed, "programs": programs, "maps": maps, "compile_s": compile_s}).encode()
    sock = socket.socket(fileno=sock_fd)
    socket.send_fds(sock, [msg], fds)
    sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(_child_main(int(sys.argv[1])))
