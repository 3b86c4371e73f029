#!/usr/bin/env python3
"""Boot a qemu guest of the VM tier with a chosen topology, run one command in it against
this checkout, and hand back its exit code and artifacts (serial log, junit XML, rc).

Why qemu and TCG: the hosts this runs on have one NUMA node and no usable KVM for a stock
kernel (see tests/vm/README.md); emulated NUMA under TCG is the only way to see a real
kernel's multi-node, SMT, cgroup v2 and eBPF behaviour here. A wedged guest is killed by
its timeout and reported as such; nothing here can hang the caller.

Command line (also used by the host-side pytest wrapper through the same functions):
    tests/vm/runner.py build
    tests/vm/runner.py run [--topology numa2] [--cgroup v2] [--out DIR] [--timeout S] -- CMD...
    tests/vm/runner.py test [--topology NAME]... [-- PYTEST ARGS]
"""

from __future__ import annotations

import argparse
import functools
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
if str(REPO) not in sys.path:  # run as a script: make `tests.vm` importable
    sys.path.insert(0, str(REPO))

from tests.vm.calibrate import loop_seconds  # noqa: E402
from tests.vm.progress import PROGRESS_FILE, Progress, read_progress  # noqa: E402
from tests.vm.topologies import TOPOLOGIES, GuestTopology  # noqa: E402

#: build-image.sh's exit status for "prerequisites unavailable" (skip, don't fail)
UNAVAILABLE = 3
#: numa2 runs the admission + runtime proof (tests/vm/guest/test_workloads.py): ~9 min under
#: TCG on a quiet 2-core host, ~20 on a loaded one
DEFAULT_TIMEOUT_S = int(os.environ.get("HWAGENT_VM_TIMEOUT", "1500"))
#: the CPU model under TCG (see accel_args); $HWAGENT_VM_CPU overrides it
TCG_CPU = os.environ.get("HWAGENT_VM_CPU", "Nehalem-v1")
#: a guest that has printed no VMTEST line this long after qemu started is taken for wedged;
#: the budget itself comes from measured boots (boot_budget_s), never below the floor
BOOT_BUDGET_FLOOR_S = 30.0
#: measured boot x this factor = the budget (boots vary about 2x on a shared machine)
BOOT_BUDGET_FACTOR = 4.0
#: budget before any boot was measured on this machine
BOOT_BUDGET_UNMEASURED_S = 120.0
#: boots remembered per image for the budget
BOOT_HISTORY = 20
#: a guest that booted this many times slower than the quickest remembered boot gets its
#: command timeout stretched by as much (the machine is loaded now), at most by this factor
MAX_TIMEOUT_STRETCH = 2.5
#: the guest test suite, run by `runner.py test` and the host-side wrapper
GUEST_TESTS = "tests/vm/guest"
#: all the guests of one `runner.py test` or pytest session together: no guest is started, and
#: none runs, past it, so one guest's overrun on a loaded host cannot carry a CI run past its
#: 90 minutes (60 for the guests leaves the other tiers 30; issue 22 item 14). Four guests at
#: their stretched limits would take ~4 h.
TIER_BUDGET_S = float(os.environ.get("HWAGENT_VM_TIER_BUDGET", "3600"))
#: kept back from a guest's limit for each guest still to run after it, so that an overrun
#: leaves every later guest time to boot and report at least a partial result
GUEST_RESERVE_S = 300.0


class Unavailable(RuntimeError):
    """The VM tier cannot run on this machine (not root, no qemu, apt unreachable...)."""


@dataclass(frozen=True)
class Image:
    path: Path
    kver: str

    @property
    def vmlinuz(self) -> Path:
        return self.path / "vmlinuz"

    @property
    def initramfs(self) -> Path:
        return self.path / "initramfs.cpio.gz"

    @property
    def modules(self) -> Path:
        return self.path / "modules"


