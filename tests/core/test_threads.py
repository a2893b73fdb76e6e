"""torch's thread count: as given, torch's own, or "auto" (the cores other processes leave free)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from corral import get_config
from corral.core import threads
from corral.core.threads import TorchThreads, busy_seconds, free_cores


@pytest.fixture(autouse=True)
def keep_torch_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def write_stat(path: Path, busy_ticks: list[int]) -> None:
    """A /proc/stat whose cpuN lines have the given busy ticks (user) and 1000 idle ticks each."""
    lines = ["cpu  0 0 0 0 0 0 0 0 0 0"]
    lines += [f"cpu{n} {ticks} 0 0 1000 0 0 0 0 0 0" for n, ticks in enumerate(busy_ticks)]
    path.write_text("\n".join([*lines, "intr 0", ""]))


def test_free_cores_keeps_at_least_one_and_counts_a_core_busy_past_the_headroom() -> None:
    assert free_cores(2, 0.0) == 2
    assert free_cores(2, 0.2) == 2  # a little background work leaves a core free
    assert free_cores(2, 0.5) == 1
    assert free_cores(2, 2.0) == 1  # both cores held by others: one thread, never zero
    assert free_cores(8, 3.0) == 5


def test_busy_seconds_sums_only_the_given_cpus_without_idle_time(tmp_path) -> None:
    stat = tmp_path / "stat"
    write_stat(stat, [100, 300, 700])
    hz = threads.os.sysconf("SC_CLK_TCK")
    assert busy_seconds([0, 2], stat) == pytest.approx(800 / hz)
    assert busy_seconds([0], tmp_path / "missing") is None


def test_auto_takes_off_the_cores_other_processes_kept_busy(tmp_path, monkeypatch) -> None:
    """Two cores; each reading moves the clock by one second, this process uses none of the CPU time."""
    stat, clock = tmp_path / "stat", iter(float(t) for t in range(100))
    hz = threads.os.sysconf("SC_CLK_TCK")
    monkeypatch.setattr(threads, "usable_cpus", lambda: [0, 1])
    monkeypatch.setattr(threads.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(threads, "own_cpu_seconds", lambda: 0.0)
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    write_stat(stat, [0, 0])
    budget = TorchThreads("auto", stat)
    assert budget.threads == 2 and torch.get_num_threads() == 2  # a quiet machine: one thread per core
    write_stat(stat, [hz, hz])  # others kept both cores busy for the last second
    assert budget.update() == 1 and torch.get_num_threads() == 1
    write_stat(stat, [hz + hz // 20, hz])  # quiet again (a twentieth of one core)
    assert budget.update() == 2 and torch.get_num_threads() == 2


def test_auto_does_not_count_this_process_as_another(tmp_path, monkeypatch) -> None:
    stat, clock, own = tmp_path / "stat", iter(float(t) for t in range(100)), iter([0.0, 2.0])
    hz = threads.os.sysconf("SC_CLK_TCK")
    monkeypatch.setattr(threads, "usable_cpus", lambda: [0, 1])
    monkeypatch.setattr(threads.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(threads, "own_cpu_seconds", lambda: next(own))
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (2.0, 2.0, 2.0))
    write_stat(stat, [0, 0])
    budget = TorchThreads("auto", stat)
    assert budget.threads == 1  # before any iteration, the load average says the machine is busy
    write_stat(stat, [hz, hz])  # the busy time was this process's own two threads
    assert budget.update() == 2


def test_a_number_is_used_as_given_and_none_keeps_torchs_count() -> None:
    torch.set_num_threads(2)
    assert TorchThreads(1).update() == 1 and torch.get_num_threads() == 1
    torch.set_num_threads(2)
    assert TorchThreads(None).update() == 2 and torch.get_num_threads() == 2


def test_num_torch_threads_takes_auto_and_refuses_other_words() -> None:
    assert get_config("SAC").num_torch_threads == "auto"
    assert get_config("PPO").resources(num_torch_threads="auto").num_torch_threads == "auto"
    with pytest.raises(Exception, match="num_torch_threads"):
        get_config("PPO").resources(num_torch_threads="all")
