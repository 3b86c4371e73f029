"""The delay attribution of bench/advisor_attrib.py (issue 26): tracefs lines -> who ran while the
LS thread waited, and whether a tick ended the wait."""

from __future__ import annotations

from bench.advisor_attrib import attribute, classify, parse, summarize

LS = 100


def sw(cpu: int, ts: float, prev: tuple[str, int], nxt: tuple[str, int], state: str = "R") -> str:
    return (f"{prev[0]}-{prev[1]}    [{cpu:03d}] d..2. {ts:.6f}: sched_switch: prev_comm={prev[0]} prev_pid={prev[1]} "
            f"prev_prio=120 prev_state={state} ==> next_comm={nxt[0]} next_pid={nxt[1]} next_prio=120")


def waking(cpu: int, ts: float, target: int) -> str:
    return f"<idle>-0       [{cpu:03d}] d.h3. {ts:.6f}: sched_waking: comm=python3 pid={LS} prio=120 target_cpu={target:03d}"


def tick(cpu: int, ts: float) -> str:
    return (f"<idle>-0       [{cpu:03d}] d.h1. {ts:.6f}: hrtimer_expire_entry: hrtimer=0000000016b226cb "
            f"function=tick_nohz_handler now=1")


PY, HOG, COT = ("python3", LS), ("sh", 200), ("pytest", 300)

TRACE = [
    sw(0, 10.000000, PY, HOG, "S"),          # the LS loop sleeps; a hog runs
    waking(0, 10.005000, 0),                 # its timer: woken on CPU 0
    sw(0, 10.005500, HOG, COT),              # a co-tenant gets the CPU first
    tick(0, 10.007990),
    sw(0, 10.008000, COT, PY),               # the LS runs at the tick: waited 3 ms, 2.5 of them behind COT
    sw(0, 10.008100, PY, HOG, "S"),
    waking(0, 10.013000, 0),
    sw(0, 10.013050, HOG, PY),               # 50 µs: not late
    sw(0, 10.013100, PY, HOG, "S"),
    sw(1, 10.017000, ("kworker/1:1", 50), ("kworker/1:1", 50)),
    waking(1, 10.018000, 0),                 # woken from CPU 1 for CPU 0 (where the hog runs) ...
    sw(1, 10.018400, ("kworker/1:1", 50), PY),  # ... and pulled to CPU 1 after 400 µs: the hog is blamed
]


def test_a_late_wakeup_is_blamed_on_who_ran_longest_and_marked_at_a_tick() -> None:
    late, wakes = attribute(parse(TRACE), LS, threshold_us=300)
    assert wakes == 3
    assert [round(x.delay_us) for x in late] == [3000, 400]
    first, second = late
    assert first.blamed == COT[1] and round(first.ran[COT[1]]) == 2500 and round(first.ran[HOG[1]]) == 500
    assert first.at_tick and first.cpu == first.target_cpu == 0
    assert second.blamed == HOG[1] and not second.at_tick and (second.cpu, second.target_cpu) == (1, 0)


def test_summary_counts_per_class() -> None:
    late, wakes = attribute(parse(TRACE), LS, threshold_us=300)
    s = summarize(late, wakes, {HOG[1]: "hog", COT[1]: "other"}, {COT[1]: "/"})
    assert s["wakeups"] == 3 and s["late"] == 2
    assert s["by_class"]["other"]["n"] == 1 and s["by_class"]["other"]["at_tick"] == 1
    assert s["by_class"]["other"]["comms"] == {"pytest /": 1}
    assert s["by_class"]["hog"]["other_cpu"] == 1


def test_classify_falls_back_on_names() -> None:
    assert classify(0, "swapper/0", {}) == "idle"
    assert classify(7, "kworker/0:1", {}) == "kernel"
    assert classify(8, "make", {}) == "other (exited)"
    assert classify(8, "make", {8: "hog"}) == "hog"
