"""From the policy's actions to the env's: the space a policy acts in, and the mapping back.

A policy acts in one flat vector per row. A Box of shape (2, 3) is a
6-dimensional Box to the policy, scaled from [-1, 1] to its bounds when
``normalize_actions`` is on. A Tuple or Dict action space (nested as deep as
the env likes; its leaves Discrete, MultiDiscrete or Box) is one float vector
to the policy, as RLlib stores such actions in its batches: the leaves in the
space's order, a Discrete leaf one number (its index), a MultiDiscrete leaf one
per component, a Box leaf flattened. Its distribution is one per leaf
(:class:`~corral.core.networks.distributions.MultiActionDistribution`), and the
env gets the structure back: a tuple or dict of batched arrays for a vector
env, one structure per row for a single action.
"""

from __future__ import annotations

from typing import Any, cast

import gymnasium as gym
import numpy as np

from corral.errors import EnvError

_LEAF_SPACES = (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.Box)
_STRUCTURES = (gym.spaces.Tuple, gym.spaces.Dict)


class ActionAdapter:
    """Maps policy actions to env actions, and describes the space the policy acts in.

    Args:
        space: the env's action space: Discrete, MultiDiscrete, Box, or a Tuple or Dict of them.
        normalize_actions: produce Box actions in [-1, 1], scaled to the bounds (finite bounds only).
        clip_actions: clip Box actions to the bounds (when not normalizing).

    Raises:
        EnvError: another action space, or a Tuple or Dict with a leaf of another kind.
    """

    def __init__(self, space: gym.Space[Any], normalize_actions: bool, clip_actions: bool) -> None:
        self.space = space
        self.policy_space: gym.Space[Any] = space
        """the space the policy's actions are in: what its distribution samples and its batches store"""
        self.distribution_space: gym.Space[Any] = space
        """the space the action distribution is built for: ``policy_space``, or for a Tuple or Dict
        action space a Tuple of its leaves' policy spaces"""
        self.leaves: list[tuple[str, ActionAdapter, slice]] = []
        """a Tuple or Dict action space's leaves in order: their path (``"[0]['move']"``), adapter, and
        columns in the policy's flat action"""
        self.normalize = self.clip = self.is_box = False
        self._env_shape: tuple[int, ...] | None = None  # set when the env's Box is not one-dimensional
        if isinstance(space, _STRUCTURES):
            self._structured(space, normalize_actions, clip_actions)
            return
        if not isinstance(space, _LEAF_SPACES):
            raise EnvError(f"action space {space} is not supported; use Discrete, MultiDiscrete, Box, or a Tuple or Dict of them")
        if isinstance(space, gym.spaces.Box):
            self._box(space, normalize_actions, clip_actions)

    def _box(self, box: gym.spaces.Box, normalize_actions: bool, clip_actions: bool) -> None:
        self.is_box = True
        self.normalize = normalize_actions and bool(np.all(np.isfinite(box.low)) and np.all(np.isfinite(box.high)))
        self.clip = clip_actions and not self.normalize
        low, high = box.low.reshape(-1), box.high.reshape(-1)
        self._low, self._bounds = low.astype(np.float32), (low, high)
        self._half_range = ((high - low) / 2.0).astype(np.float32)
        if len(box.shape) != 1:  # the policy acts in a flat vector: a scalar Box's is one number
            self._env_shape = tuple(box.shape)
            self.policy_space = gym.spaces.Box(low, high, dtype=cast("type[np.floating[Any]]", np.dtype(box.dtype).type))
        if self.normalize:
            self.policy_space = gym.spaces.Box(-1.0, 1.0, low.shape, np.float32)
        self.distribution_space = self.policy_space

    def _structured(self, space: gym.Space[Any], normalize_actions: bool, clip_actions: bool) -> None:
        lows: list[np.ndarray] = []
        highs: list[np.ndarray] = []
        column = 0
        for path, leaf in _leaves(space, ""):
            adapter = ActionAdapter(leaf, normalize_actions, clip_actions)
            low, high = _flat_bounds(adapter.policy_space)
            self.leaves.append((path, adapter, slice(column, column + low.size)))
            lows.append(low)
            highs.append(high)
            column += low.size
        self.policy_space = gym.spaces.Box(np.concatenate(lows), np.concatenate(highs), dtype=np.float32)
        self.distribution_space = gym.spaces.Tuple([adapter.policy_space for _, adapter, _ in self.leaves])

    @property
    def structured(self) -> bool:
        """Whether the env's action space is a Tuple or Dict (the policy's actions are then flat vectors)."""
        return bool(self.leaves)

    def __call__(self, actions: np.ndarray) -> Any:
        """Env actions for a batch of policy actions: an array, or a Tuple or Dict action space's structure of arrays."""
        if self.leaves:
            parts = iter(adapter(_leaf_actions(adapter, actions[:, columns])) for _, adapter, columns in self.leaves)
            return _assemble(self.space, parts)
        if self.normalize:
            return self._env_shaped(self._low + (np.clip(actions, -1.0, 1.0) + 1.0) * self._half_range)
        if self.clip:
            return self._env_shaped(np.clip(actions, *self._bounds))
        if self._env_shape is not None:
            return self._env_shaped(actions)
        if isinstance(self.space, gym.spaces.Discrete) and self.space.start:
            return actions + int(self.space.start)
        return actions

    def rows(self, env_actions: Any) -> list[Any]:
        """One env action per row of :meth:`__call__`'s result, as an env's ``step`` takes it.

        Discrete actions become Python ints, which every env accepts; a Tuple or
        Dict action space's rows are tuples or dicts of its leaves' actions.

        Args:
            env_actions: what :meth:`__call__` returned for a batch.

        Returns:
            The batch's actions, one per row.
        """
        if isinstance(self.space, gym.spaces.Discrete):
            return cast(list[Any], np.asarray(env_actions).tolist())
        if not self.leaves:
            return list(env_actions)
        first = env_actions
        while isinstance(first, (dict, tuple)):  # down to a leaf's batch, whose length is the rows'
            first = next(iter(first.values())) if isinstance(first, dict) else first[0]
        return [_row(self.space, env_actions, i) for i in range(len(first))]

    def policy_actions(self, env_actions: list[Any]) -> np.ndarray:
        """The policy's actions for env actions taken by someone else (an application's logged actions): the inverse of
        :meth:`__call__`.

        A normalized Box action is scaled back into [-1, 1]; a Discrete action loses the space's start; a
        Tuple or Dict action becomes the flat vector of its leaves.

        Args:
            env_actions: one env action per row, each in :attr:`space`.

        Returns:
            ``[B, ...]`` actions in :attr:`policy_space`.
        """
        if self.leaves:
            rows = [
                np.concatenate([np.asarray(leaf, np.float32).reshape(-1) for leaf in self._leaf_policy_actions(self.space, a)])
                for a in env_actions
            ]
            return np.stack(rows).astype(np.float32) if rows else np.zeros((0, *(self.policy_space.shape or ())), np.float32)
        actions = np.asarray(env_actions)
        if isinstance(self.space, gym.spaces.Discrete):
            return cast(np.ndarray, actions.astype(np.int64) - int(self.space.start))
        if isinstance(self.space, gym.spaces.MultiDiscrete):
            return actions.astype(np.int64)
        flat = actions.reshape(len(env_actions), -1).astype(np.float32)
        if self.normalize:
            low, high = (b.reshape(-1).astype(np.float32) for b in self._bounds)
            flat = np.clip(2.0 * (flat - low) / (high - low) - 1.0, -1.0, 1.0)
        return cast(np.ndarray, flat.reshape(len(env_actions), *(self.policy_space.shape or ())))

    def _leaf_policy_actions(self, space: gym.Space[Any], action: Any) -> list[np.ndarray]:
        """A structured action's leaves as policy actions, in the order of :attr:`leaves`."""
        found: list[Any] = []

        def walk(part: gym.Space[Any], value: Any) -> None:
            if isinstance(part, gym.spaces.Dict):
                for key, sub in part.spaces.items():
                    walk(sub, value[key])
            elif isinstance(part, gym.spaces.Tuple):
                for j, sub in enumerate(part.spaces):
                    walk(sub, value[j])
            else:
                found.append(value)

        walk(space, action)
        return [adapter.policy_actions([value])[0] for (_, adapter, _), value in zip(self.leaves, found, strict=True)]

    def _env_shaped(self, actions: np.ndarray) -> np.ndarray:
        return actions if self._env_shape is None else actions.reshape(len(actions), *self._env_shape)


