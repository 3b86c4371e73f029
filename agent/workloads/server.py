"""The admission API (hwagent.admission.v1) over admission (``Workloads``).

Every handler maps ``AdmissionError`` to its status code and anything else to
INTERNAL with the exception named, so our own code never answers UNKNOWN.

Every handler asks ``caller_of(context)`` who calls (``agent.workloads.peerfront``
learns it from the kernel) and holds it to ``agent.workloads.users``: a non-root
caller's pods run as that caller, and it lists, watches, gets, signals, stops and removes
its own pods only (another user's pod is NOT_FOUND). A call whose caller is
unknown is refused (PERMISSION_DENIED) before it reads anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import grpc

from agent.api.admission.v1 import api_pb2 as pb
from agent.api.admission.v1 import api_pb2_grpc as pb_grpc
from agent.contracts import Placement
from agent.contracts.memory import MemoryBlock
from agent.cpuset import CPUSet
from agent.eventlog import get_logger
from agent.workloads.admission import AdmitResult, Workloads
from agent.workloads.errors import AdmissionError
from agent.workloads.paging import take_page, token_key
from agent.workloads.registry import ADDED, DELETED, RegistryEvent
from agent.workloads.signals import parse_signal, signal_name
from agent.workloads.store import PodRecord, record_to_json
from agent.workloads.users import ROOT, Caller, may_see, not_found

__all__ = ["AdmissionServicer", "pod_message", "current_cpus", "WATCH_QUEUE"]

log = get_logger("hwagent.workloads")
T = TypeVar("T")
#: events a Watch stream may fall behind by before it is ended (ABORTED: re-list and watch again)
WATCH_QUEUE = 4096
#: the longest a Get waits for a pod to end (wait_terminal_seconds): a client asks again after it
MAX_WAIT_S = 3600.0


def _nodes(nodes: Any) -> list[int]:
    return sorted(int(n) for n in nodes)


def current_cpus(
    rec: PodRecord, container: str, placement: Callable[[str, str], Placement | None] | None
) -> tuple[CPUSet, CPUSet | None]:
    """A container's CPUs and memory nodes as their owner, the CPU policy, holds them
    now: a released pod holds none; a container the policy holds nothing of (an init
    container, or no CPU policy in this daemon) runs where admission placed it."""
    if rec.released:
        return CPUSet(), None
    p = placement(rec.uid, container) if placement is not None else None
    if p is not None:
        return p.cpus, p.mems
    a = rec.pod.assignments.get(container)
    return (a.cpus, a.mems) if a is not None else (CPUSet(), None)


def memory_blocks_pb(blocks: Sequence[MemoryBlock]) -> list[pb.MemoryBlock]:
    return [pb.MemoryBlock(resource=b.resource, size=b.size, numa_nodes=list(b.numa_nodes), per_node=b.split())
            for b in blocks]


def pod_message(
    rec: PodRecord,
    numa_of_device: Callable[[str, str, str, str], Sequence[int]] | None = None,
    placement: Callable[[str, str], Placement | None] | None = None,
    summary: bool = False,
    memory: Callable[[str, str], Sequence[MemoryBlock]] | None = None,
) -> pb.Pod:
    """The pod as the API shows it: spec, phase and history from the registry, each
    container's CPUs from ``placement`` (the CPU policy's, asked now; see ``current_cpus``)
    and its memory blocks from ``memory`` (the memory manager's, asked now; none once the
    pod's resources are released).
    ``summary``: without the events and the record (``ps`` shows neither; the record's JSON
    was most of a pod's bytes and of the daemon's CPU per pod listed)."""
    pod, st = rec.pod, rec.status
    statuses = {c.name: c for c in st.containers}
    containers = []
    for c in pod.spec.all_containers():
        a = pod.assignments.get(c.name)
        cs = statuses.get(c.name)
        msg = pb.Container(name=c.name, kind=c.kind)
        if a is not None:
            cpus, mems = current_cpus(rec, c.name, placement)
            msg.cpu_ids.extend(sorted(cpus))
            if mems is not None:
                msg.mems.extend(sorted(mems))
            if a.numa_affinity is None:
                msg.any_node = True
            else:
                msg.numa_affinity.extend(sorted(a.numa_affinity))
            for resource, ids in sorted(a.devices.items()):
                for i in ids:
                    nodes = numa_of_device(pod.uid, c.name, resource, i) if numa_of_device else ()
                    msg.devices.append(pb.Device(resource=resource, id=i, numa_nodes=_nodes(nodes)))
        if memory is not None and not rec.released:
            msg.memory.extend(memory_blocks_pb(memory(pod.uid, c.name)))
        if cs is not None:
            msg.state = cs.state.value
            msg.reason = cs.reason
            msg.restart_count = cs.restart_count
            msg.pid = cs.pid or 0
            if cs.exit_code is not None:
                msg.exit_code = cs.exit_code
        containers.append(msg)
    out = pb.Pod(
        name=pod.spec.name,
        namespace=pod.spec.namespace,
        uid=pod.uid,
        qos=pod.qos,
        phase=st.phase.value,
        reason=st.reason,
        message=st.message,
        source=pod.spec.source,
        admitted_at=pod.admitted_at,
        released=rec.released,
        containers=containers,
    )
    if not summary:
        out.events.extend(pb.Event(time=t, message=m) for t, m in rec.events)
        out.record_json = json.dumps(record_to_json(rec), sort_keys=True)
    return out


#: a cpuset's sorted CPU ids, one list per distinct set: the pods of a shared pool list the same ~250
#: ids, and sorting them again for each pod was a third of a JSON listing's CPU (issue 37 item 17)
_ID_LISTS: dict[CPUSet, list[int]] = {}


def _ids(cpus: CPUSet) -> list[int]:
    ids = _ID_LISTS.get(cpus)
    if ids is None:
        if len(_ID_LISTS) >= 4096:  # pools that moved many times: forget them all, keep it small
            _ID_LISTS.clear()
        ids = _ID_LISTS[cpus] = sorted(cpus)
    return ids


def summary_json(
    rec: PodRecord,
    numa_of_device: Callable[[str, str, str, str], Sequence[int]] | None = None,
    placement: Callable[[str, str], Placement | None] | None = None,
    memory: Callable[[str, str], Sequence[MemoryBlock]] | None = None,
) -> dict[str, Any]:
    """``pod_json(pod_message(rec, ..., summary=True))`` (agent.workloads.podjson), the same dict
    built from the record without the message between: a List's lines (``ps --format json``)
    encode thousands of these, and the protobuf message and its copy into a dict were two thirds
    of the daemon's CPU per pod. tests/unit/workloads/test_summary_json.py holds the two equal.
    The lists of CPU ids are shared between pods (``_ids``): read them, never change them."""
    from agent.workloads.podjson import memory_json

    pod, st = rec.pod, rec.status
    statuses = {c.name: c for c in st.containers}
    containers = []
    for c in pod.spec.all_containers():
        a = pod.assignments.get(c.name)
        cs = statuses.get(c.name)
        cpu_ids: list[int] = []
        mems = affinity = None
        devices = []
        if a is not None:
            cpus, m = current_cpus(rec, c.name, placement)
            cpu_ids = _ids(cpus)
            mems = sorted(m) or None if m is not None else None
            affinity = None if a.numa_affinity is None else sorted(a.numa_affinity)
            for resource, ids in sorted(a.devices.items()):
                for i in ids:
                    nodes = numa_of_device(pod.uid, c.name, resource, i) if numa_of_device else ()
                    devices.append({"resource": resource, "id": i, "numa_nodes": _nodes(nodes)})
        else:
            affinity = []
        blocks = [memory_json(b) for b in memory_blocks_pb(memory(pod.uid, c.name))] \
            if memory is not None and not rec.released else []
        containers.append({
            "name": c.name, "kind": c.kind, "cpu_ids": cpu_ids, "mems": mems, "numa_affinity": affinity,
            "devices": devices, "memory": blocks,
            "state": cs.state.value if cs is not None else "", "reason": cs.reason if cs is not None else "",
            "restart_count": cs.restart_count if cs is not None else 0,
            "pid": (cs.pid or None) if cs is not None else None,
            "exit_code": cs.exit_code if cs is not None else None,
        })
    return {"name": pod.spec.name, "namespace": pod.spec.namespace, "uid": pod.uid, "qos": pod.qos,
            "phase": st.phase.value, "reason": st.reason, "message": st.message, "source": pod.spec.source,
            "admitted_at": pod.admitted_at, "released": rec.released, "containers": containers, "events": []}


def _guard(fn: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    @functools.wraps(fn)
    async def wrapper(self: AdmissionServicer, request: Any, context: grpc.aio.ServicerContext) -> T:
        try:
            return await fn(self, request, context)
        except AdmissionError as e:
            await context.abort(getattr(grpc.StatusCode, e.code), e.message)
        except (asyncio.CancelledError, grpc.aio.AbortError):
            raise
        except Exception as e:  # noqa: BLE001 - never UNKNOWN from our own code
            log.exception("admission api failed", method=fn.__name__)
            await context.abort(grpc.StatusCode.INTERNAL, f"{fn.__name__} failed: {type(e).__name__}: {e}")
        raise AssertionError("unreachable")  # abort() raises

    return wrapper


def _ref(ref: pb.PodRef) -> tuple[str, str]:
    if not ref.name:
        raise AdmissionError("INVALID_ARGUMENT", "pod name is required", "bad_request")
    return ref.name, ref.namespace or "default"


class AdmissionServicer(pb_grpc.AdmissionServicer):
    def __init__(
        self,
        workloads: Workloads,
        manifest_errors: Callable[[], Sequence[tuple[str, str]]] = lambda: (),
        caller_of: Callable[[Any], Caller | None] = lambda context: ROOT,
    ) -> None:
        self.w = workloads
        self.manifest_errors = manifest_errors
        #: the call's context -> who calls; the default (an in-process server) is root
        self.caller_of = caller_of

    def _caller(self, context: Any) -> Caller:
        caller = self.caller_of(context)
        if caller is None:
            raise AdmissionError("PERMISSION_DENIED", "unknown caller: connect through the admission socket",
                                 reason="user")
        return caller

    def _find(self, context: Any, ref: pb.PodRef) -> PodRecord:
        """The pod ``ref`` names, if the caller may see it; NOT_FOUND as for a missing one otherwise."""
        caller = self._caller(context)
        name, ns = _ref(ref)
        rec = self.w.find(name, ns)
        if not may_see(caller, rec.pod.spec):
            raise not_found(ns, name)
        return rec

    def _device_numa(self, uid: str, container: str, resource: str, dev_id: str) -> Sequence[int]:
        """The device's NUMA nodes as the device manager recorded them at allocation
        (known after a restart too, before the plugin has registered again); a claim's
        devices ("resourceclaim/<name>") as the DRA driver knows them."""
        if resource.startswith("resourceclaim/"):
            pc = self.w.pod_claims
            return pc.device_numa(dev_id) if pc is not None else ()
        dm = self.w.device_manager
        if dm is None:
            return ()
        for a in dm.container_allocations(uid).get(container, ()):
            if a.resource == resource:
                for i, nodes in a.devices:
                    if i == dev_id:
                        return nodes
        return ()

    def _pod(self, rec: PodRecord, summary: bool = False) -> pb.Pod:
        svc, mm = self.w.cpu_policy, self.w.memory_manager
        return pod_message(rec, self._device_numa, svc.placement if svc is not None else None, summary,
                           mm.blocks if mm is not None else None)

    def _admit_response(self, r: AdmitResult) -> pb.AdmitResponse:
        resp = pb.AdmitResponse(warnings=list(r.warnings), dry_run=r.dry_run, would_admit=r.would_admit,
                                reason=r.reason, free=r.free)
        if r.pod is not None:
            rec = self.w.registry.record(r.pod.uid)
            if rec is not None:
                resp.pod.CopyFrom(self._pod(rec))
        for d in r.decisions:
            resp.decisions.append(
                pb.ContainerDecision(
                    name=d.name, numa_nodes=_nodes(d.affinity or ()), any_node=d.affinity is None,
                    preferred=d.preferred, admit=d.admit, reason=d.reason, cpu_ids=sorted(d.cpus),
                    mems=sorted(d.mems) if d.mems is not None else [],
                    devices=[pb.Device(resource=res, id=i, numa_nodes=_nodes(nodes)) for res, i, nodes in d.devices],
                )
            )
        return resp

    @_guard
    async def Admit(self, request: pb.AdmitRequest, context: Any) -> pb.AdmitResponse:
        result = await self.w.admit_manifest(
            request.manifest, dry_run=request.dry_run, ignore_unknown=request.ignore_unknown_fields,
            caller=self._caller(context),
        )
        return self._admit_response(result)

    @_guard
    async def Remove(self, request: pb.RemoveRequest, context: Any) -> pb.RemoveResponse:
        rec = self._find(context, request.pod)
        rec = await self.w.remove(rec.pod.spec.name, rec.pod.spec.namespace)
        return pb.RemoveResponse(pod=self._pod(rec))

    @_guard
    async def Stop(self, request: pb.StopRequest, context: Any) -> pb.StopResponse:
        grace = request.grace_seconds if request.HasField("grace_seconds") else None
        if grace is not None and not 0 <= grace <= 86400:
            raise AdmissionError("INVALID_ARGUMENT", f"grace_seconds must be in 0..86400, got {grace:g}", "bad_request")
        rec = self._find(context, request.pod)
        rec = await self.w.stop(rec.pod.spec.name, rec.pod.spec.namespace, grace)
        return pb.StopResponse(pod=self._pod(rec))

    def list_page(self, request: pb.ListRequest, caller: Caller
                  ) -> tuple[list[PodRecord], Sequence[tuple[str, str]], str]:
        """List's page as records: (the pods ``caller`` may see, the manifest errors, the next token)."""
        after = token_key(request.page_token)
        reg = self.w.registry
        recs, next_token = take_page(reg.keys_after(after), lambda k: reg.by_name(*k),
                                     lambda r: may_see(caller, r.pod.spec), request.limit)
        # the static manifest files are root's (their paths and errors too); the first page has them
        errors = self.manifest_errors() if caller.root and after is None else ()
        return recs, errors, next_token

    def summary_json(self, rec: PodRecord) -> dict[str, Any]:
        """The pod in List's form as JSON (``summary_json``), with the owners' current state."""
        svc, mm = self.w.cpu_policy, self.w.memory_manager
        return summary_json(rec, self._device_numa, svc.placement if svc is not None else None,
                            mm.blocks if mm is not None else None)

    @_guard
    async def List(self, request: pb.ListRequest, context: Any) -> pb.ListResponse:
        """A page of ``limit`` pods after ``page_token`` (every pod with limit 0, as older clients
        ask), in (namespace, name) order, built from the registry's ordered keys: a page costs
        its own size (agent.workloads.paging)."""
        recs, errors, next_token = self.list_page(request, self._caller(context))
        return pb.ListResponse(
            pods=[self._pod(r, request.summary) for r in recs],
            manifest_errors=[pb.ManifestFileError(path=p, error=e) for p, e in errors],
            next_page_token=next_token,
        )

    def _described(self, rec: PodRecord) -> pb.Pod:
        """The pod in full, with its cgroups and each container's pids as the runtime reads them
        now (``describe``; kept off List, where 10,000 pods would mean 10,000 cgroup reads)."""
        msg = self._pod(rec)
        rt = self.w.runtime()
        procs = rt.processes(rec.uid) if rt is not None else None
        if procs is not None:
            msg.cgroup = procs.cgroup
            msg.cgroup_dirs.extend(procs.cgroup_dirs)
            for c in msg.containers:
                cp = procs.containers.get(c.name)
                if cp is not None:
                    c.cgroup = cp.cgroup
                    c.pids.extend(cp.pids)
        return msg

    async def _until_terminal(self, rec: PodRecord, timeout_s: float) -> PodRecord:
        """The pod's record once it is terminal or ``timeout_s`` passed, woken by the registry's
        own change events on the loop (no polling); NOT_FOUND once it was removed."""
        registry = self.w.registry
        if not rec.status.phase.terminal:
            woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()

            def listener(ev: RegistryEvent) -> None:
                if ev.record.uid == rec.uid and (ev.type == DELETED or ev.record.status.phase.terminal) \
                        and not woken.done():
                    woken.set_result(None)

            registry.listeners.append(listener)
            try:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(woken, timeout_s)
            finally:
                registry.listeners.remove(listener)
        latest = registry.record(rec.uid)
        if latest is None:
            raise not_found(rec.pod.spec.namespace, rec.pod.spec.name)
        return latest

    @_guard
    async def Get(self, request: pb.GetRequest, context: Any) -> pb.GetResponse:
        rec = self._find(context, request.pod)
        if request.HasField("wait_terminal_seconds"):
            wait = request.wait_terminal_seconds
            if not 0 <= wait <= MAX_WAIT_S:
                raise AdmissionError("INVALID_ARGUMENT", f"wait_terminal_seconds must be in 0..{MAX_WAIT_S:g}, "
                                     f"got {wait:g}", "bad_request")
            rec = await self._until_terminal(rec, wait)
        return pb.GetResponse(pod=self._pod(rec, summary=True) if request.summary else self._described(rec))

    @_guard
    async def Signal(self, request: pb.SignalRequest, context: Any) -> pb.SignalResponse:
        rec = self._find(context, request.pod)
        try:
            sig = parse_signal(request.signal)
        except ValueError as e:
            raise AdmissionError("INVALID_ARGUMENT", str(e), "bad_request") from None
        sent = self.w.signal(rec, sig, request.container)
        return pb.SignalResponse(pod=self._pod(self.w.registry.record(rec.uid) or rec), signal=signal_name(sig),
                                 containers=[pb.SignalledContainer(name=n, pids=list(p)) for n, p in sent.items()])

    async def Watch(self, request: pb.WatchRequest, context: Any):
        try:
            caller = self._caller(context)
        except AdmissionError as e:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, e.message)
        queue: asyncio.Queue[RegistryEvent | None] = asyncio.Queue(WATCH_QUEUE)
        overflow = False

        def listener(ev: RegistryEvent) -> None:
            nonlocal overflow
            if not may_see(caller, ev.record.pod.spec):
                return
            try:
                queue.put_nowait(ev)
            except asyncio.QueueFull:
                overflow = True

        registry = self.w.registry
        registry.listeners.append(listener)
        try:
            if request.initial:
                for rec in registry.records():
                    if not may_see(caller, rec.pod.spec):
                        continue
                    yield pb.WatchEvent(type=ADDED, pod=self._pod(rec, request.summary), time=rec.pod.admitted_at)
            while True:
                ev = await queue.get()
                if overflow:
                    await context.abort(grpc.StatusCode.ABORTED, "watch fell behind; list again and re-watch")
                assert ev is not None
                yield pb.WatchEvent(type=ev.type, pod=self._pod(ev.record, request.summary), time=ev.at)
        finally:
            registry.listeners.remove(listener)
