"""The bounds of agent/limits.py: Kubernetes' own, checked at and just past each edge."""

from __future__ import annotations

import pytest

from agent.limits import (
    ANNOTATIONS_TOTAL_MAX,
    GRPC_MESSAGE_LIMITS,
    MAX_BYTES,
    LimitError,
    check_annotations,
    check_device_ids,
    check_labels,
    check_name,
    check_qualified_name,
    shown,
)


@pytest.mark.parametrize("kind, limit", [("pod_uid", 36), ("pod_name", 253), ("pod_namespace", 63),
                                         ("container_name", 63), ("device_id", 253), ("endpoint", 255)])
def test_names_are_bounded_at_the_kubernetes_limit(kind, limit):
    assert MAX_BYTES[kind] == limit
    assert check_name(kind, "a" * limit) == "a" * limit
    with pytest.raises(LimitError) as e:
        check_name(kind, "a" * (limit + 1))
    assert isinstance(e.value, ValueError) and e.value.kind == kind
    assert f"{limit + 1} bytes" in str(e.value) and f"limit is {limit}" in str(e.value)


def test_bytes_not_characters_are_counted():
    check_name("container_name", "é" * 31)  # 62 bytes
    with pytest.raises(LimitError):
        check_name("container_name", "é" * 32)  # 64 bytes


def test_messages_never_carry_the_oversized_value_back():
    with pytest.raises(LimitError) as e:
        check_name("pod_name", "x" * 3_000_000)
    assert len(str(e.value)) < 200 and "3000000 bytes" in str(e.value)
    assert len(shown("y" * 10_000)) < 100


def test_qualified_names_bound_prefix_and_name():
    check_qualified_name("k", "a" * 253 + "/" + "b" * 63)
    for bad in ("a" * 254 + "/b", "a/" + "b" * 64, "b" * 64):
        with pytest.raises(LimitError):
            check_qualified_name("k", bad)


def test_annotations_total_is_256_kib_keys_included():
    value = "v" * (ANNOTATIONS_TOTAL_MAX - 1)
    check_annotations({"k": value})
    with pytest.raises(LimitError, match="256 KiB"):
        check_annotations({"k": value + "v"})
    with pytest.raises(LimitError):
        check_annotations({"k" * 64: "v"})


def test_labels_values_are_63_bytes():
    check_labels({"example.com/x": "v" * 63})
    with pytest.raises(LimitError):
        check_labels({"example.com/x": "v" * 64})


def test_device_ids():
    check_device_ids(["GPU-" + "0" * 36, "0000:3b:00.1"])
    with pytest.raises(LimitError):
        check_device_ids(["ok", "d" * 254])


def test_every_server_api_has_explicit_message_limits():
    for api in ("registration", "deviceplugin", "podresources", "resourceplugin"):
        lim = GRPC_MESSAGE_LIMITS[api]
        opts = dict(lim.options())
        assert opts["grpc.max_receive_message_length"] == lim.receive > 0
        assert opts["grpc.max_send_message_length"] == lim.send > 0
    # a pod's full annotations (256 KiB) fit a ResourcePlugin request
    assert GRPC_MESSAGE_LIMITS["resourceplugin"].receive > ANNOTATIONS_TOTAL_MAX
