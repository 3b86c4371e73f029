"""The Python fallback of hwagent-shim (agent/runtime/shim.c), same argv and files.

Used when the C shim was not built (no gcc when scripts/setup.sh ran). It costs
the interpreter's start (tens of ms) on every launch, which is why the C shim
is the default; behaviour is the same: fork, the child joins its cgroups and
mount namespace and execs, the shim copies output to the log with rotation and
writes the exit status to STATE/exit. Only ``os`` and ``ctypes`` (for mount,
unshare and prctl) are imported, to keep the start short. Like the C shim it is
a child subreaper: what the workload orphans is re-parented to it and reaped
here, and what is left when the workload exits is killed and reaped before the
shim exits. With ``-u UID GID GROUPS`` the workload runs as that user and the log
is opened and rotated with its filesystem uid/gid, never through a link (see shim.c).
Like the C shim it runs with hwagent's fixed environment (started ``-I -S``: no
``PYTHON*`` variable is read) and takes the workload's from ``-e ENV_FD``, applied
only in the workload's exec; it keeps none of the daemon's descriptors and the
workload starts with 0, 1 and 2 only. With ``-l NAME=SOFT:HARD,...`` the workload starts with
exactly those resource limits (its submitter's), set as root before the drop (see shim.c).
"""

from __future__ import annotations

import os
import signal
import struct
import sys
import time
from typing import Any

CLONE_NEWNS = 0x00020000
PR_SET_CHILD_SUBREAPER = 36
#: after the workload exited: rounds of 100 ms spent ending what it left behind
REAP_ROUNDS = 100
MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 32, 4096, 16384, 1 << 18


def _write_state(state: str, name: str, text: str) -> None:
    tmp = os.path.join(state, f".{name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    os.replace(tmp, os.path.join(state, name))


def _libc() -> tuple[Any, Any]:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    return libc, ctypes


def _mount(libc: Any, ctypes: Any, src: str | None, dst: str, flags: int) -> None:
    s = src.encode() if src else None
    if libc.mount(s, dst.encode(), None, flags, None) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()), dst)


def _ensure_target(src: str, dst: str) -> None:
    if os.path.exists(dst):
        return
    os.makedirs(os.path.dirname(dst) or "/", exist_ok=True)
    if os.path.isdir(src):
        os.mkdir(dst, 0o755)
    else:
        os.close(os.open(dst, os.O_WRONLY | os.O_CREAT, 0o644))


#: the workload's (uid, gid, groups) from -u; None: root
_User = tuple[int, int, list[int]] | None

#: -l's names (prlimit(1)'s, as shim.c) -> the resource module's constant name; Python has no
#: RLIMIT_LOCKS: Linux numbers it 10 on every architecture
LIMIT_NAMES = {"cpu": "CPU", "fsize": "FSIZE", "data": "DATA", "stack": "STACK", "core": "CORE", "rss": "RSS",
               "nproc": "NPROC", "nofile": "NOFILE", "memlock": "MEMLOCK", "as": "AS", "locks": "LOCKS",
               "sigpending": "SIGPENDING", "msgqueue": "MSGQUEUE", "nice": "NICE", "rtprio": "RTPRIO",
               "rttime": "RTTIME"}
_RLIMIT_LOCKS = 10
#: (name, soft, hard) from -l, -1 (RLIM_INFINITY) for unlimited
_Limits = list[tuple[str, int, int]]


def _rlim(word: str) -> int:
    if word == "unlimited":
        return -1
    if not word.isdigit() or not word.isascii() or len(word) > 20 or int(word) >= (1 << 64) - 1:
        raise ValueError(word)
    return int(word)


def parse_limits(arg: str) -> _Limits:
    """-l NAME=SOFT:HARD[,...] (agent/runtime/rlimits.py shim_arg); ValueError for anything else, as shim.c."""
    out = []
    for item in arg.split(",") if arg else ():
        name, eq, values = item.partition("=")
        soft, colon, hard = values.partition(":")
        if name not in LIMIT_NAMES or not eq or not colon:
            raise ValueError(item)
        s, h = _rlim(soft), _rlim(hard)
        if h != -1 and (s == -1 or s > h):
            raise ValueError(item)
        out.append((name, s, h))
    return out


def _least(a: int, b: int) -> int:
    """The smaller of two limits, -1 (unlimited) being the largest."""
    return b if a == -1 else a if b == -1 else min(a, b)


def _setrlimit(which: int, soft: int, hard: int) -> None:
    """resource.setrlimit with the kernel's errno: the module turns EPERM and EINVAL into ValueError."""
    import errno
    import resource

    try:
        resource.setrlimit(which, (soft, hard))
    except (ValueError, OverflowError) as e:
        code = errno.EPERM if "not allowed" in str(e) else errno.EINVAL
        raise OSError(code, os.strerror(code)) from None


