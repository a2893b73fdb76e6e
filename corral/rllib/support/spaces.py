"""RLlib's space helpers: ``get_preprocessor``, ``flatten_space``, ``get_base_struct_from_space``.

A preprocessor here turns one observation into the array corral's networks
read: Discrete parts one-hot, Tuple and Dict parts flattened side by side
(corral's own :class:`~corral.core.common.spaces.ObservationPreprocessor`);
a Box passes through unchanged, as with RLlib's ``NoPreprocessor``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from corral.core.common.spaces import ObservationPreprocessor, add_batch_dim


class NoPreprocessor:
    """The preprocessor of a Box: observations pass through unchanged.

    Attributes:
        shape: one observation's shape.
        size: how many numbers it holds.
        observation_space: the space of what :meth:`transform` returns.
    """

    def __init__(self, obs_space: gym.Space[Any], options: dict[str, Any] | None = None) -> None:
        """Take the space's shape.

        Args:
            obs_space: the raw observation space.
            options: RLlib's model options (unused: nothing here depends on them).
        """
        self._obs_space = obs_space
        self.shape: tuple[int, ...] = tuple(obs_space.shape or ())
        self.size = int(np.prod(self.shape))
        self.observation_space: gym.Space[Any] = obs_space

    def transform(self, observation: Any) -> np.ndarray:
        """One observation as the network reads it.

        Args:
            observation: one raw observation from the space.
        """
        return np.asarray(observation)


class FlatteningPreprocessor(NoPreprocessor):
    """The preprocessor of Discrete, MultiDiscrete, MultiBinary, Tuple and Dict spaces: one flat float32 vector."""

    def __init__(self, obs_space: gym.Space[Any], options: dict[str, Any] | None = None) -> None:
        """Build the flattening for the space.

        Args:
            obs_space: the raw observation space.
            options: RLlib's model options (unused).
        """
        super().__init__(obs_space, options)
        self._flatten = ObservationPreprocessor(obs_space)
        self.shape = self._flatten.shape
        self.size = int(np.prod(self.shape))
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, self.shape, np.float32)

    def transform(self, observation: Any) -> np.ndarray:
        """One observation as one flat float32 vector.

        Args:
            observation: one raw observation from the space.
        """
        return self._flatten(add_batch_dim(self._obs_space, observation))[0]


def get_preprocessor(space: gym.Space[Any]) -> type[NoPreprocessor]:
    """The preprocessor class for observations of ``space`` (instantiate it with the space).

    Args:
        space: the raw observation space.

    Returns:
        :class:`NoPreprocessor` for a Box, :class:`FlatteningPreprocessor` otherwise.
    """
    return NoPreprocessor if isinstance(space, gym.spaces.Box) else FlatteningPreprocessor


def get_base_struct_from_space(space: gym.Space[Any]) -> Any:
    """A Tuple space as a tuple and a Dict space as a dict of its parts, recursively; other spaces as themselves.

    Args:
        space: the space.
    """
    if isinstance(space, gym.spaces.Tuple):
        return tuple(get_base_struct_from_space(s) for s in space.spaces)
    if isinstance(space, gym.spaces.Dict):
        return {k: get_base_struct_from_space(s) for k, s in space.spaces.items()}
    return space


def flatten_space(space: gym.Space[Any]) -> list[gym.Space[Any]]:
    """The primitive spaces inside ``space``, in order (a Dict's keys sorted, as RLlib's ``tree.flatten`` orders them).

    Args:
        space: the space.

    Returns:
        A list of the leaves (``[space]`` for a primitive space).
    """
    if isinstance(space, gym.spaces.Tuple):
        return [leaf for s in space.spaces for leaf in flatten_space(s)]
    if isinstance(space, gym.spaces.Dict):
        return [leaf for key in sorted(space.spaces) for leaf in flatten_space(space.spaces[key])]
    return [space]