def build_image() -> Image:
    """Build or reuse the cached image (tests/vm/build-image.sh does the work and caching)."""
    p = subprocess.run(["bash", str(HERE / "build-image.sh")], capture_output=True, text=True)
    if p.returncode == UNAVAILABLE:
        raise Unavailable(p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "build-image.sh: unavailable")
    if p.returncode != 0:
        raise RuntimeError(f"build-image.sh failed (rc {p.returncode}):\n{p.stderr[-4000:]}")
    path = Path(p.stdout.strip().splitlines()[-1])
    return Image(path, (path / "kver").read_text().strip())


def accel_args() -> list[str]:
    """TCG unless a real (non-PVM) KVM exists, or $HWAGENT_VM_ACCEL says otherwise.

    PVM's /dev/kvm cannot run a stock kernel; TCG with an Intel-vendor CPU model is what
    gives correct SMT siblings and packages (the AMD-vendor models lose SMT under TCG).

    Why a named model and not ``max``: Debian's qemu 7.2 is the first release whose TCG
    emulates AVX/AVX2, and ``-cpu max`` turns on everything TCG can do (AVX2, LA57
    five-level paging, PKU, ...), the least exercised paths of the emulator; the tier saw
    qemu segfault at start and a guest wedged silently before its first console line with
    it. Nehalem is Intel (SMT siblings and packages come out right through CPUID leaf 0xB),
    x86-64-v2 (SSE4.2/POPCNT: all Debian userland, bcc's LLVM and the wheels run), every
    feature it names is one TCG implements (qemu warns about none), and nothing the guest
    tests need is missing: BPF, cgroups and NUMA are the kernel's, not the CPU's.
    """
    want = os.environ.get("HWAGENT_VM_ACCEL", "auto")
    if want == "auto":
        flags = ""
        try:
            flags = next((ln for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("flags")), "")
        except OSError:
            pass
        real_kvm = (
            os.access("/dev/kvm", os.R_OK | os.W_OK)
            and (" vmx" in flags or " svm" in flags)
            and not Path("/sys/module/kvm_pvm").exists()
        )
        want = "kvm" if real_kvm else "tcg"
    if want == "kvm":
        return ["-accel", "kvm", "-cpu", "host"]
    return ["-accel", "tcg", "-cpu", TCG_CPU]


@dataclass(frozen=True)
class StartFailure:
    """One attempt that never got the guest going: qemu died first, or the guest stayed silent."""

    #: "crash" (qemu died before the guest's first VMTEST line) or "silent" (no such line in budget)
    kind: str
    #: qemu's exit status for a crash (negative = signal); None for a silent guest (we killed it)
    qemu_rc: int | None
    after_s: float
    budget_s: float

    def describe(self) -> str:
        if self.kind == "crash":
            how = f"signal {-self.qemu_rc}" if self.qemu_rc is not None and self.qemu_rc < 0 else f"rc {self.qemu_rc}"
            return f"qemu died at start ({how}) after {self.after_s:.0f}s"
        return f"guest silent for {self.after_s:.0f}s (boot budget {self.budget_s:.0f}s), killed"


