"""Values that change over training time (learning rates, epsilon, noise scales)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class PiecewiseSchedule:
    """Linear interpolation between ``(timestep, value)`` endpoints, constant outside them."""

    def __init__(self, endpoints: Sequence[Sequence[float]]) -> None:
        self._t = np.array([float(t) for t, _ in endpoints])
        self._v = np.array([float(v) for _, v in endpoints])

    def __call__(self, timestep: float) -> float:
        """The value at ``timestep``."""
        return float(np.interp(timestep, self._t, self._v))


def linear_schedule(initial: float, final: float, timesteps: int, start: int = 0) -> PiecewiseSchedule:
    """From ``initial`` at ``start`` to ``final`` at ``start + timesteps``, then constant.

    Args:
        initial: the value up to ``start``.
        final: the value from ``start + timesteps`` on.
        timesteps: how long the linear change takes; values below 1 count as 1.
        start: the timestep the change begins at.

    Returns:
        A schedule to call with a timestep.
    """
    return PiecewiseSchedule([(start, initial), (start + max(1, timesteps), final)])