def _leaves(space: gym.Space[Any], path: str) -> list[tuple[str, gym.Space[Any]]]:
    """A Tuple or Dict space's leaves with their paths, in the order its ``spaces`` list them (depth first)."""
    if isinstance(space, gym.spaces.Dict):
        return [leaf for key, part in space.spaces.items() for leaf in _leaves(part, f"{path}[{key!r}]")]
    if isinstance(space, gym.spaces.Tuple):
        return [leaf for index, part in enumerate(space.spaces) for leaf in _leaves(part, f"{path}[{index}]")]
    if not isinstance(space, _LEAF_SPACES):
        raise EnvError(
            f"action space: the part at {path} is {space}; a Tuple or Dict action space's parts must be Discrete, "
            "MultiDiscrete, Box, or Tuples and Dicts of them"
        )
    return [(path, space)]


def _flat_bounds(space: gym.Space[Any]) -> tuple[np.ndarray, np.ndarray]:
    """The bounds of a leaf's policy actions as flat float vectors: a Discrete index is one number."""
    if isinstance(space, gym.spaces.Discrete):
        return np.zeros(1, np.float32), np.full(1, space.n - 1, np.float32)
    if isinstance(space, gym.spaces.MultiDiscrete):
        nvec = space.nvec.reshape(-1).astype(np.float32)
        return np.zeros_like(nvec), nvec - 1
    box = cast(gym.spaces.Box, space)
    return box.low.reshape(-1).astype(np.float32), box.high.reshape(-1).astype(np.float32)


