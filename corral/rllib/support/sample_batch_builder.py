"""RLlib's ``SampleBatchBuilder``: a batch built a row at a time, for experiences recorded outside an env runner."""

from __future__ import annotations

import collections
from typing import Any

import numpy as np

from corral.core.common.sample_batch import MultiAgentBatch, SampleBatch

UNROLL_ID = "unroll_id"
"""the column :meth:`SampleBatchBuilder.build_and_reset` numbers its batches in, as RLlib's does"""


class SampleBatchBuilder:
    """Builds a SampleBatch a row at a time, for experiences recorded outside an env runner (RLlib's recipe).

    Attributes:
        count: the rows added since the last build.
    """

    _next_unroll_id = 0
    """numbers every built batch that has no ``unroll_id`` column, across builders, as RLlib does"""

    def __init__(self) -> None:
        self.buffers: dict[str, list[Any]] = collections.defaultdict(list)
        self.count = 0

    def add_values(self, **values: Any) -> None:
        """Add one row: a value per column (every row should name the same columns).

        Args:
            **values: the row's value of each column, e.g. ``obs=..., actions=..., rewards=...``.
        """
        for key, value in values.items():
            self.buffers[key].append(value)
        self.count += 1

    def add_batch(self, batch: SampleBatch) -> None:
        """Add every row of ``batch`` (each column's values after those added before).

        Args:
            batch: a SampleBatch (a dict of columns of equal length).

        Raises:
            TypeError: ``batch`` is a MultiAgentBatch or not a batch at all.
        """
        if not isinstance(batch, dict):
            hint = ": add each policy's batch of .policy_batches to a builder of its own"
            raise TypeError(
                f"SampleBatchBuilder.add_batch takes a SampleBatch, got {type(batch).__name__}"
                + (hint if isinstance(batch, MultiAgentBatch) else "")
            )
        rows = SampleBatch(batch).count
        for key, column in batch.items():
            self.buffers[key].extend(column)
        self.count += rows

    def build_and_reset(self) -> SampleBatch:
        """The rows added so far as a SampleBatch; the builder starts empty again.

        Each column becomes an array (float64 ones float32, as RLlib saves
        memory); a batch without ``unroll_id`` gets one number for all its rows.

        Returns:
            The batch.

        Raises:
            ValueError: the columns differ in length (a row left one out), or a column's
                values differ in shape.
        """
        lengths = {key: len(values) for key, values in self.buffers.items()}
        if len(set(lengths.values())) > 1:
            raise ValueError(
                f"SampleBatchBuilder: the columns differ in length {lengths}; give every add_values() call the same columns"
            )
        batch = SampleBatch({key: _column_array(key, values) for key, values in self.buffers.items()})
        if UNROLL_ID not in batch:
            batch[UNROLL_ID] = np.repeat(SampleBatchBuilder._next_unroll_id, batch.count)
            SampleBatchBuilder._next_unroll_id += 1
        self.buffers.clear()
        self.count = 0
        return batch


def _column_array(key: str, values: list[Any]) -> np.ndarray:
    try:
        array = np.array(values)
    except ValueError as exc:
        raise ValueError(f"column {key!r} cannot be one array, its values differ in shape: {exc}") from None
    return array.astype(np.float32) if array.dtype == np.float64 else array
