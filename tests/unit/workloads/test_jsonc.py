"""The CLI's JSON (agent.commands._jsonc, the C accelerator driven without the json package) reads
and writes what json.loads and json.dumps do, and refuses what they refuse."""

from __future__ import annotations

import json
import math

import pytest

from agent.commands import _jsonc

#: values of the shapes the CLI API carries (a pod, a manifest, an error) and JSON's corners
VALUES = [
    {},
    [],
    "",
    "plain",
    "ü-ñ \u2028 \x00 \"quoted\" \\ tab\t",
    "\U0001f600",
    0,
    -7,
    2**70,
    1.5,
    -0.0,
    1e300,
    True,
    False,
    None,
    {"pod": {"name": "job-x1", "uid": "u1", "phase": "Succeeded", "containers": [
        {"name": "main", "exit_code": 0, "cpu_ids": [0, 1], "numa_affinity": None, "devices": []}]},
     "warnings": [], "dry_run": False},
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "annotations": {"k": '{"numa_binding": "true"}'}},
     "spec": {"containers": [{"name": "main", "command": ["/bin/true", "a b", "ü"]}], "restartPolicy": "Never"}},
    [[[[]]], {"": {"": ""}}],
    {1: "int key", 2.5: "float key", None: "none key"},
    {True: "bool key"},
    (1, 2, "tuple"),
]


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_dumps_writes_what_json_dumps_writes(value):
    assert _jsonc.dumps(value) == json.dumps(value)


@pytest.mark.parametrize("value", [*VALUES, {"b": {"z": 1, "a": [{"y": 2, "x": 3}]}, "a": 0}], ids=repr)
def test_dumps_with_sorted_keys_writes_what_json_writes(value):
    """`hwagent status` prints an eviction's evidence with sorted keys (issue 37 item 16)."""
    try:
        want: str | type[Exception] = json.dumps(value, sort_keys=True)
    except TypeError:  # keys that do not compare (an int beside None): both refuse
        want = TypeError
    if want is TypeError:
        with pytest.raises(TypeError):
            _jsonc.dumps(value, sort_keys=True)
    else:
        assert _jsonc.dumps(value, sort_keys=True) == want


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_loads_reads_what_json_loads_reads(value):
    text = json.dumps(value)
    assert _jsonc.loads(text) == json.loads(text)
    assert _jsonc.loads(text.encode()) == json.loads(text.encode())
    assert _jsonc.loads(f" \n\t{text}\r\n ") == json.loads(text)


def test_nan_and_infinity_round_trip_as_json_has_them():
    text = json.dumps([math.inf, -math.inf, math.nan])
    assert _jsonc.dumps([math.inf, -math.inf, math.nan]) == text == "[Infinity, -Infinity, NaN]"
    inf, neg, nan = _jsonc.loads(text)
    assert inf == math.inf and neg == -math.inf and math.isnan(nan)


@pytest.mark.parametrize("text", ["", " ", "{", '{"a": 1', "[1,]", '{"a" 1}', "nul", "01", '"\\x"', '"a\nb"',
                                  '{"a": 1} {"b": 2}', "1 2", "[] x", b"\xff\xfe"], ids=repr)
def test_loads_refuses_what_json_refuses(text):
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        _jsonc.loads(text)


@pytest.mark.parametrize("value", [{"a": object()}, [b"bytes"], {(1, 2): "tuple key"}, {1j}], ids=repr)
def test_dumps_refuses_what_json_refuses(value):
    with pytest.raises(TypeError):
        json.dumps(value)
    with pytest.raises(TypeError):
        _jsonc.dumps(value)


def test_dumps_refuses_a_circular_value():
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(ValueError):
        _jsonc.dumps(loop)
