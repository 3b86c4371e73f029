"""Loading the BPF programs in probes/: one compile for every enabled probe, in a child process.

Each concern (run-queue delay, block I/O, net TX, IOMMU, thermal, IRQ) is its own
C file with a descriptor beside it (``probes/<name>.toml``: attach points, maps,
shared constants, BTF offsets, rows to seed), so the C side and this loader
never restate each other; ``probes/common.h`` holds the helpers the C files share.
The enabled probes are concatenated and compiled once by bcc in a short-lived
child (agent.pressure.bpfbuild) that hands back map and program descriptors:
the daemon keeps no LLVM state. Programs are attached by hand so a probe can be
switched on and off at run time without recompiling, which the overhead bench
relies on.
"""

from __future__ import annotations

import os
import time
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.eventlog import get_logger
from agent.pressure import bpfsys
from agent.pressure.bpfbuild import BuildError, BuildRequest, BuildResult, ProgramLoad, build_in_child
from agent.pressure.bpfmaps import BpfMap, DescError
from agent.pressure.btf import BTF, BTFError, hierarchy_macros, load_btf, offset_macros
from agent.pressure.config import ALL_PROBES

log = get_logger("hwagent.pressure")

__all__ = [
    "PROBES",
    "AttachPoint",
    "ProbeSpec",
    "ProbeSpecError",
    "ProbeSet",
    "ProbeLoadError",
    "load_spec",
    "default_probes_dir",
    "tracepoint_exists",
]

COMMON_HEADER = "common.h"
_KINDS = ("tracepoint", "tp_btf")


class ProbeSpecError(ValueError):
    """A probe descriptor (probes/<name>.toml) is missing or malformed; the message names the file."""


@dataclass(frozen=True)
class AttachPoint:
    #: "tracepoint" (classic, the format record) or "tp_btf" (the raw TP_PROTO arguments, BTF-typed)
    kind: str
    point: str  # "category:event"
    program: str  # function in the .c file
    #: attached only where the kernel has it, with -D<macro>=1 telling the C source
    optional: bool = False
    macro: str = ""
    #: tp_btf only: the TP_PROTO argument types the program's ctx indices assume
    args: tuple[str, ...] = ()

    @property
    def event(self) -> str:
        return self.point.partition(":")[2]


@dataclass(frozen=True)
class ProbeSpec:
    name: str
    source: str  # file in probes/
    points: tuple[AttachPoint, ...]
    maps: tuple[str, ...] = ()
    constants: Mapping[str, int] = field(default_factory=dict)
    btf_offsets: Mapping[str, str] = field(default_factory=dict)
    cgroup_hierarchy: bool = False
    #: (map, constant) zeroed rows inserted before attaching
    seeds: tuple[tuple[str, str], ...] = ()

    @property
    def attach(self) -> tuple[tuple[str, str], ...]:
        """(tracepoint, program) pairs that must all exist for the probe to load."""
        return tuple((p.point, p.program) for p in self.points if not p.optional)

    @property
    def needs_btf(self) -> bool:
        return bool(self.btf_offsets) or self.cgroup_hierarchy or any(p.kind == "tp_btf" for p in self.points)


def _str_list(v: Any, what: str) -> tuple[str, ...]:
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise ProbeSpecError(f"{what} must be a list of strings")
    return tuple(v)


def _attach_point(a: dict[str, Any]) -> AttachPoint:
    """One [[attach]] table of a descriptor."""
    kind = a.get("kind", "tracepoint")
    if kind not in _KINDS:
        raise ProbeSpecError(f"attach kind {kind!r} is not one of {', '.join(_KINDS)}")
    point, program = a["point"], a["program"]
    if ":" not in point:
        raise ProbeSpecError(f"attach point {point!r} is not category:event")
    optional = bool(a.get("optional", False))
    macro = a.get("macro", "")
    if optional and not macro:
        raise ProbeSpecError(f"optional attach point {point} needs a macro")
    args = _str_list(a.get("args", []), f"args of {point}")
    if kind == "tp_btf" and not args:
        raise ProbeSpecError(f"tp_btf point {point} needs its args (the prototype the C source assumes)")
    return AttachPoint(kind, point, program, optional, macro, args)


def _seed(s: dict[str, Any], constants: dict[str, Any]) -> tuple[str, str]:
    """One [[seed]] table: (map, constant) whose key is written before attaching."""
    if s.get("key") not in constants:
        raise ProbeSpecError(f"seed key {s.get('key')!r} is not a constant of this probe")
    return (str(s["map"]), str(s["key"]))


