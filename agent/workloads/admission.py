"""The admission pipeline and the registry it publishes as ``WORKLOADS``.

validate → decide (``decision.decide``: the topology manager merges the CPU
policy's and the device manager's hints and places every container on a copy
of their state, nothing changed) → commit exactly what the decision placed
(the CPU policy's and the device manager's Allocate, rolled back on a later
failure) → the device plugins' PreStartContainer → persist → answer → hand the
pod to the runtime, when one is published. A dry run is the same decision,
answered without the commit.

One admission at a time: the topology manager decides on hints computed from
the state it sees, so a second admission interleaving between hints and
allocation would be refused for resources the first one had not taken yet
(the kubelet admits pods one by one for the same reason). Release paths
(status changes, Remove) do not take the lock: they only give resources back.

Everything runs on the daemon's loop. A refused admission leaves the CPU
policy, the device manager and the registry as they were, and says why in
one line: which resource, and what was free per NUMA node.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from agent.contracts import CPUAllocator, Deferred, DeviceAllocator, MemoryAllocator, PodRuntime
from agent.contracts.memory import MemoryBlock, MemoryRefused
from agent.contracts.dra import ClaimRefused, PodClaims
from agent.cpu.errors import PolicyError
from agent.contracts.cpu import AllocateResult
from agent.cpu.qos import DEDICATED, RECLAIMED, SHARED, SYSTEM, parse_qos
from agent.cpu.overcommit import overcommit_note
from agent.cpuset import CPUSet
from agent.contracts.devices import ContainerAllocation
from agent.devicemanager.selection import AllocationError
from agent.eventlog import get_logger
from agent.topologymanager import TopologyManager
from agent.workloads import metrics as m
from agent.workloads.errors import AdmissionError
from agent.workloads.freetext import NodeFree, free_line
from agent.workloads.manifest import ManifestError, parse_manifest
from agent.contracts.pods import (
    QOS_DEDICATED,
    QOS_RECLAIMED,
    QOS_SHARED,
    QOS_SYSTEM,
    AdmittedPod,
    ContainerAssignment,
    PodPhase,
    PodSpec,
    PodStatus,
)
from agent.workloads.decision import PodDecision, assignments, decide
from agent.workloads.providers import (
    admission_error_from_devices,
    admission_error_from_memory,
    admission_error_from_policy,
    memory_managed,
    memory_request,
)
from agent.workloads.quota import UserLimits, log_cap_refusal, pod_cap_refusal, user_name
from agent.workloads.registry import ADMITTED, Registry
from agent.workloads.claimshare import claim_share_refusal, foreign_holder
from agent.workloads.users import ROOT, Caller, not_found, resolve_run_as, submitter_limits
from agent.workloads.asuser import LookupStuck, LookupUnavailable, as_user
from agent.workloads.runnable import pod_unrunnable
from agent.workloads.store import PodRecord

__all__ = ["Workloads", "AdmitResult", "ContainerDecision", "PodLogs"]

#: said in a memory refusal: it stands on the pools as the kernel gives them now
REREAD_NOTE = " (the memory and hugepage pools were read again for this request)"

log = get_logger("hwagent.workloads")

#: how long the lookup of a pod's paths as its user may take (a FUSE or NFS mount that hangs)
LOOKUP_TIMEOUT_S = 5.0
#: manifests up to this size are parsed on the loop (about a millisecond; larger ones
#: cost ~5 ms per KiB in the pure-Python reader)
INLINE_PARSE_BYTES = 4 << 10

_SHORT_QOS = {SHARED: QOS_SHARED, DEDICATED: QOS_DEDICATED, RECLAIMED: QOS_RECLAIMED, SYSTEM: QOS_SYSTEM}


class PodLogs(Protocol):
    """What the pods wrote (``agent.runtime.logdir.LogDirs``): a pod's logs live as long
    as its record. Blocking; admission calls it from an executor."""

    def remove(self, namespace: str, name: str) -> bool: ...

    def size(self, namespace: str, name: str) -> int: ...

    def exists(self, namespace: str, name: str) -> bool: ...


@dataclass(frozen=True)
class ContainerDecision:
    """Dry run: where one container would go (the admission's own decision)."""

    name: str
    affinity: frozenset[int] | None
    preferred: bool
    admit: bool
    reason: str = ""
    #: the CPUs it would get (for shared/reclaimed containers: the pool's now)
    cpus: CPUSet = field(default_factory=CPUSet)
    #: memory nodes of a NUMA-bound container; None = every allowed node
    mems: CPUSet | None = None
    #: (resource, device id, the device's NUMA nodes), in resource then id order
    devices: tuple[tuple[str, str, tuple[int, ...]], ...] = ()


@dataclass(frozen=True)
class AdmitResult:
    pod: AdmittedPod | None
    warnings: tuple[str, ...] = ()
    dry_run: bool = False
    #: dry run only
    decisions: tuple[ContainerDecision, ...] = ()
    would_admit: bool = True
    reason: str = ""
    free: str = ""
    spec: PodSpec | None = None


@dataclass
class Workloads:
    """Admission: registry + pipeline. Published as ``WORKLOADS`` and ``ACTIVE_PODS``."""

    registry: Registry
    topology_manager: TopologyManager
    numa_ids: Sequence[int]
    #: the CPU policy and the device manager (started before admission); None = not running here
    cpu_policy: CPUAllocator | None = None
    device_manager: DeviceAllocator | None = None
    #: the memory manager (started before admission); None = not running here
    memory_manager: MemoryAllocator | None = None
    #: the DRA driver's pod claims (standalone, started before admission); None = not running here
    pod_claims: PodClaims | None = None
    #: the runtime starts after admission: a deferred reference (None until it published itself)
    runtime_ref: Deferred[PodRuntime] = lambda: None
    machine_memory_bytes: int | None = None
    clock: Callable[[], float] = time.time
    #: what one user other than root may hold (``agent.workloads.quota``)
    limits: UserLimits = UserLimits()
    #: the pods' log directories; None: not kept here (no runtime writes any)
    logs: PodLogs | None = None
    user_name: Callable[[int], str] = user_name
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set, init=False)
    _releasing: set[str] = field(default_factory=set, init=False)
    #: pods whose removal runs now (a Remove call, or one a restart is finishing)
    _removing: set[str] = field(default_factory=set, init=False)

    def __post_init__(self) -> None:
        self._publish()

    # --- WorkloadRegistry -----------------------------------------------------------

    def active_pod_uids(self) -> frozenset[str]:
        return self.registry.active_pod_uids()

    def get(self, uid: str) -> AdmittedPod | None:
        return self.registry.get(uid)

    def admitted(self) -> Sequence[AdmittedPod]:
        return self.registry.admitted()

    def status(self, uid: str) -> PodStatus | None:
        return self.registry.status(uid)

    def listed(self) -> Sequence[AdmittedPod]:
        return [r.pod for r in self.registry.records()]

    def runtime(self) -> PodRuntime | None:
        return self.runtime_ref()

    # --- admission --------------------------------------------------------------------

    async def admit_manifest(
        self, raw: bytes | str, *, dry_run: bool = False, ignore_unknown: bool = False, source: str = "api",
        caller: Caller = ROOT,
    ) -> AdmitResult:
        """Parse, resolve who the pod runs as for ``caller`` (``agent.workloads.users``:
        PERMISSION_DENIED before anything is decided), then admit or dry-run it."""
        parse = functools.partial(parse_manifest, raw, ignore_unknown=ignore_unknown, source=source)
        try:
            # the YAML reader is pure Python (it has to be, to refuse aliases and duplicate keys):
            # a large manifest is parsed off the loop so it never stalls the daemon
            parsed = parse() if len(raw) <= INLINE_PARSE_BYTES else await asyncio.to_thread(parse)
        except ManifestError as e:
            m.ADMISSIONS.labels("refused", "INVALID_ARGUMENT").inc()
            raise AdmissionError("INVALID_ARGUMENT", f"invalid manifest: {e}", reason="manifest") from None
        try:
            spec = dataclasses.replace(parsed.pod, run_as=resolve_run_as(caller, parsed.pod.run_as),
                                       rlimits=submitter_limits(caller))
        except AdmissionError as e:
            m.ADMISSIONS.labels("refused", e.code).inc()
            raise
        for w in parsed.warnings:
            log.warning("manifest field ignored", pod=parsed.pod.key, warning=w)
        result = await (self.dry_run(spec, caller) if dry_run else self.admit(spec, caller))
        return AdmitResult(**{**result.__dict__, "warnings": (*parsed.warnings, *result.warnings)})

    def qos_of(self, spec: PodSpec) -> str:
        try:
            return _SHORT_QOS[parse_qos(spec.annotations, spec.labels).level]
        except PolicyError as e:
            raise AdmissionError("INVALID_ARGUMENT", f"invalid manifest: metadata.annotations: {e}", "qos") from None

    def _precheck(self, spec: PodSpec) -> None:
        """Refusals that need no hints: resources this node does not have at all."""
        dm = self.device_manager
        known = set(dm.resources()) if dm is not None else set()
        for c in spec.all_containers():
            for r in sorted(c.resources.extended):
                if r not in known:
                    have = ", ".join(sorted(known)) or "none"
                    raise AdmissionError(
                        "RESOURCE_EXHAUSTED",
                        f"{r}: no device plugin has registered this resource on this node (registered: {have})",
                        reason="unknown_resource",
                    )
        mem = self.machine_memory_bytes
        if mem:
            for c in spec.all_containers():
                want = c.resources.memory_request_bytes or 0
                if want > mem:
                    raise AdmissionError(
                        "RESOURCE_EXHAUSTED",
                        f"memory: container {c.name} requests {want} bytes, the node has {mem}",
                        reason="memory",
                    )

    async def admit(self, spec: PodSpec, caller: Caller = ROOT) -> AdmitResult:
        """``caller``: who asked (its per-user limits apply unless it is root)."""
        # shielded: a caller that goes away (a cancelled RPC) does not interrupt an
        # admission half way; it completes (and reaches the runtime) or rolls back on its own
        task = asyncio.ensure_future(self._admit_and_report(spec, caller))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # retrieved even if nobody waits
        return await asyncio.shield(task)

    async def _admit_and_report(self, spec: PodSpec, caller: Caller) -> AdmitResult:
        t0 = time.perf_counter()
        try:
            result = await self._admit(spec, caller)
        except AdmissionError as e:
            m.ADMISSIONS.labels("refused", e.code).inc()
            log.warning("admission refused", pod=spec.key, code=e.code, reason=e.message)
            raise
        m.ADMISSIONS.labels("admitted", "OK").inc()
        m.ADMIT_DURATION.observe(time.perf_counter() - t0)
        assert result.pod is not None
        self._hand_to_runtime(result.pod)
        return result

    async def _check_runnable(self, spec: PodSpec) -> None:
        """When it starts here (a runtime runs pods), a missing working directory or command is refused
        now, not at start. Looked up as the pod's user (``agent.workloads.asuser``), so a path the user
        cannot reach reads as the user's own shell says, and outside the lock: a filesystem that hangs
        holds up this admission alone. Root's pods are looked up as root, as before."""
        if self.runtime() is None:
            return
        user = spec.run_as
        if user is None or user.uid in (None, 0):
            why = pod_unrunnable(spec)
        else:
            try:
                why = await as_user(user, lambda: pod_unrunnable(spec), LOOKUP_TIMEOUT_S)
            except LookupUnavailable as e:
                # the shim's chdir and execve, as the user, say it at start instead
                log.warning("pod paths not looked up as its user", pod=spec.key, uid=user.uid, error=str(e))
                return
            except LookupStuck as e:
                raise AdmissionError("FAILED_PRECONDITION", f"cannot check the pod's working directory and command: "
                                     f"{e}", reason="not_runnable") from None
        if why is not None:
            raise AdmissionError("INVALID_ARGUMENT", why, reason="not_runnable")

    async def _admit(self, spec: PodSpec, caller: Caller) -> AdmitResult:
        qos = self.qos_of(spec)
        await self._check_runnable(spec)
        async with self._lock:
            self._check_new(spec)
            await self._check_limits(spec, caller)
            self._check_claim_sharing(spec, caller)
            self.registry.reserve(spec.key, spec.uid)
            try:
                decision = await self._decide(spec)
                pod = await self._commit(decision, qos)
                try:
                    await self.registry.add(pod, line=admitted_line(pod))
                except BaseException as e:
                    # a failed write records nothing (Registry.add): roll the allocations back too
                    await self._rollback(spec)
                    if not isinstance(e, Exception):
                        raise
                    raise AdmissionError("INTERNAL", f"cannot persist the admission: {e}", "persist") from None
                await self._clear_logs(spec)
            finally:
                self.registry.unreserve(spec.key, spec.uid)
        self._publish()
        log.info("pod admitted", pod=spec.key, uid=spec.uid, qos=qos, containers=_describe_assignments(pod))
        # a shared pod that asks for CPU time, onto shared CPUs their requests already exceed
        asks = any(c.resources.cpu_request_milli for c in spec.all_containers())
        note = self._shared_overcommit() if qos == QOS_SHARED and asks else None
        return AdmitResult(pod=pod, warnings=() if note is None else (note,))

    def _shared_overcommit(self) -> str | None:
        """What the shared pods request in all against the CPUs they run on now, when it is more
        (``agent.cpu.overcommit``: admitted, and said)."""
        svc = self.cpu_policy
        if svc is None:
            return None
        shared = [a for a in svc.allocations() if a.qos_level == SHARED]
        cpus = CPUSet.union_all(a.cpuset for a in shared)
        return overcommit_note(sum(a.request_quantity for a in shared), len(cpus))

    async def _check_limits(self, spec: PodSpec, caller: Caller) -> None:
        """The caller's per-user limits (none for root): RESOURCE_EXHAUSTED naming the limit.
        Under the admission lock, so two admissions cannot both take the last place."""
        if caller.root:
            return
        owner = spec.owner_uid
        why = pod_cap_refusal(self.user_name(owner), self.registry.pods_of(owner), self.limits.max_pods_per_user)
        if why is None and self.limits.max_log_bytes_per_user and self.logs is not None:
            names = [(r.pod.spec.namespace, r.pod.spec.name) for u in self.registry.uids_of(owner)
                     if (r := self.registry.record(u)) is not None]  # on the loop, which owns the registry
            held = await asyncio.get_running_loop().run_in_executor(None, self._log_bytes, names)
            why = log_cap_refusal(self.user_name(owner), held, self.limits.max_log_bytes_per_user)
        if why is not None:
            raise AdmissionError("RESOURCE_EXHAUSTED", why, reason="user_limit")

    def _check_claim_sharing(self, spec: PodSpec, caller: Caller) -> None:
        """A member's pod may not name a ResourceClaim that another user's pod holds (it would
        share that pod's device: agent.workloads.claimshare). Under the admission lock, the only
        path that reserves claims, so no other admission can take one in between."""
        pc = self.pod_claims
        if caller.root or pc is None or not spec.resource_claims:
            return
        holders = ((r.pod.spec.owner_uid, r.pod.spec.key, pc.pod_claims(r.pod.spec.uid)) for r in self.registry
                   if r.pod.spec.namespace == spec.namespace)
        found = foreign_holder(spec.resource_claims.values(), spec.owner_uid, holders)
        if found is not None:
            raise AdmissionError("PERMISSION_DENIED", claim_share_refusal(spec.namespace, found[0]), reason="dra")

    def _log_bytes(self, names: list[tuple[str, str]]) -> int:
        """The bytes in these pods' log directories (blocking: in an executor)."""
        assert self.logs is not None
        return sum(self.logs.size(ns, name) for ns, name in names)

    async def _clear_logs(self, spec: PodSpec) -> None:
        """A new pod starts with empty logs: a directory of an earlier pod of the same name
        that its removal did not take (a crash in between, an older hwagent) goes first."""
        logs = self.logs
        if logs is None or not logs.exists(spec.namespace, spec.name):
            return
        try:
            await asyncio.get_running_loop().run_in_executor(None, logs.remove, spec.namespace, spec.name)
        except OSError as e:
            log.warning("earlier logs not removed", pod=spec.key, error=str(e))
        else:
            log.info("earlier logs removed", pod=spec.key)

    async def _remove_logs(self, rec: PodRecord) -> None:
        """What the pod wrote goes with it (as ``docker rm``). A failure is logged and the
        removal goes on: the next pod of that name clears the directory first, and the
        daemon's start removes log directories no record names."""
        logs = self.logs
        if logs is None:
            return
        spec = rec.pod.spec
        try:
            await asyncio.get_running_loop().run_in_executor(None, logs.remove, spec.namespace, spec.name)
        except OSError as e:
            log.warning("pod logs not removed", pod=rec.key, error=str(e))

    def _check_new(self, spec: PodSpec) -> None:
        why = self.registry.taken(spec.key, spec.uid)
        if why is not None:
            raise AdmissionError("ALREADY_EXISTS", why, reason="exists")
        self._precheck(spec)

    async def _decide(self, spec: PodSpec, *, count: bool = True) -> PodDecision:
        """``decision.decide``; a RESOURCE_EXHAUSTED refusal says what was free.

        When a pod the memory manager places does not fit, the memory and hugepage pools are
        read again and the pod decided once more if they changed: pages reserved a moment
        ago (``nr_hugepages``) count now, not at the next periodic re-read. The refusal says
        the pools were read for it, so nobody reaches for SIGHUP."""
        try:
            return await self._decide_once(spec, count)
        except AdmissionError as e:
            if e.code != "RESOURCE_EXHAUSTED":
                raise
            refused = e
        mm = self.memory_manager
        reread = mm is not None and memory_managed(spec)
        if reread and mm is not None and await mm.refresh():
            log.info("memory pools read again for a refused admission", pod=spec.key)
            try:
                return await self._decide_once(spec, count)
            except AdmissionError as e:
                if e.code != "RESOURCE_EXHAUSTED":
                    raise
                refused = e
        note = REREAD_NOTE if reread and refused.reason.startswith("memory_") else ""
        raise AdmissionError(refused.code, f"{refused.detail}{note}; {self._refusal_free(spec, refused.reason)}",
                             refused.reason) from None

    async def _decide_once(self, spec: PodSpec, count: bool) -> PodDecision:
        return await decide(spec, self.topology_manager, self.cpu_policy, self.device_manager, count=count,
                            memory_manager=self.memory_manager, pod_claims=self.pod_claims)

    def _refusal_free(self, spec: PodSpec, reason: str) -> str:
        """The free summary a refusal ends with. When no CPU is left for shared pods, the CPUs
        it counts are free for dedicated pods only, and the line says so (the policy's message
        before it says why, under its dedicated_numa rule); a bare "cpu 0=1" beside "no cpu is
        left" read as a contradiction."""
        if reason == "cpu_no_shared_cpus":
            return self.free_summary(spec, cpus_note="the CPUs are free for dedicated pods only")
        return self.free_summary(spec)

    async def _commit(self, d: PodDecision, qos: str) -> AdmittedPod:
        """Allocate exactly what the decision placed, container by container in
        its order (CPUs, then devices, named by the decision), then the plugins'
        PreStartContainer; all of it rolled back on any failure."""
        spec, svc, dm = d.spec, self.cpu_policy, self.device_manager
        cpu_results: dict[str, AllocateResult] = {}
        dev_results: dict[str, ContainerAllocation] = {}
        mem_results: dict[str, tuple[MemoryBlock, ...]] = {}
        mm = self.memory_manager
        try:
            for c in spec.all_containers():
                mreq = d.memory.requests.get(c.name)
                if mreq is not None and mm is not None:
                    mem_results[c.name] = await mm.allocate(mreq)
                req = d.cpu.requests.get(c.name)
                if req is not None and svc is not None:
                    cpu_results[c.name] = await svc.allocate(req)
                dreq = d.devices.requests.get(c.name)
                if dreq is not None and dm is not None:
                    dev_results[c.name] = await dm.allocate(dreq)
            if dm is not None:
                for c in spec.all_containers():
                    if c.resources.extended:
                        await dm.pre_start(spec.uid, c.name)
        except AllocationError as e:
            await self._rollback(spec)
            raise admission_error_from_devices(None, e) from None
        except PolicyError as e:
            await self._rollback(spec)
            raise admission_error_from_policy(e) from None
        except MemoryRefused as e:
            await self._rollback(spec)
            raise admission_error_from_memory(e) from None
        except BaseException:
            await self._rollback(spec)
            raise
        shared = svc.shared_cpus() if svc is not None else CPUSet()
        numa_of = svc.numa_of() if svc is not None else None
        placed = assignments(spec, d.hints, cpu_results, dev_results, shared, numa_of, mem_results)
        if spec.resource_claims:
            placed = await self._reserve_claims(spec, placed)
        return AdmittedPod(spec=spec, qos=qos, assignments=placed, admitted_at=self.clock())

    async def _reserve_claims(self, spec: PodSpec, placed: dict[str, ContainerAssignment]
                              ) -> dict[str, ContainerAssignment]:
        """Allocate and prepare the pod's ResourceClaims (DRA), aligned with the NUMA nodes its
        containers were given; their CDI devices join each container's grant, which the runtime
        resolves like a device plugin's CDI names. A refusal rolls everything back."""
        pc = self.pod_claims
        try:
            if pc is None:
                raise ClaimRefused("the pod references ResourceClaims, and no DRA driver runs here ([dra] enabled)")
            numa: dict[str, frozenset[int] | None] = {}
            for claim in spec.resource_claims:
                users = [placed[c.name].numa_affinity for c in spec.all_containers()
                         if claim in c.resources.claims and c.name in placed]
                numa[claim] = (None if not users or any(u is None for u in users)
                               else frozenset().union(*[u for u in users if u is not None]))
            got = await pc.reserve(spec.uid, spec.name, spec.namespace, spec.resource_claims, numa)
        except ClaimRefused as e:
            await self._rollback(spec)
            raise AdmissionError("RESOURCE_EXHAUSTED", f"dra: {e}", reason="dra") from None
        except BaseException:
            await self._rollback(spec)
            raise
        out = dict(placed)
        for c in spec.all_containers():
            if not c.resources.claims or c.name not in out:
                continue
            a = out[c.name]
            ids = tuple(i for claim in c.resources.claims for d in got.get(claim, ()) for i in d.cdi_device_ids)
            # the views list a claim's devices as the resource "resourceclaim/<name>"
            devices = {**a.devices, **{f"resourceclaim/{spec.resource_claims[claim]}": tuple(
                d.device for d in got.get(claim, ())) for claim in c.resources.claims}}
            out[c.name] = dataclasses.replace(a, devices=devices, grant=dataclasses.replace(
                a.grant, cdi_devices=tuple(dict.fromkeys(a.grant.cdi_devices + ids))))
        return out

    async def _rollback(self, spec: PodSpec) -> None:
        """Give back whatever the commit took so far (each provider's release is a
        no-op for a pod it holds nothing of)."""
        dm, svc = self.device_manager, self.cpu_policy
        try:
            if dm is not None:
                dm.release_pod(spec.uid)
                await dm.flush_checkpoint()
        except Exception:  # noqa: BLE001 - keep rolling back the other provider
            log.exception("rollback failed", pod=spec.key, provider="devices")
        try:
            if svc is not None:
                await svc.release_pod(spec.uid)
        except Exception:  # noqa: BLE001 - the original error is what the caller hears
            log.exception("rollback failed", pod=spec.key, provider="cpu")
        try:
            if self.memory_manager is not None:
                await self.memory_manager.release_pod(spec.uid)
        except Exception:  # noqa: BLE001 - the original error is what the caller hears
            log.exception("rollback failed", pod=spec.key, provider="memory")
        try:
            if self.pod_claims is not None and spec.resource_claims:
                await self.pod_claims.release(spec.uid)
        except Exception:  # noqa: BLE001 - the original error is what the caller hears
            log.exception("rollback failed", pod=spec.key, provider="dra")

    def _hand_to_runtime(self, pod: AdmittedPod) -> None:
        rt = self.runtime()
        if rt is None:
            return

        async def run() -> None:
            try:
                await rt.run(pod)
            except Exception as e:  # noqa: BLE001 - the runtime reports failures as status; this is a bug path
                log.exception("runtime run failed", pod=pod.spec.key)
                await self.pod_status_changed(
                    pod.uid, PodStatus(phase=PodPhase.FAILED, reason="StartError", message=str(e))
                )

        task = asyncio.get_running_loop().create_task(run(), name=f"run-{pod.spec.key}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- dry run ------------------------------------------------------------------------

    async def dry_run(self, spec: PodSpec, caller: Caller = ROOT) -> AdmitResult:
        """What admission would decide now, and where every container would go:
        the admission's own decision (``_decide``), with nothing allocated or written.
        Refusals other than RESOURCE_EXHAUSTED raise, as the admission would."""
        self.qos_of(spec)  # refuses bad QoS annotations as admit would
        await self._check_runnable(spec)
        async with self._lock:  # the state an admission queued now would meet
            self._check_new(spec)
            try:
                await self._check_limits(spec, caller)
                self._check_claim_sharing(spec, caller)
                d = await self._decide(spec, count=False)
            except AdmissionError as e:
                if e.code != "RESOURCE_EXHAUSTED":
                    raise
                free = "" if e.reason == "user_limit" else self._refusal_free(spec, e.reason)
                reason = e.message.removesuffix(f"; {free}")
                m.ADMISSIONS.labels("dry_run", e.code).inc()
                return AdmitResult(pod=None, dry_run=True, would_admit=False, reason=reason, free=free, spec=spec)
            free = self.free_summary(spec)
        m.ADMISSIONS.labels("dry_run", "OK").inc()
        return AdmitResult(
            pod=None, dry_run=True, decisions=_decisions(d), would_admit=True, free=free, spec=spec,
        )

    def free_summary(self, spec: PodSpec | None = None, cpus_note: str = "") -> str:
        """``free per NUMA node: node 0: 3 CPUs, 2 example.com/dev; node 1: ...`` (``freetext``):
        dedicatable CPUs (not held by NUMA-bound containers, reserved excluded), the free
        healthy devices and the memory the pod asks for, per node."""
        ids = set(self.numa_ids)
        cpus: dict[int, int] = {}
        memory: dict[int, dict[str, int]] = {}
        devices: dict[int, dict[str, int]] = {}
        unaligned: dict[str, int] = {}
        svc = self.cpu_policy
        if svc is not None:
            cpus = dict(svc.free_per_numa())
        dm = self.device_manager
        wanted = sorted({r for c in spec.all_containers() for r in c.resources.extended}) if spec else []
        if dm is not None and wanted:
            held = {(a.resource, d) for a in dm.allocations() for d in a.device_ids}
            healthy = dm.allocatable_devices()
            for r in wanted:
                for n in ids:
                    devices.setdefault(n, {})[r] = 0
                for d in healthy.get(r, []):
                    if (r, d.id) in held:
                        continue
                    if not d.numa:
                        unaligned[r] = unaligned.get(r, 0) + 1
                    for n in d.numa:
                        per = devices.setdefault(n, {})
                        per[r] = per.get(r, 0) + 1
        mm = self.memory_manager
        if mm is not None and spec is not None and memory_managed(spec):
            try:
                asked = {r for c in spec.containers for r in memory_request(spec, c).requests}
            except AdmissionError:
                asked = set()
            for nm in mm.nodes():
                if nm.resource in asked:
                    memory.setdefault(nm.node, {})[nm.resource] = nm.free
        nodes = ids | cpus.keys() | memory.keys() | devices.keys()
        return free_line({n: NodeFree(cpus.get(n), memory.get(n, {}), devices.get(n, {})) for n in nodes},
                         unaligned, cpus_note)

    # --- status and removal ---------------------------------------------------------------

    async def pod_status_changed(self, uid: str, status: PodStatus) -> None:
        rec = self.registry.record(uid)
        if rec is None:
            log.warning("status for unknown pod", uid=uid, phase=status.phase.value)
            return
        line = None
        if status.phase != rec.status.phase or status.reason != rec.status.reason:
            line = f"{status.phase.value}" + (f" ({status.reason})" if status.reason else "")
            if status.message:
                line += f": {status.message}"
        why = status.reason or status.phase.value
        if status.phase.terminal and not rec.released and uid not in self._releasing:
            # the end and the release are one record write, after the resources went back
            # (docs/performance.md): a daemon killed before it finds the record as it was, and
            # the runtime, whose files keep the exit until this returns, reports the end again
            await self.release(uid, why=why, status=status, line=line)
            rec = self.registry.record(uid)
        else:
            rec = await self.registry.update(uid, status=status, line=line)
            if status.phase.terminal:
                await self.release(uid, why=why)
        if rec is not None and rec.removing and uid not in self._removing:
            await self._finish_removal(rec, status)
        self._publish()

    async def release(self, uid: str, why: str, status: PodStatus | None = None, line: str | None = None) -> None:
        """Give a pod's CPUs and devices back (idempotent); the record stays.

        ``status`` (and its event ``line``): the pod's end, recorded in the same write as the
        release (one synced record write per ended pod instead of two). Should giving a resource
        back fail, the end is still recorded before the error propagates."""
        rec = self.registry.record(uid)
        if rec is None or rec.released or uid in self._releasing:
            if rec is not None and status is not None:
                await self.registry.update(uid, status=status, line=line)
            return
        self._releasing.add(uid)
        try:
            try:
                await self._give_back(uid, rec)
            except BaseException:
                if status is not None:
                    with contextlib.suppress(Exception):  # the release's own error is the one to raise
                        await self.registry.update(uid, status=status, line=line)
                raise
            lines = (line, f"resources released ({why})") if line else (f"resources released ({why})",)
            await self.registry.update(uid, status=status, released=True, lines=lines)
        finally:
            self._releasing.discard(uid)
        m.RELEASES.labels("terminal" if why != "removed" else "removed").inc()
        log.info("pod released", pod=rec.key, uid=uid, why=why)

    async def _give_back(self, uid: str, rec: PodRecord) -> None:
        """The pod's CPUs, devices, memory and claims, each owner's release durable when it returns."""
        svc = self.cpu_policy
        if svc is not None:
            await svc.release_pod(uid)
        dm = self.device_manager
        if dm is not None:
            # committed allocations are what the checkpoint holds: a pod without any (most
            # jobs) changes nothing there, and compacting it anyway was a snapshot written
            # and synced per pod (docs/performance.md)
            held = bool(dm.container_allocations(uid))
            dm.release_pod(uid)
            if held:
                await dm.flush_checkpoint()
        if self.memory_manager is not None:
            await self.memory_manager.release_pod(uid)
        if self.pod_claims is not None and rec.pod.spec.resource_claims:
            await self.pod_claims.release(uid)

    def find(self, name: str, namespace: str = "default") -> PodRecord:
        rec = self.registry.by_key(f"{namespace}/{name}")
        if rec is None:
            raise not_found(namespace, name)
        return rec

    async def remove(self, name: str, namespace: str = "default") -> PodRecord:
        """Stop the pod (when a runtime runs it), release its resources, forget it.

        The intent is recorded (durably) before anything is stopped: a daemon killed
        before the record is gone finishes the removal after its restart (see
        ``_finish_removal``), instead of keeping a ``Failed (Removed)`` record that
        needs a second ``rm``. A pod that ended and gave its resources back has nothing
        left to stop or release: its removal is the record's deletion alone (one synced
        unlink), with no intent written first (docs/performance.md: the intent was one of
        the six record writes of every ``launch --wait --rm``)."""
        rec = self.find(name, namespace)
        if not rec.removing and not (rec.status.phase.terminal and rec.released):
            try:
                rec = await self.registry.update(rec.uid, removing=True, line="removing") or rec
            except BaseException:
                # the intent did not reach the disk: a failed call changes nothing (memory too)
                with contextlib.suppress(Exception):
                    await self.registry.update(rec.uid, removing=False)
                raise
        return await self._remove(rec)

    async def _remove(self, rec: PodRecord) -> PodRecord:
        uid = rec.uid
        self._removing.add(uid)
        try:
            rt = self.runtime()
            if rt is not None and not rec.status.phase.terminal:
                await rt.stop(uid, None, "Removed")
            await self.release(uid, why="removed")
            await self._remove_logs(rec)
            last = self.registry.record(uid) or rec
            gone = await self.registry.delete(uid)
        finally:
            self._removing.discard(uid)
        self._publish()
        log.info("pod removed", pod=rec.key, uid=uid)
        return gone or last

    async def _finish_removal(self, rec: PodRecord, status: PodStatus) -> None:
        """A status for a pod a Remove was interrupted on (the daemon was killed), as the
        restored runtime reports it. A terminal one ends the removal here; any other
        means the pod runs (re-attached, or started again) and is stopped first, in the
        background: this is the runtime's report path, and the stop reports too."""
        log.info("pod removal resumed", pod=rec.key, uid=rec.uid, phase=status.phase.value)
        if status.phase.terminal:
            await self._remove(rec)
            return
        self._removing.add(rec.uid)  # one resumed removal per pod, however many reports come

        async def finish() -> None:
            try:
                await self._remove(rec)
            except Exception:  # noqa: BLE001 - logged; the intent stays for the next restart
                log.exception("pod removal failed", pod=rec.key, uid=rec.uid)

        task = asyncio.get_running_loop().create_task(finish(), name=f"remove-{rec.key}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def stop(self, name: str, namespace: str = "default", grace_s: float | None = None) -> PodRecord:
        rec = self.find(name, namespace)
        rt = self.runtime()
        if rt is None:
            raise AdmissionError(
                "FAILED_PRECONDITION",
                f"pod {rec.key} is admitted but no workload runtime runs in this daemon; "
                "nothing to stop (hwagent rm releases its resources)",
                reason="no_runtime",
            )
        await rt.stop(rec.uid, grace_s, "Stopped")
        return self.registry.record(rec.uid) or rec

    def signal(self, rec: PodRecord, sig: int, container: str = "") -> dict[str, tuple[int, ...]]:
        """``sig`` to every process of ``container`` (every container when empty) of a pod the
        runtime runs; the pids signalled per container. Refused, with nothing sent, for a
        container the pod does not have, an ended pod, or a daemon without a runtime."""
        names = [c.name for c in rec.pod.spec.all_containers()]
        if container and container not in names:
            raise AdmissionError("NOT_FOUND", f"pod {rec.key} has no container {container!r} "
                                 f"(its containers: {', '.join(names)})", reason="bad_request")
        rt = self.runtime()
        if rt is None:
            raise AdmissionError("FAILED_PRECONDITION", f"pod {rec.key} is admitted but no workload runtime runs "
                                 "in this daemon; nothing runs to signal", reason="no_runtime")
        if rec.status.phase.terminal:
            raise AdmissionError("FAILED_PRECONDITION", f"pod {rec.key} has ended ({rec.status.phase.value}); "
                                 "nothing runs to signal (`hwagent describe` shows how it ended)",
                                 reason="not_running")
        return rt.signal(rec.uid, [container] if container else names, sig)

    # --- start-up -----------------------------------------------------------------------

    async def reconcile_after_restore(self) -> None:
        """Pods that ended while their release was in flight get it now; pods that
        look alive but that the CPU policy lost (a checkpoint given up) are reported."""
        svc = self.cpu_policy
        held = {a.pod_uid for a in svc.allocations()} if svc is not None else None
        for rec in self.registry.records():
            if rec.removing and (rec.status.phase.terminal or _never_reported(rec)):
                # a Remove the kill interrupted, with nothing left for a runtime to stop; a pod
                # reported running is left to the runtime's restore, whose report resumes it
                await self._remove(rec)
            elif rec.status.phase.terminal and not rec.released:
                await self.release(rec.uid, why="terminal before restart")
            elif held is not None and not rec.status.phase.terminal and rec.uid not in held:
                needs_cpu = any(a.cpus and a.mems is not None for a in rec.pod.assignments.values())
                if needs_cpu:
                    log.warning(
                        "pod cpus unknown", pod=rec.key, uid=rec.uid, note="the cpu policy holds no cpus for it",
                    )
        self._publish()

    async def drain(self) -> None:
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def _publish(self) -> None:
        m.publish_admitted(self.registry.live_qos_counts())


def _decisions(d: PodDecision) -> tuple[ContainerDecision, ...]:
    out = []
    for c in d.spec.all_containers():
        hint, a = d.hints[c.name], d.placement[c.name]
        planned = d.devices.results.get(c.name)
        allocs = sorted(planned.allocations, key=lambda x: x.resource) if planned is not None else []
        devices = tuple((x.resource, dev_id, tuple(nodes)) for x in allocs for dev_id, nodes in x.devices)
        out.append(ContainerDecision(
            name=c.name, affinity=a.numa_affinity, preferred=hint.preferred, admit=True,
            cpus=a.cpus, mems=a.mems, devices=devices,
        ))
    return tuple(out)


def _never_reported(rec: PodRecord) -> bool:
    """Still the status admission gave it: no runtime said anything about the pod (none
    runs in this daemon, or the daemon went down before its runtime started the pod)."""
    return rec.status.phase == PodPhase.PENDING and rec.status.reason == ADMITTED


def admitted_line(pod: AdmittedPod) -> str:
    """The pod's first event: where admission placed each container. History: the CPU
    policy owns where a shared container's CPUs are now (the pool moves), which the
    views ask it for."""
    return "admitted with " + ", ".join(f"cpus {a.cpus or '-'} for {a.name}" for a in pod.assignments.values())


def _describe_assignments(pod: AdmittedPod) -> str:
    out = []
    for a in pod.assignments.values():
        devs = ",".join(f"{r}={'+'.join(ids)}" for r, ids in a.devices.items())
        aff = "any" if a.numa_affinity is None else ",".join(map(str, sorted(a.numa_affinity)))
        out.append(f"{a.name}:cpus={a.cpus or '-'}:numa={aff}" + (f":devices={devs}" if devs else ""))
    return ";".join(out)
