"""The NRI front's decisions: a container the runtime creates, placed by the same owners
and with the same requests as standalone admission's.

A front decides nothing itself (docs/ARCHITECTURE): ``Placer.create`` turns the
runtime's container into the one-container ``PodSpec`` admission would build
from the equivalent manifest (``agent.nri.classify`` reads the QoS and requests
back from what the kubelet wrote), asks the topology manager to align and place
it with admission's own hint providers (``agent.workloads.providers``: the CPU
policy, the memory manager) plus the NUMA nodes of the container's device nodes,
then commits exactly the requests the decision recorded, as admission does. The
answer to the runtime is the owners' placement, read back from them: cpuset
CPUs and memory nodes, hugepage limits, and for reclaimed containers the low
``cpu.shares`` (cgroup v1) or ``cpu.idle`` (v2, through the ``unified`` map).

Never blocking the node: whatever refuses (the policy, the memory manager, the
topology manager) is counted and logged, the container runs unadjusted, and it
is kept as *unadjusted* to be placed when resources allow (``repair``: at the
next Synchronize, or after a release). Placement is pod-scoped in the owners
(they release by pod), so a pod's CPUs go back when its sandbox stops or is
removed, and a container re-created in a pod still held gets its place back.

Pure helpers (``adjustment``, ``update_for``) build the runtime's messages.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from agent.api.nri.v1alpha1 import api_pb2 as nri
from agent.cgroups.paths import CPU_IDLE_FILE
from agent.contracts import CPUAllocator, MemoryAllocator
from agent.contracts.cpu import RECLAIMED
from agent.contracts.hints import TopologyHint
from agent.contracts.memory import MemoryRefused
from agent.contracts.pods import ContainerSpec, PodSpec
from agent.contracts.pods import Resources as PodResources
from agent.cpu.errors import PolicyError
from agent.cpuset import CPUSet
from agent.eventlog import get_logger
from agent.journalbatch import Deferred, deferred
from agent.nri.classify import Classified, Resources, classify
from agent.nri.devnuma import device_numa_nodes
from agent.topologymanager import TopologyAffinityError, TopologyManager
from agent.topologymanager.manager import HintProvider
from agent.workloads.errors import AdmissionError
from agent.workloads.providers import (
    CPUProvider,
    MemoryProvider,
    admission_error_from_memory,
    admission_error_from_policy,
)

__all__ = ["DEVICES_RESOURCE", "Decision", "Placer", "adjustment", "pod_spec", "resources_of", "update_for"]

log = get_logger("hwagent.nri")

K = TypeVar("K")

#: the topology manager's resource name for the NUMA nodes of a container's device nodes
DEVICES_RESOURCE = "devices"

#: the cpu.shares of a reclaimed container on cgroup v1 (the kubelet's minimum, BestEffort's)
RECLAIMED_SHARES = 2

#: adjusted: the owners placed it; held: they already held it (a re-created container);
#: refused: they could not (it runs unadjusted); ignored: opted out; off: no owner runs here
OUTCOMES = ("adjusted", "held", "refused", "ignored", "off")


@dataclass(frozen=True)
class Decision:
    pod: str
    container: str
    outcome: str
    reason: str
    level: str = ""
    kube_qos: str = ""
    cpus: CPUSet | None = None
    mems: CPUSet | None = None
    #: page size as the runtime names it ("2MB") -> bytes
    hugepage_limits: Mapping[str, int] = field(default_factory=dict)
    decide_ms: float = 0.0
    #: CPU time of the loop's thread over the decision (the owners' fsyncs run on their writers)
    decide_cpu_ms: float = 0.0

    @property
    def applied(self) -> bool:
        return self.outcome in ("adjusted", "held")


# --- the runtime's messages, pure ---------------------------------------------------------

def resources_of(ctr: nri.Container) -> Resources:
    """What the runtime says of a container's resources, as plain values."""
    r = ctr.linux.resources
    cpu, mem = r.cpu, r.memory
    return Resources(
        cpu_shares=cpu.shares.value if cpu.HasField("shares") else None,
        cpu_quota=cpu.quota.value if cpu.HasField("quota") else None,
        cpu_period=cpu.period.value if cpu.HasField("period") else None,
        memory_limit=mem.limit.value if mem.HasField("limit") and mem.limit.value > 0 else None,
        hugepages={h.page_size: h.limit for h in r.hugepage_limits},
    )