def load_spec(path: Path) -> ProbeSpec:
    """Parse one descriptor; every mistake is reported with the file and the key."""
    try:
        raw = tomllib.loads(path.read_text())
    except OSError as e:
        raise ProbeSpecError(f"cannot read probe descriptor {path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise ProbeSpecError(f"{path}: {e}") from None
    name = path.stem
    try:
        source = raw["source"]
        if not isinstance(source, str):
            raise ProbeSpecError("source must be a file name")
        points = [_attach_point(a) for a in raw.get("attach", [])]
        if not points:
            raise ProbeSpecError("no [[attach]] points")
        constants = raw.get("constants", {})
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in constants.values()):
            raise ProbeSpecError("constants must be integers")
        offsets = raw.get("btf_offsets", {})
        if not all(isinstance(v, str) for v in offsets.values()):
            raise ProbeSpecError("btf_offsets values must be \"struct.member\" strings")
        seeds = [_seed(s, constants) for s in raw.get("seed", [])]
        maps = _str_list(raw.get("maps", []), "maps")
        return ProbeSpec(name, source, tuple(points), maps, dict(constants), dict(offsets),
                         bool(raw.get("cgroup_hierarchy", False)), tuple(seeds))
    except KeyError as e:
        raise ProbeSpecError(f"{path}: missing key {e.args[0]!r}") from None
    except ProbeSpecError as e:
        raise ProbeSpecError(f"{path}: {e}") from None


def default_probes_dir() -> Path:
    """$HWAGENT_PROBES_DIR, the checkout's probes/, or the copy a wheel installed (agent.datafiles)."""
    from agent.datafiles import probes_dir

    return probes_dir()


class _Catalog(Mapping[str, ProbeSpec]):
    """Every known probe (the config's switches), its descriptor read on first use."""

    def __init__(self, directory: Path | None = None) -> None:
        self._dir = directory
        self._specs: dict[str, ProbeSpec] = {}

    def __getitem__(self, name: str) -> ProbeSpec:
        if name not in ALL_PROBES:
            raise KeyError(name)
        if name not in self._specs:
            self._specs[name] = load_spec((self._dir or default_probes_dir()) / f"{name}.toml")
        return self._specs[name]

    def __iter__(self) -> Iterator[str]:
        return iter(ALL_PROBES)

    def __len__(self) -> int:
        return len(ALL_PROBES)


#: probe name -> spec, from probes/<name>.toml of the installation
PROBES: Mapping[str, ProbeSpec] = _Catalog()


class ProbeLoadError(RuntimeError):
    """The probes are not loaded (or the build failed); the message says which and why."""


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


@dataclass
class LoadedObject:
    """What the build child handed over: program and map descriptors, owned here."""

    programs: dict[str, int]
    maps: dict[str, BpfMap]

    def close(self) -> None:
        for fd in self.programs.values():
            os.close(fd)
        for m in self.maps.values():
            m.close()
        self.programs, self.maps = {}, {}


@dataclass
class _Plan:
    """One probe as it will be built: its source and flags, and the points this kernel has."""

    spec: ProbeSpec
    source: str
    cflags: list[str]
    points: list[AttachPoint]
    loads: list[ProgramLoad]


def _constant_macro(name: str, value: int) -> str:
    return f"-D{name}={value:#x}ULL" if value > 0x7FFFFFFF or value < 0 else f"-D{name}={value}"