@dataclass(frozen=True)
class GuestRun:
    topology: str
    cgroup: str
    rc: int | None  # the command's exit status; None = no status came back
    timed_out: bool
    wall_s: float
    out_dir: Path
    #: qemu's own exit status (negative = killed by that signal)
    qemu_rc: int | None = None
    #: qemu crashes before the guest started that were retried (see boot)
    crashes: tuple[int, ...] = ()
    #: every attempt that did not get the guest started, crashes and silent guests alike
    start_failures: tuple[StartFailure, ...] = ()
    #: the last attempt, too, never got the guest started (after its retry): no result at all
    never_started: bool = False
    #: seconds from qemu's start to the guest's first VMTEST line in the attempt that ran
    boot_s: float | None = None
    #: the limit the attempt that ran was held to, in seconds from its start (its timeout,
    #: stretched for a slow boot, cut to the tier's budget)
    limit_s: float | None = None
    #: the tier's budget, not the guest's own timeout, set that limit
    cut_by_tier: bool = False

    @property
    def serial_log(self) -> Path:
        return self.out_dir / "serial.log"

    @property
    def junit(self) -> Path:
        return self.out_dir / "junit.xml"

    @property
    def progress_file(self) -> Path:
        return self.out_dir / PROGRESS_FILE

    def progress(self) -> Progress | None:
        """What the guest's pytest reported test by test (tests/vm/progress.py), if it ran."""
        return read_progress(self.progress_file)

    def partial_report(self) -> str:
        """Which guest tests passed and failed, and which one was running, when the guest
        ended without its junit XML (killed at its limit, or crashed)."""
        progress = self.progress()
        if progress is None:
            return (f"the guest's pytest reported no test (no {PROGRESS_FILE}: it had not finished collecting, "
                    "or never started)")
        return progress.report()

    def serial_tail(self, lines: int = 60) -> str:
        try:
            text = self.serial_log.read_text(errors="replace")
        except OSError:
            return "(no serial log)"
        return "\n".join(text.splitlines()[-lines:])

    def describe(self) -> str:
        retried = "".join(f", after {f.describe()} and a retry" for f in self.start_failures[:1])
        if self.never_started and self.start_failures:
            return "never started: " + "; then ".join(f.describe() for f in self.start_failures)
        if self.timed_out:
            limit = "" if self.limit_s is None else f", limit {self.limit_s:.0f}s"
            tier = " (cut to what was left of the VM tier's budget)" if self.cut_by_tier else ""
            return f"TIMED OUT after {self.wall_s:.0f}s{limit}{tier} (guest killed){retried}"
        if self.rc is None:
            init_failed = self.out_dir / "init-failed"
            qemu_log = self.out_dir / "qemu.log"
            qemu_said = qemu_log.read_text(errors="replace").strip() if qemu_log.exists() else ""
            if init_failed.exists():
                why = f"guest /init failed: {init_failed.read_text().strip()}"
            elif self.qemu_rc is not None and self.qemu_rc < 0:
                why = f"qemu killed by signal {-self.qemu_rc}; qemu.log: {qemu_said[-300:]}"
            elif qemu_said:
                why = f"qemu rc {self.qemu_rc}: {qemu_said[-500:]}"
            else:
                why = "guest crashed or died before finishing; see serial.log"
            return f"no exit status ({why}){retried}"
        return f"rc={self.rc} in {self.wall_s:.0f}s{retried}"


# --- boot budget: measured boots on this machine ------------------------------------------


def _load_per_cpu() -> float:
    try:
        return os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:
        return 1.0


def _history_file(image_dir: Path) -> Path:
    return Path(os.environ.get("HWAGENT_VM_BOOT_HISTORY", str(image_dir / "boot-times")))


def record_boot(image_dir: Path, seconds: float, load_per_cpu: float) -> None:
    """Remember one boot (seconds to the first VMTEST line, and the load it ran under)."""
    path = _history_file(image_dir)
    try:
        lines = path.read_text().splitlines()[-(BOOT_HISTORY - 1):] if path.exists() else []
        path.write_text("".join(f"{ln}\n" for ln in lines) + f"{seconds:.2f} {load_per_cpu:.2f}\n")
    except OSError:
        pass  # a read-only cache: the budget stays at its unmeasured default


def _boots_per_unit_load(image_dir: Path) -> list[float]:
    """The remembered boots, each divided by the load per CPU it ran under (at least 1):
    TCG's speed on this machine with the load taken out."""
    out: list[float] = []
    try:
        for line in _history_file(image_dir).read_text().splitlines():
            secs, load = (float(x) for x in line.split())
            out.append(secs / max(1.0, load))
    except (OSError, ValueError):
        pass
    return out


