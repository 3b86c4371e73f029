"""hwagent launch --memory --hugepages-2Mi --hugepages-1Gi [--hugepages-spread]: the manifest the
flags mean, parsed back by the manifest reader as the admission would."""

from __future__ import annotations

import argparse
import json

import pytest

from agent.cli import CommandError
from agent.commands import launch
from agent.contracts.memory import SPREAD_ANNOTATION
from agent.workloads.manifest import parse_manifest

MB = 1 << 20


def args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    launch.add_parser(p.add_subparsers())
    return p.parse_args(["launch", *argv])


def test_memory_and_hugepages_flags_make_a_guaranteed_memory_request() -> None:
    a = args("--name", "w", "--cpus", "2", "--qos", "dedicated", "--memory", "512Mi", "--hugepages-2Mi", "64Mi",
             "--hugepages-1Gi", "1Gi", "--", "/bin/true")
    m = launch.manifest_from_flags(a)
    res = m["spec"]["containers"][0]["resources"]
    assert res["limits"] == res["requests"] == {"cpu": "2", "memory": "512Mi", "hugepages-2Mi": "64Mi",
                                                 "hugepages-1Gi": "1Gi"}
    r = parse_manifest(json.dumps(m)).pod.containers[0].resources
    assert r.memory_limit_bytes == 512 * MB
    assert dict(r.hugepages) == {"hugepages-2Mi": 64 * MB, "hugepages-1Gi": 1 << 30}


def test_spread_sets_the_annotation() -> None:
    m = launch.manifest_from_flags(args("--hugepages-2Mi", "8Mi", "--hugepages-spread", "--", "/bin/true"))
    assert m["metadata"]["annotations"] == {SPREAD_ANNOTATION: "true"}
    assert launch.SPREAD_ANNOTATION == SPREAD_ANNOTATION


def test_a_file_takes_no_hugepage_flags(tmp_path) -> None:
    f = tmp_path / "p.json"
    f.write_text("{}")
    with pytest.raises(CommandError, match="drop the other pod flags"):
        launch.run(args("-f", str(f), "--hugepages-2Mi", "8Mi"))
