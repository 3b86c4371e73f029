"""A stand-in kubelet (and Katalyst plugin watcher) of the tests' own, over real unix sockets.

Serves pod-resources v1 on ``<root>/pod-resources/kubelet.sock`` and plays the
plugin watcher on a registration directory: finds sockets there, asks
``GetInfo`` and answers ``NotifyRegistrationStatus``. Messages come from
upstream_wire (the upstream fingerprint table), never from hwagent's protos.
``restart()`` stops the server and binds a new socket at the same path, as a
kubelet restart does.
"""

from __future__ import annotations

import os
import stat
import threading
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from .upstream_wire import Wire

WIRE = Wire()


@dataclass
class FakeContainer:
    name: str
    devices: dict[str, list[str]] = field(default_factory=dict)
    cpu_ids: list[int] = field(default_factory=list)


@dataclass
class FakePod:
    namespace: str
    name: str
    containers: list[FakeContainer]


class FakeKubelet:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.socket = self.root / "pod-resources" / "kubelet.sock"
        self.pods: list[FakePod] = []
        self.allocatable: dict[str, list[str]] = {}
        self.get_enabled = False
        self.calls: list[str] = []
        self._lock = threading.Lock()
        self._server: grpc.Server | None = None

    # -- pod-resources v1 ------------------------------------------------------------
    def _pod_msg(self, p: FakePod):
        msg = WIRE["v1.PodResources"](name=p.name, namespace=p.namespace)
        for c in p.containers:
            cm = msg.containers.add(name=c.name, cpu_ids=c.cpu_ids)
            for resource, ids in c.devices.items():
                cm.devices.add(resource_name=resource, device_ids=ids)
        return msg

    def _list(self, request, context):
        with self._lock:
            self.calls.append("List")
            return WIRE["v1.ListPodResourcesResponse"](pod_resources=[self._pod_msg(p) for p in self.pods])

    def _allocatable(self, request, context):
        with self._lock:
            self.calls.append("GetAllocatableResources")
            resp = WIRE["v1.AllocatableResourcesResponse"]()
            for resource, ids in self.allocatable.items():
                resp.devices.add(resource_name=resource, device_ids=ids)
            return resp

    def _get(self, request, context):
        with self._lock:
            self.calls.append("Get")
            if not self.get_enabled:
                context.abort(grpc.StatusCode.UNIMPLEMENTED, "KubeletPodResourcesGet is disabled")
            for p in self.pods:
                if (p.namespace, p.name) == (request.pod_namespace, request.pod_name):
                    return WIRE["v1.GetPodResourcesResponse"](pod_resources=self._pod_msg(p))
            context.abort(grpc.StatusCode.NOT_FOUND, "no such pod")

    def start(self) -> None:
        self.socket.parent.mkdir(parents=True, exist_ok=True)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        server.add_generic_rpc_handlers(WIRE.server_handlers({
            "/v1.PodResourcesLister/List": self._list,
            "/v1.PodResourcesLister/GetAllocatableResources": self._allocatable,
            "/v1.PodResourcesLister/Get": self._get,
        }))
        server.add_insecure_port(f"unix:{self.socket}")
        server.start()
        self._server = server

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(grace=0).wait()
            self._server = None
        try:
            self.socket.unlink()
        except FileNotFoundError:
            pass

    def restart(self) -> int:
        """Stop, remove the socket, serve again on a new one; returns the new socket's inode."""
        self.stop()
        self.start()
        return os.stat(self.socket).st_ino


class FakePluginWatcher:
    """Katalyst's plugin watcher, reduced to what the handshake needs."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.registered: dict[str, object] = {}  # socket path -> PluginInfo

    def scan(self, notify_ok: bool = True) -> dict[str, object]:
        for p in sorted(self.directory.iterdir()):
            if p.name.startswith(".") or not stat.S_ISSOCK(p.lstat().st_mode) or str(p) in self.registered:
                continue
            with grpc.insecure_channel(f"unix://{p}") as ch:
                info = WIRE.unary(ch, "/pluginregistration.Registration/GetInfo")(
                    WIRE["pluginregistration.InfoRequest"](), timeout=10)
                WIRE.unary(ch, "/pluginregistration.Registration/NotifyRegistrationStatus")(
                    WIRE["pluginregistration.RegistrationStatus"](plugin_registered=notify_ok), timeout=10)
            self.registered[str(p)] = info
        return self.registered


class KatalystClient:
    """The eviction manager's side of evictionplugin.v1alpha1, on upstream's wire."""

    def __init__(self, endpoint: str) -> None:
        self.channel = grpc.insecure_channel(f"unix://{endpoint}")

    def call(self, method: str, request):
        return WIRE.unary(self.channel, f"/evictionplugin.v1alpha1.EvictionPlugin/{method}")(request, timeout=10)

    @staticmethod
    def pod(namespace: str, name: str, uid: str):
        p = WIRE["k8s.io.api.core.v1.Pod"]()
        p.metadata.namespace, p.metadata.name, p.metadata.uid = namespace, name, uid
        p.status.phase = "Running"
        return p

    def threshold_met(self, active):
        return self.call("ThresholdMet", WIRE["evictionplugin.v1alpha1.GetThresholdMetRequest"](active_pods=active))

    def top_eviction_pods(self, active, top_n: int = 1, scope: str = ""):
        return self.call("GetTopEvictionPods", WIRE["evictionplugin.v1alpha1.GetTopEvictionPodsRequest"](
            active_pods=active, topN=top_n, eviction_scope=scope))

    def close(self) -> None:
        self.channel.close()