def timeout_stretch(image_dir: Path, boot_s: float, load_per_cpu: float | None = None) -> float:
    """How much longer than its nominal timeout a guest that took ``boot_s`` to boot may
    run: its boot against the quickest remembered one (per unit of load), between 1 and
    MAX_TIMEOUT_STRETCH. The boot is a measurement of how fast the emulator runs on this
    machine right now.

    ``load_per_cpu``, the load this boot started under, counts the boot itself as a
    reference too: a fresh machine (a CI clone with no boot remembered) that is loaded
    boots slowly against its own load-free figure, so its first guests are stretched as
    well, where comparing loaded boots only with each other would give 1."""
    per_unit = _boots_per_unit_load(image_dir)
    if load_per_cpu is not None:
        per_unit.append(boot_s / max(1.0, load_per_cpu))
    if not per_unit or min(per_unit) <= 0:
        return 1.0
    return min(MAX_TIMEOUT_STRETCH, max(1.0, boot_s / min(per_unit)))


def boot_budget_s(image_dir: Path, load_per_cpu: float | None = None) -> float:
    """How long a guest may stay silent before it is taken for wedged.

    $HWAGENT_VM_BOOT_BUDGET if set; else the slowest remembered boot, normalised by the
    load it ran under (run-queue length per CPU, at least 1) and scaled to the load now,
    times BOOT_BUDGET_FACTOR, never below BOOT_BUDGET_FLOOR_S. No boot measured yet:
    BOOT_BUDGET_UNMEASURED_S.
    """
    env = os.environ.get("HWAGENT_VM_BOOT_BUDGET")
    if env:
        return float(env)
    per_unit_load = _boots_per_unit_load(image_dir)
    if not per_unit_load:
        return BOOT_BUDGET_UNMEASURED_S
    now = _load_per_cpu() if load_per_cpu is None else load_per_cpu
    return max(BOOT_BUDGET_FLOOR_S, BOOT_BUDGET_FACTOR * max(per_unit_load) * max(1.0, now))


def qemu_command(image: Image, topo: GuestTopology, cgroup: str, out_dir: Path, cwd: Path) -> list[str]:
    for path in (image.path, cwd, out_dir):
        if any(ch.isspace() for ch in str(path)):
            raise ValueError(f"paths passed on the kernel command line cannot hold spaces: {path}")
    append = " ".join(
        [
            "console=ttyS0 panic=-1 quiet mitigations=off",
            f"vmtest.cgroup={cgroup}",
            f"vmtest.modules={image.modules}",
            f"vmtest.cwd={cwd}",
            f"vmtest.init={topo.init}",
            # systemd as PID 1: unified hierarchy, only the tier's own target, quiet console
            *(["systemd.unified_cgroup_hierarchy=1", "systemd.unit=vmtest.target", "systemd.show_status=0"]
              if topo.init == "systemd" else []),
        ]
    )
    return [
        os.environ.get("HWAGENT_VM_QEMU", "qemu-system-x86_64"),
        *accel_args(),
        "-machine", "q35",
        *topo.qemu_args(),
        "-kernel", str(image.vmlinuz),
        "-initrd", str(image.initramfs),
        "-append", append,
        # hostroot: this machine's / read-only; the guest puts a tmpfs overlay on top
        # (explicit bus: qemu would otherwise try to plug them into an expander bridge)
        "-fsdev", "local,id=fsroot,path=/,security_model=none,readonly=on,multidevs=remap",
        "-device", "virtio-9p-pci,fsdev=fsroot,mount_tag=rootfs,bus=pcie.0",
        "-fsdev", f"local,id=fsout,path={out_dir},security_model=none,multidevs=remap",
        "-device", "virtio-9p-pci,fsdev=fsout,mount_tag=out,bus=pcie.0",
        "-display", "none", "-monitor", "none",
        "-serial", f"file:{out_dir / 'serial.log'}",
        "-nic", "none", "-vga", "none", "-no-reboot",
    ]  # fmt: skip


