"""Hypothesis-driven fuzz of every gRPC method on every socket of a running daemon.

The methods come from the proto descriptors, not from a hand-written list: a
method added to a served service is fuzzed without touching this file, and a
service with no socket here fails the test. Bodies are well-formed messages
with hostile values (over-long names, nested JSON annotations, NaN quantities,
unknown enum values, extreme integers), raw bytes, mutations of valid bodies
(bit flips, truncation), and one body over each server's message limit.

Properties: hwagent's own code never answers UNKNOWN or INTERNAL, nothing
stalls, the daemon never dies, it logs no traceback, and its log grows by a
bounded amount per bad request (the repeat limiter).
"""

from __future__ import annotations

import json
import os
import re
import urllib.request

import grpc
import pytest
from google.protobuf import message_factory
from google.protobuf.descriptor import FieldDescriptor as F
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from agent.api.deviceplugin.v1beta1 import api_pb2 as dp_pb
from agent.api.pluginregistration.v1 import api_pb2 as reg_pb
from agent.api.podresources.v1 import api_pb2 as pr_pb
from agent.api.resourceplugin.v1alpha1 import api_pb2 as rp_pb
from agent.cpu.qos import CPU_ENHANCEMENT_KEY, MEMORY_ENHANCEMENT_KEY, QOS_KEY
from agent.limits import GRPC_MESSAGE_LIMITS
from tests.fault.conftest import COUNTS
from tests.fault.daemon import LOOP_RESOURCE, RunningDaemon

#: per method; the tier's time budget is spent mostly here
EXAMPLES = int(os.environ.get("HWAGENT_FUZZ_EXAMPLES", "500"))
CALL_TIMEOUT_S = 60.0  # a generous bound on one answer on a loaded machine: a stall, not a timing check
FORBIDDEN = {grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL, grpc.StatusCode.DEADLINE_EXCEEDED,
             grpc.StatusCode.UNAVAILABLE}

#: service full name -> (socket attribute of Sockets, API name in GRPC_MESSAGE_LIMITS)
SERVED = {
    "v1beta1.Registration": ("registration", "registration"),
    "v1beta1.DevicePlugin": ("loop_plugin", "deviceplugin"),
    "v1.PodResourcesLister": ("pod_resources", "podresources"),
    "resourceplugin.v1alpha1.ResourcePlugin": ("cpu", "resourceplugin"),
    "pluginregistration.Registration": ("cpu", "resourceplugin"),
}
#: services in our protos that hwagent is the client of, never the server
CLIENT_ONLY = {"resourceplugin.v1alpha1.Registration": "the QRM kubelet's side; hwagent registers there"}


def _methods():
    out = []
    for mod in (dp_pb, pr_pb, rp_pb, reg_pb):
        for svc in mod.DESCRIPTOR.services_by_name.values():
            for m in svc.methods:
                out.append((svc.full_name, m))
    return out


METHODS = _methods()

# ---- strategies -----------------------------------------------------------------------

_NAMES = ["", "a", "pod", "c", "ns", "loop0", "loop1", "loop7", LOOP_RESOURCE, "cpu", "memory", "v1beta1",
          "v1alpha1", "registration.sock", "admission.sock", "pod-resources.sock", "hwagent-example.com_loop.sock", "..", "../x.sock", "/etc/passwd",
          "a\x00b", "shared_cores", "dedicated_cores", "reclaimed_cores", "system_cores", "bogus_cores",
          "true", "false", "DevicePlugin", "ResourcePlugin", "-1", "0", "x" * 63, "y" * 64, "z" * 253,
          "w" * 254, "u" * 36, "u" * 37, "\u00e9" * 40, "example.com/" + "r" * 70]