def _leaf_actions(adapter: ActionAdapter, columns: np.ndarray) -> np.ndarray:
    """A leaf's policy actions from its columns of the flat actions: integer indexes for Discrete and MultiDiscrete."""
    space = adapter.policy_space
    if isinstance(space, gym.spaces.Discrete):
        return cast(np.ndarray, np.rint(columns[:, 0]).astype(np.int64))
    if isinstance(space, gym.spaces.MultiDiscrete):
        return cast(np.ndarray, np.rint(columns).astype(np.int64).reshape(len(columns), *space.shape))
    return columns.astype(space.dtype or np.float32, copy=False)


def _assemble(space: gym.Space[Any], parts: Any) -> Any:
    """The space's structure with its leaves taken from ``parts`` in :func:`_leaves`' order."""
    if isinstance(space, gym.spaces.Dict):
        return {key: _assemble(part, parts) for key, part in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(_assemble(part, parts) for part in space.spaces)
    return next(parts)


def _row(space: gym.Space[Any], batch: Any, i: int) -> Any:
    """Row ``i`` of a batched structure, Discrete leaves as Python ints."""
    if isinstance(space, gym.spaces.Dict):
        return {key: _row(part, batch[key], i) for key, part in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(_row(part, batch[j], i) for j, part in enumerate(space.spaces))
    return int(batch[i]) if isinstance(space, gym.spaces.Discrete) else np.asarray(batch[i])


def zero_actions(space: gym.Space[Any], rows: int) -> np.ndarray:
    """``rows`` zero actions of the policy's action space: the previous action at an episode's start.

    Args:
        space: the policy's action space.
        rows: how many.

    Returns:
        ``[rows, *space.shape]`` zeros of the space's dtype.
    """
    return np.zeros((rows, *(space.shape or ())), dtype=space.dtype or np.float32)