def boot(
    image: Image,
    topo: GuestTopology,
    command: str,
    out_dir: Path,
    *,
    cgroup: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    cwd: Path = REPO,
    env: dict[str, str] | None = None,
    stretch: bool = False,
    not_after: float | None = None,
) -> GuestRun:
    """Run `command` (a shell snippet) in a fresh guest; artifacts land in out_dir.

    ``stretch``: a guest that boots slower than the quickest remembered boot gets its
    timeout stretched alike (timeout_stretch), so a loaded machine gets a calibrated
    budget while the bound stays timeout_s x MAX_TIMEOUT_STRETCH.
    ``not_after``: a time.monotonic() instant no attempt runs past, whatever its own
    timeout and stretch (the tier's budget, TierBudget.not_after)."""
    cgroup = cgroup or topo.cgroup
    out_dir = out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in ("rc", "junit.xml", PROGRESS_FILE, "serial.log", "init-failed", "qemu.log", "serial.log.crashed",
                  "qemu.log.crashed", "serial.log.silent", "qemu.log.silent"):
        (out_dir / stale).unlink(missing_ok=True)
    guest_env = {
        "HWAGENT_VM_GUEST": "1",
        "HWAGENT_VM_TOPOLOGY": topo.name,
        "HWAGENT_VM_CGROUP": cgroup,
        "HWAGENT_VM_OUT": "/out",
        # the guest scales its budgets by its own speed against this (tests/vm/calibrate.py)
        "HWAGENT_VM_HOST_LOOP_S": f"{loop_seconds():.4f}",
        **(env or {}),
    }
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in guest_env.items())
    (out_dir / "cmd.sh").write_text(f"# written by tests/vm/runner.py\n{exports}{command}\n")
    argv = qemu_command(image, topo, cgroup, out_dir, cwd)
    (out_dir / "qemu-argv.txt").write_text(shlex.join(argv) + "\n")
    t0 = time.monotonic()
    failures: list[StartFailure] = []
    while True:
        budget = boot_budget_s(image.path)
        load = _load_per_cpu()
        stretch_of = functools.partial(timeout_stretch, image.path, load_per_cpu=load) if stretch else None
        attempt = _run_qemu(argv, out_dir, timeout_s - (time.monotonic() - t0), budget, stretch_of, not_after)
        if attempt.boot_s is not None and not attempt.silent:
            record_boot(image.path, attempt.boot_s, load)
        # qemu dying before the guest's /init ran (qemu 7.2's TCG segfaulted at start now and
        # then with -cpu max), or a guest silent past its boot budget, is no result of the
        # command: one fresh try in all, and both attempts are reported
        if attempt.silent:
            failure = StartFailure("silent", None, attempt.wall_s, budget)
        elif not attempt.timed_out and attempt.qemu_rc < 0 and attempt.boot_s is None:
            failure = StartFailure("crash", attempt.qemu_rc, attempt.wall_s, budget)
        else:
            break
        failures.append(failure)
        suffix = "crashed" if failure.kind == "crash" else "silent"
        for name in ("serial.log", "qemu.log"):
            if (out_dir / name).exists():
                (out_dir / name).rename(out_dir / f"{name}.{suffix}")
        if len(failures) > 1 or timeout_s - (time.monotonic() - t0) < 1 or \
                not_after is not None and not_after - time.monotonic() < 1:
            break
    wall = time.monotonic() - t0
    never_started = bool(failures) and (attempt.silent or attempt.boot_s is None and not attempt.timed_out
                                        and attempt.qemu_rc < 0)
    rc: int | None = None
    rc_file = out_dir / "rc"
    if not attempt.timed_out and not never_started and rc_file.exists():
        try:
            rc = int(rc_file.read_text().strip())
        except ValueError:
            rc = None
    crashes = tuple(f.qemu_rc for f in failures if f.kind == "crash" and f.qemu_rc is not None)
    return GuestRun(topo.name, cgroup, rc, attempt.timed_out, wall, out_dir, attempt.qemu_rc, crashes,
                    tuple(failures), never_started, attempt.boot_s, attempt.limit_s, attempt.cut_by_tier)


