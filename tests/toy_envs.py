"""Small environments with the observation and action spaces the catalog must handle."""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class _RandomObservationEnv(gym.Env):
    """Random observations from the space; subclasses count steps in ``self.t`` and decide rewards and ends."""

    def __init__(self, config=None):
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.observation_space.sample(), {}


class ImageEnv(_RandomObservationEnv):
    """An 8x8 RGB image observation, a MultiDiscrete action, episodes of 5 steps."""

    observation_space = gym.spaces.Box(0, 255, (8, 8, 3), np.uint8)
    action_space = gym.spaces.MultiDiscrete([3, 2])

    def step(self, action):
        assert self.action_space.contains(np.asarray(action))
        self.t += 1
        return self.observation_space.sample(), float(action[0] == 2), self.t >= 5, False, {}


class DictObsEnv(_RandomObservationEnv):
    """Dict observations (Discrete + Box) with a Box action, episodes of 4 steps."""

    observation_space = gym.spaces.Dict({"pos": gym.spaces.Discrete(4), "vel": gym.spaces.Box(-1, 1, (2,), np.float32)})
    action_space = gym.spaces.Box(-3.0, 3.0, (2,), np.float32)

    def step(self, action):
        assert np.all(action >= -3.0) and np.all(action <= 3.0)
        self.t += 1
        return self.observation_space.sample(), -float(np.abs(action).sum()), False, self.t >= 4, {}
