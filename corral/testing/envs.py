"""Tiny environments, one per action-space type, so every algorithm can be checked in a second; and memory tasks.

Each toy env checks the actions it gets: an action outside the space raises
at once, so an algorithm that produces invalid actions fails loudly rather
than training on garbage. Their episodes last 16 steps and end by truncation.
:class:`StatelessCartPole` and :class:`RepeatAfterMe` need memory to be
solved, for recurrent models (issue 31).
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


class TupleActionEnv(_ToyEnv):
    """``Tuple(Discrete(3), Box(-2, 2, (2,)))`` actions: 1 for choosing 1, minus the aim's distance from 0.5."""

    action_space = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Box(-2.0, 2.0, (2,), np.float32)))

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        """Check the action is a tuple in the space, then step."""
        if not isinstance(action, tuple) or not self.action_space.contains(action):
            raise ValueError(f"{type(self).__name__} got the action {action!r}, which is outside {self.action_space}")
        self.t += 1
        reward = float(action[0] == 1) - float(np.abs(action[1] - 0.5).sum())
        return self._observe(), reward, False, self.t >= self.episode_length, {}


class DictActionEnv(_ToyEnv):
    """Nested ``Dict(move=Discrete(3), aim=Tuple(Box(-2, 2, ()), MultiDiscrete([3, 2])))`` actions; 1 and 1s earn."""

    action_space = gym.spaces.Dict(
        {
            "move": gym.spaces.Discrete(3),
            "aim": gym.spaces.Tuple((gym.spaces.Box(-2.0, 2.0, (), np.float32), gym.spaces.MultiDiscrete([3, 2]))),
        }
    )

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        """Check the action is a dict in the space, then step."""
        if isinstance(action, dict) and isinstance(action.get("aim"), tuple):  # a vector env hands a scalar Box out as
            action = {**action, "aim": (np.asarray(action["aim"][0]), action["aim"][1])}  # a numpy scalar: as an array
        if not isinstance(action, dict) or not self.action_space.contains(action):
            raise ValueError(f"{type(self).__name__} got the action {action!r}, which is outside {self.action_space}")
        self.t += 1
        scalar, codes = action["aim"]
        reward = float(action["move"] == 1) + float(np.sum(codes == 1)) - abs(float(scalar) - 0.5)
        return self._observe(), reward, False, self.t >= self.episode_length, {}