@dataclass(frozen=True)
class _Attempt:
    qemu_rc: int
    timed_out: bool
    #: killed for printing no VMTEST line within the boot budget
    silent: bool
    wall_s: float
    #: seconds to the first VMTEST line; None when it never came
    boot_s: float | None
    #: the limit it was held to at the end, seconds from its start
    limit_s: float | None = None
    #: not_after, not the timeout, set that limit
    cut_by_tier: bool = False


#: how often the runner looks at the serial log while a guest runs
_POLL_S = 0.25


def _run_qemu(argv: list[str], out_dir: Path, timeout_s: float, boot_budget_s: float,
              stretch_of: Callable[[float], float] | None = None, not_after: float | None = None) -> _Attempt:
    """Run qemu once, watching its serial log: killed at the timeout (stretched by
    ``stretch_of(boot seconds)`` once the guest has booted) or at ``not_after``, whichever
    comes first, or at the boot budget while the guest has printed no VMTEST line yet."""
    t0 = time.monotonic()
    own = t0 + max(timeout_s, 1)
    deadline = own if not_after is None else min(own, not_after)
    boot_s: float | None = None
    with open(out_dir / "qemu.log", "wb") as qlog:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=qlog, stderr=subprocess.STDOUT,
                                start_new_session=True)
        while True:
            try:
                rc = proc.wait(timeout=_POLL_S)
            except subprocess.TimeoutExpired:
                rc = None
            now = time.monotonic()
            if boot_s is None and _guest_started(out_dir):
                boot_s = now - t0
                if stretch_of is not None:
                    own = t0 + max(timeout_s, 1) * stretch_of(boot_s)
                    deadline = own if not_after is None else min(own, not_after)
            limit = (deadline - t0, not_after is not None and not_after < own)
            if rc is not None:
                return _Attempt(rc, False, False, now - t0, boot_s, *limit)
            silent = boot_s is None and now - t0 >= boot_budget_s
            if silent or now >= deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                return _Attempt(proc.wait(), not silent, silent, time.monotonic() - t0, boot_s, *limit)


def _guest_started(out_dir: Path) -> bool:
    try:
        return b"VMTEST:" in (out_dir / "serial.log").read_bytes()
    except OSError:
        return False


def guest_pytest_command(pytest_args: list[str] | None = None, tests: tuple[str, ...] = ()) -> str:
    """The guest side of the tier: pytest over tests/vm/guest (or the named files of it) with the checkout's venv."""
    python = REPO / ".venv" / "bin" / "python"
    py = str(python) if python.exists() else "python3"
    paths = [f"{GUEST_TESTS}/{t}" for t in tests] or [GUEST_TESTS]
    args = ["-m", "pytest", "-q", "-ra", "-p", "no:cacheprovider", *paths,
            "--junitxml=/out/junit.xml", "-o", "junit_family=xunit1", "-o", "junit_logging=system-out",
            # each outcome as it finishes, so a guest cut at its limit still says what it did
            "-p", "tests.vm.progress", f"--vm-progress=/out/{PROGRESS_FILE}",
            *(pytest_args or [])]
    return f"exec {shlex.quote(py)} {shlex.join(args)}"


@dataclass(frozen=True)
class JunitSummary:
    tests: int
    failures: int
    errors: int
    skipped: int
    #: (test id, message) of each failure/error
    problems: tuple[tuple[str, str], ...]
    #: (test id, reason) of each skip
    skips: tuple[tuple[str, str], ...]

    @property
    def passed(self) -> int:
        return self.tests - self.failures - self.errors - self.skipped


