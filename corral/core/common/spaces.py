"""Turning gymnasium observations into network inputs, checking them, and batching them.

Observations become one flat float32 vector per row (one-hot for Discrete and
MultiDiscrete, concatenation for Dict and Tuple), except images, which keep
their shape and dtype for the CNN. Actions go the other way in
:mod:`corral.core.common.actions`.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any, TypeGuard, cast

import gymnasium as gym
import numpy as np

from corral.core.common.repeated import Repeated
from corral.errors import EnvError


def is_image_space(space: gym.Space[Any]) -> TypeGuard[gym.spaces.Box]:
    """A Box of shape (H, W, C) that a CNN should read."""
    return isinstance(space, gym.spaces.Box) and len(space.shape) == 3


class ObservationPreprocessor:
    """Maps a batch of raw observations (as a vector env returns them) to one array.

    Attributes:
        shape: the shape of one preprocessed observation.
        dtype: float32, or the Box's own dtype for images (uint8 stays uint8).
    """

    def __init__(self, space: gym.Space[Any]) -> None:
        self.space = space
        if is_image_space(space):
            self.shape: tuple[int, ...] = tuple(space.shape)
            self.dtype: np.dtype = cast(np.dtype, space.dtype)  # a Box always has a dtype
        else:
            self.shape = (flat_size(space),)
            self.dtype = np.dtype(np.float32)

    def __call__(self, obs: Any) -> np.ndarray:
        """Preprocess a batch: the result has shape ``(batch, *self.shape)``."""
        if is_image_space(self.space):
            return np.asarray(obs)
        return _flatten_batch(self.space, obs)


def flat_size(space: gym.Space[Any]) -> int:
    """How many numbers one observation of ``space`` flattens to (Discrete parts one-hot), as the preprocessor does.

    Raises:
        EnvError: a space the preprocessor does not take.
    """
    if isinstance(space, gym.spaces.Box):
        return int(np.prod(space.shape))
    if isinstance(space, gym.spaces.Discrete):
        return int(space.n)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return int(np.sum(space.nvec))
    if isinstance(space, gym.spaces.MultiBinary):
        return int(np.prod(space.shape))
    if isinstance(space, gym.spaces.Dict):
        return sum(flat_size(s) for s in space.spaces.values())
    if isinstance(space, gym.spaces.Tuple):
        return sum(flat_size(s) for s in space.spaces)
    if isinstance(space, Repeated):
        return 1 + space.max_len * flat_size(space.child_space)  # the length, then the items
    raise EnvError(
        f"observation space {space} is not supported; use Box, Discrete, MultiDiscrete, MultiBinary, Dict, Tuple or Repeated"
    )


def _flatten_batch(space: gym.Space[Any], obs: Any) -> np.ndarray:
    if isinstance(space, (gym.spaces.Box, gym.spaces.MultiBinary)):
        arr = np.asarray(obs, dtype=np.float32)
        return arr.reshape(arr.shape[0], -1)
    if isinstance(space, gym.spaces.Discrete):
        idx = np.asarray(obs, dtype=np.int64) - int(space.start)
        out = np.zeros((idx.shape[0], int(space.n)), dtype=np.float32)
        out[np.arange(idx.shape[0]), idx] = 1.0
        return out
    if isinstance(space, gym.spaces.MultiDiscrete):
        idx = np.asarray(obs, dtype=np.int64).reshape(-1, len(space.nvec))
        parts = [_flatten_batch(gym.spaces.Discrete(int(n)), idx[:, j]) for j, n in enumerate(space.nvec.ravel())]
        return np.concatenate(parts, axis=1)
    if isinstance(space, gym.spaces.Dict):
        return np.concatenate([_flatten_batch(s, obs[k]) for k, s in space.spaces.items()], axis=1)
    if isinstance(space, gym.spaces.Tuple):
        return np.concatenate([_flatten_batch(s, obs[i]) for i, s in enumerate(space.spaces)], axis=1)
    if isinstance(space, Repeated):
        return _flatten_lists(space, obs)
    raise EnvError(f"observation space {space} is not supported")


def _flatten_lists(space: Repeated, rows: Sequence[Any]) -> np.ndarray:
    """Each row's list as RLlib writes it: its length, its items flattened one after another, zeros after them."""
    width = flat_size(space.child_space)
    out = np.zeros((len(rows), 1 + space.max_len * width), np.float32)
    for i, row in enumerate(rows):
        if len(row) > space.max_len:
            raise EnvError(f"an observation holds a list of {len(row)} items, more than {space}'s max_len of {space.max_len}")
        out[i, 0] = len(row)
    items = [item for row in rows for item in row]
    if items:  # all rows' items flattened in one batch, then put in place
        flat = _flatten_batch(space.child_space, stack_observations(items, space.child_space))
        starts = np.cumsum([0, *(len(row) for row in rows)])
        for i, row in enumerate(rows):
            out[i, 1 : 1 + len(row) * width] = flat[starts[i] : starts[i + 1]].ravel()
    return out