_JSON = st.one_of(
    st.integers(1, 3000).map(lambda n: "[" * n + "]" * n),
    st.integers(1, 3000).map(lambda n: '{"a":' * n + "1" + "}" * n),
    st.sampled_from(['{"numa_binding": "true"}', '{"numa_binding": "true", "numa_exclusive": "true"}',
                     '{"cpuset_pool": "batch"}', '{"cpuset_pool": "reserve"}', '{"numa_binding": 1}',
                     "[]", "null", "{", '{"x": {"y": "z"}}', '"str"']),
)
TEXT = st.one_of(st.sampled_from(_NAMES), st.text(max_size=24), st.text(min_size=200, max_size=400), _JSON)
_ANN_KEYS = st.sampled_from([QOS_KEY, MEMORY_ENHANCEMENT_KEY, CPU_ENHANCEMENT_KEY, "example.com/x", "k" * 70])
_ANN_VALUES = st.one_of(st.sampled_from(["shared_cores", "dedicated_cores", "reclaimed_cores", "system_cores",
                                         "x", ""]), _JSON, TEXT)

_INTS = {
    F.TYPE_INT32: (-(2**31), 2**31 - 1), F.TYPE_SINT32: (-(2**31), 2**31 - 1), F.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    F.TYPE_INT64: (-(2**63), 2**63 - 1), F.TYPE_SINT64: (-(2**63), 2**63 - 1), F.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    F.TYPE_UINT32: (0, 2**32 - 1), F.TYPE_FIXED32: (0, 2**32 - 1),
    F.TYPE_UINT64: (0, 2**64 - 1), F.TYPE_FIXED64: (0, 2**64 - 1),
}


def _scalar(f):
    t = f.type
    if t == F.TYPE_STRING:
        return TEXT
    if t == F.TYPE_BYTES:
        return st.binary(max_size=32)
    if t == F.TYPE_BOOL:
        return st.booleans()
    if t in _INTS:
        lo, hi = _INTS[t]
        return st.one_of(st.integers(-3, 8).filter(lambda v: lo <= v <= hi), st.integers(lo, hi),
                         st.sampled_from([lo, hi]))
    if t in (F.TYPE_FLOAT, F.TYPE_DOUBLE):
        return st.one_of(st.sampled_from([0.0, 0.5, 1.0, 2.0, -1.0, 1e30, float("nan"), float("inf")]),
                         st.floats(width=32 if t == F.TYPE_FLOAT else 64))
    if t == F.TYPE_ENUM:
        return st.integers(-2, 12)
    raise AssertionError(f"unhandled field type {t}")


def message(desc, depth: int = 0):
    cls = message_factory.GetMessageClass(desc)
    optional = {}
    for f in desc.fields:
        if f.type == F.TYPE_MESSAGE and f.message_type.GetOptions().map_entry:
            kf, vf = f.message_type.fields_by_name["key"], f.message_type.fields_by_name["value"]
            keys = _ANN_KEYS if f.name in ("annotations", "labels") else _scalar(kf)
            if vf.type == F.TYPE_MESSAGE:
                if depth >= 3:
                    continue
                values = message(vf.message_type, depth + 1)
            else:
                values = _ANN_VALUES if f.name in ("annotations", "labels") else _scalar(vf)
            optional[f.name] = st.dictionaries(keys, values, max_size=4)
            continue
        if f.type == F.TYPE_MESSAGE:
            if depth >= 3:
                continue
            one = message(f.message_type, depth + 1)
        else:
            one = _scalar(f)
        is_repeated = getattr(f, "is_repeated", None)
        repeated = is_repeated if isinstance(is_repeated, bool) else f.label == F.LABEL_REPEATED
        optional[f.name] = st.lists(one, max_size=5) if repeated else one
    return st.fixed_dictionaries({}, optional=optional).map(lambda kw: cls(**kw))


def _flip(raw: bytes, data) -> bytes:
    if not raw:
        return raw
    b = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(b) - 1))
        b[i] ^= 1 << data.draw(st.integers(0, 7))
    return bytes(b)


def bodies(desc):
    structured = message(desc).map(lambda m: m.SerializeToString())

    @st.composite
    def mutated(draw):
        raw = draw(structured)
        if draw(st.booleans()) and raw:
            return raw[: draw(st.integers(0, len(raw) - 1))]
        return _flip(raw, type("D", (), {"draw": staticmethod(draw)}))

    return st.one_of(structured, structured, mutated(), st.binary(max_size=128))


# ---- the daemon and its channels ------------------------------------------------------------