class CountingEnv(gym.Env):
    """Episodes of 3 to 9 steps (drawn at reset) that end by termination; the observation is the step, reward 1 a step.

    For checking ``batch_mode="complete_episodes"``: a batch holds only whole
    episodes exactly when it has as many first steps (observation 0) as last
    ones (terminated).
    """

    observation_space = gym.spaces.Box(0.0, 10.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config: Any = None) -> None:
        self.t, self.length = 0, 3

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        """Start an episode of a length drawn from the env's generator."""
        super().reset(seed=seed)
        self.t, self.length = 0, int(self.np_random.integers(3, 10))
        return np.array([0.0], np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        """Count the step; the episode terminates at its length."""
        self.t += 1
        return np.array([float(self.t)], np.float32), 1.0, self.t >= self.length, False, {}


class StatelessCartPole(gym.Env):
    """CartPole-v1 whose observation is the cart's position and the pole's angle only, without their velocities.

    Tests memory: one observation does not tell which way the pole is falling,
    so a feed-forward policy balances it poorly, while a recurrent one (or one
    that sees several steps) can estimate the velocities from the last
    observations. Rewards, episode ends (termination when the pole falls or the
    cart leaves the track, truncation at 500 steps) and actions are
    CartPole-v1's.

    Args:
        config: ignored (an ``EnvContext`` when made by corral).
    """

    action_space = gym.spaces.Discrete(2)
    VISIBLE = (0, 2)
    """the indices of CartPole-v1's observation kept: the cart's position and the pole's angle"""

    def __init__(self, config: Any = None) -> None:
        self.env = gym.make("CartPole-v1")
        full = self.env.observation_space
        assert isinstance(full, gym.spaces.Box)
        low, high = full.low[list(self.VISIBLE)], full.high[list(self.VISIBLE)]
        self.observation_space = gym.spaces.Box(low, high, (len(self.VISIBLE),), np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        """Start an episode of the inner CartPole; the observation is its position and angle."""
        super().reset(seed=seed)
        obs, info = self.env.reset(seed=seed, options=options)
        return self._visible(obs), info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        """CartPole's step, its observation without the velocities."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._visible(obs), float(reward), terminated, truncated, info

    def _visible(self, obs: np.ndarray) -> np.ndarray:
        return np.asarray(obs, np.float32)[list(self.VISIBLE)]

    def close(self) -> None:
        """Close the inner CartPole."""
        self.env.close()


class RepeatAfterMe(gym.Env):
    """Repeat the observation seen ``repeat_delay`` steps ago: a memory task with an exact answer.

    Each step observes a random bit (``Discrete(2)``); the action (``Discrete(2)``)
    earns +1 when it equals the bit observed ``repeat_delay`` steps before the
    current one and -1 otherwise. The first ``repeat_delay`` steps of an
    episode have nothing to repeat yet and earn 0. An episode terminates after
    ``episode_length`` steps. A policy without memory earns 0 on average; one
    that remembers the last ``repeat_delay`` bits earns ``episode_length -
    repeat_delay``.

    Args:
        config: ``repeat_delay`` (default 1, as RLlib's key), ``episode_length`` (default 100).
    """

    observation_space = gym.spaces.Discrete(2)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config: Any = None) -> None:
        config = dict(config or {})
        self.repeat_delay = int(config.get("repeat_delay", 1))
        self.episode_length = int(config.get("episode_length", 100))
        if self.repeat_delay < 0 or self.episode_length < 1:
            raise ValueError(f"RepeatAfterMe needs repeat_delay >= 0 and episode_length >= 1, got {config}")
        self.seen: list[int] = []

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[int, dict]:
        """Start an episode; the first bit is drawn."""
        super().reset(seed=seed)
        self.seen = [int(self.np_random.integers(2))]
        return self.seen[-1], {}

    def step(self, action: Any) -> tuple[int, float, bool, bool, dict]:
        """Score the action against the bit ``repeat_delay`` steps back; draw the next bit."""
        index = len(self.seen) - 1 - self.repeat_delay  # the current observation is seen[-1]
        reward = 0.0 if index < 0 else (1.0 if int(action) == self.seen[index] else -1.0)
        self.seen.append(int(self.np_random.integers(2)))
        return self.seen[-1], reward, len(self.seen) > self.episode_length, False, {}


TOY_ENVS: dict[type[gym.Space], str] = {
    gym.spaces.Discrete: f"{__name__}:DiscreteActionEnv",
    gym.spaces.MultiDiscrete: f"{__name__}:MultiDiscreteActionEnv",
    gym.spaces.Box: f"{__name__}:BoxActionEnv",
    gym.spaces.Tuple: f"{__name__}:TupleActionEnv",
    gym.spaces.Dict: f"{__name__}:DictActionEnv",
}
"""The toy environment for each action-space type, as ``module:Class`` env specs."""


def _multi_agent(env: Any, name: str) -> type:
    from corral.core.environments.multi_agent_env import make_multi_agent

    cls = make_multi_agent(env)
    # named where it lives, so configs, YAML files and checkpoints can name it by its import path
    cls.__module__, cls.__qualname__, cls.__name__ = __name__, name, name
    return cls


MultiAgentCartPole = _multi_agent("CartPole-v1", "MultiAgentCartPole")
"""``make_multi_agent("CartPole-v1")`` by an import path: agents 0..num_agents-1 (``env_config["num_agents"]``,
default 1) each balance their own pole. The multi-agent tuned examples and benchmarks use it."""

MultiAgentCountingEnv = _multi_agent(CountingEnv, "MultiAgentCountingEnv")
"""``make_multi_agent(CountingEnv)`` by an import path: each agent's episode has its own length, and it leaves when
that ends (for checking that multi-agent ``batch_mode="complete_episodes"`` keeps every agent's episode whole)."""


def _turn_based_toy_env() -> type:
    from corral.core.environments.multi_agent_env import ALL_AGENTS, MultiAgentEnv

    class TurnBasedToyEnv(MultiAgentEnv):
        """Players ``"first"`` and ``"second"`` take turns; the mover sees a random observation and its legal actions.

        The observation is ``{"observation": Box(-1, 1, (4,)), "action_mask": 0/1 flags}``
        over ``Discrete(3)``, one random action illegal each turn (an illegal action
        raises). The mover earns 1 for action 1 when it is legal, and the other player
        loses half of that, so rewards reach a player between its turns. After each
        move the game ends with probability 0.05 (terminated), else after 20 moves
        (truncated): rows stay open across sample calls, as in a board game.
        """

        def __init__(self, config: Any = None) -> None:
            self.possible_agents = ["first", "second"]
            super().__init__()
            self.observation_space = gym.spaces.Dict(
                {"observation": gym.spaces.Box(-1.0, 1.0, (4,), np.float32), "action_mask": gym.spaces.Box(0, 1, (3,), np.int8)}
            )
            self.action_space = gym.spaces.Discrete(3)
            self.moves = 0
            self.mover = "first"
            self.mask = np.ones(3, np.int8)

        def _observe(self) -> dict[str, Any]:
            self.mask = np.ones(3, np.int8)
            self.mask[self.np_random.integers(3)] = 0
            return {"observation": self.np_random.uniform(-1.0, 1.0, 4).astype(np.float32), "action_mask": self.mask.copy()}

        def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
            """Start a game; ``"first"`` moves."""
            super().reset(seed=seed)
            self.moves, self.mover, self.agents = 0, "first", list(self.possible_agents)
            return {self.mover: self._observe()}, {}

        def step(self, action_dict: dict) -> tuple[dict, dict, dict, dict, dict]:  # type: ignore[override]
            """The mover's action; the other player moves next."""
            action = int(action_dict[self.mover])
            if not self.mask[action]:
                raise ValueError(f"{self.mover} took the illegal action {action}; the mask was {self.mask.tolist()}")
            other = "second" if self.mover == "first" else "first"
            earned = float(action == 1)
            rewards = {self.mover: earned, other: -0.5 * earned}
            self.moves += 1
            terminated = bool(self.np_random.random() < 0.05)
            truncated = not terminated and self.moves >= 20
            self.mover = other
            if terminated or truncated:
                observations = {agent: self._observe() for agent in self.possible_agents}
                return observations, rewards, {ALL_AGENTS: terminated}, {ALL_AGENTS: truncated}, {}
            return {other: self._observe()}, rewards, {ALL_AGENTS: False}, {ALL_AGENTS: False}, {}

    TurnBasedToyEnv.__module__, TurnBasedToyEnv.__qualname__ = __name__, "TurnBasedToyEnv"
    return TurnBasedToyEnv


TurnBasedToyEnv = _turn_based_toy_env()
"""A two-player turn-based multi-agent env with action masks, by an import path (``corral.testing.envs:TurnBasedToyEnv``)."""
