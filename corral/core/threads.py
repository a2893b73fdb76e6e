"""How many threads torch computes with: the cores this process may use that other processes leave free.

torch's intra-op threads spin while they wait for work. On a quiet machine,
one per core makes a large update faster (SAC's 256x256 networks: 1.7x on
2 cores); on a busy one the same threads wait for cores that other processes
hold, and an update can take 35 times as long as on one thread. Busy is the
normal case in RL (remote env runners, Tune trials, evaluation actors, CI), so
``num_torch_threads="auto"`` decides from what the machine does:

- inside a Ray actor (a remote env runner, a Tune trial), the CPUs the actor
  reserved: Ray gave them to it, and the cluster's other actors hold the rest;
- elsewhere, the cores of this process's CPU set that other processes kept
  busy over the last training iteration are taken off, re-read every
  iteration (``/proc/stat`` less this process's own CPU time); before the
  first iteration, the 1-minute load average stands in.

An integer is used as given; None keeps torch's own choice (one thread per core).
"""

from __future__ import annotations

import math
import os
import sys
import time
from pathlib import Path
from typing import Literal

import torch

PROC_STAT = Path("/proc/stat")

HEADROOM = 0.2
"""the share of a core other processes may keep busy while it still counts as free (see :func:`free_cores`)"""


def usable_cpus() -> list[int]:
    """The CPUs this process may run on (its affinity set), or ``range(os.cpu_count())`` where the platform has none."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def busy_seconds(cpus: list[int], stat: Path = PROC_STAT) -> float | None:
    """Seconds the given CPUs spent busy since boot (idle and iowait are not busy), from ``/proc/stat``.

    Args:
        cpus: CPU numbers whose ``cpuN`` lines are summed.
        stat: the file to read (a test may give its own).

    Returns:
        The seconds, or None where there is no such file (not Linux).
    """
    try:
        lines = stat.read_text().splitlines()
    except OSError:
        return None
    wanted = {f"cpu{n}" for n in cpus}
    ticks = 0
    for line in lines:
        name, *values = line.split()
        if name in wanted:
            fields = [int(v) for v in values[:8]]  # user nice system idle iowait irq softirq steal (guest is in user)
            ticks += sum(fields) - fields[3] - fields[4]
    return ticks / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    """CPU time this process (all its threads) has used, user and system."""
    times = os.times()
    return times.user + times.system


def ray_actor_cpus() -> float | None:
    """The CPUs Ray reserved for the actor this code runs in, or None outside a Ray actor (a driver, no Ray)."""
    if "ray" not in sys.modules:  # never import Ray for this
        return None
    import ray

    if not ray.is_initialized():
        return None
    context = ray.get_runtime_context()
    if context.get_actor_id() is None:
        return None
    resources = context.get_assigned_resources()  # type: ignore[no-untyped-call]  # Ray leaves this method unannotated
    return float(resources.get("CPU", 0.0))


def free_cores(total: int, others_busy: float) -> int:
    """The threads to use when other processes keep ``others_busy`` of ``total`` cores busy: at least one.

    A core that others use for more than :data:`HEADROOM` of the time is not
    free: a thread spinning on it would wait for them.

    Args:
        total: cores this process may use.
        others_busy: cores' worth of CPU time other processes used per second of wall time.

    Returns:
        The thread count, in ``[1, total]``.
    """
    return max(1, min(total, math.floor(total - others_busy + HEADROOM)))


class TorchThreads:
    """Sets torch's intra-op thread count as ``num_torch_threads`` asks, and re-decides ``"auto"`` each iteration.

    Args:
        setting: an int (that many threads), ``"auto"`` (see the module's docstring) or None (torch's own count).
        stat: ``/proc/stat`` (a test may give its own file).
    """

    def __init__(self, setting: int | Literal["auto"] | None, stat: Path = PROC_STAT) -> None:
        self.setting = setting
        self._stat = stat
        self._cpus = usable_cpus()
        self._last: tuple[float, float, float] | None = None
        """(wall time, busy seconds of our CPUs, this process's CPU seconds) at the last decision"""
        self.threads = self._first()

    def _first(self) -> int:
        if self.setting is None:
            return torch.get_num_threads()
        if isinstance(self.setting, int):
            return self._apply(self.setting)
        reserved = ray_actor_cpus()
        if reserved is not None:
            self.setting = max(1, math.floor(reserved))  # fixed: Ray decides what this actor may use
            return self._apply(self.setting)
        self._last = self._reading()
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
        return self._apply(free_cores(len(self._cpus), load))

    def update(self) -> int:
        """Re-decide ``"auto"`` from what other processes did since the last call (call once per iteration).

        Returns:
            The thread count torch now uses.
        """
        if self.setting != "auto":
            return self.threads
        now = self._reading()
        last, self._last = self._last, now
        if now is None or last is None or now[0] - last[0] < 0.05:
            return self.threads  # no /proc, or too short an interval to say anything
        wall = now[0] - last[0]
        others = max(0.0, (now[1] - last[1]) - (now[2] - last[2])) / wall
        return self._apply(free_cores(len(self._cpus), others))

    def _reading(self) -> tuple[float, float, float] | None:
        busy = busy_seconds(self._cpus, self._stat)
        return None if busy is None else (time.monotonic(), busy, own_cpu_seconds())

    def _apply(self, threads: int) -> int:
        if threads != torch.get_num_threads():
            torch.set_num_threads(threads)
        self.threads = threads
        return threads
