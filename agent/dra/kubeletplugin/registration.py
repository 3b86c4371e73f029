"""The kubelet plugin watcher's handshake for a DRA driver (pluginregistration v1).

The kubelet watches ``<kubelet_root>/plugins_registry/``; for each socket it
calls ``GetInfo`` and hands the answer to the handler registered for its
type (``DRAPlugin``): the name is the driver name, the endpoint the socket the
DRA services listen on, and the "supported versions" list the gRPC services
offered as ``<proto package's last part>.<service>`` (``v1.DRAPlugin``,
``v1beta1.DRAPlugin``, ``v1alpha1.DRAResourceHealth``): a 1.32 kubelet picks
``v1beta1.DRAPlugin``, 1.34 ``v1.DRAPlugin``. It then reports the outcome
with ``NotifyRegistrationStatus``, which we log and keep for status.
"""

from __future__ import annotations

import time

from agent.api.pluginregistration.v1 import api_pb2 as reg_pb
from agent.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from agent.eventlog import get_logger
from agent.limits import shown

__all__ = ["PLUGIN_TYPE", "SERVICES", "DRARegistrationServicer"]

log = get_logger("hwagent.dra")

PLUGIN_TYPE = "DRAPlugin"
#: every service the DRA socket serves, newest DRAPlugin first, as the kubelet matches them
SERVICES: tuple[str, ...] = ("v1.DRAPlugin", "v1beta1.DRAPlugin", "v1alpha1.DRAResourceHealth",
                             "v1.DRAResourceHealth")


class DRARegistrationServicer(reg_grpc.RegistrationServicer):
    """GetInfo and NotifyRegistrationStatus; ``registered``/``error`` say what the kubelet last told us."""

    def __init__(self, driver: str, endpoint: str, services: tuple[str, ...] = SERVICES) -> None:
        self.driver = driver
        self.endpoint = endpoint
        self.services = services
        #: None until the kubelet reports; then its verdict
        self.registered: bool | None = None
        self.error = ""
        self.reported_at: float | None = None

    async def GetInfo(self, request, context):
        return reg_pb.PluginInfo(type=PLUGIN_TYPE, name=self.driver, endpoint=self.endpoint,
                                 supported_versions=list(self.services))

    async def NotifyRegistrationStatus(self, request, context):
        self.registered = request.plugin_registered
        self.error = request.error
        self.reported_at = time.time()
        if request.plugin_registered:
            log.info("dra driver registered with the kubelet", driver=self.driver, endpoint=self.endpoint)
        else:
            log.error("dra driver registration refused by the kubelet", driver=self.driver,
                      error=shown(request.error, 512))
        return reg_pb.RegistrationStatusResponse()
