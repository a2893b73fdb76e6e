"""Envs from RLlib's examples that exercise unusual spaces: nested, parametric (masked) and correlated actions.

- :class:`NestedSpaceRepeatAfterMeEnv`: repeat a nested ``Tuple``/``Dict`` observation (``nested_space_repeat_after_me_env``);
- :class:`ParametricActionsCartPole` / :class:`ParametricActionsCartPoleNoEmbeddings`: CartPole's two moves hidden
  among ``max_avail_actions`` actions, with an action mask (``parametric_actions_cartpole``);
- :class:`CorrelatedActionsEnv`: a two-part action whose parts must agree (``correlated_actions_env``).

Spaces, constructor arguments, rewards and episode ends are RLlib's; randomness
comes from the env's ``np_random``, so ``reset(seed=...)`` fixes an episode.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from corral.testing.example_envs._common import config_dict, draw_seed

__all__ = [
    "CorrelatedActionsEnv",
    "NestedSpaceRepeatAfterMeEnv",
    "ParametricActionsCartPole",
    "ParametricActionsCartPoleNoEmbeddings",
]


def _leaves(space: gym.Space[Any], value: Any) -> Iterator[tuple[gym.Space[Any], Any]]:
    """The leaf spaces of a nested ``Tuple``/``Dict`` space, each with the matching part of ``value``."""
    if isinstance(space, gym.spaces.Tuple):
        for sub_space, sub_value in zip(space.spaces, value, strict=True):
            yield from _leaves(sub_space, sub_value)
    elif isinstance(space, gym.spaces.Dict):
        for key, sub_space in space.spaces.items():
            yield from _leaves(sub_space, value[key])
    else:
        yield space, value


class NestedSpaceRepeatAfterMeEnv(gym.Env[Any, Any]):
    """Repeat the current observation, drawn from a (possibly nested) space that actions share.

    Each step's observation is a sample of the space. The action is compared
    with it leaf by leaf: a ``Discrete`` leaf earns +1 when equal, a ``Box``
    leaf loses the L1 distance; other leaf spaces earn nothing. Episodes last
    ``episode_len`` steps (``terminated`` and ``truncated`` both True at the end, as in RLlib).

    Args:
        config: ``space`` (default ``Tuple([Discrete(2), Dict({"a": Box(-1, 1, (2,))})])``)
            and ``episode_len`` (default 100).
    """

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        settings = config_dict(config)
        default = gym.spaces.Tuple([gym.spaces.Discrete(2), gym.spaces.Dict({"a": gym.spaces.Box(-1.0, 1.0, (2,), np.float32)})])
        self.observation_space: gym.Space[Any] = settings.get("space", default)
        self.action_space: gym.Space[Any] = self.observation_space
        self.episode_len = int(settings.get("episode_len", 100))
        self.steps = 0
        self.current_obs: Any = None
        self._sampler = copy.deepcopy(self.observation_space)  # seeded from np_random, apart from the spaces users seed

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Start an episode and show its first observation.

        Args:
            seed: seeds ``np_random``, which seeds the observations (None: keep drawing from it).
            options: ignored.
        """
        super().reset(seed=seed)
        self._sampler.seed(draw_seed(self.np_random))
        self.steps = 0
        return self._next_obs(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Score the action against the current observation, leaf by leaf; show the next one."""
        self.steps += 1
        reward = 0.0
        for (space, wanted), (_, given) in zip(
            _leaves(self.observation_space, self.current_obs), _leaves(self.action_space, action), strict=True
        ):
            if isinstance(space, gym.spaces.Box):
                reward -= float(np.sum(np.abs(np.asarray(given) - wanted)))
            elif isinstance(space, gym.spaces.Discrete):
                reward += 1.0 if int(given) == int(wanted) else 0.0
        done = self.steps >= self.episode_len
        return self._next_obs(), reward, done, done, {}

    def _next_obs(self) -> Any:
        self.current_obs = self._sampler.sample()
        return copy.deepcopy(self.current_obs)


class _HiddenMovesCartPole(gym.Env[Any, Any]):
    """CartPole-v1 whose left and right moves are two of ``max_avail_actions`` actions, at ``left_idx`` and ``right_idx``.

    A subclass draws what a seeded reset draws anew (:meth:`_redraw`) and says
    what an observation holds besides ``cart`` (:meth:`_observe`).
    """

    def __init__(self, max_avail_actions: int) -> None:
        self.max_avail_actions = max_avail_actions
        self.action_space = gym.spaces.Discrete(max_avail_actions)
        self.wrapped = gym.make("CartPole-v1")
        self.left_idx, self.right_idx = 0, 1

    def _redraw(self) -> None:
        """What a seeded reset draws again from ``np_random``."""

    def _on_reset(self) -> None:
        """What every reset does before CartPole's."""

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Start a CartPole episode.

        Args:
            seed: seeds ``np_random`` and, through it, what the env draws and CartPole (None: keep drawing from it).
            options: passed to CartPole.
        """
        super().reset(seed=seed)
        if seed is not None:
            self._redraw()
        self._on_reset()
        obs, info = self.wrapped.reset(seed=draw_seed(self.np_random), options=options)
        return self._observe(obs), info

    def _move(self, action: Any, detail: str = "") -> int:
        """CartPole's move for ``action``: 0 at ``left_idx``, 1 at ``right_idx``.

        Raises:
            ValueError: ``action`` is neither.
        """
        if action == self.left_idx:
            return 0
        if action == self.right_idx:
            return 1
        raise ValueError(f"action {action!r} is not one of the two valid actions {self.left_idx} and {self.right_idx}{detail}")

    def _observe(self, cart: np.ndarray) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def close(self) -> None:
        """Close the inner CartPole."""
        self.wrapped.close()


class ParametricActionsCartPole(_HiddenMovesCartPole):
    """CartPole whose left and right moves hide at two random places among ``max_avail_actions`` actions.

    The observation is a dict: ``cart`` (CartPole-v1's observation),
    ``action_mask`` (1 at the two valid actions) and ``avail_actions`` (each
    action's 2-number embedding: the left or right move's, zeros elsewhere).
    The two embeddings are drawn once per env (again on each seeded reset); the
    two places are drawn anew at every reset and step. Taking an action outside
    the mask raises ``ValueError``. Rewards and episode ends are CartPole-v1's,
    its 500-step truncation included.

    Args:
        max_avail_actions: the size of the action space (at least 2).
    """

    def __init__(self, max_avail_actions: int) -> None:
        super().__init__(max_avail_actions)
        self.observation_space = gym.spaces.Dict(
            {
                "action_mask": gym.spaces.Box(0, 1, shape=(max_avail_actions,), dtype=np.int8),
                "avail_actions": gym.spaces.Box(-10, 10, shape=(max_avail_actions, 2), dtype=np.float32),
                "cart": self.wrapped.observation_space,
            }
        )
        self._redraw()
        self.update_avail_actions()

    def _redraw(self) -> None:
        self.left_action_embed = self.np_random.standard_normal(2).astype(np.float32)
        self.right_action_embed = self.np_random.standard_normal(2).astype(np.float32)

    def _on_reset(self) -> None:
        self.update_avail_actions()

    def update_avail_actions(self) -> None:
        """Hide the left and right moves at two new random actions; the rest are masked out."""
        n = self.max_avail_actions
        self.action_assignments = np.zeros((n, 2), np.float32)
        self.action_mask = np.zeros(n, np.int8)
        self.left_idx, self.right_idx = (int(i) for i in self.np_random.choice(n, 2, replace=False))
        self.action_assignments[self.left_idx] = self.left_action_embed
        self.action_assignments[self.right_idx] = self.right_action_embed
        self.action_mask[[self.left_idx, self.right_idx]] = 1

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """Play the move hidden at ``action`` in CartPole, then hide the moves anew.

        Raises:
            ValueError: ``action`` is not one of the two valid actions.
        """
        move = self._move(action, f" (action_mask {self.action_mask.tolist()})")
        obs, reward, terminated, truncated, info = self.wrapped.step(move)
        self.update_avail_actions()
        return self._observe(obs), float(reward), terminated, truncated, info

    def _observe(self, cart: np.ndarray) -> dict[str, np.ndarray]:
        return {"action_mask": self.action_mask.copy(), "avail_actions": self.action_assignments.copy(), "cart": cart}


class ParametricActionsCartPoleNoEmbeddings(_HiddenMovesCartPole):
    """:class:`ParametricActionsCartPole` without the embeddings: the model learns them; the two places stay put.

    The observation is ``cart`` (CartPole-v1's) and ``valid_avail_actions_mask``
    (1 at the two valid actions, in a float ``Box(0, 1)``). The two valid
    actions are drawn when the env is made (again on each seeded reset) and
    stay for its life; any other action raises ``ValueError``. Rewards and
    episode ends are CartPole-v1's.

    Args:
        max_avail_actions: the size of the action space (at least 2).
    """

    def __init__(self, max_avail_actions: int) -> None:
        super().__init__(max_avail_actions)
        self.observation_space = gym.spaces.Dict(
            {
                "valid_avail_actions_mask": gym.spaces.Box(0, 1, shape=(max_avail_actions,), dtype=np.float32),
                "cart": self.wrapped.observation_space,
            }
        )
        self._redraw()

    def _redraw(self) -> None:
        self.left_idx, self.right_idx = (int(i) for i in self.np_random.choice(self.max_avail_actions, 2, replace=False))
        self.valid_avail_actions_mask = np.zeros(self.max_avail_actions, np.float32)
        self.valid_avail_actions_mask[[self.left_idx, self.right_idx]] = 1.0

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """Play the move at ``action`` in CartPole.

        Raises:
            ValueError: ``action`` is not one of the two valid actions.
        """
        obs, reward, terminated, truncated, info = self.wrapped.step(self._move(action))
        return self._observe(obs), float(reward), terminated, truncated, info

    def _observe(self, cart: np.ndarray) -> dict[str, np.ndarray]:
        return {"valid_avail_actions_mask": self.valid_avail_actions_mask.copy(), "cart": cart}


class CorrelatedActionsEnv(gym.Env[Any, Any]):
    """Observe a random bit; act with two bits: +5 when the first equals the observation, +5 when the second equals the first.

    Observations are ``Discrete(2)``, actions ``Tuple([Discrete(2), Discrete(2)])``;
    at most +10 a step. Episodes end after 21 steps (RLlib's ``t > 20``;
    ``terminated`` and ``truncated`` both True), so the best return is 210. An
    autoregressive action distribution learns it faster than independent parts.

    Args:
        config: ignored, but required positionally as in RLlib.
    """

    def __init__(self, config: Any) -> None:
        self.observation_space = gym.spaces.Discrete(2)
        self.action_space = gym.spaces.Tuple([gym.spaces.Discrete(2), gym.spaces.Discrete(2)])
        self.last_observation: int | None = None
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
        """Start an episode with a random bit.

        Args:
            seed: seeds ``np_random`` (None: keep drawing from it).
            options: ignored.
        """
        super().reset(seed=seed)
        self.t = 0
        self.last_observation = int(self.np_random.integers(2))
        return self.last_observation, {}

    def step(self, action: Any) -> tuple[int, float, bool, bool, dict[str, Any]]:
        """Score the two action parts (see the class docstring); show a new bit."""
        self.t += 1
        first, second = (int(part) for part in action)
        reward = 5.0 * (first == self.last_observation) + 5.0 * (first == second)
        done = self.t > 20
        self.last_observation = int(self.np_random.integers(2))
        return self.last_observation, reward, done, done, {}
