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


_FAILED_ONCE: set[tuple[int, int]] = set()  # per process: which (runner, sub-env) already raised


class FlakyCartPole(gym.Wrapper):
    """CartPole whose chosen sub-environment raises on its 5th step.

    ``env_config``: ``fail_worker`` (default 1) and ``fail_vector`` (default 0)
    choose the sub-environment; ``once=True`` raises only the first time in
    this process, so a restarted copy works.
    """

    def __init__(self, config):
        super().__init__(gym.make("CartPole-v1"))
        self.t = 0
        chosen = (config.get("fail_worker", 1), config.get("fail_vector", 0))
        self.key = (config.worker_index, config.vector_index)
        self.armed = self.key == chosen and not (config.get("once", False) and self.key in _FAILED_ONCE)

    def step(self, action):
        self.t += 1
        if self.armed and self.t == 5:
            _FAILED_ONCE.add(self.key)
            raise RuntimeError(f"flaky sub-environment {self.key} broke")
        return self.env.step(action)


class SlowCartPole(gym.Wrapper):
    """CartPole that takes its time: ``env_config`` ``step_delay_s`` per step, and ``start_delay_s`` to be made
    in a remote runner once the file ``slow_start_flag`` exists (so a restarted runner starts slowly)."""

    def __init__(self, config):
        import os
        import time

        flag = config.get("slow_start_flag")
        if config.worker_index > 0 and flag and os.path.exists(flag):
            time.sleep(config.get("start_delay_s", 0.0))
        super().__init__(gym.make("CartPole-v1"))
        self.step_delay_s = config.get("step_delay_s", 0.0)

    def step(self, action):
        import time

        time.sleep(self.step_delay_s)
        return self.env.step(action)


class SelfDrawingCartPole(gym.Wrapper):
    """CartPole made without a render mode whose ``render()`` draws itself (RLlib's contract): it appends one line
    per frame to the file ``env_config["frames_file"]``, so a test in another process can count the frames."""

    def __init__(self, config):
        super().__init__(gym.make("CartPole-v1"))
        self.frames_file = config["frames_file"]

    def render(self):
        with open(self.frames_file, "a") as frames:
            frames.write("frame\n")


class LocalOnlyEnv(gym.Wrapper):
    """CartPole that refuses to be built in a remote env runner (worker_index > 0)."""

    def __init__(self, config):
        if config.worker_index > 0:
            raise RuntimeError("only the local runner may build this env")
        super().__init__(gym.make("CartPole-v1"))


class BrokenCartPole(gym.Wrapper):
    """CartPole that, at step ``at`` of every episode (default 3), returns ``reward`` or a broken observation.

    ``env_config``: ``reward`` (a float, e.g. ``nan``) replaces the reward;
    ``obs`` is ``"outside"`` (a value of 100, beyond the space), ``"nan"`` or
    ``"shape"`` (one value too many); ``only_vector`` limits it to one sub-environment;
    ``after_resets`` waits for that many episodes first.
    """

    def __init__(self, config):
        super().__init__(gym.make("CartPole-v1"))
        self.t = 0
        self.at = config.get("at", 3)
        self.reward = config.get("reward")
        self.obs_kind = config.get("obs")
        self.armed = config.get("only_vector", config.vector_index) == config.vector_index
        self.wait = config.get("after_resets", 0)
        self.resets = 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        self.resets += 1
        return self.env.reset(seed=seed, options=options)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.t += 1
        if self.armed and self.t == self.at and self.resets > self.wait:
            if self.reward is not None:
                reward = float(self.reward)
            if self.obs_kind == "outside":
                obs = np.full_like(obs, 100.0)
            elif self.obs_kind == "nan":
                obs = np.full_like(obs, np.nan)
            elif self.obs_kind == "shape":
                obs = np.zeros(5, dtype=np.float32)
        return obs, reward, terminated, truncated, info


class TupleObsEnv(_RandomObservationEnv):
    """Tuple observations (Discrete + Box) with a Discrete action, episodes of 4 steps."""

    observation_space = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Box(-1, 1, (2,), np.float32)))
    action_space = gym.spaces.Discrete(3)

    def step(self, action):
        self.t += 1
        return self.observation_space.sample(), float(int(action) == 1), self.t >= 4, False, {}


class MatrixActionEnv(_RandomObservationEnv):
    """A Box action of shape (2, 3), rewarded for matching a target matrix; episodes of 4 steps."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = gym.spaces.Box(np.full((2, 3), -2.0, np.float32), np.full((2, 3), 2.0, np.float32))
    target = np.array([[1.0, -1.0, 0.5], [0.0, 1.5, -0.5]], np.float32)

    def step(self, action):
        assert action.shape == (2, 3), f"an action of shape {action.shape}"
        self.t += 1
        return self.observation_space.sample(), -float(np.abs(action - self.target).sum()), False, self.t >= 4, {}


class MaskedChoiceEnv(gym.Env):
    """Six actions, a random half of them legal at each step; an illegal action raises.

    The observation is ``{"observation": one-hot of a legal target, "action_mask": 0/1 flags}``;
    choosing the target pays 1. ``env_config={"mask_key": ...}`` renames the mask's key.
    Episodes last 10 steps.
    """

    n = 6

    def __init__(self, config=None):
        self.key = (config or {}).get("mask_key", "action_mask")
        self.observation_space = gym.spaces.Dict(
            {"observation": gym.spaces.Box(0, 1, (self.n,), np.float32), self.key: gym.spaces.Box(0, 1, (self.n,), np.int8)}
        )
        self.action_space = gym.spaces.Discrete(self.n)
        self.t = 0

    def _observe(self):
        self.mask = (self.np_random.random(self.n) < 0.5).astype(np.int8)
        self.target = int(self.np_random.integers(self.n))
        self.mask[self.target] = 1
        return {"observation": np.eye(self.n, dtype=np.float32)[self.target], self.key: self.mask}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._observe(), {}

    def step(self, action):
        if not self.mask[int(action)]:
            raise AssertionError(f"masked action {int(action)} taken; legal were {np.flatnonzero(self.mask).tolist()}")
        reward = float(int(action) == self.target)
        self.t += 1
        return self._observe(), reward, False, self.t >= 10, {}


class SignGuessEnv(gym.Env):
    """Five steps of guessing a shown sign: the observation is (step / 5, sign), reward 1 for action 1 on +1 or 0 on -1.

    Short and with every action possible in every state, so importance sampling's
    ratios stay moderate: off-policy estimators can be checked against the online value.
    """

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        self.t = 0
        self.sign = 1.0

    def _obs(self):
        self.sign = float(self.np_random.choice([-1.0, 1.0]))
        return np.array([self.t / 5.0, self.sign], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        reward = float(int(action) == int(self.sign > 0))
        self.t += 1
        return self._obs(), reward, self.t >= 5, False, {}