def read_junit(path: Path) -> JunitSummary:
    root = ET.parse(path).getroot()
    problems: list[tuple[str, str]] = []
    skips: list[tuple[str, str]] = []
    tests = 0
    for case in root.iter("testcase"):
        tests += 1
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        for kind in ("failure", "error"):
            for el in case.findall(kind):
                problems.append((name, f"{kind}: {(el.get('message') or '')[:300]}\n{(el.text or '')[-2000:]}"))
        for el in case.findall("skipped"):
            kind = "xfail" if el.get("type") == "pytest.xfail" else "skip"
            skips.append((name, f"{kind}: {el.get('message') or ''}"))
    failures = sum(1 for c in root.iter("testcase") if c.find("failure") is not None)
    errors = sum(1 for c in root.iter("testcase") if c.find("error") is not None)
    return JunitSummary(tests, failures, errors, len(skips), tuple(problems), tuple(skips))


def guest_verdict(run: GuestRun, summary: JunitSummary | None, what: str) -> str | None:
    """None when a guest suite passed; else why not, in words: a guest cut at its limit or
    ended without junit XML gets its partial result (what passed, what failed and why,
    what was running) ahead of the serial log's tail. ``what`` names the guest."""
    context = f"{what}, cgroup {run.cgroup}: {run.describe()}; artifacts in {run.out_dir}"
    if run.timed_out or summary is None:
        missing = "" if run.timed_out else ": no junit.xml"
        return (f"{context}{missing}\n--- guest tests before the end ---\n{run.partial_report()}"
                f"\n--- serial log tail ---\n{run.serial_tail()}")
    if summary.failures or summary.errors:
        progress = run.progress()
        stopped = f"\nstopped early: {progress.stopped}" if progress is not None and progress.stopped else ""
        return f"{context}{stopped}\n" + "\n".join(f"{t}: {m}" for t, m in summary.problems)
    if run.rc != 0:
        return f"{context}: guest pytest rc {run.rc}\n{run.serial_tail()}"
    if summary.passed == 0:
        return f"{context}: no guest test passed"
    return None


@dataclass(frozen=True)
class TierBudget:
    """The time every guest of one run shares (TIER_BUDGET_S from ``started``).

    Why: each guest's own limit is its timeout stretched up to MAX_TIMEOUT_STRETCH for a
    loaded host, and four of those in a row (~4 h) would starve the CI run that waits on
    them. A guest is cut where the tier's end, less GUEST_RESERVE_S for each guest still to
    run after it, comes first, and reports its partial result; the later ones still run."""

    total_s: float = TIER_BUDGET_S
    started: float = field(default_factory=time.monotonic)

    def not_after(self, guests_after: int) -> float:
        """The time.monotonic() instant a guest with ``guests_after`` guests still to run
        after it must have ended by."""
        return self.started + self.total_s - guests_after * GUEST_RESERVE_S

    def refusal(self, guests_after: int, now: float | None = None) -> str | None:
        """Why a guest is not started at all (too little left of the budget to boot), or None."""
        left = self.not_after(guests_after) - (time.monotonic() if now is None else now)
        if left >= BOOT_BUDGET_FLOOR_S:
            return None
        return (f"not started: {max(left, 0):.0f}s left for it of the VM tier's {self.total_s:.0f}s budget "
                f"(HWAGENT_VM_TIER_BUDGET), {guests_after} guest(s) still to run after it; "
                "the guests before it used the rest")


def default_out_root() -> Path:
    """$HWAGENT_VM_OUT, else a fresh /tmp/hwagent-vm-XXXX: concurrent runs never share artifacts."""
    env = os.environ.get("HWAGENT_VM_OUT")
    if env:
        return Path(env)
    return Path(tempfile.mkdtemp(prefix="hwagent-vm-", dir="/tmp"))


def _cmd_build(_: argparse.Namespace) -> int:
    t0 = time.monotonic()
    image = build_image()
    print(f"image {image.path} kernel {image.kver} ({time.monotonic() - t0:.1f}s)")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    image = build_image()
    topo = TOPOLOGIES[args.topology]
    out = Path(args.out) if args.out else default_out_root() / topo.name
    command = " ".join(args.command) if args.command else "true"
    run = boot(image, topo, command, out, cgroup=args.cgroup, timeout_s=args.timeout)
    print(f"{topo.name} cgroup={run.cgroup}: {run.describe()}; artifacts in {out}")
    if run.rc is None:
        print(run.serial_tail(), file=sys.stderr)
        return 99
    return run.rc


