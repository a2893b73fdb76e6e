"""What the machine spends during a run: RLlib's ``perf`` result (``log_sys_usage``), read from Linux's /proc.

RLlib asks psutil; corral reads the two figures from ``/proc/stat`` and
``/proc/meminfo`` itself rather than add a dependency for them. Both are
machine-wide, as RLlib's are: the CPU share covers remote env runners on this
machine too. On a platform without /proc, ``perf`` is empty and a one-time
INFO line says why.
"""

from __future__ import annotations

import logging
from pathlib import Path

logger = logging.getLogger("corral")

PROC = Path("/proc")


class SystemUsage:
    """The machine's CPU and memory use between one :meth:`perf` call and the next (one training iteration)."""

    def __init__(self, proc: Path = PROC) -> None:
        """Start measuring now.

        Args:
            proc: where the proc filesystem is mounted (a test may give a folder of its own).
        """
        self._proc = proc
        self._available = (proc / "stat").is_file() and (proc / "meminfo").is_file()
        if not self._available:
            logger.info("log_sys_usage: this platform has no /proc to read CPU and memory use from; results carry no 'perf'")
        self._last = self._cpu_times() if self._available else (0, 0)

    def perf(self) -> dict[str, float]:
        """``cpu_util_percent`` (all cores, since the last call) and ``ram_util_percent`` (now); empty without /proc."""
        if not self._available:
            return {}
        busy, total = self._cpu_times()
        last_busy, last_total = self._last
        self._last = (busy, total)
        cpu = 100.0 * (busy - last_busy) / (total - last_total) if total > last_total else 0.0
        return {"cpu_util_percent": round(cpu, 1), "ram_util_percent": round(self._ram_percent(), 1)}

    def _cpu_times(self) -> tuple[int, int]:
        """Busy and total clock ticks of all cores since boot (idle and iowait are not busy)."""
        fields = [int(v) for v in (self._proc / "stat").read_text().split("\n", 1)[0].split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        total = sum(fields[:8])  # guest time is already counted in user time
        return total - idle, total

    def _ram_percent(self) -> float:
        """Memory in use, as the kernel counts it available (page cache it may drop is not in use)."""
        values = {}
        for line in (self._proc / "meminfo").read_text().splitlines():
            name, _, rest = line.partition(":")
            values[name] = int(rest.split()[0]) if rest.split() else 0
        total = values.get("MemTotal", 0)
        return 100.0 * (total - values.get("MemAvailable", values.get("MemFree", 0))) / total if total else 0.0
