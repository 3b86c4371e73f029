"""`hwagent launch` flags -> the Pod manifest they mean (no daemon needed)."""

from __future__ import annotations

import argparse
import json
import re

import pytest

from agent.cli import CommandError
from agent.commands import launch
from agent.commands.launch import ENHANCEMENT_KEY, QOS_KEY, add_parser, manifest_from_flags
from agent.workloads.manifest import parse_manifest


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    return parser.parse_args(["launch", *argv])


@pytest.mark.parametrize("extra", [(), ("--numa-binding",)], ids=["implied", "explicit"])
def test_dedicated_is_numa_bound_with_or_without_the_flag(extra: tuple[str, ...]) -> None:
    # the CPU policy serves dedicated cores only NUMA-bound (issue 13's `launch --cpus 1 --qos dedicated`)
    m = manifest_from_flags(parse("--name", "hog", "--cpus", "1", "--qos", "dedicated", *extra, "--", "sh"))
    ann = m["metadata"]["annotations"]
    assert ann[QOS_KEY] == "dedicated_cores"
    assert json.loads(ann[ENHANCEMENT_KEY]) == {"numa_binding": "true"}
    assert m["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}


@pytest.mark.parametrize("qos", ["shared", "reclaimed", "system", None])
def test_other_qos_levels_are_not_bound_unless_asked(qos: str | None) -> None:
    argv = ["--name", "w", "--cpu-request", "500m", *(["--qos", qos] if qos else []), "--", "sh"]
    assert ENHANCEMENT_KEY not in manifest_from_flags(parse(*argv))["metadata"].get("annotations", {})
    bound = manifest_from_flags(parse(*argv[:-2], "--numa-binding", "--", "sh"))
    assert json.loads(bound["metadata"]["annotations"][ENHANCEMENT_KEY]) == {"numa_binding": "true"}


def test_a_launch_without_name_gets_one_from_its_command():
    m1 = launch.manifest_from_flags(parse("--cpus", "1", "--", "/usr/bin/Stress_NG", "--cpu", "1"))
    m2 = launch.manifest_from_flags(parse("--cpus", "1", "--", "/usr/bin/Stress_NG", "--cpu", "1"))
    n1, n2 = m1["metadata"]["name"], m2["metadata"]["name"]
    assert re.fullmatch(r"stress-ng-[a-z0-9]{5}", n1) and n1 != n2
    # the generated name is one the manifest validator accepts
    assert parse_manifest(json.dumps(m1)).pod.name == n1


def test_no_command_is_a_clear_error():
    with pytest.raises(CommandError, match="command to run is missing"):
        launch.manifest_from_flags(parse("--cpus", "1"))


def test_launch_memory_goes_through_the_manifest_rules():
    # --memory 0: no limit, as for the kubelet and runc
    m = manifest_from_flags(parse("--name", "m", "--memory", "0", "--", "sh"))
    assert parse_manifest(json.dumps(m)).pod.containers[0].resources.memory_limit_bytes is None
    # a limit the container cannot start in: the same refusal as a manifest's
    m = manifest_from_flags(parse("--name", "m", "--memory", "4Ki", "--", "sh"))
    with pytest.raises(ValueError, match="at least 6Mi"):
        parse_manifest(json.dumps(m))


@pytest.mark.parametrize("command", ["/usr/bin/stress-ng", "Train.SH", "./a b--c", "--x--", "!!!", "", "ÜBER_job",
                                     "a" * 60, "x!@#y", "-lead", "trail-", "İstanbul", "a..b__c"])
def test_generated_name_is_the_command_as_a_dns_label_with_a_suffix(command: str) -> None:
    # the base as the regex made it before the CLI stopped importing re (agent.commands.launch._label)
    base = re.sub(r"[^a-z0-9-]+", "-", command.rsplit("/", 1)[-1].lower()).strip("-")[:40] or "pod"
    name = launch.generated_name(command)
    prefix, _, suffix = name.rpartition("-")
    assert prefix == base
    assert re.fullmatch(r"[a-z0-9]{5}", suffix)


@pytest.mark.parametrize("given,quantity", [("2", "2"), ("0.5", "500m"), (".25", "250m"), ("1.5", "1500m"),
                                            ("500m", "500m"), ("1000m", "1"), ("2.000", "2")])
def test_cpus_takes_whole_cpus_or_a_fraction_as_docker_does(given: str, quantity: str) -> None:
    """`--cpus 0.5` is what a docker user types: request = limit = 500m, through the manifest rules."""
    m = manifest_from_flags(parse("--name", "w", "--cpus", given, "--", "sh"))
    assert m["spec"]["containers"][0]["resources"] == {"requests": {"cpu": quantity}, "limits": {"cpu": quantity}}
    parse_manifest(json.dumps(m))


@pytest.mark.parametrize("given", ["0", "0m", "-1", "one", "1.", "0.0005", "1.5m", "1e3", "٣", ""])
def test_cpus_refuses_what_is_no_positive_millicore_count(given: str, capsys) -> None:
    with pytest.raises(SystemExit):
        parse("--name", "w", "--cpus", given, "--", "sh")
    assert "--cpus" in capsys.readouterr().err