def result_counts(run: GuestRun, summary: JunitSummary | None) -> str:
    """One line of counts: the junit XML's, else the progress file's, marked partial."""
    if summary is not None:
        return f"{summary.passed} passed, {summary.failures + summary.errors} failed, {summary.skipped} skipped"
    progress = run.progress()
    if progress is None:
        return "no junit, no progress"
    return (f"partial: {len(progress.passed)} passed, {len(progress.failed)} failed, "
            f"{len(progress.skipped)} skipped" + (f", cut in {progress.running}" if progress.running else ""))


def _cmd_test(args: argparse.Namespace) -> int:
    t_all = time.monotonic()
    image = build_image()
    print(f"image {image.path} kernel {image.kver} ({time.monotonic() - t_all:.1f}s)")
    worst = 0
    out_root = default_out_root()
    names = args.topology or list(TOPOLOGIES)
    tier = TierBudget()
    for i, name in enumerate(names):
        topo = TOPOLOGIES[name]
        out = out_root / name
        refused = tier.refusal(len(names) - i - 1)
        if refused:
            print(f"{name:8s} {refused}")
            worst = worst or 99
            continue
        run = boot(image, topo, guest_pytest_command(args.pytest_args, topo.guest_tests), out, timeout_s=args.timeout,
                   stretch=True, not_after=tier.not_after(len(names) - i - 1))
        summary = read_junit(run.junit) if run.junit.exists() else None
        print(f"{name:8s} cgroup={run.cgroup:6s} {run.describe():28s} {result_counts(run, summary)}  ({out})")
        if summary:
            progress = run.progress()
            if progress is not None and progress.stopped:
                print(f"  stopped early: {progress.stopped}")
            for test, msg in summary.problems:
                print(f"  FAILED {test}: {msg.splitlines()[0] if msg else ''}")
            for test, reason in summary.skips:
                print(f"  skipped {test}: {reason}")
        else:
            print(run.partial_report())
        if run.rc != 0 or run.timed_out:
            worst = worst or (run.rc if run.rc else 99)
            if run.rc is None:
                print(run.serial_tail(), file=sys.stderr)
    print(f"VM tier total {time.monotonic() - t_all:.0f}s")
    return worst


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tests/vm/runner.py", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="Artifacts go to $HWAGENT_VM_OUT or a fresh /tmp/hwagent-vm-* directory.")
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("build", help="build or reuse the cached guest image").set_defaults(func=_cmd_build)
    run = sub.add_parser("run", help="boot one guest and run a command in the checkout")
    run.add_argument("--topology", default="numa2", choices=sorted(TOPOLOGIES))
    run.add_argument("--cgroup", choices=("v2", "v1", "hybrid", "none"), help="default: the topology's own")
    run.add_argument("--out", help="artifacts directory (default $HWAGENT_VM_OUT/<topology>)")
    run.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S)
    run.add_argument("command", nargs=argparse.REMAINDER)
    run.set_defaults(func=_cmd_run)
    test = sub.add_parser("test", help="run the guest test suite on every (or the named) topology")
    test.add_argument("--topology", action="append", choices=sorted(TOPOLOGIES))
    test.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S)
    test.add_argument("pytest_args", nargs=argparse.REMAINDER)
    test.set_defaults(func=_cmd_test)
    args = parser.parse_args(argv)
    for attr in ("command", "pytest_args"):
        if getattr(args, attr, None) and getattr(args, attr)[0] == "--":
            setattr(args, attr, getattr(args, attr)[1:])
    try:
        return args.func(args)
    except Unavailable as e:
        print(f"VM tier unavailable: {e}", file=sys.stderr)
        return UNAVAILABLE


if __name__ == "__main__":
    sys.exit(main())
