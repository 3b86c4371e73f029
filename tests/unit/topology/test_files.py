"""The small parsers under the reader: masks, cache sizes, /proc/cpuinfo, file reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.fsread import read_text
from agent.topology.cpuinfo import CpuinfoIds, parse_cpuinfo
from agent.topology.files import Notes, parse_size


@pytest.mark.parametrize(
    ("text", "size"),
    [("32K\n", 32 << 10), ("30720K", 30720 << 10), ("8M", 8 << 20), ("1G", 1 << 30), ("512", 512), ("", None), ("big", None)],
)
def test_parse_size(text: str, size: int | None) -> None:
    assert parse_size(text) == size


def test_parse_cpuinfo_x86_and_arm_blocks() -> None:
    text = (
        "processor\t: 0\nphysical id\t: 1\ncore id\t\t: 3\n\n"
        "processor\t: 1\nmodel name\t: x\n\n"  # arm style: no ids
        "garbage without colon\n\n"
        "processor\t: 2\nphysical id\t: x\n"
    )
    assert parse_cpuinfo(text) == {
        0: CpuinfoIds(1, 3),
        1: CpuinfoIds(None, None),
        2: CpuinfoIds(None, None),
    }


def test_read_text_missing_and_directory(tmp_path: Path) -> None:
    assert read_text(str(tmp_path / "none")) is None
    assert read_text(str(tmp_path / "none" / "deeper")) is None
    assert read_text(str(tmp_path)) is None


def test_read_text_long_files_are_read_whole(tmp_path: Path) -> None:
    big = "x" * 200_000
    (tmp_path / "f").write_text(big)
    assert read_text(str(tmp_path / "f")) == big
    assert read_text(str(tmp_path / "f"), stream=True) == big


def test_unreadable_file_is_a_warning_not_a_crash(tmp_path: Path) -> None:
    notes = Notes()
    (tmp_path / "loop").symlink_to(tmp_path / "loop")  # ELOOP on open
    assert notes.text(str(tmp_path / "loop")) is None
    assert notes.lines and "cannot read" in notes.lines[0]


def test_per_cpu_notes_are_aggregated() -> None:
    notes = Notes()
    for c in (3, 1, 2, 7):
        notes.cpu(c, "odd")
    notes.warn("plain")
    notes.warn("plain")
    assert notes.finish() == ("plain", "cpus 1-3,7: odd")


# -- parse_mask: CPUSet.from_mask's syntax, faster on NR_CPUS-wide masks ------------------
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from agent.cpuset import CPUSet, CPUSetError  # noqa: E402
from agent.topology.files import parse_mask  # noqa: E402


def _same(text: str) -> None:
    try:
        want: object = CPUSet.from_mask(text)
    except CPUSetError:
        want = CPUSetError
    try:
        got: object = parse_mask(text)
    except CPUSetError:
        got = CPUSetError
    assert got == want, text


# no deadline: the suite runs on loaded shared machines, where a 4096-bit case can take 300 ms
@settings(deadline=None, max_examples=150)
@given(st.integers(min_value=0, max_value=(1 << 4096) - 1), st.integers(min_value=1, max_value=130))
def test_parse_mask_agrees_on_kernel_masks(value: int, words: int) -> None:
    hexes = f"{value:x}".rjust(8 * words, "0")
    _same(",".join(hexes[i : i + 8] for i in range(0, len(hexes), 8)))


@settings(deadline=None)
@given(st.text(alphabet="0123456789abcdefABCDEF,\n ", max_size=60))
def test_parse_mask_agrees_on_any_text(text: str) -> None:
    _same(text)
