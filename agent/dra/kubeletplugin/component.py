"""The kubelet-side DRA driver component: the registration socket and the DRA socket.

Kubelet mode only, and only with ``[dra] enabled``. It serves

- ``<kubelet_root>/plugins/<driver>/dra.sock``: ``DRAPlugin`` v1 and v1beta1
  (over the driver's ``ClaimPreparer``, ``DRA_DRIVER``, held deferred: the
  driver may start after this component) and ``DRAResourceHealth`` v1alpha1
  and v1 (over ``DEVICE_PLUGINS``, started before);
- ``<kubelet_root>/plugins_registry/<driver>-reg.sock``: the plugin watcher's
  ``GetInfo``/``NotifyRegistrationStatus``. The registration socket is bound
  last, so the kubelet never dials a DRA socket that is not there yet, and
  removed first at stop, so the kubelet deregisters the driver before its
  services go away.

Both servers run on the daemon's loop. Publishes ``DRA_KUBELET_PLUGIN`` (its
state: sockets, the kubelet's registration verdict) for status. The node name (pool names, health) is
``$NODE_NAME`` as a DaemonSet's downward API sets it, else the host name, as
the kubelet's default.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.contracts import DEVICE_PLUGINS, DRA_DRIVER, ClaimPreparer, DaemonContext, Deferred
from agent.contracts.drakubelet import DRA_KUBELET_PLUGIN
from agent.daemonconfig import DAEMON_SECTION
from agent.eventlog import get_logger
from agent.rootpaths import kubelet_plugins_registry

__all__ = ["DRAKubeletPlugin", "factory", "dra_socket", "registration_socket"]

log = get_logger("hwagent.dra")

#: how often health streams compare the plugins' device health
HEALTH_INTERVAL_S = 1.0


def dra_socket(kubelet_root: str | Path, driver: str) -> Path:
    return Path(kubelet_root) / "plugins" / driver / "dra.sock"


def registration_socket(kubelet_root: str | Path, driver: str) -> Path:
    return kubelet_plugins_registry(kubelet_root) / f"{driver}-reg.sock"


class DRAKubeletPlugin:
    name = "dra-kubeletplugin"

    def __init__(self, driver: str, kubelet_root: str | Path, node: str,
                 health_interval_s: float = HEALTH_INTERVAL_S) -> None:
        self.driver = driver
        self.dra_socket = dra_socket(kubelet_root, driver)
        self.registration_socket = registration_socket(kubelet_root, driver)
        self.node = node
        self.health_interval_s = health_interval_s
        self.registration: Any = None
        self.services: dict[str, Any] = {}
        self.health: dict[str, Any] = {}
        self._servers: list[Any] = []

    async def start(self, ctx: DaemonContext) -> None:
        from agent.dra.kubeletplugin.health import add_health_services
        from agent.dra.kubeletplugin.registration import DRARegistrationServicer
        from agent.dra.kubeletplugin.service import add_dra_services
        from agent.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc
        from agent.grpcguard import new_server
        from agent.unixsock import serve_unix

        plugins = ctx.lookup(DEVICE_PLUGINS)
        ctx.publish(DRA_KUBELET_PLUGIN, self)
        dra = new_server("dra")
        driver: Deferred[ClaimPreparer] = ctx.deferred(DRA_DRIVER)
        self.services = add_dra_services(dra, driver)
        self.health = add_health_services(dra, (lambda: plugins.dra_states()) if plugins else (lambda: ()),
                                          self.node, self.health_interval_s)
        await serve_unix(dra, ctx.remove_on_exit(self.dra_socket))
        self._servers.append(dra)
        reg = new_server("pluginregistration")
        self.registration = DRARegistrationServicer(self.driver, str(self.dra_socket))
        reg_grpc.add_RegistrationServicer_to_server(self.registration, reg)
        await serve_unix(reg, ctx.remove_on_exit(self.registration_socket))
        self._servers.append(reg)
        log.info("dra kubelet plugin serving", driver=self.driver, endpoint=self.dra_socket,
                 registration=self.registration_socket, node=self.node)

    async def stop(self) -> None:
        for path, server in zip((self.registration_socket, self.dra_socket), reversed(self._servers), strict=False):
            _unlink(path)
            await server.stop(grace=0.5)
        self._servers.clear()

    def healthy(self) -> bool:
        return len(self._servers) == 2

    def state(self) -> dict[str, Any]:
        """What status shows: where it serves and what the kubelet said of the registration."""
        reg = self.registration
        return {
            "driver": self.driver, "endpoint": str(self.dra_socket), "registration": str(self.registration_socket),
            "registered": None if reg is None else reg.registered, "error": "" if reg is None else reg.error,
            "prepare_calls": sum(s.calls["prepare"] for s in self.services.values()),
            "health_streams": sum(h.streams for h in self.health.values()),
        }


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def factory(ctx: DaemonContext) -> DRAKubeletPlugin | None:
    from agent.dra.config import DRA_SECTION, DraConfig
    from agent.dra.slices import local_node_name

    if ctx.mode != "kubelet":
        return None
    try:
        cfg = ctx.config[DRA_SECTION]
    except KeyError:  # a Config built without the [dra] section: its defaults
        cfg = DraConfig()
    if not cfg.enabled:
        return None
    return DRAKubeletPlugin(cfg.driver_name, ctx.config[DAEMON_SECTION].kubelet_root_dir, local_node_name())