class ObservationCheck:
    """Says why observations do not belong to a space (wrong shape, NaN, outside the bounds), or that they do.

    Works on one observation or on a batch (``batched=True``, as a vector env
    returns them) with vectorised numpy checks, cheap enough for every step.
    Box bounds that span the whole dtype (uint8 images in [0, 255]) are not
    compared at all.

    Args:
        space: the observation space.
    """

    def __init__(self, space: gym.Space[Any]) -> None:
        self.space = space
        if isinstance(space, gym.spaces.Box):
            info = np.iinfo(space.dtype) if np.issubdtype(space.dtype, np.integer) else None
            full = info is not None and bool(np.all(space.low <= info.min) and np.all(space.high >= info.max))
            self._bounds = None if full else (space.low, space.high)
        # a few float values (a CartPole state) compare faster in Python than through numpy's per-call overhead
        self._few: tuple[list[float], list[float]] | None = None
        self._shape = space.shape
        if isinstance(space, gym.spaces.Box) and space.low.dtype.kind == "f" and space.low.size <= 64:
            self._few = (space.low.ravel().tolist(), space.high.ravel().tolist())
        self._parts = (
            {k: ObservationCheck(s) for k, s in space.spaces.items()}
            if isinstance(space, gym.spaces.Dict)
            else dict(enumerate(ObservationCheck(s) for s in space.spaces))
            if isinstance(space, gym.spaces.Tuple)
            else None
        )

    def _few_inside(self, obs: Any) -> bool:
        """Whether one observation of a small float Box is inside it, checked in Python (False: ask numpy why not)."""
        few = self._few
        if few is None or type(obs) is not np.ndarray or obs.shape != self._shape or obs.dtype.kind != "f":
            return False
        values = obs.tolist() if obs.ndim == 1 else obs.ravel().tolist()
        # NaN compares False, so it is never inside; the shapes matched, so the lists have the same length
        return all(map(operator.le, few[0], values)) and all(map(operator.le, values, few[1]))

    def problem(self, obs: Any, batched: bool = False, bounds: bool = True) -> tuple[int, str] | None:
        """``(row, what is wrong)`` for the first bad observation, or None if all belong to the space.

        ``row`` is the index in the batch (0 when not ``batched``).

        Args:
            obs: one observation, or a batch of them with a leading batch axis (Dict and
                Tuple observations: a dict or tuple of such batches).
            batched: whether ``obs`` is a batch.
            bounds: check values against the space's bounds too (False: the form only).

        Returns:
            ``(row, what is wrong)``, or None. A wrong shape, a missing Dict or Tuple part
            or values that are not numbers are reported at row 0, whichever row has them.
        """
        space = self.space
        if not batched and self._few_inside(obs):
            return None
        if self._parts is not None:
            for key, check in self._parts.items():
                try:
                    part = obs[key]
                except (KeyError, IndexError, TypeError):
                    return 0, f"has no {key!r} part, which the space {space} has"
                found = check.problem(part, batched, bounds)
                if found is not None:
                    return found[0], f"[{key!r}] {found[1]}"
            return None
        if not isinstance(space, (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
            rows = obs if batched else [obs]
            bad = [i for i, row in enumerate(rows) if not space.contains(row)]
            return (bad[0], f"is not in the observation space {space}") if bad else None
        try:
            arr = np.asarray(obs)
        except (ValueError, TypeError) as exc:
            return 0, f"is not an array ({exc})"
        shape = tuple(cast(tuple[int, ...], space.shape))  # these four spaces always have a shape
        got = arr.shape[1:] if batched else arr.shape
        if got != shape:
            return 0, f"has shape {got}, but the observation space {space} has shape {shape}"
        if arr.dtype.kind not in "biuf":
            return 0, f"holds {arr.dtype} values, not numbers"
        return self._outside(arr, batched) if bounds else None

    def _outside(self, arr: np.ndarray, batched: bool) -> tuple[int, str] | None:
        """``(row, values)`` of the first observation with values outside the space's bounds, or None."""
        space = self.space
        if isinstance(space, gym.spaces.Box):
            if self._bounds is None:
                return None
            inside = (arr >= self._bounds[0]) & (arr <= self._bounds[1])  # NaN compares False: never inside
        elif isinstance(space, gym.spaces.Discrete):
            inside = (arr >= space.start) & (arr < space.start + space.n)
        elif isinstance(space, gym.spaces.MultiDiscrete):
            inside = (arr >= space.start) & (arr < space.start + space.nvec)
        else:
            inside = (arr == 0) | (arr == 1)
        if bool(inside.all()):
            return None
        flat = inside.reshape(len(arr), -1) if batched else inside.reshape(1, -1)
        row = int(np.flatnonzero(~flat.all(axis=1))[0])
        values = (arr[row] if batched else arr).reshape(-1)[~flat[row]]
        return row, f"holds {values[:3].tolist()}, outside the observation space {space}"


def space_to_json(space: gym.Space[Any]) -> dict[str, Any]:
    """A JSON description of a space (type, shape, dtype, sizes), to compare two spaces and name them in messages.

    Box bounds are left out, so an env whose bounds moved still evaluates a
    checkpoint; checkpoints store spaces exactly with
    :func:`corral.core.common.space_codec.encode_space`.
    """
    if isinstance(space, gym.spaces.Box):
        return {"type": "Box", "shape": list(space.shape), "dtype": str(space.dtype)}
    if isinstance(space, gym.spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, gym.spaces.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": space.nvec.tolist()}
    if isinstance(space, gym.spaces.MultiBinary):
        return {"type": "MultiBinary", "shape": list(space.shape)}
    if isinstance(space, gym.spaces.Dict):
        return {"type": "Dict", "spaces": {k: space_to_json(s) for k, s in space.spaces.items()}}
    if isinstance(space, gym.spaces.Tuple):
        return {"type": "Tuple", "spaces": [space_to_json(s) for s in space.spaces]}
    if isinstance(space, Repeated):
        return {"type": "Repeated", "child_space": space_to_json(space.child_space), "max_len": space.max_len}
    return {"type": type(space).__name__}


def add_batch_dim(space: gym.Space[Any], obs: Any) -> Any:
    """One observation of ``space`` as a batch of one (Dict and Tuple observations part by part).

    Args:
        space: the observation space.
        obs: one observation of it.

    Returns:
        The observation with a leading batch dimension of 1 on every array.
    """
    if isinstance(space, gym.spaces.Dict):
        return {k: add_batch_dim(s, obs[k]) for k, s in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(add_batch_dim(s, o) for s, o in zip(space.spaces, obs, strict=False))
    if isinstance(space, Repeated):
        return [obs]  # a batch of one list
    return np.asarray(obs)[None]


def stack_observations(observations: Sequence[Any], space: gym.Space[Any] | None = None) -> Any:
    """Single observations as one batch, as a vector env returns them (dicts and tuples of arrays are stacked inside).

    Args:
        observations: observations of one space, without a batch axis.
        space: their space, where it holds ``Repeated`` lists (which stay a list of lists); None: read the
            structure from the first observation.

    Returns:
        An array with a leading batch axis, or a dict or tuple of such arrays.
    """
    if isinstance(space, Repeated):
        return list(observations)
    first = observations[0]
    if isinstance(first, dict):
        parts = space.spaces if isinstance(space, gym.spaces.Dict) else {}
        return {key: stack_observations([o[key] for o in observations], parts.get(key)) for key in first}
    if isinstance(first, tuple):
        items = space.spaces if isinstance(space, gym.spaces.Tuple) else (None,) * len(first)
        return tuple(stack_observations([o[i] for o in observations], items[i]) for i in range(len(first)))
    return np.stack([np.asarray(o) for o in observations])
