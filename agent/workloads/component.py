"""Standalone admission as a daemon component.

Start order matters: the registry is restored from disk first, then published
as ``WORKLOADS`` and as the ``ACTIVE_PODS`` source. Until that moment nothing
is released by the device manager's or the CPU policy's clean-ups (their
deferred reference to the source answers None), and from that moment the
source lists every pod that was admitted before the restart, so a restart
never releases a live pod. Then terminal pods whose release was interrupted are released, the
admission API is served on ``<root>/admission.sock`` and the static manifest
directory is watched. The socket is root's and ``[workloads] socket_group``'s
(0660; 0600 when that group does not exist): a ``PeerFront`` accepts on it,
learns each caller from the kernel and forwards to the gRPC server on
``<root>/workloads/api.sock`` (root-only), so the servicer knows who calls
(``agent.workloads.users``). The same API is served to the CLI as HTTP/JSON on
``<root>/cli.sock`` (``agent.workloads.cliapi``), with the same mode and group.
Pods that asked for it (``launch --rm`` without ``--wait``) are removed once they end,
and ended pods past the retention rule (``[workloads] ended_pods_*``) oldest first
(``agent.workloads.autoremove``); a removal takes the pod's log directory with it, and
log directories no record names are removed at start.

Publishes ``WORKLOADS`` (``WorkloadRegistry``) and ``ACTIVE_PODS``. Looks up
``CPU_POLICY``, ``DEVICE_MANAGER`` and ``MEMORY_MANAGER`` at start (all started before it, see
``COMPONENTS``); the runtime, started after it, is a deferred ``RUNTIME``
asked at each admission; the pod directory a later front publishes (Slurm's jobs) is a
deferred ``POD_DIRECTORY`` the CLI API shows (``GET /v1/directory``).
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

from agent.topologymanager.config import TOPOLOGY_MANAGER_SECTION
from agent.contracts import DaemonContext
from agent.contracts import ACTIVE_PODS, CPU_POLICY, DEVICE_MANAGER, MEMORY_MANAGER, POD_DIRECTORY, RUNTIME, WORKLOADS
from agent.contracts.nri import NRI_PODS
from agent.pods import JoinedActivePods
from agent.contracts.dra import DRA_POD_CLAIMS
from agent.eventlog import get_logger
from agent.rootpaths import ADMISSION_SOCKET as SOCKET_NAME
from agent.workloads.config import WORKLOADS_SECTION, WorkloadsConfig

__all__ = ["WorkloadsComponent", "factory", "socket_path_for", "manifest_dir_for", "STATE_DIR"]

log = get_logger("hwagent.workloads")

#: under the root dir: one file per admitted pod
STATE_DIR = ("workloads", "pods")
#: under the root dir: the gRPC server behind the admission socket's front (root-only directory)
INNER_SOCKET = ("workloads", "api.sock")


def socket_gid(group: str) -> int | None:
    """The gid of ``[workloads] socket_group``; None (root only) when unset or unknown."""
    import grp

    if not group:
        return None
    try:
        return grp.getgrnam(group).gr_gid
    except KeyError:
        log.info("admission socket root only", group=group, note="no such group (hwagent install-unit creates it)")
        return None


def socket_path_for(cfg: WorkloadsConfig, root_dir: Path) -> Path:
    return Path(cfg.socket_path) if cfg.socket_path else Path(root_dir) / SOCKET_NAME


def manifest_dir_for(cfg: WorkloadsConfig, root_dir: Path) -> Path:
    return Path(cfg.manifest_dir) if cfg.manifest_dir else Path(root_dir) / "manifests"


def _remove_orphan_logs(root_dir: Path, records: list[Any]) -> None:
    """Log directories no record names: left by a removal a crash interrupted, or by an
    older hwagent, whose ``rm`` kept them (blocking: in an executor)."""
    from agent.runtime.logdir import LogDirs, log_dir_name

    keep = {log_dir_name(r.pod.spec.namespace, r.pod.spec.name) for r in records}
    try:
        gone = LogDirs(root_dir).remove_orphans(keep)
    except OSError as e:
        log.warning("orphan log directories not removed", error=str(e))
        return
    if gone:
        log.info("orphan log directories removed", count=len(gone))


class WorkloadsComponent:
    name = "workloads"

    def __init__(self, cfg: WorkloadsConfig) -> None:
        self.cfg = cfg
        self.workloads: Any = None
        self.manifests: Any = None
        self.socket_path: Path | None = None
        self._server: Any = None
        self._front: Any = None
        self._cli: Any = None
        self._autoremove: Any = None
        self._ctx: DaemonContext | None = None

    async def start(self, ctx: DaemonContext) -> None:
        from agent.api.admission.v1 import api_pb2_grpc as pb_grpc
        from agent.grpcguard import new_server
        from agent.topologymanager import TopologyManager
        from agent.unixsock import serve_unix
        from agent.rootpaths import cli_socket
        from agent.workloads.admission import Workloads
        from agent.workloads.cliapi import CliApi
        from agent.limits import MAX_MANIFEST_BYTES
        from agent.workloads.manifestdir import ManifestDir
        from agent.workloads.registry import Registry
        from agent.safepath import ensure_dir
        from agent.workloads.peerfront import PeerFront
        from agent.workloads.server import AdmissionServicer
        from agent.workloads.store import PodFileStore, RegistryStateError
        from agent.workloads.quota import UserLimits
        from agent.runtime.logdir import LogDirs

        self._ctx = ctx
        store = PodFileStore(ctx.root_dir.joinpath(*STATE_DIR), root_dir=ctx.root_dir)
        loop = asyncio.get_running_loop()
        try:
            records = await loop.run_in_executor(None, store.load, self.cfg.accept_state_loss)
        except RegistryStateError as e:
            raise RuntimeError(str(e)) from None
        registry = Registry(store)
        registry.restore(records)
        topo = ctx.topology
        try:
            tm = TopologyManager.for_topology(ctx.config[TOPOLOGY_MANAGER_SECTION], topo)
        except ValueError as e:
            raise RuntimeError(f"topology manager: {e}") from None
        memory = sum(n.memory_bytes or 0 for n in topo.numa_nodes) or None
        self.workloads = Workloads(
            registry, tm, topo.numa_ids, cpu_policy=ctx.lookup(CPU_POLICY), device_manager=ctx.lookup(DEVICE_MANAGER),
            memory_manager=ctx.lookup(MEMORY_MANAGER), pod_claims=ctx.lookup(DRA_POD_CLAIMS), runtime_ref=ctx.deferred(RUNTIME), machine_memory_bytes=memory,
            limits=UserLimits(self.cfg.max_pods_per_user, self.cfg.max_log_bytes_per_user),
            logs=LogDirs(ctx.root_dir),
        )
        ctx.publish(WORKLOADS, self.workloads)
        # the NRI front's pods too (agent.nri.component publishes them after this one starts)
        ctx.publish(ACTIVE_PODS, JoinedActivePods(self.workloads, ctx.deferred(NRI_PODS)))
        await self.workloads.reconcile_after_restore()
        await loop.run_in_executor(None, _remove_orphan_logs, ctx.root_dir, registry.records())
        from agent.workloads.autoremove import AutoRemover
        from agent.workloads.retention import RetentionRule

        # pods launched with --rm (no --wait) are removed when they end, those that ended while down now,
        # and ended pods past the retention rule
        c = self.cfg
        self._autoremove = AutoRemover(self.workloads, RetentionRule(
            c.ended_pods_per_user, c.ended_pods_total, c.ended_pods_max_age_s, c.ended_pods_log_bytes))
        self._autoremove.start()

        self.manifests = ManifestDir(
            manifest_dir_for(self.cfg, ctx.root_dir), self.workloads,
            poll_seconds=self.cfg.manifest_poll_seconds, ignore_unknown=self.cfg.manifest_ignore_unknown_fields,
            root_dir=ctx.root_dir,
        )
        self.socket_path = socket_path_for(self.cfg, ctx.root_dir)
        gid = socket_gid(self.cfg.socket_group)
        inner = ensure_dir(ctx.root_dir, INNER_SOCKET[:-1], mode=0o700) / INNER_SOCKET[-1]
        limiter = self._limiter()
        idle_s = self.cfg.connection_idle_seconds
        front = PeerFront(self.socket_path, inner, mode=0o600 if gid is None else 0o660, gid=gid, limiter=limiter,
                          idle_s=idle_s)
        # a channel with no call in progress is closed after the idle time too (the front closes
        # one that never spoke); the client's channel reconnects at its next call
        self._server = new_server("admission", options=(("grpc.max_connection_idle_ms", int(idle_s * 1000)),))
        servicer = AdmissionServicer(self.workloads, self.manifests.errors,
                                     caller_of=lambda context: front.caller(context.peer()))
        pb_grpc.add_AdmissionServicer_to_server(servicer, self._server)
        # the manifest directory exists before the socket does: a script that waits for
        # the socket may drop a manifest in at once
        await self.manifests.start()
        await serve_unix(self._server, inner)
        ctx.remove_on_exit(inner)
        # the CLI's socket before the admission socket: one that waits for admission.sock may run `hwagent ps`
        cli = CliApi(cli_socket(ctx.root_dir), self.workloads, self.manifests.errors, max_body=MAX_MANIFEST_BYTES,
                     mode=front.mode, gid=gid, limiter=limiter, idle_s=idle_s,
                     directory=ctx.deferred(POD_DIRECTORY))
        await cli.start()
        self._cli = cli
        ctx.remove_on_exit(cli.path)
        await front.start()
        self._front = front
        ctx.remove_on_exit(self.socket_path)
        log.info(
            "workloads started", socket=self.socket_path, manifests=self.manifests.dir, pods=len(registry),
            policy=tm.policy, scope=tm.scope,
        )

    def _limiter(self) -> Any:
        """One count of users' connections for both sockets users reach (agent.workloads.connlimit),
        sized from the descriptor limit the daemon runs with."""
        import resource

        from agent.workloads.connlimit import ConnectionLimiter, ConnectionPolicy, user_descriptor_budget

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        budget = user_descriptor_budget(soft, self.cfg.reserved_descriptors)
        policy = ConnectionPolicy(self.cfg.max_connections_per_user, budget)
        if budget < policy.per_user:
            log.warning("users get few connections", descriptor_limit=soft, reserved=self.cfg.reserved_descriptors,
                        user_descriptors=budget, note="raise LimitNOFILE or lower [workloads] reserved_descriptors")
        log.info("connection limits", per_user=policy.per_user, user_descriptors=budget, descriptor_limit=soft,
                 idle_seconds=self.cfg.connection_idle_seconds)
        return ConnectionLimiter(policy)

    async def stop(self) -> None:
        if self._autoremove is not None:
            await self._autoremove.stop()
            self._autoremove = None
        if self.manifests is not None:
            await self.manifests.stop()
        if self._cli is not None:
            await self._cli.close()
            self._cli = None
        if self._front is not None:
            await self._front.close()
            self._front = None
        if self._server is not None:
            await self._server.stop(0.5)
            self._server = None
        if self.socket_path is not None:
            with contextlib.suppress(FileNotFoundError):
                self.socket_path.unlink()
        if self.workloads is not None:
            await self.workloads.drain()
        if self._ctx is not None:
            # the registry stays on disk; with it withdrawn the clean-ups go inert again
            self._ctx.withdraw(ACTIVE_PODS)
            self._ctx.withdraw(WORKLOADS)

    def healthy(self) -> bool:
        return bool(
            self._server is not None and self._front is not None and self._front.serving
            and self._cli is not None and self._cli.serving
            and self.manifests is not None and self.manifests.running
        )


def factory(ctx: DaemonContext) -> WorkloadsComponent | None:
    cfg: WorkloadsConfig = ctx.config[WORKLOADS_SECTION]
    if not cfg.enabled:
        log.info("workloads disabled", reason="config")
        return None
    if ctx.mode != "standalone":
        log.info("workloads disabled", reason="mode", mode=ctx.mode, note="the kubelet admits pods")
        return None
    return WorkloadsComponent(cfg)