def set_limits(limits: _Limits) -> None:
    """Set each limit (as root, before the drop: raising a hard one needs it); OSError with the
    errno the kernel gave, as shim.c reports it. Without CAP_SYS_RESOURCE a hard limit cannot be
    raised above the shim's own: the values are clipped to it (never above the submitter's) and
    stderr (shim.err) says so, as shim.c does."""
    import errno
    import resource

    for name, soft, hard in limits:
        which = getattr(resource, "RLIMIT_" + LIMIT_NAMES[name], _RLIMIT_LOCKS)
        try:
            _setrlimit(which, soft, hard)
        except OSError as e:
            if e.errno != errno.EPERM:
                raise
            hard = _least(hard, resource.getrlimit(which)[1])
            soft = _least(soft, hard)
            _setrlimit(which, soft, hard)
            inf = (1 << 64) - 1
            os.write(2, f"hwagent-shim: {name}: cannot raise the hard limit (EPERM): kept at "
                        f"{inf if soft == -1 else soft}:{inf if hard == -1 else hard}\n".encode())


class _FsUser:
    """File access as the workload's user for the log (setfsuid/setfsgid), root again after."""

    def __init__(self, user: _User) -> None:
        self.user = user

    def __enter__(self) -> None:
        if self.user is not None:
            libc, _ = _libc()
            libc.setfsgid(self.user[1])
            libc.setfsuid(self.user[0])

    def __exit__(self, *exc: object) -> None:
        if self.user is not None:
            libc, _ = _libc()
            libc.setfsgid(0)
            libc.setfsuid(0)


def close_all_but(keep: set[int]) -> None:
    """Close every descriptor from 3 on that is not in ``keep``."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass  # the listing's own descriptor, gone with it


def read_env(fd: int) -> dict[str, str]:
    """The workload's environment from ``fd`` ("NAME=VALUE\\0" entries up to EOF; see shim.c):
    ValueError for an entry with no name or no '='."""
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    data = b"".join(chunks)
    if data and not data.endswith(b"\0"):
        raise ValueError("the last entry is not NUL-terminated")
    env = {}
    for entry in data.split(b"\0")[:-1]:
        name, eq, value = entry.partition(b"=")
        if not name or not eq:
            raise ValueError(f"not an environment entry: {entry[:40]!r}")
        env[os.fsdecode(name)] = os.fsdecode(value)
    return env


def _child(procs: list[str], binds: list[tuple[str, str, bool]], cwd: str, out_w: int, err_w: int,
           cmd: list[str], env: dict[str, str], user: _User = None, limits: _Limits | None = None) -> None:
    stage, what = "cgroup", ""
    try:
        pid = f"{os.getpid()}\n".encode()
        for p in procs:
            what = p
            fd = os.open(p, os.O_WRONLY)
            try:
                os.write(fd, pid)
            finally:
                os.close(fd)
        if binds:
            stage = "mount"
            libc, ctypes = _libc()
            what = "unshare(CLONE_NEWNS)"
            if libc.unshare(CLONE_NEWNS) != 0:
                raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
            what = "make / private"
            _mount(libc, ctypes, None, "/", MS_REC | MS_PRIVATE)
            for src, dst, ro in binds:
                what = dst
                _ensure_target(src, dst)
                _mount(libc, ctypes, src, dst, MS_BIND | MS_REC)
                if ro:
                    _mount(libc, ctypes, None, dst, MS_BIND | MS_REMOUNT | MS_RDONLY)
        for name, soft, hard in limits or ():
            stage, what = "rlimit", name
            set_limits([(name, soft, hard)])
        if user is not None:
            stage = "user"
            what = "setgroups"
            os.setgroups(user[2])
            what = "setgid"
            os.setgid(user[1])
            what = "setuid"
            os.setuid(user[0])
        if cwd:
            stage, what = "chdir", cwd
            os.chdir(cwd)
        devnull = os.open("/dev/null", os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out_w, 1)
        os.dup2(out_w, 2)
        # the workload starts with 0, 1 and 2 (the error pipe is close-on-exec: it reports a failed exec)
        close_all_but({err_w})
        default_signals()
        stage, what = "exec", cmd[0]
        # its environment only now, after the drop: the lookup follows the workload's PATH, as its user
        os.execvpe(cmd[0], cmd, env)
    except OSError as e:
        msg = f"{stage} {e.errno or 0} {what}: {e.strerror or e}"
        os.write(err_w, msg.encode()[:1000])
    finally:
        os._exit(127)


def _rotate(log: str, keep: int) -> None:
    for i in range(keep - 1, 0, -1):
        try:
            os.rename(f"{log}.{i}", f"{log}.{i + 1}")
        except OSError:
            pass
    try:
        if keep >= 1:
            os.rename(log, f"{log}.1")
        else:
            os.unlink(log)
    except OSError:
        pass


USAGE = ("usage: shim.py STATE LOG LOG_MAX LOG_KEEP HANDSHAKE_FD CWD [-u UID GID GROUPS] [-l LIMITS] [-e ENV_FD] "
         "[-p PROCS]... [-b SRC DST MODE]... -- ARGV...")


class _BadArgs(Exception):
    """A command line the shim refuses, with the message to print."""


class _Args:
    """The shim's command line, parsed."""

    def __init__(self, argv: list[str]) -> None:
        if len(argv) < 7:
            raise _BadArgs(USAGE)
        self.state, self.log, self.cwd = argv[0], argv[1], argv[5]
        self.log_max, self.log_keep, self.hs = int(argv[2]), int(argv[3]), int(argv[4])
        self.procs: list[str] = []
        self.binds: list[tuple[str, str, bool]] = []
        self.user: _User = None
        #: where the workload's environment comes from (-e); None: an empty one
        self.envfd: int | None = None
        #: the workload's resource limits (-l)
        self.limits: _Limits = []
        i = 6
        while i < len(argv):
            a = argv[i]
            if a == "--":
                i += 1
                break
            if a == "-p" and i + 1 < len(argv):
                self.procs.append(argv[i + 1])
                i += 2
            elif a == "-u" and i + 3 < len(argv):
                try:
                    groups = [] if argv[i + 3] == "-" else [int(g) for g in argv[i + 3].split(",")]
                    self.user = (int(argv[i + 1]), int(argv[i + 2]), groups)
                except ValueError:
                    raise _BadArgs(f"shim.py: bad -u {' '.join(argv[i + 1:i + 4])}") from None
                i += 4
            elif a == "-l" and i + 1 < len(argv):
                try:
                    self.limits += parse_limits(argv[i + 1])
                except ValueError:
                    raise _BadArgs(f"shim.py: bad -l {argv[i + 1]}") from None
                i += 2
            elif a == "-e" and i + 1 < len(argv):
                if not argv[i + 1].isdigit() or int(argv[i + 1]) < 3 or int(argv[i + 1]) == self.hs:
                    raise _BadArgs(f"shim.py: bad -e {argv[i + 1]}")
                self.envfd = int(argv[i + 1])
                i += 2
            elif a == "-b" and i + 3 < len(argv):
                self.binds.append((argv[i + 1], argv[i + 2], argv[i + 3] == "ro"))
                i += 4
            else:
                raise _BadArgs(f"shim.py: bad argument {a}")
        self.cmd = argv[i:]
        if not self.cmd:
            raise _BadArgs("shim.py: no command")


