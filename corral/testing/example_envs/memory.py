"""Memory tasks from RLlib's examples: a policy that forgets what it saw earlier in the episode cannot solve them.

- :class:`StatelessCartPole`: CartPole without the velocities (RLlib's ``examples.env.stateless_cartpole``);
- :class:`RepeatAfterMeEnv`: answer the observation seen ``repeat_delay`` steps ago (``repeat_after_me_env``);
- :class:`RepeatInitialObsEnv`: answer the first observation at every step (``repeat_initial_obs_env``);
- :class:`LookAndPush` and the :class:`OneHot` wrapper: look at a hidden case, then push (``look_and_push``).

Their spaces, config keys and defaults, rewards and episode ends are RLlib's;
randomness comes from the env's ``np_random``, so ``reset(seed=...)`` fixes an episode.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

from corral.testing.example_envs._common import config_dict

__all__ = ["LookAndPush", "OneHot", "RepeatAfterMeEnv", "RepeatInitialObsEnv", "StatelessCartPole"]


class StatelessCartPole(CartPoleEnv):
    """CartPole (gymnasium's ``CartPoleEnv``) that observes only the cart's position and the pole's angle.

    Without the two velocities one observation cannot tell which way the pole
    is falling, so only a policy with memory balances it well. As RLlib's, it
    is the unwrapped ``CartPoleEnv``: rewards and termination are CartPole's,
    and nothing truncates an episode (there is no 500-step time limit; the
    existing ``corral.testing.envs.StatelessCartPole`` has one, which is why
    this is a separate class). The observation bounds are twice CartPole's
    termination thresholds.

    Args:
        config: ignored (RLlib's signature).
    """

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        high = np.array([self.x_threshold * 2, self.theta_threshold_radians * 2], dtype=np.float32)
        self.observation_space = gym.spaces.Box(low=-high, high=high, dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """Start a CartPole episode; observe its position and angle.

        Args:
            seed: seeds ``np_random`` (None: keep drawing from it).
            options: CartPole's reset options (``low`` / ``high`` of the initial state).
        """
        obs, info = super().reset(seed=seed, options=options)
        return self._hide_velocities(obs), info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """CartPole's step, observing only position and angle."""
        cartpole_step: Callable[[Any], tuple[np.ndarray, float, bool, bool, dict[str, Any]]] = super().step  # untyped there
        obs, reward, terminated, truncated, info = cartpole_step(action)
        return self._hide_velocities(obs), float(reward), terminated, truncated, info

    @staticmethod
    def _hide_velocities(obs: np.ndarray) -> np.ndarray:
        return np.array([obs[0], obs[2]], dtype=np.float32)


class RepeatAfterMeEnv(gym.Env[Any, Any]):
    """Act out the observation seen ``repeat_delay`` steps before the current one.

    Each step shows a fresh random token. The action is scored against the
    token ``repeat_delay`` steps back; before the episode has that many, it is
    scored against a zero token (as RLlib pads its history with zeros).

    - Discrete (default): tokens and actions in ``Discrete(2)``; +1 for the
      right token, -1 otherwise.
    - ``continuous``: tokens drawn uniformly from ``[0, 1)^2`` in a
      ``Box(-1, 1, (2,))`` space that actions share; the reward is minus the
      L1 distance between action and token.

    The episode ends (``terminated`` and ``truncated`` both True, as in RLlib)
    after ``episode_len - repeat_delay + 1`` steps: RLlib ends it once its
    history (padding included) is longer than ``episode_len``.

    Args:
        config: ``continuous`` (default False), ``repeat_delay`` (default 1;
            0 repeats the current token), ``episode_len`` (default 100).
    """

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        settings = config_dict(config)
        self.continuous = bool(settings.get("continuous"))
        if self.continuous:
            self.observation_space: gym.Space[Any] = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        else:
            self.observation_space = gym.spaces.Discrete(2)
        self.action_space: gym.Space[Any] = self.observation_space
        self.delay = int(settings.get("repeat_delay", 1))
        self.episode_len = int(settings.get("episode_len", 100))
        self.history: list[Any] = []

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Start an episode: ``repeat_delay`` zero tokens of padding, then the first token shown.

        Args:
            seed: seeds ``np_random`` (None: keep drawing from it).
            options: ignored.
        """
        super().reset(seed=seed)
        padding = np.zeros(2, np.float32) if self.continuous else 0
        self.history = [padding] * self.delay
        return self._show_next(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Score the action against the token ``repeat_delay`` steps back, then show the next token."""
        target = self.history[-(1 + self.delay)]
        if self.continuous:
            reward = -float(np.sum(np.abs(np.asarray(action, np.float32) - target)))
        else:
            reward = 1.0 if int(action) == target else -1.0
        done = len(self.history) > self.episode_len
        return self._show_next(), reward, done, done, {}

    def _show_next(self) -> Any:
        token: Any = self.np_random.random(2).astype(np.float32) if self.continuous else int(self.np_random.integers(2))
        self.history.append(token)
        return token.copy() if self.continuous else token


class RepeatInitialObsEnv(gym.Env[Any, Any]):
    """Repeat the episode's first observation at every step; every later observation is 0.

    The first observation is a random bit (``Discrete(2)``); each action
    (``Discrete(2)``) earns +1 when it equals that bit and -1 otherwise. The
    episode ends after ``episode_len`` steps (``terminated`` and ``truncated``
    both True, as in RLlib), so the best return is ``episode_len``.

    Args:
        episode_len: the number of steps (default 100). RLlib's takes only this
            integer; a config mapping (as corral hands an env class) is read for
            its ``episode_len`` key too.
    """

    def __init__(self, episode_len: int | Mapping[str, Any] = 100) -> None:
        if isinstance(episode_len, Mapping):
            episode_len = int(episode_len.get("episode_len", 100))
        self.observation_space = gym.spaces.Discrete(2)
        self.action_space = gym.spaces.Discrete(2)
        self.token: int | None = None
        self.episode_len = int(episode_len)
        self.num_steps = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
        """Start an episode: draw the bit to repeat, and show it.

        Args:
            seed: seeds ``np_random`` (None: keep drawing from it).
            options: ignored.
        """
        super().reset(seed=seed)
        self.token = int(self.np_random.integers(2))
        self.num_steps = 0
        return self.token, {}

    def step(self, action: Any) -> tuple[int, float, bool, bool, dict[str, Any]]:
        """+1 if the action repeats the first observation, else -1; the observation is 0 from now on."""
        reward = 1.0 if int(action) == self.token else -1.0
        self.num_steps += 1
        done = self.num_steps >= self.episode_len
        return 0, reward, done, done, {}


class LookAndPush(gym.Env[Any, Any]):
    """A five-state chain whose last push pays off only if the agent looked at a hidden case earlier.

    States are ``Discrete(5)``, actions ``Discrete(2)`` (0 look, 1 push);
    episodes start in state 2 with a hidden case, 0 or 1, drawn at reset.
    Every step before the last costs -1:

    - push (1) in state 0 goes to 2, in 1, 2 or 3 to the next state;
    - look (0) in state 2 reveals the case by moving to state 0 or 1 (the case);
      look elsewhere stays put;
    - in state 4 the episode terminates: +10 if the action is push and the case
      is 1, else -10 (RLlib's rule: with case 0 no final action wins).

    Nothing truncates an episode. RLlib's returns an old-gym 4-tuple on the
    final step; this one returns gymnasium's 5-tuple (``truncated`` False).

    Args:
        config: ignored (RLlib's takes no argument; this lets corral make it from an env class).
    """

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        self.action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.spaces.Discrete(5)
        self._state = 2
        self._case = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
        """Start in state 2 with a hidden case drawn from ``np_random``.

        Args:
            seed: seeds ``np_random`` (None: keep drawing from it).
            options: ignored.
        """
        super().reset(seed=seed)
        self._state = 2
        self._case = int(self.np_random.integers(2))
        return self._state, {}

    def step(self, action: Any) -> tuple[int, float, bool, bool, dict[str, Any]]:
        """Move along the chain (see the class docstring); state 4 ends the episode."""
        if not self.action_space.contains(int(action)):
            raise ValueError(f"LookAndPush got the action {action!r}, which is outside {self.action_space}")
        push = int(action) == 1
        if self._state == 4:
            return self._state, 10.0 if push and self._case == 1 else -10.0, True, False, {}
        if push:
            self._state = 2 if self._state == 0 else self._state + 1
        elif self._state == 2:
            self._state = self._case
        return self._state, -1.0, False, False, {}


class OneHot(gym.Wrapper[np.ndarray, Any, Any, Any]):
    """Observe a ``Discrete(n)`` env's state as a one-hot vector in ``Box(0, 1, (n,))``, as RLlib wraps :class:`LookAndPush`.

    RLlib's version starts from a vector of ones, so every observation comes out
    all ones; this one writes the one-hot vector its name promises.

    Args:
        env: an env with a ``Discrete`` observation space.
    """

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        if not isinstance(env.observation_space, gym.spaces.Discrete):
            raise ValueError(f"OneHot needs a Discrete observation space, got {env.observation_space}")
        self.n = int(env.observation_space.n)
        self.observation_space = gym.spaces.Box(0.0, 1.0, (self.n,), np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """The inner env's reset, its observation one-hot encoded.

        Args:
            seed: passed to the inner env.
            options: passed to the inner env.
        """
        obs, info = self.env.reset(seed=seed, options=options)
        return self._encode_obs(obs), info

    def step(self, action: Any) -> tuple[np.ndarray, Any, bool, bool, dict[str, Any]]:
        """The inner env's step, its observation one-hot encoded."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._encode_obs(obs), reward, terminated, truncated, info

    def _encode_obs(self, obs: Any) -> np.ndarray:
        encoded = np.zeros(self.n, np.float32)
        encoded[int(obs)] = 1.0
        return encoded
