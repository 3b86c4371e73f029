"""`hwagent launch` flags become the manifest an operator would have written."""

from __future__ import annotations

import argparse
import json
import re

import pytest

from agent.cli import CommandError
from agent.commands import launch
from agent.workloads.manifest import parse_manifest


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    launch.add_parser(sub)
    return parser.parse_args(["launch", *argv])


def test_dedicated_implies_numa_binding():
    m = launch.manifest_from_flags(_args("--name", "a", "--cpus", "1", "--qos", "dedicated", "--", "sleep", "1"))
    ann = m["metadata"]["annotations"]
    assert ann["katalyst.kubewharf.io/qos_level"] == "dedicated_cores"
    assert json.loads(ann["katalyst.kubewharf.io/memory_enhancement"]) == {"numa_binding": "true"}
    shared = launch.manifest_from_flags(_args("--name", "b", "--cpus", "1", "--", "sleep", "1"))
    assert "katalyst.kubewharf.io/memory_enhancement" not in shared["metadata"].get("annotations", {})


def test_a_launch_without_name_gets_one_from_its_command():
    m1 = launch.manifest_from_flags(_args("--cpus", "1", "--", "/usr/bin/Stress_NG", "--cpu", "1"))
    m2 = launch.manifest_from_flags(_args("--cpus", "1", "--", "/usr/bin/Stress_NG", "--cpu", "1"))
    n1, n2 = m1["metadata"]["name"], m2["metadata"]["name"]
    assert re.fullmatch(r"stress-ng-[a-z0-9]{5}", n1) and n1 != n2
    # the generated name is one the manifest validator accepts
    assert parse_manifest(json.dumps(m1)).pod.name == n1


def test_no_command_is_a_clear_error():
    with pytest.raises(CommandError, match="command to run is missing"):
        launch.manifest_from_flags(_args("--cpus", "1"))