class ProbeSet:
    """The loaded BPF object holding every enabled probe, with per-probe attach."""

    def __init__(
        self,
        enabled: list[str] | tuple[str, ...],
        *,
        hierarchy: str = "v2",
        probes_dir: Path | None = None,
        btf_path: str = "/sys/kernel/btf/vmlinux",
        max_cgroups: int = 4096,
    ) -> None:
        self.hierarchy = hierarchy
        self.probes_dir = probes_dir or default_probes_dir()
        self.specs = _Catalog(self.probes_dir)
        self.btf_path = btf_path
        self.max_cgroups = max_cgroups
        self.states: dict[str, ProbeState] = {
            name: ProbeState(name, "off", "disabled in [pressure] config") for name in ALL_PROBES
        }
        unknown = [n for n in enabled if n not in ALL_PROBES]
        if unknown:
            raise ValueError(f"unknown probe {unknown[0]!r} (known: {', '.join(ALL_PROBES)})")
        self.wanted = [n for n in enabled if n in ALL_PROBES]
        self.bpf: LoadedObject | None = None
        self.compile_s = 0.0
        self.child_s = 0.0
        self.btf_s = 0.0
        self._troot = tracefs_root()
        self._plans: dict[str, _Plan] = {}
        self._links: dict[str, list[int]] = {}
        self.last_request: dict[str, Any] = {}

    # -- loading ---------------------------------------------------------------------
    def _plan(self, name: str, btf: BTF | None) -> _Plan:
        """Raise ProbeLoadError saying why this kernel cannot run the probe."""
        spec = self.specs[name]
        cflags = [_constant_macro(k, v) for k, v in spec.constants.items()]
        points, loads = [], []
        for p in spec.points:
            if p.kind == "tracepoint":
                if not tracepoint_exists(p.point, self._troot):
                    if p.optional:
                        continue
                    raise ProbeLoadError(f"kernel has no tracepoint {p.point}")
                loads.append(ProgramLoad(name, p.program, bpfsys.BPF_PROG_TYPE_TRACEPOINT))
            else:
                assert btf is not None
                try:
                    have = tuple(btf.raw_tracepoint_params(p.event))
                    btf_id = btf.typedef_id(f"btf_trace_{p.event}")
                except BTFError as e:
                    if p.optional:
                        continue
                    raise ProbeLoadError(f"no BTF tracepoint {p.point}: {e}") from None
                if have != p.args:
                    raise ProbeLoadError(f"{p.point} takes ({', '.join(have)}) in this kernel; "
                                         f"{spec.source} expects ({', '.join(p.args)})")
                loads.append(ProgramLoad(name, p.program, bpfsys.BPF_PROG_TYPE_TRACING, bpfsys.BPF_TRACE_RAW_TP,
                                         btf_id))
            if p.optional:
                cflags.append(f"-D{p.macro}=1")
            points.append(p)
        if btf is not None:
            try:
                cflags += offset_macros(btf, dict(spec.btf_offsets))
                if spec.cgroup_hierarchy:
                    cflags += hierarchy_macros(btf, self.hierarchy)
            except BTFError as e:
                raise ProbeLoadError(str(e)) from None
        try:
            source = (self.probes_dir / spec.source).read_text()
        except OSError as e:
            raise ProbeLoadError(f"cannot read {spec.source}: {e.strerror}") from None
        return _Plan(spec, source, cflags, points, loads)

    def _unavailable(self, name: str, why: str) -> None:
        self.states[name] = ProbeState(name, "unavailable", why)

    def load(self) -> None:
        """Build and attach every wanted probe that the kernel supports.

        Never raises for a missing kernel feature: the probe's state says why it is
        unavailable so the caller can fall back and report it.
        """
        self._plan_wanted()
        if not self._plans:
            return
        res = self._build()
        if res is None:
            return
        self.compile_s, self.child_s = res.compile_s, res.child_s
        obj = LoadedObject({}, {})
        for n, why in res.failed.items():
            log.warning("probe build failed", probe=n, reason=why)
        for name, plan in list(self._plans.items()):
            if not self._adopt(name, plan, res, obj):
                del self._plans[name]
        for fd in res.programs.values():  # loaded but named by no plan: nothing to attach them to
            os.close(fd)
        for fd, _k, _v in res.maps.values():
            os.close(fd)
        self.bpf = obj
        for name, plan in self._plans.items():
            for m, const in plan.spec.seeds:
                tbl = obj.maps[m]
                tbl[tbl.Key(plan.spec.constants[const])] = tbl.Leaf()
            self.states[name] = ProbeState(name, "off", "built, not attached")
            self.attach(name)

    def _plan_wanted(self) -> None:
        """A plan for every wanted probe; those that cannot have one are marked unavailable.
        BTF is parsed once, for the first probe that needs it, and dropped afterwards."""
        btf: BTF | None = None
        btf_error = ""
        for name in self.wanted:
            try:
                if self.specs[name].needs_btf and btf is None and not btf_error:
                    t0 = time.perf_counter()
                    try:
                        btf = load_btf(self.btf_path)
                    except BTFError as e:
                        btf_error = str(e)
                    self.btf_s = time.perf_counter() - t0
                if self.specs[name].needs_btf and btf is None:
                    raise ProbeLoadError(btf_error)
                self._plans[name] = self._plan(name, btf)
            except (ProbeLoadError, ProbeSpecError) as e:
                self._unavailable(name, str(e))
        del btf  # the parsed type table is ~20 MB of Python objects: not kept

    def _build(self) -> BuildResult | None:
        """Compile and load every plan in one build child; None (all plans unavailable) when it fails."""
        try:
            header = (self.probes_dir / COMMON_HEADER).read_text()
        except OSError as e:
            for n in self._plans:
                self._unavailable(n, f"cannot read {COMMON_HEADER}: {e.strerror}")
            self._plans = {}
            return None
        cflags = [f"-DRQ_MAX_CGROUPS={self.max_cgroups}"]
        for plan in self._plans.values():
            cflags += [f for f in plan.cflags if f not in cflags]
        req = BuildRequest(
            header=header,
            units={n: p.source for n, p in self._plans.items()},
            cflags=cflags,
            programs=[ld for p in self._plans.values() for ld in p.loads],
            maps={n: list(p.spec.maps) for n, p in self._plans.items()},
        )
        #: what was sent to the build child (the bench compiles it in-process to compare)
        self.last_request = {"header": req.header, "units": req.units, "cflags": req.cflags}
        try:
            return build_in_child(req)
        except BuildError as e:
            log.warning("probes build failed", probes=",".join(self._plans), reason=str(e))
            for n in self._plans:
                self._unavailable(n, str(e))
            self._plans = {}
            return None

    def _adopt(self, name: str, plan: _Plan, res: BuildResult, obj: LoadedObject) -> bool:
        """Move one probe's programs and maps from the build result into ``obj``. False (the probe
        unavailable, its fds closed) when its build failed or a map cannot be read."""
        progs = {ld.program: res.programs.pop(ld.program) for ld in plan.loads if ld.program in res.programs}
        maps = {m: res.maps.pop(m) for m in plan.spec.maps if m in res.maps}
        why = res.failed.get(name, "")
        built: dict[str, BpfMap] = {}
        if not why:
            try:
                for m, (fd, kdesc, ldesc) in maps.items():
                    built[m] = BpfMap(m, fd, kdesc, ldesc)
            except (DescError, OSError, ValueError) as e:
                why = f"cannot read map {m}: {e}"
        if why:
            for fd in progs.values():
                os.close(fd)
            for m, (fd, _k, _v) in maps.items():
                if m not in built:
                    os.close(fd)
            for bm in built.values():
                bm.close()
            self._unavailable(name, why)
            return False
        obj.programs.update(progs)
        obj.maps.update(built)
        return True

    def attach(self, name: str) -> None:
        if self.bpf is None:
            raise ProbeLoadError("no BPF object loaded")
        st = self.states[name]
        plan = self._plans.get(name)
        if st.state == "bpf" or plan is None:
            return
        links: list[int] = []
        done: list[str] = []
        try:
            for p in plan.points:
                fd = self.bpf.programs[p.program]
                if p.kind == "tp_btf":
                    links.append(bpfsys.raw_tracepoint_open(fd))
                else:
                    links.append(bpfsys.tracepoint_open(fd, self._troot, p.point))
                done.append(p.point)
        except bpfsys.BpfError as e:
            for link in links:
                os.close(link)
            self._unavailable(name, f"attach failed: {e}")
            return
        self._links[name] = links
        self.states[name] = ProbeState(name, "bpf", "attached", done)

    def detach(self, name: str) -> None:
        st = self.states[name]
        if st.state != "bpf":
            return
        for link in self._links.pop(name, []):
            os.close(link)
        self.states[name] = ProbeState(name, "off", "detached")

    def active(self, name: str) -> bool:
        return self.states[name].state == "bpf"

    def table(self, name: str) -> BpfMap:
        if self.bpf is None:
            raise ProbeLoadError("no BPF object loaded")
        try:
            return self.bpf.maps[name]
        except KeyError:
            raise ProbeLoadError(f"map {name} is not loaded") from None

    def constant(self, probe: str, name: str) -> int:
        """A constant shared with the C source, from the probe's descriptor."""
        return self.specs[probe].constants[name]

    def close(self) -> None:
        for name in list(self.states):
            self.detach(name)
        if self.bpf is not None:
            self.bpf.close()
            self.bpf = None
