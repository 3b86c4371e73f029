"""Loading the BPF programs in probes/ with bcc: one compile for every enabled probe.

Each concern (run-queue delay, block I/O, net TX, IOMMU, thermal, IRQ) is its own
C file and its own set of attach points; the enabled ones are concatenated and
compiled once, because each bcc compile costs ~0.4 s and ~60 MB that LLVM keeps.
Programs are attached by hand (not bcc's auto-attach) so a probe can be switched
on and off at run time without recompiling, which the overhead bench relies on.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.pressure.btf import BTFError, CgroupOffsets, cgroup_offsets, load_btf

log = logging.getLogger("hwagent.pressure")

__all__ = [
    "PROBES",
    "ProbeSpec",
    "ProbeSet",
    "ProbeLoadError",
    "default_probes_dir",
    "tracepoint_exists",
    "read_table",
]

RQ_OVERFLOW_CGID = 0xFFFFFFFFFFFFFFFF


@dataclass(frozen=True)
class ProbeSpec:
    name: str
    source: str  # file in probes/
    #: (tracepoint "cat:event", function) pairs; all required ones must exist
    attach: tuple[tuple[str, str], ...]
    #: attach points used only when the kernel has them (with a -D macro to say so)
    optional: tuple[tuple[str, str, str], ...] = ()
    maps: tuple[str, ...] = ()


PROBES: dict[str, ProbeSpec] = {
    p.name: p
    for p in (
        ProbeSpec(
            "runqlat",
            "runqlat.c",
            (
                ("sched:sched_wakeup", "rq_on_wakeup"),
                ("sched:sched_wakeup_new", "rq_on_wakeup_new"),
                ("sched:sched_switch", "rq_on_switch"),
                ("sched:sched_process_free", "rq_on_free"),
            ),
            maps=("rq_tasks", "rq_cgroups"),
        ),
        ProbeSpec(
            "blockio",
            "blockio.c",
            (("block:block_rq_issue", "blk_on_issue"), ("block:block_rq_complete", "blk_on_complete")),
            optional=(("block:block_rq_error", "blk_on_error", "BLK_HAVE_RQ_ERROR"),),
            maps=("blk_start", "blk_lat", "blk_errors"),
        ),
        ProbeSpec(
            "netdev",
            "netdev.c",
            (("net:net_dev_xmit", "net_on_xmit"), ("net:net_dev_xmit_timeout", "net_on_timeout")),
            maps=("net_stats",),
        ),
        ProbeSpec("iommu", "iommu.c", (("iommu:io_page_fault", "iommu_on_fault"),), maps=("iommu_faults",)),
        ProbeSpec(
            "thermal", "thermal.c", (("thermal:thermal_zone_trip", "thermal_on_trip"),), maps=("thermal_trips",)
        ),
        ProbeSpec("irq", "irq.c", (("irq:irq_handler_exit", "irq_on_exit"),), maps=("irq_stats",)),
    )
}


class ProbeLoadError(RuntimeError):
    """bcc is missing or the compile failed; the message says which and why."""


def default_probes_dir() -> Path:
    """$HWAGENT_PROBES_DIR, the checkout's probes/, or the copy a wheel installed (agent.datafiles)."""
    from agent.datafiles import probes_dir

    return probes_dir()


