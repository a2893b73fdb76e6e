"""RLlib's variable-length lists: the ``Repeated`` space, and the ``RepeatedValues`` a model reads for it.

An observation of ``Repeated(child, max_len)`` is a list of up to ``max_len``
observations of ``child`` (a player list, the items a player holds). The
preprocessor writes it, as RLlib's does, into one flat row: the list's length,
then each item flattened, then zeros up to ``max_len`` items
(``1 + max_len * child size`` numbers). A ModelV2 reads it back through
``restore_original_dimensions`` as :class:`RepeatedValues`: the items padded
to ``[B, max_len, ...]`` beside the lengths.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np


class Repeated(gym.Space[list[Any]]):
    """A list of 0 to ``max_len`` observations of ``child_space`` (RLlib's ``spaces.Repeated``).

    Args:
        child_space: the space of each item (any space corral preprocesses, a ``Repeated`` too).
        max_len: the most items a list holds.
        seed: seeds this space's generator and the child's (RLlib seeds neither).

    Raises:
        TypeError: ``child_space`` is not a gymnasium space.
        ValueError: ``max_len`` is below 1.
    """

    def __init__(self, child_space: gym.Space[Any], max_len: int, seed: int | None = None) -> None:
        if not isinstance(child_space, gym.Space):
            raise TypeError(f"Repeated's child_space must be a gymnasium space, such as Box(0, 1, (3,)); got {child_space!r}")
        if int(max_len) < 1:
            raise ValueError(f"Repeated's max_len is the most items a list holds, at least 1; got {max_len}")
        self.child_space = child_space
        self.max_len = int(max_len)
        super().__init__(None, None, seed)

    def seed(self, seed: int | None = None) -> list[int]:
        """Seed the draw of list lengths and, from it, the child space's draws.

        Args:
            seed: the seed; None draws one from the operating system.

        Returns:
            The seeds used, this space's first.
        """
        seeds = super().seed(seed)
        self.child_space.seed(int(self.np_random.integers(2**31)))
        return list(seeds) if isinstance(seeds, list) else [seeds]

    @property
    def is_np_flattenable(self) -> bool:
        """False: lists of varying length have no fixed-size flat form in gymnasium's sense."""
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> list[Any]:
        """A list of 1 to ``max_len`` child samples, as RLlib's ``Repeated.sample`` draws them.

        Args:
            mask: not taken (gymnasium's argument).
            probability: not taken (gymnasium's argument).

        Raises:
            ValueError: a mask or probability was given.
        """
        if mask is not None or probability is not None:
            raise ValueError("Repeated.sample takes no mask or probability; sample the child space for masked items")
        return [self.child_space.sample() for _ in range(int(self.np_random.integers(1, self.max_len + 1)))]

    def contains(self, x: Any) -> bool:
        """Whether ``x`` is a list (or tuple, or array) of at most ``max_len`` items of the child space."""
        return (
            isinstance(x, (list, tuple, np.ndarray))
            and len(x) <= self.max_len
            and all(self.child_space.contains(item) for item in x)
        )

    def to_jsonable(self, sample_n: Iterable[list[Any]]) -> list[list[Any]]:
        """Lists as JSON-ready values, item by item through the child space."""
        return [self.child_space.to_jsonable(list(sample)) for sample in sample_n]

    def from_jsonable(self, sample_n: Sequence[list[Any]]) -> list[list[Any]]:
        """The lists :meth:`to_jsonable` wrote."""
        return [self.child_space.from_jsonable(list(sample)) for sample in sample_n]

    def __repr__(self) -> str:
        return f"Repeated({self.child_space!r}, {self.max_len})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Repeated) and other.child_space == self.child_space and other.max_len == self.max_len

    __hash__ = None  # type: ignore[assignment]  # equal spaces compare by value, like gymnasium's


class RepeatedValues:
    """A batch of ``Repeated`` observations as a model reads them: padded items and their lists' lengths.

    For ``Repeated(Box(K), N)`` in a batch of B, ``values`` is a ``[B, N, K]``
    tensor; for ``Repeated(Dict(...), N)`` a dict of ``[B, N, ...]`` tensors;
    a nested ``Repeated`` is a ``RepeatedValues`` whose tensors and lengths
    have one more ``[N]`` axis per enclosing list.

    Args:
        values: the items, padded with zeros after each list's end.
        lengths: ``[B, ...]`` how many items of each list are real (floats, as the flat row holds them).
        max_len: the space's ``max_len``.
    """

    def __init__(self, values: Any, lengths: Any, max_len: int) -> None:
        self.values = values
        self.lengths = lengths
        self.max_len = max_len
        self._unbatched: list[list[Any]] | None = None

    def unbatch_repeat_dim(self) -> list[Any]:
        """The padded items position by position: a list of ``max_len`` structures of ``[B, ...]`` tensors."""
        return [_at_position(self.values, j) for j in range(self.max_len)]

    def unbatch_all(self) -> list[list[Any]]:
        """Each row's real items as Python lists (for reading; slow to compute with): ``B`` lists of items."""
        if self._unbatched is None:
            positions = self.unbatch_repeat_dim()
            self._unbatched = [[_row(positions[j], i) for j in range(int(self.lengths[i]))] for i in range(len(self.lengths))]
        return self._unbatched

    def map_values(self, fn: Callable[[Any], Any], lengths: Callable[[Any], Any]) -> RepeatedValues:
        """The same lists with ``fn`` applied to every tensor of ``values`` and ``lengths`` to the lengths.

        Args:
            fn: applied to each leaf tensor (nested ``RepeatedValues`` too).
            lengths: applied to this list's and nested lists' lengths.
        """
        return RepeatedValues(map_leaves(self.values, fn, lengths), lengths(self.lengths), self.max_len)

    def __repr__(self) -> str:
        return f"RepeatedValues(value={self.values!r}, lengths={self.lengths!r}, max_len={self.max_len})"


def map_leaves(structure: Any, fn: Callable[[Any], Any], lengths: Callable[[Any], Any] | None = None) -> Any:
    """``fn`` on every tensor of a dict / tuple / :class:`RepeatedValues` structure.

    Args:
        structure: the structure.
        fn: applied to each leaf.
        lengths: applied to each nested list's lengths (None: ``fn``).
    """
    if isinstance(structure, dict):
        return {key: map_leaves(value, fn, lengths) for key, value in structure.items()}
    if isinstance(structure, tuple):
        return tuple(map_leaves(value, fn, lengths) for value in structure)
    if isinstance(structure, RepeatedValues):
        return structure.map_values(fn, lengths or fn)
    return fn(structure)


def _at_position(values: Any, j: int) -> Any:
    return map_leaves(values, lambda tensor: tensor[:, j], lambda lengths: lengths[:, j])


def _row(values: Any, i: int) -> Any:
    if isinstance(values, dict):
        return {key: _row(value, i) for key, value in values.items()}
    if isinstance(values, tuple):
        return tuple(_row(value, i) for value in values)
    if isinstance(values, RepeatedValues):
        return values.unbatch_all()[i]
    return values[i]
