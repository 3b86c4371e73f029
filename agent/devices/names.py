"""The kubelet's extended-resource-name rule, so a bad name fails at config
load instead of at registration time (where the kubelet would reject it with
"the ResourceName ... is invalid" and the resource would silently never appear).

Rule (k8s pkg/apis/core/v1/helper IsExtendedResourceName): the name has a
domain prefix, is not in the ``kubernetes.io/`` namespace, does not start with
``requests.``, and ``"requests." + name`` is a qualified name.
"""

from __future__ import annotations

import re

__all__ = ["extended_resource_name_error", "is_extended_resource_name"]

_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = re.compile(rf"^{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def _qualified_name_error(value: str) -> str | None:
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            return "prefix part must be non-empty"
        if len(prefix) > 253:
            return "prefix part must be no more than 253 characters"
        if not _DNS1123_SUBDOMAIN.match(prefix):
            return "prefix part must be a lower-case DNS subdomain"
    else:
        return "a qualified name has at most one '/'"
    if not name:
        return "name part must be non-empty"
    if len(name) > 63:
        return "name part must be no more than 63 characters"
    if not _QUALIFIED_NAME.match(name):
        return "name part must consist of alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric"
    return None


def extended_resource_name_error(name: str) -> str | None:
    """Why ``name`` is not a valid extended resource name, or None if it is."""
    if "/" not in name:
        return f"{name!r} needs a domain prefix (like 'example.com/{name}')"
    if "kubernetes.io/" in name:
        return f"{name!r} is in the kubernetes.io namespace, which is reserved for native resources"
    if name.startswith("requests."):
        return f"{name!r} must not start with 'requests.'"
    err = _qualified_name_error("requests." + name)
    if err:
        return f"{name!r} is not a qualified name: {err}"
    return None


def is_extended_resource_name(name: str) -> bool:
    return extended_resource_name_error(name) is None
