"""What the machine can hold: sizes are checked against free memory before anything large is allocated.

A config can ask for more than any machine has (a replay buffer of 2**31 rows,
a network over 100M-float observations). numpy and torch would then fail deep
inside with an allocator error, or, worse, the allocation would succeed lazily
and the process would be killed when the pages are touched. So every large
allocation corral makes on a config's behalf is sized first and refused with a
:class:`~corral.errors.ConfigError` that names the size.
"""

from __future__ import annotations

import os

from corral.errors import ConfigError


def available_bytes() -> int | None:
    """Memory this process could still allocate, in bytes (None where the platform does not say)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_fits(what: str, nbytes: int, advice: str) -> None:
    """Refuse an allocation of ``nbytes`` for ``what`` that the machine cannot hold.

    Args:
        what: what would be allocated, for the message ("the replay buffer (1000000 rows)").
        nbytes: its size.
        advice: which setting to change, for the message.

    Raises:
        ConfigError: ``nbytes`` is more than the memory available now.
    """
    free = available_bytes()
    if free is not None and nbytes > free:
        raise ConfigError(
            f"{what} needs {nbytes:,} bytes ({_human(nbytes)}), but {_human(free)} of memory are available; {advice}"
        )


def _human(nbytes: float) -> str:
    if nbytes < 1024:
        return f"{int(nbytes)} bytes"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        nbytes /= 1024
        if nbytes < 1024:
            return f"{nbytes:.1f} {unit}"
    return f"{nbytes / 1024:.1f} PiB"
