"""Tiny environments, one per action-space type, so every algorithm can be checked in a second.

Each checks the actions it gets: an action outside the space raises at once,
so an algorithm that produces invalid actions fails loudly rather than
training on garbage. Episodes last 16 steps and end by truncation.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class _ToyEnv(gym.Env):
    """Random 4-dim observations; a subclass sets ``action_space`` and rewards one action."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    action_space: gym.Space
    episode_length = 16

    def __init__(self, config: Any = None) -> None:
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        return self._observe(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        checked = np.asarray(action, dtype=self.action_space.dtype)
        if not self.action_space.contains(checked if checked.shape else checked.item()):
            raise ValueError(f"{type(self).__name__} got the action {action!r}, which is outside {self.action_space}")
        self.t += 1
        return self._observe(), self.reward(checked), False, self.t >= self.episode_length, {}

    def reward(self, action: np.ndarray) -> float:
        """The reward for a valid action; the subclass decides which action is good."""
        raise NotImplementedError

    def _observe(self) -> np.ndarray:
        return self.np_random.uniform(-1.0, 1.0, 4).astype(np.float32)


class DiscreteActionEnv(_ToyEnv):
    """``Discrete(3)`` actions; action 1 earns 1."""

    action_space = gym.spaces.Discrete(3)

    def reward(self, action: np.ndarray) -> float:
        """1 for action 1, else 0."""
        return float(action == 1)


class MultiDiscreteActionEnv(_ToyEnv):
    """``MultiDiscrete([3, 2])`` actions; 1 for each component equal to 1."""

    action_space = gym.spaces.MultiDiscrete([3, 2])

    def reward(self, action: np.ndarray) -> float:
        """The number of components equal to 1."""
        return float(np.sum(action == 1))


class BoxActionEnv(_ToyEnv):
    """``Box(-2, 2, (2,))`` actions; the closer to 0.5 the better."""

    action_space = gym.spaces.Box(-2.0, 2.0, (2,), np.float32)

    def reward(self, action: np.ndarray) -> float:
        """Minus the distance of the action from (0.5, 0.5)."""
        return -float(np.abs(action - 0.5).sum())


TOY_ENVS: dict[type[gym.Space], str] = {
    gym.spaces.Discrete: f"{__name__}:DiscreteActionEnv",
    gym.spaces.MultiDiscrete: f"{__name__}:MultiDiscreteActionEnv",
    gym.spaces.Box: f"{__name__}:BoxActionEnv",
}
"""The toy environment for each action-space type, as ``module:Class`` env specs."""


def _multi_agent_cartpole() -> type:
    from corral.core.environments.multi_agent_env import make_multi_agent

    cls = make_multi_agent("CartPole-v1")
    # named where it lives, so configs, YAML files and checkpoints can name it by its import path
    cls.__module__, cls.__qualname__, cls.__name__ = __name__, "MultiAgentCartPole", "MultiAgentCartPole"
    return cls


MultiAgentCartPole = _multi_agent_cartpole()
"""``make_multi_agent("CartPole-v1")`` by an import path: agents 0..num_agents-1 (``env_config["num_agents"]``,
default 1) each balance their own pole. The multi-agent tuned examples and benchmarks use it."""
