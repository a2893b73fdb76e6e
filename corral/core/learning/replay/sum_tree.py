"""Array-backed sum-tree with a parallel min-tree, for proportional prioritized replay.

See :class:`SumTree`; :mod:`corral.core.learning.replay.replay_buffers` is its user.
"""

from __future__ import annotations

import numpy as np

from corral.errors import ConfigError


class SumTree:
    """Binary sum-tree (and parallel min-tree) over non-negative leaf values.

    Prioritized replay needs three things fast: change many priorities, draw
    rows in proportion to priority, and know the smallest priority for weight
    normalisation. Arrays of ``2 * capacity`` nodes (capacity rounded up to a
    power of two, root at index 1) give all three in ``log2(capacity)`` numpy
    operations per call, for any number of rows at once. The min-tree ignores
    zero leaves (unused slots), so :attr:`min` is the smallest *positive* value.
    """

    def __init__(self, capacity: int) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) or capacity < 1:
            raise ConfigError(f"SumTree capacity must be an integer >= 1, got {capacity!r}")
        capacity = int(capacity)
        self.capacity = 1 << (capacity - 1).bit_length()
        self._depth = self.capacity.bit_length() - 1
        self._sum = np.zeros(2 * self.capacity, dtype=np.float64)
        self._min = np.full(2 * self.capacity, np.inf, dtype=np.float64)

    @property
    def total(self) -> float:
        """Sum of all leaves: the mass that :meth:`find` partitions."""
        return float(self._sum[1])

    @property
    def min(self) -> float:
        """Smallest positive leaf (``inf`` if none), for importance-weight normalisation."""
        return float(self._min[1])

    def get(self, indexes: np.ndarray) -> np.ndarray:
        """Leaf values at ``indexes``."""
        return self._sum[np.asarray(indexes, dtype=np.int64) + self.capacity]

    def set(self, indexes: np.ndarray, values: np.ndarray) -> None:
        """Set leaves and refresh their ancestors; with repeated indexes the last value wins.

        Args:
            indexes: leaf positions, in ``[0, capacity)`` (the capacity rounded up to a power of two).
            values: one new value per index, finite and >= 0; 0 makes a leaf impossible to draw.

        Raises:
            ConfigError: the two differ in length, an index is out of range, or a value is
                not finite or negative.
        """
        idx = np.asarray(indexes, dtype=np.int64).reshape(-1)
        vals = np.asarray(values, dtype=np.float64).reshape(-1)
        if idx.shape != vals.shape:
            raise ConfigError(f"SumTree.set got {idx.size} indexes but {vals.size} values")
        if idx.size == 0:
            return
        if idx.min() < 0 or idx.max() >= self.capacity:
            raise ConfigError(f"SumTree indexes must lie in [0, {self.capacity}), got {idx.min()}..{idx.max()}")
        if not np.all(np.isfinite(vals)) or vals.min() < 0:
            raise ConfigError("SumTree values must be finite and >= 0")
        keep = last_occurrences(idx)
        self.set_unique(idx[keep], vals[keep])

    def set_unique(self, indexes: np.ndarray, values: np.ndarray) -> None:
        """:meth:`set` for callers that already checked: distinct in-range indexes, finite values >= 0.

        Nothing is checked here: a negative index, or a NaN or negative value, corrupts
        the tree without an error.

        Args:
            indexes: distinct int64 leaf positions in ``[0, capacity)``, as a numpy array.
            values: one float value per index, finite and >= 0.
        """
        node = indexes + self.capacity
        self._sum[node] = values
        self._min[node] = np.where(values > 0, values, np.inf)
        for _ in range(self._depth):  # duplicates among parents write identical values: harmless
            node >>= 1
            left = node << 1
            right = left + 1
            self._sum[node] = self._sum[left] + self._sum[right]
            self._min[node] = np.minimum(self._min[left], self._min[right])

    def find(self, prefix_sums: np.ndarray) -> np.ndarray:
        """Leaf index holding each prefix sum: the ``i`` with ``cum[i] <= s < cum[i + 1]``.

        All queries descend together, one level per handful of numpy steps.
        Float rounding near a boundary (or ``s == total``) could steer a query
        into a zero-mass subtree; such rare queries are redone with a descent
        that never enters one, so every answer is a leaf with positive value
        (as long as :attr:`total` is positive).
        """
        vals = np.array(prefix_sums, dtype=np.float64).reshape(-1)
        leaves = self._descend(vals.copy(), guarded=False)
        stray = self._sum[leaves + self.capacity] <= 0
        if stray.any():
            leaves[stray] = self._descend(vals[stray], guarded=True)
        return leaves

    def _descend(self, vals: np.ndarray, guarded: bool) -> np.ndarray:
        """Walk every query from the root to a leaf, updating ``vals`` in place."""
        tree = self._sum
        node = np.ones(vals.size, dtype=np.int64)
        lsum = np.empty_like(vals)
        right = np.empty(vals.size, dtype=bool)
        for _ in range(self._depth):
            node <<= 1  # now the left child
            np.take(tree, node, out=lsum)
            np.greater_equal(vals, lsum, out=right)
            if guarded:  # go right only into positive mass; go left only into positive mass
                right = (right & (tree[node + 1] > 0)) | (lsum <= 0)
            np.subtract(vals, lsum, out=vals, where=right)
            node += right
        return node - self.capacity


def last_occurrences(indexes: np.ndarray) -> np.ndarray:
    """Positions of each distinct index's last occurrence, so that with repeats the last value wins."""
    _, last = np.unique(indexes[::-1], return_index=True)
    return indexes.size - 1 - last
