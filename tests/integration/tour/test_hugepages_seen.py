"""Pages a person reserves are seen by the next launch (issue 37 item 1), and the refusal
before them says what to do and that the pools were read for it, in quantities as a person
reads them (item 2).

The daemon's periodic re-read is set to an hour, so only admission's own re-read can see
the pages. nr_hugepages is restored to what it was, whatever happens."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.integration.tour.conftest import Tour, open_tour

pytestmark = [pytest.mark.root, pytest.mark.timeout(180)]

NR = Path("/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages")
LAUNCH = ("launch", "--memory", "64Mi", "--hugepages-2Mi", "4Mi", "--", "sleep", "60")


@pytest.fixture(scope="module")
def tour() -> Iterator[Tour]:
    yield from open_tour({"memory": {"rescan_interval_s": "3600.0"}})


@contextmanager
def reserved(n: int) -> Iterator[int]:
    """``n`` 2 MiB pages in the pool for the block; the value it had after."""
    if not NR.exists():
        pytest.skip("no 2 MiB hugepages on this kernel")
    old = int(NR.read_text())
    try:
        NR.write_text(str(n))
        yield int(NR.read_text())
    finally:
        NR.write_text(str(old))
        assert int(NR.read_text()) == old


def test_a_refusal_for_pages_says_how_to_reserve_them_in_words_a_person_reads(tour: Tour) -> None:
    with reserved(0):
        r = tour.cli(LAUNCH[0], "--name", "hp0", *LAUNCH[1:])
    assert r.returncode == 1, (r.stdout, r.stderr)
    err = r.stderr
    # what to do, and that the refusal stands on the pools as they are now
    assert "echo N > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages" in err, err
    assert "read again for this request" in err, err
    # the quantities as a person reads them, once
    assert "node 0: " in err and "0 × 2 MiB pages" in err and "GiB memory" in err, err
    assert "=0" not in err and "Ki;" not in err and err.count("free per") == 1, err


def test_pages_reserved_a_moment_ago_are_seen_by_the_next_launch(tour: Tour) -> None:
    with reserved(0):
        assert tour.cli(LAUNCH[0], "--name", "hp1", *LAUNCH[1:]).returncode == 1
    with reserved(4) as got:
        if got < 2:
            pytest.skip("the kernel gave fewer than 2 pages (memory too fragmented)")
        r = tour.cli(LAUNCH[0], "--name", "hp1", *LAUNCH[1:])
        assert r.returncode == 0, (r.stdout, r.stderr)
        mem = tour.ok("memory", "--format", "json")
        assert "hugepages-2Mi" in mem and "hp1" in mem, mem
        tour.ok("stop", "hp1")
        tour.ok("rm", "hp1")
