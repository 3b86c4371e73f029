"""Whose job it is, as Slurm says it: user and partition from ``squeue``, cached (issue 35 part 2).

The cgroup tree names a job by number only (v2 not even by uid), so its user and
partition are asked of Slurm, never guessed. One ``squeue`` call per refresh asks
for the jobs not yet cached (``-j`` with their ids, which also answers jobs that
have just ended); an answer is kept ``ttl`` seconds. Slurm's client programs run
with a clean environment (PATH of ``bin_dir`` only, ``SLURM_CONF`` when configured):
this is a root process and takes nothing of a caller's.

``%A`` is the job's own id (an array element's, as its cgroup names it), ``%U``
the uid, ``%u`` the user name, ``%P`` the partition, ``%a`` the account, ``%q`` the QOS,
``%b`` the GRES it asked for. A job that asked for GRES is asked about once more, alone
(``scontrol show job -d -o <id>``: the GRES indexes it holds on each node), to name the
devices it holds (agent.slurm.gresmap).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

__all__ = ["JobInfo", "JobInfoCache", "SQUEUE_FORMAT", "parse_squeue", "squeue_argv"]

#: one line per job; fields cannot hold '|' (Slurm refuses it in user, partition, account, QOS and GRES names)
SQUEUE_FORMAT = "%A|%U|%u|%P|%a|%q|%b"


@dataclass(frozen=True)
class JobInfo:
    job: str
    uid: int
    user: str
    partition: str
    account: str = ""
    qos: str = ""
    #: the GRES it asked for as squeue says it ("gres:gpu:1"; "" for none)
    gres: str = ""
    #: GRES name -> the record indexes it holds on this node (``scontrol show job -d``)
    held: Mapping[str, tuple[int, ...]] = field(default_factory=dict)


def _none(text: str) -> str:
    """squeue prints an unset field (account and QOS without accounting) as "(null)"."""
    return "" if text == "(null)" else text


def parse_squeue(text: str) -> dict[str, JobInfo]:
    """``squeue -h -o SQUEUE_FORMAT`` output -> job id -> info; malformed lines are skipped."""
    out: dict[str, JobInfo] = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 7 or not parts[0].isdigit() or not parts[1].isdigit():
            continue
        job, uid, user, partition, account, qos, gres = (_none(p) for p in parts)
        out[job] = JobInfo(job, int(uid), user, partition, account, qos, "" if gres == "N/A" else gres)
    return out


def squeue_argv(bin_dir: str, jobs: Iterable[str]) -> list[str]:
    ids = sorted(set(jobs), key=int)
    return [f"{bin_dir.rstrip('/')}/squeue", "-h", "-o", SQUEUE_FORMAT, "-j", ",".join(ids)]


#: (argv, env, timeout) -> stdout; raises OSError / subprocess errors on failure
Runner = Callable[[list[str], Mapping[str, str], float], str]


def run_command(argv: list[str], env: Mapping[str, str], timeout: float) -> str:
    """stdout, and stderr after it (``slurmd -G`` prints its records there)."""
    r = subprocess.run(argv, env=dict(env), capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL, check=False)
    if r.returncode != 0:
        raise OSError(f"{argv[0]} exited {r.returncode}: {r.stderr.strip()[:300]}")
    return r.stdout + r.stderr


class JobInfoCache:
    """Job id -> ``JobInfo``, asked of Slurm for the ids not known or too old. Not thread-safe:
    only the component's refresh (one at a time) uses it."""

    def __init__(self, bin_dir: str, slurm_conf: str = "", ttl: float = 60.0, timeout: float = 10.0,
                 runner: Runner = run_command, clock: Callable[[], float] | None = None, node: str = "") -> None:
        """``node``: this node's name, whose GRES indexes a job's are (none asked for without it)."""
        import time

        self.bin_dir = bin_dir
        self.node = node
        self.env = {"PATH": bin_dir, "LANG": "C", **({"SLURM_CONF": slurm_conf} if slurm_conf else {})}
        self.ttl = ttl
        self.timeout = timeout
        self.runner = runner
        self.clock = clock or time.monotonic
        self._known: dict[str, tuple[float, JobInfo]] = {}
        #: why the last query failed ("" after a good one), for status
        self.last_error = ""
        self.queries = 0

    def lookup(self, jobs: Iterable[str]) -> dict[str, JobInfo]:
        """Info for ``jobs``: cached, then one query for the rest. Jobs no longer asked for are forgotten."""
        now = self.clock()
        wanted = set(jobs)
        self._known = {j: v for j, v in self._known.items() if j in wanted}
        stale = sorted(j for j in wanted if j not in self._known or now - self._known[j][0] > self.ttl)
        if stale:
            self.queries += 1
            try:
                answered = parse_squeue(self.runner(squeue_argv(self.bin_dir, stale), self.env, self.timeout))
            except (OSError, subprocess.SubprocessError) as e:
                self.last_error = str(e)
            else:
                self.last_error = ""
                for j, info in answered.items():
                    if j in wanted:
                        self._known[j] = (now, self._with_held(info))
        return {j: v for j, (_, v) in self._known.items()}

    def _with_held(self, info: JobInfo) -> JobInfo:
        """``info`` with the GRES indexes it holds on this node, for a job that asked for GRES."""
        from agent.slurm.gresmap import parse_job_gres

        if not info.gres or not self.node:
            return info
        argv = [f"{self.bin_dir.rstrip('/')}/scontrol", "show", "job", "-d", "-o", info.job]
        try:
            held = parse_job_gres(self.runner(argv, self.env, self.timeout), self.node).get(info.job, {})
        except (OSError, subprocess.SubprocessError) as e:
            self.last_error = str(e)
            return info
        return replace(info, held={k: tuple(v) for k, v in held.items()})

    def gres_records(self, slurmd: str) -> dict[str, list[tuple[str, ...]]]:
        """This node's GRES records as slurmd parses gres.conf (``slurmd -G``: print and exit), in
        index order; {} when it cannot be asked (the join with devices is then left out)."""
        from agent.slurm.gresmap import parse_slurmd_gres

        if not slurmd or not self.node:
            return {}
        argv = [slurmd, "-G", "-N", self.node, *(["-f", self.env["SLURM_CONF"]] if "SLURM_CONF" in self.env else [])]
        try:
            return parse_slurmd_gres(self.runner(argv, self.env, self.timeout))
        except (OSError, subprocess.SubprocessError) as e:
            self.last_error = str(e)
            return {}
