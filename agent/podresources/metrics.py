"""Prometheus metrics of the pod-resources v1 server.

The kubelet counts each method in its own family
(``kubelet_pod_resources_endpoint_requests_{list,get_allocatable,get}`` and
``..._errors_*``); we fold them into one ``method`` label after our
``hwagent_`` prefix, keeping its ``server_api_version`` label, so a dashboard
ports by swapping the prefix and selecting on ``method``.
"""

from __future__ import annotations

from prometheus_client import Counter

POD_RESOURCES_REQUESTS = Counter(
    "hwagent_pod_resources_endpoint_requests",
    "Pod-resources API requests, per method.",
    ["server_api_version", "method"],
)
POD_RESOURCES_ERRORS = Counter(
    "hwagent_pod_resources_endpoint_errors",
    "Pod-resources API requests that failed, per method.",
    ["server_api_version", "method"],
)
