"""Numbers read back from a checkpoint, checked before a ``set_state`` uses them.

Every room restores counters and rates from JSON or policy files; a tampered or
truncated file must fail with a clear error instead of a negative step count.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def restored_count(value: Any, name: str) -> int:
    """``value`` as a count read back from a checkpoint: an integer >= 0.

    Args:
        value: the value as read (from JSON or a policy file).
        name: what it is, for the error message.

    Raises:
        ValueError: anything else (a string, a bool, a float, a negative number);
            the restore turns it into a CheckpointError naming the file.
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
    return int(value)


def restored_float(value: Any, name: str, minimum: float | None = None) -> float:
    """``value`` as a finite number read back from a checkpoint (at least ``minimum`` if given).

    Args:
        value: the value as read (from JSON or a policy file); ints are accepted.
        name: what it is, for the error message.
        minimum: the smallest value allowed; None allows any finite number.

    Raises:
        ValueError: not a finite real number, or below ``minimum``.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not np.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    return float(value)