class _Log:
    """The container's log file; it never grows past log_max: rotate first, cutting at the
    last newline that fits."""

    def __init__(self, path: str, log_max: int, log_keep: int, user: _User = None) -> None:
        self.path, self.log_max, self.log_keep = path, log_max, log_keep
        # when each chunk arrived, beside the log (shim.c's times file; agent/runtime/logtimes.py)
        self.times_path = (path[: -len(".log")] if path.endswith(".log") else path) + ".times"
        self.as_user = _FsUser(user)
        self.fd = self._open(self.path)
        self.times_fd = self._open(self.times_path)
        self.size = os.fstat(self.fd).st_size

    def _open(self, path: str) -> int:
        with self.as_user:
            return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)

    def _record(self) -> None:
        try:
            os.write(self.times_fd, struct.pack("=QQ", self.size, time.time_ns()))
        except OSError:
            pass  # the times are an aid; the log itself must not stop for them

    def write(self, data: bytes) -> None:
        while data:
            take = len(data)
            if self.log_max > 0:
                room = self.log_max - self.size
                if room <= 0 or (len(data) > room and self.size > 0 and b"\n" not in data[:room]):
                    os.close(self.fd)
                    os.close(self.times_fd)
                    with self.as_user:
                        _rotate(self.path, self.log_keep)
                        _rotate(self.times_path, self.log_keep)
                    self.fd = self._open(self.path)
                    self.times_fd = self._open(self.times_path)
                    self.size = 0
                    continue
                if len(data) > room:
                    nl = data.rfind(b"\n", 0, room)
                    take = nl + 1 if nl >= 0 else room
            self._record()
            os.write(self.fd, data[:take])
            self.size += take
            data = data[take:]