@pytest.fixture(scope="module")
def running():
    import shutil
    import tempfile
    from pathlib import Path

    base = Path(tempfile.mkdtemp(prefix="hwz-", dir="/tmp"))
    d = RunningDaemon.start(base)
    channels: dict[str, grpc.Channel] = {}
    try:
        yield d, channels
    finally:
        for ch in channels.values():
            ch.close()
        d.cleanup()
        shutil.rmtree(base, ignore_errors=True)


def _channel(running, sock_attr: str) -> grpc.Channel:
    d, channels = running
    if sock_attr not in channels:
        path = getattr(d.sockets, sock_attr)
        channels[sock_attr] = grpc.insecure_channel(
            f"unix://{path}", options=[("grpc.max_receive_message_length", 64 << 20)])
    return channels[sock_attr]


def _call(ch: grpc.Channel, path: str, streaming: bool, body: bytes) -> grpc.StatusCode:
    try:
        if streaming:
            call = ch.unary_stream(path, request_serializer=None, response_deserializer=None)(
                body, timeout=CALL_TIMEOUT_S)
            try:
                next(call)
            except StopIteration:
                pass
            call.cancel()
        else:
            ch.unary_unary(path, request_serializer=None, response_deserializer=None)(body, timeout=CALL_TIMEOUT_S)
    except grpc.RpcError as e:
        code = e.code()
        if code == grpc.StatusCode.CANCELLED and streaming:
            return grpc.StatusCode.OK
        assert code not in FORBIDDEN, (path, code, e.details(), body[:200])
        return code
    return grpc.StatusCode.OK


def test_every_proto_service_is_fuzzed_or_known_client_only():
    names = {svc for svc, _ in METHODS}
    assert names == set(SERVED) | set(CLIENT_ONLY), names ^ (set(SERVED) | set(CLIENT_ONLY))


@pytest.mark.parametrize("service, method", [(s, m) for s, m in METHODS if s in SERVED],
                         ids=[f"{s}/{m.name}" for s, m in METHODS if s in SERVED])
def test_fuzz_method(running, service, method):
    d, _ = running
    sock_attr, api = SERVED[service]
    ch = _channel(running, sock_attr)
    path = f"/{service}/{method.name}"
    codes: dict[str, int] = {}

    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=False,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(body=bodies(method.input_type))
    def fuzz(body):
        code = _call(ch, path, method.server_streaming, body)
        codes[code.name] = codes.get(code.name, 0) + 1

    fuzz()
    # one body over the server's limit: refused by the transport, never decoded
    limit = GRPC_MESSAGE_LIMITS[api].receive
    assert _call(ch, path, method.server_streaming, b"\x00" * (limit + 1)) == grpc.StatusCode.RESOURCE_EXHAUSTED
    n = sum(codes.values()) + 1
    COUNTS["fuzz: requests"] += n
    COUNTS[f"fuzz: requests {service}/{method.name}"] += n
    for code, k in codes.items():
        COUNTS[f"fuzz: answers {code}"] += k
    COUNTS["fuzz: answers RESOURCE_EXHAUSTED"] += 1
    assert d.alive(), f"daemon died fuzzing {path}"


def test_daemon_survived_logged_no_traceback_and_counted_no_internal_error(running):
    d, _ = running
    assert d.alive()
    with urllib.request.urlopen(d.metrics.replace("/metrics", "/healthz"), timeout=30) as r:
        assert r.status == 200
    with urllib.request.urlopen(d.metrics, timeout=30) as r:
        body = r.read().decode()
    internal = [line for line in body.splitlines()
                if line.startswith("hwagent_grpc_internal_errors_total{") and not line.endswith(" 0.0")]
    assert internal == [], internal
    log = d.log()
    assert "Traceback" not in log and "grpc handler failed" not in log
    assert not re.search(r"level=error logger=grpc", log)
    requests = COUNTS["fuzz: requests"]
    if requests:
        COUNTS["fuzz: daemon log bytes per request"] = len(log.encode()) // requests
        suppressed = sum(float(m.group(1)) for m in re.finditer(
            r"^hwagent_log_lines_suppressed_total\{[^}]*\} (\S+)$", body, re.M))
        COUNTS["fuzz: log lines suppressed as repeats"] = int(suppressed)
    print(json.dumps({k: v for k, v in COUNTS.items() if k.startswith("fuzz: ") and "/" not in k}))
