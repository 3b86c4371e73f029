"""A thin adapter over the official ``kubernetes`` client (the optional ``kube``
dependency group): the few ``resource.k8s.io/v1`` calls the DRA driver makes.

Imported only when ``[dra] kubeconfig`` is set, and then from a worker thread:
the client costs ~0.3 s of CPU and ~35 MB to import, which neither the CLI nor a
daemon without an API server should pay. Objects go in and come out as plain
dicts (``_preload_content=False``, the JSON read here), so the parsers that read
claim files read API objects too and no field is lost to the client's models.
Every failure is a ``KubeError`` whose message says what to do.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["IN_CLUSTER", "KubeError", "KubeApi", "connect"]

#: ``[dra] kubeconfig`` value that means the pod's service account
IN_CLUSTER = "in-cluster"
#: (connect, read) seconds for one request: a hung API server must not hold a prepare for long
DEFAULT_TIMEOUT_S = 5.0


class KubeError(Exception):
    """An API call that failed: ``status`` is the HTTP status, None when the server was not reached."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def _reason(body: str | bytes | None) -> str:
    try:
        doc = json.loads(body or b"")
        return str(doc.get("message") or doc.get("reason") or "")
    except (ValueError, AttributeError):
        return ""


class KubeApi:
    """``ResourceV1Api`` calls with dicts in and out; ``KubeError`` on every failure."""

    def __init__(self, api: Any, where: str, timeout_s: float, core: Any = None) -> None:
        self._api = api
        self._core = core
        self.where = where
        self._timeout = (timeout_s, timeout_s)

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        from kubernetes.client.exceptions import ApiException

        try:
            resp = fn(*args, _preload_content=False, _request_timeout=self._timeout, **kwargs)
            return json.loads(resp.data or b"{}")
        except ApiException as e:
            detail = _reason(e.body) or str(e.reason or "")
            raise KubeError(f"{what}: the API server at {self.where} answered {e.status}: {detail}",
                            status=e.status) from None
        except ValueError as e:
            raise KubeError(f"{what}: the API server at {self.where} sent no JSON ({e})") from None
        except Exception as e:  # noqa: BLE001 - urllib3's connection, TLS and timeout errors alike
            raise KubeError(f"{what}: the API server at {self.where} is unreachable "
                            f"({type(e).__name__}: {e}); retry") from None

    def read_claim(self, namespace: str, name: str) -> dict[str, Any]:
        return dict(self._call(f"GET ResourceClaim {namespace}/{name}", self._api.read_namespaced_resource_claim,
                               name, namespace))

    def node_uid(self, node: str) -> str:
        """The Node object's uid (the slices' owner)."""
        doc = self._call(f"GET Node {node}", self._core.read_node, node)
        return str(dict(doc.get("metadata") or {}).get("uid") or "")

    def list_slices(self, node: str, driver: str) -> list[dict[str, Any]]:
        """This node's slices of this driver (field selector, as upstream's controller lists)."""
        doc = self._call("LIST ResourceSlices", self._api.list_resource_slice,
                         field_selector=f"spec.nodeName={node},spec.driver={driver}")
        return [dict(i) for i in doc.get("items") or ()]

    def create_slice(self, doc: dict[str, Any]) -> dict[str, Any]:
        return dict(self._call(f"CREATE ResourceSlice {doc['metadata']['name']}", self._api.create_resource_slice,
                               doc))

    def replace_slice(self, doc: dict[str, Any]) -> dict[str, Any]:
        name = doc["metadata"]["name"]
        return dict(self._call(f"UPDATE ResourceSlice {name}", self._api.replace_resource_slice, name, doc))

    def delete_slice(self, name: str, uid: str = "") -> None:
        """Delete, only the object of ``uid`` when given; one already gone is done."""
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}} if uid else None
        try:
            self._call(f"DELETE ResourceSlice {name}", self._api.delete_resource_slice, name, body=body)
        except KubeError as e:
            if e.status != 404:
                raise


def connect(kubeconfig: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> KubeApi:
    """A client from a kubeconfig file or, for ``in-cluster``, the pod's service account.

    No request is made: a server that is down fails the first call, not this one.
    """
    try:
        from kubernetes import config as kconfig
        from kubernetes.client import ApiClient, Configuration
        from kubernetes.client.api.core_v1_api import CoreV1Api
        from kubernetes.client.api.resource_v1_api import ResourceV1Api
    except ImportError as e:
        raise KubeError(f"[dra] kubeconfig is set but the kubernetes client is not installed ({e}): "
                        "pip install 'hwagent[kube]'") from None
    cfg = Configuration()
    try:
        if kubeconfig == IN_CLUSTER:
            kconfig.load_incluster_config(client_configuration=cfg)
        else:
            kconfig.load_kube_config(config_file=kubeconfig, client_configuration=cfg, persist_config=False)
    except Exception as e:  # noqa: BLE001 - the loader's ConfigException, OSError, YAML errors alike
        raise KubeError(f"[dra] kubeconfig {kubeconfig}: cannot load it ({e}); fix the file "
                        "(or for in-cluster, mount the service account token)") from None
    cfg.retries = 0  # one try per call: the driver answers the kubelet (who retries) and republishes itself
    client = ApiClient(cfg)
    return KubeApi(ResourceV1Api(client), cfg.host, timeout_s, core=CoreV1Api(client))
