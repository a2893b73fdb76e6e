"""RLlib's observation preprocessors: one observation as the array corral's networks read.

Discrete parts one-hot, Tuple and Dict parts flattened side by side, a
``Repeated`` list as its length and padded items (corral's own
:class:`~corral.core.common.spaces.ObservationPreprocessor`); a Box passes
through unchanged, as with RLlib's ``NoPreprocessor``. Scripts get one
from ``get_preprocessor(space)`` or ``ModelCatalog.get_preprocessor_for_space(space)``.
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
    """The preprocessor of Discrete, MultiDiscrete, MultiBinary, Tuple, Dict and Repeated spaces: one flat float32 vector."""

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
        return np.asarray(self._flatten(add_batch_dim(self._obs_space, observation))[0])


RepeatedValuesPreprocessor = FlatteningPreprocessor
"""RLlib's name for a ``Repeated`` space's preprocessor: the list's length, then its items, zero-padded to ``max_len``"""


def get_preprocessor(space: gym.Space[Any]) -> type[NoPreprocessor]:
    """The preprocessor class for observations of ``space`` (instantiate it with the space).

    Args:
        space: the raw observation space.

    Returns:
        :class:`NoPreprocessor` for a Box, :class:`FlatteningPreprocessor` otherwise.
    """
    return NoPreprocessor if isinstance(space, gym.spaces.Box) else FlatteningPreprocessor
