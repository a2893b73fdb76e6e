"""A fragment postprocessed one trajectory at a time, for callbacks that look at each (``on_postprocess_trajectory``).

An env runner normally postprocesses a policy's whole ``[T, K]`` fragment in
one call. RLlib's hook sees one trajectory at a time, before and after
postprocessing; a column of the fragment (one sub-environment, or one agent in
one) is that trajectory here. Return estimators work per column already, so
the rows that come out are the same, column by column.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from corral.core.common.sample_batch import SampleBatch

if TYPE_CHECKING:
    from corral.core.learning.policy import Policy


@dataclass
class Trajectory:
    """One column of a fragment, before and after postprocessing."""

    column: int
    """its index in the fragment"""
    original: SampleBatch
    """its transitions before postprocessing (the valid rows, flattened)"""
    postprocessed: SampleBatch
    """what ``policy.postprocess_trajectory`` made of it (the hook may edit it)"""

    @property
    def has_transitions(self) -> bool:
        """Whether it holds a transition (a column of reset rows only has none, and no hook call)."""
        return self.original.count > 0


def postprocess_columns(policy: Policy, fragment: SampleBatch, bootstrap_obs: np.ndarray) -> list[Trajectory]:
    """Postprocess each column of a time-major fragment on its own.

    Args:
        policy: the policy whose fragment it is.
        fragment: ``[T, K, ...]`` columns plus ``valid``.
        bootstrap_obs: ``[K, ...]`` preprocessed observations after each column's last row.

    Returns:
        A trajectory per column, in column order; joined, their ``postprocessed`` batches
        are the policy's training rows.
    """
    trajectories = []
    for k in range(fragment[SampleBatch.VALID].shape[1]):
        column = SampleBatch({key: value[:, k : k + 1] for key, value in fragment.items()})
        original = policy.flatten_fragment(column)
        trajectories.append(Trajectory(k, original, policy.postprocess_trajectory(column, bootstrap_obs[k : k + 1])))
    return trajectories