def _become_supervisor() -> None:
    """A session of its own, a subreaper for what the workload orphans, no SIGPIPE,
    and the signals it forwards or reaps blocked."""
    try:
        os.setsid()
    except PermissionError:  # already a session leader (the launcher spawns it with setsid)
        pass
    libc, _ctypes = _libc()
    # best effort: without it orphans go to PID 1 as before, and the runtime's cgroup kill still ends them
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    blocked = {signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
    signal.pthread_sigmask(signal.SIG_BLOCK, blocked)


def default_signals() -> None:
    """Every signal at its default and none blocked, as a container starts whatever the daemon
    inherited (a daemon started from a script's background job has SIGINT and SIGQUIT ignored,
    and an ignored signal survives exec: a shell cannot even trap it). Same as shim.c; also
    what `hwagent exec -t` does for its command (agent/commands/_ptyrelay.py)."""
    for sig in signal.valid_signals():
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            try:
                signal.signal(sig, signal.SIG_DFL)
            except (OSError, ValueError):  # the real-time signals glibc keeps for itself
                pass
    signal.pthread_sigmask(signal.SIG_SETMASK, set())


def _sigchld_fd() -> int:
    """A descriptor that turns readable on SIGCHLD (the shim's signalfd, in Python):
    SIGCHLD is unblocked here, in the shim only, after the fork."""
    r, w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(w)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
    return r


def _reap(child: int) -> tuple[int | None, bool]:
    """Reap every child that has exited: (the workload's wait status if it was
    among them, whether the shim has no child left at all)."""
    status = None
    while True:
        try:
            pid, st = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return status, True
        if pid == 0:
            return status, False
        if pid == child:
            status = st


def _kill_children() -> None:
    """SIGKILL every process whose parent is the shim: once the workload exited, the
    orphans re-parented here (theirs come here in turn, for the next round)."""
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            if int(fields[1]) == me:
                os.kill(int(name), signal.SIGKILL)
        except (OSError, IndexError, ValueError):
            continue


def _end_orphans(child: int, wake: int) -> None:
    """The workload is gone: end and reap what it left behind before the daemon sees the exit."""
    import select

    for _ in range(REAP_ROUNDS):
        if _reap(child)[1]:
            return
        _kill_children()
        select.select([wake], [], [], 0.1)
        _drain(wake)


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


def _copy_until_exit(child: int, out_r: int, log: _Log, wake: int) -> int:
    """Copy the child's output to the log until it exits, reaping any orphan that
    ends meanwhile; the child's wait status."""
    import select

    poller = select.poll()
    poller.register(wake, select.POLLIN)
    poller.register(out_r, select.POLLIN)
    out_open = True
    status: int | None = None
    while status is None:
        events = dict(poller.poll())
        if out_r in events and out_open:
            data = os.read(out_r, 65536)
            if not data:
                out_open = False
                poller.unregister(out_r)
            else:
                log.write(data)
        if wake in events:
            _drain(wake)
            status = _reap(child)[0]
    os.set_blocking(out_r, False)
    try:
        while data := os.read(out_r, 65536):
            log.write(data)
    except BlockingIOError:
        pass
    return status


def main(argv: list[str]) -> int:
    try:
        args = _Args(argv)
    except _BadArgs as e:
        print(e, file=sys.stderr)
        return 2
    state, hs = args.state, args.hs
    # none of the daemon's descriptors stays here: only 0-2, the handshake and the environment
    close_all_but({hs} | ({args.envfd} if args.envfd is not None else set()))
    env: dict[str, str] = {}
    if args.envfd is not None:
        try:
            env = read_env(args.envfd)
        except (OSError, ValueError) as e:
            line = f"error env {getattr(e, 'errno', None) or 22} the workload's environment: {e}\n"
            _write_state(state, "exit", line)
            os.write(hs, line.encode())
            return 1
        finally:
            os.close(args.envfd)
    _become_supervisor()
    out_r, out_w = os.pipe2(os.O_CLOEXEC)
    err_r, err_w = os.pipe2(os.O_CLOEXEC)
    child = os.fork()
    if child == 0:
        _child(args.procs, args.binds, args.cwd, out_w, err_w, args.cmd, env, args.user, args.limits)
    os.close(out_w)
    os.close(err_w)
    err = b""
    while chunk := os.read(err_r, 1100):
        err += chunk
    os.close(err_r)
    if err:
        os.waitpid(child, 0)
        line = f"error {err.decode(errors='replace')}\n"
        _write_state(state, "exit", line)
        os.write(hs, line.encode())
        return 0
    wake = _sigchld_fd()
    _write_state(state, "pid", f"{os.getpid()} {child}\n")
    os.write(hs, f"ok {os.getpid()} {child}\n".encode())
    os.close(hs)
    status = _copy_until_exit(child, out_r, _Log(args.log, args.log_max, args.log_keep, args.user), wake)
    if os.WIFEXITED(status):
        _write_state(state, "exit", f"exited {os.WEXITSTATUS(status)}\n")
    else:
        _write_state(state, "exit", f"signaled {os.WTERMSIG(status)}\n")
    _end_orphans(child, wake)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
