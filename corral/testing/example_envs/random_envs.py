"""Envs that act at random in any spaces, from RLlib's ``examples.env.random_env``: for testing code against a space.

:class:`RandomEnv` draws observations and rewards from spaces its config
names, and ends episodes by chance or at a length limit; the others are it
with fixed spaces, and one copy per agent (:data:`RandomMultiAgentEnv`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from corral.core.environments.multi_agent_env import make_multi_agent
from corral.testing.example_envs._common import config_dict, draw_seed

__all__ = ["RandomEnv", "RandomLargeObsSpaceEnv", "RandomLargeObsSpaceEnvContActions", "RandomMultiAgentEnv"]


class RandomEnv(gym.Env[Any, Any]):
    """Observations and rewards drawn from configurable spaces; each step ends the episode with a fixed chance.

    A step terminates the episode with probability ``p_terminated``, or
    truncates it (and does not terminate) once it has taken ``max_episode_len``
    steps. With ``static_samples`` one observation and one reward, drawn when
    the env is made, are returned every time (as copies). A reward drawn as a
    0-d array (the default reward space) is returned as a float.

    Args:
        config: ``action_space`` (default ``Discrete(2)``), ``observation_space``
            (default ``Discrete(2)``), ``reward_space`` (default ``Box(-1, 1, ())``),
            ``static_samples`` (default False), ``p_terminated`` (default: the
            older key ``p_done``, else 0.1), ``max_episode_len`` (default None:
            no limit; 0 also means none) and ``check_action_bounds`` (default False:
            True raises ``ValueError`` on an action outside the action space).
    """

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        settings = config_dict(config)
        self.action_space: gym.Space[Any] = settings.get("action_space", gym.spaces.Discrete(2))
        self.observation_space: gym.Space[Any] = settings.get("observation_space", gym.spaces.Discrete(2))
        self.reward_space: gym.Space[Any] = settings.get("reward_space", gym.spaces.Box(-1.0, 1.0, (), np.float32))
        # Private copies to draw from, seeded from np_random at each reset (the public spaces stay the user's to seed).
        self._observations = copy.deepcopy(self.observation_space)
        self._rewards = copy.deepcopy(self.reward_space)
        self.static_samples = bool(settings.get("static_samples", False))
        if self.static_samples:
            self.observation_sample = self._observations.sample()
            self.reward_sample = self._rewards.sample()
        p_terminated = settings.get("p_terminated")
        self.p_terminated = float(settings.get("p_done", 0.1) if p_terminated is None else p_terminated)
        self.max_episode_len: int | None = settings.get("max_episode_len")
        self.check_action_bounds = bool(settings.get("check_action_bounds", False))
        self.steps = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Start an episode with a random (or the static) observation.

        Args:
            seed: seeds ``np_random``, which seeds the drawn observations and rewards (None: keep drawing from it).
            options: ignored.
        """
        super().reset(seed=seed)
        if self._observations != self.observation_space:  # a subclass set its own (RLlib's ActionMaskEnv): draw from it
            self._observations = copy.deepcopy(self.observation_space)
        self._observations.seed(draw_seed(self.np_random))
        self._rewards.seed(draw_seed(self.np_random))
        self.steps = 0
        return self._observation(), {}

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        """Draw an observation and a reward; end the episode at the length limit or by chance.

        Raises:
            ValueError: ``check_action_bounds`` is set and the action is outside the action
                space, or the action space is a ``Tuple`` and the action has another length.
        """
        if self.check_action_bounds and not self.action_space.contains(action):
            raise ValueError(f"Illegal action for {self.action_space}: {action!r}")
        if isinstance(self.action_space, gym.spaces.Tuple) and len(action) != len(self.action_space.spaces):
            raise ValueError(f"Illegal action for {self.action_space}: {action!r}")
        self.steps += 1
        terminated = truncated = False
        if self.max_episode_len and self.steps >= self.max_episode_len:
            truncated = True
        elif self.p_terminated > 0.0:
            terminated = bool(self.np_random.random() < self.p_terminated)
        reward = copy.deepcopy(self.reward_sample) if self.static_samples else self._rewards.sample()
        if isinstance(reward, np.ndarray | np.number) and np.ndim(reward) == 0:
            reward = float(reward)
        return self._observation(), reward, terminated, truncated, {}

    def _observation(self) -> Any:
        return copy.deepcopy(self.observation_sample) if self.static_samples else self._observations.sample()


RandomMultiAgentEnv = make_multi_agent(RandomEnv)
"""One :class:`RandomEnv` per agent (``make_multi_agent(RandomEnv)``): ``num_agents`` (default 1) in the config
sets the agents, ``0`` to ``num_agents - 1``; the rest of the config goes to each copy."""
RandomMultiAgentEnv.__module__, RandomMultiAgentEnv.__qualname__, RandomMultiAgentEnv.__name__ = (
    __name__,
    "RandomMultiAgentEnv",
    "RandomMultiAgentEnv",
)


class RandomLargeObsSpaceEnv(RandomEnv):
    """:class:`RandomEnv` with a 5000-dimensional ``Box(-1, 1)`` observation space, for testing large inputs.

    Args:
        config: :class:`RandomEnv`'s, whose ``observation_space`` this one sets
            (on a copy: the caller's config is left as it was).
    """

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        settings = config_dict(config)
        settings["observation_space"] = gym.spaces.Box(-1.0, 1.0, (5000,), np.float32)
        super().__init__(settings)


class RandomLargeObsSpaceEnvContActions(RandomEnv):
    """:class:`RandomLargeObsSpaceEnv` with continuous actions in ``Box(-1, 1, (5,))``.

    Args:
        config: :class:`RandomEnv`'s, whose ``observation_space`` and ``action_space``
            this one sets (on a copy).
    """

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        settings = config_dict(config)
        settings["observation_space"] = gym.spaces.Box(-1.0, 1.0, (5000,), np.float32)
        settings["action_space"] = gym.spaces.Box(-1.0, 1.0, (5,), np.float32)
        super().__init__(settings)