def _resources_msg(d: Decision, v2: bool, with_cpu_class: bool) -> nri.LinuxResources:
    res = nri.LinuxResources()
    if d.cpus is not None:
        res.cpu.cpus = str(d.cpus)
    if d.mems is not None:
        res.cpu.mems = str(d.mems)
    if with_cpu_class and d.level == RECLAIMED:
        if v2:
            res.unified[CPU_IDLE_FILE] = "1"
            # shares present and 0: runc then writes no cpu.weight (its v2 conversion of 0 is
            # "leave it"). With the CRI's shares kept (BestEffort's 2 -> weight 1), every update
            # containerd makes of a running container had runc write cpu.weight first, and the
            # kernel refuses a weight on an idle group (EINVAL): the reclaimed containers never
            # followed the pool. An idle group's weight means nothing anyway.
            res.cpu.shares.SetInParent()
        else:
            res.cpu.shares.value = RECLAIMED_SHARES
    for size, limit in sorted(d.hugepage_limits.items()):
        res.hugepage_limits.append(nri.HugepageLimit(page_size=size, limit=limit))
    return res


def adjustment(d: Decision, v2: bool) -> nri.ContainerAdjustment | None:
    """The answer to CreateContainer: the owners' placement (None: no adjustment)."""
    if not d.applied:
        return None
    return nri.ContainerAdjustment(linux=nri.LinuxContainerAdjustment(resources=_resources_msg(d, v2, True)))


def update_for(container_id: str, d: Decision, v2: bool) -> nri.ContainerUpdate:
    """An UpdateContainers entry moving a running container to the owners' placement now."""
    return nri.ContainerUpdate(container_id=container_id,
                               linux=nri.LinuxContainerUpdate(resources=_resources_msg(d, v2, True)))


def pod_spec(pod: nri.PodSandbox, ctr: nri.Container, c: Classified) -> PodSpec:
    """The one-container pod admission would decide for the equivalent manifest: the same
    name, namespace, uid, the QoS annotations, CPU request (= limit for a Guaranteed pod),
    memory limit and hugepages."""
    mem = c.memory_limit_bytes
    res = PodResources(cpu_request_milli=c.cpu_request_milli or None, cpu_limit_milli=c.cpu_limit_milli,
                       memory_request_bytes=mem, memory_limit_bytes=mem, hugepages=dict(c.hugepages))
    return PodSpec(name=pod.name, namespace=pod.namespace, uid=pod.uid,
                   containers=(ContainerSpec(name=ctr.name, command=("nri",), resources=res),),
                   annotations=dict(c.annotations), labels={})


class DeviceNodeHints:
    """The container's device nodes as a hint provider: they sit where they sit, so the only
    hint is their NUMA nodes (preferred); nothing to place. None: no device with a node."""

    name = "devices"

    def __init__(self, nodes: frozenset[int]) -> None:
        self.nodes = nodes

    async def container_hints(self, pod: PodSpec, container: str) -> Mapping[str, Sequence[TopologyHint] | None]:
        return {DEVICES_RESOURCE: [TopologyHint(self.nodes, True)]} if self.nodes else {}

    async def pod_hints(self, pod: PodSpec) -> Mapping[str, Sequence[TopologyHint] | None]:
        return await self.container_hints(pod, "")

    async def place(self, pod: PodSpec, container: str, hint: TopologyHint) -> None:
        return None


# --- the placer -----------------------------------------------------------------------------

@dataclass
class Counters:
    adjusted: int = 0
    failed: int = 0
    updates: int = 0
    released: int = 0


