"""A small CRI v1 client for the NRI tests: run a host-network pod and a container, then tear them down.

Debian ships no crictl; these few calls over containerd's CRI socket (gRPC,
``agent.api.cri.v1``) are what the kubelet would make for a pod. Pods use the
node's network namespace, so no CNI plugin is needed, and every cgroup lands
under ``cgroup_parent``, a test-owned subtree the caller removes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import grpc

from agent.api.cri.v1 import api_pb2 as cri
from agent.api.cri.v1 import api_pb2_grpc as cri_grpc

__all__ = ["CriClient", "Pod"]


@dataclass(frozen=True)
class Pod:
    id: str
    config: cri.PodSandboxConfig


class CriClient:
    def __init__(self, socket: Path, timeout: float = 30.0) -> None:
        self._channel = grpc.insecure_channel(f"unix:{socket}")
        self._rt = cri_grpc.RuntimeServiceStub(self._channel)
        self.timeout = timeout

    def close(self) -> None:
        self._channel.close()

    def version(self) -> cri.VersionResponse:
        return self._rt.Version(cri.VersionRequest(), timeout=self.timeout)

    def run_pod(self, name: str, namespace: str, uid: str, *, cgroup_parent: str, log_dir: Path,
                annotations: dict[str, str] | None = None) -> Pod:
        config = cri.PodSandboxConfig(
            metadata=cri.PodSandboxMetadata(name=name, namespace=namespace, uid=uid, attempt=0),
            log_directory=str(log_dir), annotations=annotations or {},  # no hostname: the node's UTS namespace
            linux=cri.LinuxPodSandboxConfig(
                cgroup_parent=cgroup_parent,
                security_context=cri.LinuxSandboxSecurityContext(
                    namespace_options=cri.NamespaceOption(network=cri.NODE, pid=cri.POD, ipc=cri.POD))),
        )
        resp = self._rt.RunPodSandbox(cri.RunPodSandboxRequest(config=config), timeout=self.timeout)
        return Pod(resp.pod_sandbox_id, config)

    def create_container(self, pod: Pod, name: str, image: str, *,
                         cpu_shares: int = 0, memory_limit: int = 0) -> str:
        config = cri.ContainerConfig(
            metadata=cri.ContainerMetadata(name=name, attempt=0),
            image=cri.ImageSpec(image=image), log_path=f"{name}.log",
            linux=cri.LinuxContainerConfig(resources=cri.LinuxContainerResources(
                cpu_shares=cpu_shares, memory_limit_in_bytes=memory_limit)),
        )
        resp = self._rt.CreateContainer(cri.CreateContainerRequest(
            pod_sandbox_id=pod.id, config=config, sandbox_config=pod.config), timeout=self.timeout)
        return resp.container_id

    def start_container(self, container_id: str) -> None:
        self._rt.StartContainer(cri.StartContainerRequest(container_id=container_id), timeout=self.timeout)

    def container_pid(self, container_id: str) -> int:
        resp = self._rt.ContainerStatus(cri.ContainerStatusRequest(container_id=container_id, verbose=True),
                                        timeout=self.timeout)
        return int(json.loads(resp.info["info"])["pid"])

    def remove_pod(self, pod_id: str) -> None:
        """Stop and remove the pod with its containers (CRI removes a pod's containers with it)."""
        self._rt.StopPodSandbox(cri.StopPodSandboxRequest(pod_sandbox_id=pod_id), timeout=self.timeout)
        self._rt.RemovePodSandbox(cri.RemovePodSandboxRequest(pod_sandbox_id=pod_id), timeout=self.timeout)

    def pod_ids(self) -> list[str]:
        return [p.id for p in self._rt.ListPodSandbox(cri.ListPodSandboxRequest(), timeout=self.timeout).items]
