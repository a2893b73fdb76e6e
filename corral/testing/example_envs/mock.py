"""Mock envs from RLlib's ``examples.env.mock_env``: fixed-length episodes with known observations and rewards.

Tests of samplers, episode bookkeeping and multi-agent envs (see
:mod:`corral.testing.example_envs.multi_agent`) use them because every value
they return is known in advance. Actions are checked against nothing and ignored.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["MockEnv", "MockEnv2", "MockEnv3"]


class MockEnv(gym.Env[Any, Any]):
    """Observation 0 and reward 1.0 every step; the episode ends after ``episode_length`` steps.

    The last step sets both ``terminated`` and ``truncated``, as RLlib's does.

    Args:
        episode_length: the number of steps in an episode.
        config: kept as ``self.config``; not read.
    """

    def __init__(self, episode_length: int, config: Any = None) -> None:
        self.episode_length = episode_length
        self.config = config
        self.i = 0
        self.observation_space = gym.spaces.Discrete(1)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
        """Start an episode (observation 0).

        Args:
            seed: seeds ``np_random`` (nothing here draws from it).
            options: ignored.
        """
        super().reset(seed=seed)
        self.i = 0
        return 0, {}

    def step(self, action: Any) -> tuple[int, float, bool, bool, dict[str, Any]]:
        """Count the step: observation 0, reward 1.0, the end at ``episode_length``."""
        self.i += 1
        done = self.i >= self.episode_length
        return 0, 1.0, done, done, {}


class MockEnv2(gym.Env[Any, Any]):
    """The observation is the step count (0 at reset), the reward 100.0 a step; the episode ends after ``episode_length`` steps.

    Observations lie in ``Discrete(episode_length + 1)``. The seed given to
    ``reset`` is kept as ``rng_seed``, for tests that check seeds reach the env;
    ``render`` returns a random 300x400 RGB image.

    Args:
        episode_length: the number of steps in an episode.
    """

    render_mode: str | None = "rgb_array"

    def __init__(self, episode_length: int) -> None:
        self.episode_length = episode_length
        self.i = 0
        self.observation_space = gym.spaces.Discrete(self.episode_length + 1)
        self.action_space = gym.spaces.Discrete(2)
        self.rng_seed: int | None = None
        self.metadata = {"render.modes": ["rgb_array"], "render_modes": ["rgb_array"]}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
        """Start an episode (observation 0); remember the seed, if one is given.

        Args:
            seed: kept as ``rng_seed``, and seeds ``np_random`` (which ``render`` draws from).
            options: ignored.
        """
        super().reset(seed=seed)
        self.i = 0
        if seed is not None:
            self.rng_seed = seed
        return self.i, {}

    def step(self, action: Any) -> tuple[int, float, bool, bool, dict[str, Any]]:
        """Count the step: observation the count, reward 100.0, the end at ``episode_length``."""
        self.i += 1
        done = self.i >= self.episode_length
        return self.i, 100.0, done, done, {}

    def render(self) -> np.ndarray:
        """A random ``(300, 400, 3)`` ``uint8`` image, standing in for a rendering."""
        return self.np_random.integers(0, 256, size=(300, 400, 3), dtype=np.uint8)


class MockEnv3(gym.Env[Any, Any]):
    """The observation and the reward are the step count, the info says it too; episodes end after ``episode_length`` steps.

    Observations lie in ``Discrete(100)``; the infos are ``{"timestep": count}``
    (0 at reset).

    Args:
        episode_length: the number of steps in an episode (below 100, to stay in the observation space).
    """

    def __init__(self, episode_length: int) -> None:
        self.episode_length = episode_length
        self.i = 0
        self.observation_space = gym.spaces.Discrete(100)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
        """Start an episode (observation 0, info ``{"timestep": 0}``).

        Args:
            seed: seeds ``np_random`` (nothing here draws from it).
            options: ignored.
        """
        super().reset(seed=seed)
        self.i = 0
        return self.i, {"timestep": 0}

    def step(self, action: Any) -> tuple[int, float, bool, bool, dict[str, Any]]:
        """Count the step: observation and reward the count, the end at ``episode_length``."""
        self.i += 1
        done = self.i >= self.episode_length
        return self.i, float(self.i), done, done, {"timestep": self.i}