def tracefs_root() -> Path:
    for p in (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing")):
        if (p / "events").is_dir():
            return p
    return Path("/sys/kernel/tracing")


def tracepoint_exists(tp: str, root: Path | None = None) -> bool:
    cat, _, event = tp.partition(":")
    return ((root or tracefs_root()) / "events" / cat / event / "format").is_file()


@dataclass
class ProbeState:
    name: str
    #: "bpf" (attached), "off" (config), "unavailable" (kernel lacks it / compile failed)
    state: str
    detail: str = ""
    attached: list[str] = field(default_factory=list)


class ProbeSet:
    """The compiled BPF object holding every enabled probe, with per-probe attach."""

    def __init__(
        self,
        enabled: list[str] | tuple[str, ...],
        *,
        hierarchy: str = "v2",
        probes_dir: Path | None = None,
        btf_path: str = "/sys/kernel/btf/vmlinux",
        max_tasks: int = 32768,
        max_cgroups: int = 4096,
        offsets: CgroupOffsets | None = None,
    ) -> None:
        self.hierarchy = hierarchy
        self.probes_dir = probes_dir or default_probes_dir()
        self.btf_path = btf_path
        self.max_tasks = max_tasks
        self.max_cgroups = max_cgroups
        self._offsets = offsets
        self.states: dict[str, ProbeState] = {
            name: ProbeState(name, "off", "disabled in [pressure] config") for name in PROBES
        }
        self.wanted = [n for n in enabled if n in PROBES]
        unknown = [n for n in enabled if n not in PROBES]
        if unknown:
            raise ValueError(f"unknown probe {unknown[0]!r} (known: {', '.join(PROBES)})")
        self.bpf: Any = None
        self.compile_s = 0.0
        self.btf_s = 0.0
        self._optional_on: dict[str, list[tuple[str, str]]] = {}

    # -- loading ---------------------------------------------------------------------
    def load(self) -> None:
        """Compile and attach every wanted probe that the kernel supports.

        Never raises for a missing kernel feature: the probe's state says why it is
        unavailable so the caller can fall back and report it.
        """
        troot = tracefs_root()
        sources: list[str] = []
        cflags = [f"-DRQ_MAX_TASKS={self.max_tasks}", f"-DRQ_MAX_CGROUPS={self.max_cgroups}"]
        included: list[str] = []
        for name in self.wanted:
            spec = PROBES[name]
            missing = [tp for tp, _ in spec.attach if not tracepoint_exists(tp, troot)]
            if missing:
                self.states[name] = ProbeState(name, "unavailable", f"kernel has no tracepoint {missing[0]}")
                continue
            if name == "runqlat":
                try:
                    t0 = time.perf_counter()
                    offs = self._offsets or cgroup_offsets(load_btf(self.btf_path))
                    self.btf_s = time.perf_counter() - t0
                    cflags += offs.macros(self.hierarchy)
                except BTFError as e:
                    self.states[name] = ProbeState(name, "unavailable", str(e))
                    continue
            opts = []
            for tp, fn, macro in spec.optional:
                if tracepoint_exists(tp, troot):
                    cflags.append(f"-D{macro}=1")
                    opts.append((tp, fn))
            self._optional_on[name] = opts
            try:
                sources.append((self.probes_dir / spec.source).read_text())
            except OSError as e:
                self.states[name] = ProbeState(name, "unavailable", f"cannot read {spec.source}: {e.strerror}")
                continue
            included.append(name)
        if not included:
            return
        try:
            from bcc import BPF  # noqa: PLC0415 - optional, heavy import
        except ImportError as e:
            for n in included:
                self.states[n] = ProbeState(n, "unavailable", f"bcc not importable: {e}")
            return
        t0 = time.perf_counter()
        try:
            self.bpf = BPF(text=_join(sources).encode(), cflags=cflags)
        except Exception as e:  # bcc raises bare Exception on compile failure
            reason = f"BPF compile/load failed: {str(e).strip()[:300]}"
            log.warning("probes_compile_failed probes=%s reason=%r", ",".join(included), reason)
            if len(included) == 1:
                self.states[included[0]] = ProbeState(included[0], "unavailable", reason)
                return
            # Find the culprit(s) alone so one bad probe does not take the rest down.
            good_src, good = [], []
            for n, src in zip(included, sources):
                try:
                    BPF(text=_join([src]).encode(), cflags=cflags).cleanup()
                    good.append(n)
                    good_src.append(src)
                except Exception as e1:
                    self.states[n] = ProbeState(n, "unavailable", f"BPF compile/load failed: {str(e1)[:200]}")
            included = good
            if not included:
                return
            self.bpf = BPF(text=_join(good_src).encode(), cflags=cflags)
        self.compile_s = time.perf_counter() - t0
        if "runqlat" in included:
            self._seed_overflow_row()
        for n in included:
            self.states[n] = ProbeState(n, "off", "compiled, not attached")
            self.attach(n)

    def _seed_overflow_row(self) -> None:
        tbl = self.bpf[b"rq_cgroups"]
        tbl[tbl.Key(RQ_OVERFLOW_CGID)] = tbl.Leaf()

    def attach(self, name: str) -> None:
        if self.bpf is None:
            raise ProbeLoadError("no BPF object loaded")
        spec = PROBES[name]
        st = self.states[name]
        if st.state == "bpf":
            return
        points = list(spec.attach) + self._optional_on.get(name, [])
        done: list[str] = []
        try:
            for tp, fn in points:
                self.bpf.attach_tracepoint(tp=tp.encode(), fn_name=fn.encode())
                done.append(tp)
        except Exception as e:
            for tp in done:
                self.bpf.detach_tracepoint(tp=tp.encode())
            self.states[name] = ProbeState(name, "unavailable", f"attach failed: {e}")
            return
        self.states[name] = ProbeState(name, "bpf", "attached", done)

    def detach(self, name: str) -> None:
        st = self.states[name]
        if st.state != "bpf" or self.bpf is None:
            return
        for tp in st.attached:
            self.bpf.detach_tracepoint(tp=tp.encode())
        self.states[name] = ProbeState(name, "off", "detached")

    def active(self, name: str) -> bool:
        return self.states[name].state == "bpf"

    def table(self, name: str) -> Any:
        if self.bpf is None:
            raise ProbeLoadError("no BPF object loaded")
        return self.bpf[name.encode()]

    def close(self) -> None:
        if self.bpf is not None:
            for name in list(self.states):
                self.detach(name)
            self.bpf.cleanup()
            self.bpf = None


def _join(sources: list[str]) -> str:
    return "#include <uapi/linux/ptrace.h>\n" + "\n".join(sources)


def read_table(tbl: Any) -> list[tuple[Any, Any]]:
    """All (key, value) pairs; the batch syscall where the kernel has it (10x faster)."""
    try:
        return list(tbl.items_lookup_batch())
    except Exception:
        return list(tbl.items())