class Placer:
    """The owners behind the NRI front. ``foreign(uid)``: a pod the owners hold for another
    front (standalone admission's registry), never released or moved by this one."""

    def __init__(self, tm: TopologyManager, cpu_policy: CPUAllocator | None = None,
                 memory_manager: MemoryAllocator | None = None, device_manager: Any = None, *,
                 cgroup_v2: bool = False, sysfs_root: str = "/sys",
                 foreign: Callable[[str], bool] = lambda uid: False,
                 allow_opt_out: bool = True) -> None:
        self.tm = tm
        self.cpu_policy = cpu_policy
        self.memory_manager = memory_manager
        self.device_manager = device_manager
        self.cgroup_v2 = cgroup_v2
        self.sysfs_root = sysfs_root
        self.foreign = foreign
        self.allow_opt_out = allow_opt_out
        self.counters = Counters()
        #: container id -> (pod, container) of containers running without the adjustment they should have
        self.unadjusted: dict[str, tuple[nri.PodSandbox, nri.Container]] = {}
        #: container id -> (pod uid, name, level) of every container whose placement the runtime applied
        self.placed: dict[str, tuple[str, str, str]] = {}
        #: container id -> (cpus, mems) the runtime was last told (or reported)
        self.told: dict[str, tuple[str, str]] = {}
        #: (pod uid, container name) -> ids of the placed containers of that name (a re-created one adds one)
        self._ids: dict[tuple[str, str], set[str]] = {}
        #: pod uid -> ids of its placed containers (a pod's release forgets them without a pass over all)
        self._pods: dict[str, set[str]] = {}
        #: the CPU policy's mark at the last look for moved placements (``pending_updates``)
        self._mark: object | None = None
        #: placed containers to look at next time whatever the policy says (their runtime was told nothing)
        self._untold: set[str] = set()
        #: why no container is placed now ("" = place): the kubelet's CPU manager is not none
        self.paused = ""
        #: called when an answered placement was undone (its record failed): repair is due
        self.on_undone: Callable[[], None] | None = None
        #: the answered creates whose owners' records are still on their way to disk
        self._settling: set[asyncio.Future[None]] = set()

    # -- one container ---------------------------------------------------------------------

    def held(self, pod_uid: str, container: str) -> bool:
        svc, mm = self.cpu_policy, self.memory_manager
        return (svc is not None and svc.placement(pod_uid, container) is not None) or \
            (mm is not None and bool(mm.blocks(pod_uid, container)))

    def current(self, pod_uid: str, container: str) -> tuple[CPUSet | None, CPUSet | None]:
        """Where the owners have the container now: (cpus, mems); None for what they do not place."""
        cpus = mems = None
        svc, mm = self.cpu_policy, self.memory_manager
        p = svc.placement(pod_uid, container) if svc is not None else None
        if p is not None:
            cpus, mems = p.cpus, p.mems
        blocks = mm.blocks(pod_uid, container) if mm is not None else ()
        if blocks:
            mems = CPUSet({n for b in blocks for n in b.numa_nodes})
        return cpus, mems

    async def create(self, pod: nri.PodSandbox, ctr: nri.Container) -> Decision:
        """Decide and commit one container; never raises for a refusal (the Decision says it)."""
        started, cpu0 = time.perf_counter(), time.thread_time()
        name = f"{pod.namespace}/{pod.name}"
        try:
            c = classify(dict(pod.annotations), dict(ctr.annotations), pod.linux.cgroup_parent, resources_of(ctr),
                         allow_opt_out=self.allow_opt_out)
        except ValueError as e:
            return self._refused(ctr, pod, name, str(e), "", "", started)
        if c.ignored:
            self.unadjusted.pop(ctr.id, None)
            return Decision(name, ctr.name, "ignored", c.reason, decide_ms=_ms(started))
        if self.cpu_policy is None and self.memory_manager is None:
            return Decision(name, ctr.name, "off", "no cpu policy or memory manager runs here", c.level, c.kube_qos,
                            decide_ms=_ms(started))
        if self.paused:  # the kubelet's CPU manager places CPUs too (agent.kubelet.cpumanager)
            return Decision(name, ctr.name, "off", self.paused, c.level, c.kube_qos, decide_ms=_ms(started))
        outcome = "held"
        if not self.held(pod.uid, ctr.name):
            try:
                await self._place(pod_spec(pod, ctr, c), ctr)
            except AdmissionError as e:
                return self._refused(ctr, pod, name, str(e), c.level, c.kube_qos, started)
            outcome = "adjusted"
        cpus, mems = self.current(pod.uid, ctr.name)
        d = Decision(name, ctr.name, outcome, c.reason, c.level, c.kube_qos, cpus, mems,
                     _hugepage_limits(ctr, self.memory_manager, pod.uid), _ms(started),
                     (time.thread_time() - cpu0) * 1000)
        self.unadjusted.pop(ctr.id, None)
        self.placed[ctr.id] = (pod.uid, ctr.name, c.level)
        self._ids.setdefault((pod.uid, ctr.name), set()).add(ctr.id)
        self._pods.setdefault(pod.uid, set()).add(ctr.id)
        self.told[ctr.id] = (str(cpus) if cpus is not None else "", str(mems) if mems is not None else "")
        if outcome == "adjusted":  # a new placement (a held one answered again is not counted twice)
            self.counters.adjusted += 1
        return d

    async def answer(self, pod: nri.PodSandbox, ctr: nri.Container) -> Decision:
        """``create`` as the answer to the runtime's CreateContainer: decided and committed in
        the owners' memory, but not waiting for their journal records (``agent.journalbatch``).
        Answering before the fdatasync is safe here because the runtime keeps the container's
        resources itself and a restarted hwagent reconciles with them (``synchronize``), as
        it does after a kill -9 between an answer and its record. A record that fails undoes
        the placement in its owner: the container is then counted, kept as unadjusted and
        ``on_undone`` is called, so the pusher places it again and tells the runtime."""
        with deferred() as batch:
            d = await self.create(pod, ctr)
        if batch.futures:
            settling = asyncio.ensure_future(self._settle(batch, pod, ctr))
            self._settling.add(settling)
            settling.add_done_callback(self._settling.discard)
        return d

    async def _settle(self, batch: Deferred, pod: nri.PodSandbox, ctr: nri.Container) -> None:
        errors = await batch.settle()
        if not errors or ctr.id not in self.placed or self.held(pod.uid, ctr.name):
            return
        self.forget_container(ctr.id)
        self.counters.failed += 1
        self.unadjusted[ctr.id] = (pod, ctr)
        log.warning("nri placement not persisted", pod=f"{pod.namespace}/{pod.name}", container=ctr.name,
                    id=ctr.id, error=str(errors[0]), note="undone; the container is placed again and updated")
        if self.on_undone is not None:
            self.on_undone()

    async def _place(self, spec: PodSpec, ctr: nri.Container) -> None:
        """Admission's decision for ``spec`` (its providers, the topology manager), then its
        commit: the requests the decision recorded, memory first then CPUs, rolled back together."""
        cpu, memory = CPUProvider(self.cpu_policy), MemoryProvider(self.memory_manager)
        devices = DeviceNodeHints(device_numa_nodes(
            ((d.type, d.major, d.minor) for d in ctr.linux.devices), self.sysfs_root))
        providers: list[HintProvider[PodSpec]] = [cpu, memory, devices]
        try:
            hints = await self.tm.decide(spec, [ctr.name], providers)
        except TopologyAffinityError as e:
            raise AdmissionError("RESOURCE_EXHAUSTED", str(e), reason="topology_affinity") from None
        except PolicyError as e:
            raise admission_error_from_policy(e) from None
        except MemoryRefused as e:
            raise admission_error_from_memory(e) from None
        del hints  # the requests carry the chosen hints
        svc, mm = self.cpu_policy, self.memory_manager
        try:
            mreq = memory.requests.get(ctr.name)
            if mreq is not None and mm is not None:
                await mm.allocate(mreq)
            req = cpu.requests.get(ctr.name)
            if req is not None and svc is not None:
                await svc.allocate(req)
        except BaseException as e:
            await self._release_owners(spec.uid)
            if isinstance(e, PolicyError):
                raise admission_error_from_policy(e) from None
            if isinstance(e, MemoryRefused):
                raise admission_error_from_memory(e) from None
            raise

    def _refused(self, ctr: nri.Container, pod: nri.PodSandbox, name: str, why: str, level: str, kube: str,
                 started: float) -> Decision:
        self.counters.failed += 1
        self.unadjusted[ctr.id] = (pod, ctr)
        return Decision(name, ctr.name, "refused", why, level, kube, decide_ms=_ms(started))

    # -- pods going away -------------------------------------------------------------------

    async def _release_owners(self, pod_uid: str) -> bool:
        released = False
        if self.cpu_policy is not None:
            released = await self.cpu_policy.release_pod(pod_uid) or released
        if self.memory_manager is not None:
            released = await self.memory_manager.release_pod(pod_uid) or released
        return released

    async def release_pod(self, pod_uid: str) -> bool:
        """The pod's sandbox stopped or went: every owner gives its resources back."""
        if not pod_uid or self.foreign(pod_uid):
            return False
        for cid in list(self._pods.get(pod_uid, ())):
            self.forget_container(cid)
        for cid in [cid for cid, (p, _) in self.unadjusted.items() if p.uid == pod_uid]:
            del self.unadjusted[cid]
        released = await self._release_owners(pod_uid)
        if released:
            self.counters.released += 1
        return released

    def forget_container(self, container_id: str) -> None:
        rec = self.placed.pop(container_id, None)
        if rec is not None:
            _unindex(self._ids, (rec[0], rec[1]), container_id)
            _unindex(self._pods, rec[0], container_id)
        self.told.pop(container_id, None)
        self.unadjusted.pop(container_id, None)
        self._untold.discard(container_id)

    def untold(self, container_id: str) -> None:
        """The runtime applied nothing of the container's placement (its answer went out
        before the decision): the next ``pending_updates`` pushes it."""
        if container_id in self.placed:
            self.told[container_id] = ("", "")
            self._untold.add(container_id)

    def held_pods(self) -> set[str]:
        """Pods the owners hold for this front."""
        uids: set[str] = set()
        if self.cpu_policy is not None:
            uids.update(a.pod_uid for a in self.cpu_policy.allocations())
        if self.memory_manager is not None:
            uids.update(uid for uid, _ in self.memory_manager.all_blocks())
        return {u for u in uids if not self.foreign(u)}

    # -- reconciling with the runtime ------------------------------------------------------

    async def synchronize(self, pods: Iterable[nri.PodSandbox], containers: Iterable[nri.Container]
                          ) -> tuple[list[nri.ContainerUpdate], list[str], list[Decision]]:
        """The runtime's full picture, reconciled as the restore after kill -9 does: pods the
        owners hold that the runtime no longer has are released; containers the owners do not
        hold (created while hwagent was down, or refused before) are placed; every container
        whose cpuset differs from the owners' placement is moved. Returns (updates for the
        runtime, released pod uids, decisions made).

        One batch: the owners journal each change without waiting for it, and the whole
        reconciliation waits once for the records (``agent.journalbatch``): N containers cost
        a few fdatasyncs, not N in a row. A record that could not be made durable is undone
        by its owner; every container it no longer holds is then answered as refused (runs
        unadjusted, repaired later), so the runtime is told nothing that does not hold."""
        by_id = {p.id: p for p in pods}
        live_uids = {p.uid for p in by_id.values()}
        placed: list[tuple[nri.PodSandbox, nri.Container, Decision]] = []
        with deferred() as batch:
            released = [uid for uid in sorted(self.held_pods() - live_uids) if await self.release_pod(uid)]
            self.placed.clear()
            self.told.clear()
            self.unadjusted.clear()
            self._ids.clear()
            self._pods.clear()
            self._untold.clear()
            # what moves from here on (a later container of this list shrinking the shared pool
            # under an earlier one) is what the next pending_updates looks at
            self._mark = self._moved(None)[0]
            for ctr in containers:
                pod = by_id.get(ctr.pod_sandbox_id)
                if pod is None or ctr.state not in (nri.CONTAINER_CREATED, nri.CONTAINER_RUNNING,
                                                    nri.CONTAINER_PAUSED):
                    continue
                placed.append((pod, ctr, await self.create(pod, ctr)))
        errors = await batch.settle()
        if errors:
            log.warning("nri synchronize not persisted", error=str(errors[0]), failed=len(errors),
                        note="what the owners undid is answered as refused and repaired later")
        decisions: list[Decision] = []
        updates: list[nri.ContainerUpdate] = []
        for pod, ctr, d in placed:
            if errors and d.applied and not self.held(pod.uid, ctr.name):
                self.forget_container(ctr.id)
                d = self._refused(ctr, pod, d.pod, "the owners' state could not be persisted", d.level,
                                  d.kube_qos, time.perf_counter())
            decisions.append(d)
            if not d.applied:
                continue
            now = ctr.linux.resources.cpu
            if (now.cpus, now.mems) != (str(d.cpus) if d.cpus is not None else now.cpus,
                                        str(d.mems) if d.mems is not None else now.mems):
                updates.append(update_for(ctr.id, d, self.cgroup_v2))
        self.counters.updates += len(updates)
        return updates, released, decisions

    def _moved(self, mark: object | None) -> tuple[object | None, set[tuple[str, str]] | None]:
        """The CPU policy's (new mark, containers moved since ``mark``); None: look at all."""
        moved_since = getattr(self.cpu_policy, "moved_since", None) if self.cpu_policy is not None else None
        if moved_since is None:
            return None, None
        new_mark, keys = moved_since(mark)
        return new_mark, keys

    def pending_updates(self, exclude: str = "", full: bool = False) -> list[nri.ContainerUpdate]:
        """Containers whose placement moved since the runtime was last told (a pool re-size,
        a ramp-up ended, the advisor): one update each, recorded as told.

        Only the containers the CPU policy says may have moved since the last look are read
        back (``moved_since``: its own change, O(what changed)), plus those whose runtime was
        told nothing; ``full`` (or an owner that cannot say) reads every placed container.
        The memory manager moves no running container (its blocks change with the placer's
        own allocate and release), so it is not asked."""
        self._mark, keys = self._moved(self._mark)
        if keys is None or full:
            candidates: Iterable[str] = list(self.placed)
        else:
            candidates = sorted({cid for k in keys for cid in self._ids.get(k, ())} | self._untold)
        self._untold = set()
        out: list[nri.ContainerUpdate] = []
        for cid in candidates:
            rec = self.placed.get(cid)
            if rec is None or cid == exclude:
                continue
            uid, name, level = rec
            cpus, mems = self.current(uid, name)
            now = (str(cpus) if cpus is not None else "", str(mems) if mems is not None else "")
            if cpus is None or now == self.told.get(cid):
                continue
            self.told[cid] = now
            d = Decision("", name, "held", "placement moved", level, cpus=cpus, mems=mems)
            out.append(update_for(cid, d, self.cgroup_v2))
        self.counters.updates += len(out)
        return out

    async def repair(self) -> list[tuple[str, Decision]]:
        """Place the containers that run unadjusted, where the owners can now; (id, decision) of
        each one placed (the caller pushes them as updates)."""
        done: list[tuple[str, Decision]] = []
        for cid, (pod, ctr) in list(self.unadjusted.items()):
            d = await self.create(pod, ctr)
            if d.applied:
                done.append((cid, d))
        return done


def _unindex(index: dict[K, set[str]], key: K, container_id: str) -> None:
    ids = index.get(key)
    if ids is not None:
        ids.discard(container_id)
        if not ids:
            del index[key]


def _hugepage_limits(ctr: nri.Container, mm: MemoryAllocator | None, pod_uid: str) -> dict[str, int]:
    """The hugepage limits the container asked for, where the memory manager placed them."""
    if mm is None or not mm.blocks(pod_uid, ctr.name):
        return {}
    return {h.page_size: h.limit for h in ctr.linux.resources.hugepage_limits if h.limit}


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000
