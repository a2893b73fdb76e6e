"""Checking what sub-environments return: the guard around each one stepped in a loop, and a native vector env's batches.

A :class:`SubEnvironmentGuard` checks every step's reward and observation,
names the sub-environment when it fails, restarts it if asked, and records
how its episode began so that a restored copy can replay it;
:func:`check_vector_step` makes the same checks on a natively vectorised env,
which has no sub-environment objects to wrap.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Callable
from typing import Any, TypeGuard

import gymnasium as gym
import numpy as np

from corral.core.common import state_codec
from corral.core.common.spaces import ObservationCheck
from corral.core.seeding import generator_state, set_generator_state
from corral.errors import EnvError, EnvRunnerError

logger = logging.getLogger("corral")


class SubEnvironmentGuard(gym.Wrapper):
    """One sub-environment of a runner's vector env: checks what it returns, names it when it fails, or restarts it.

    Every step's reward must be finite and, unless ``disable_env_checking``,
    every observation must belong to the observation space (its shape, its
    bounds, no NaN). A sub-environment that breaks this or whose ``step``
    raises is, with ``restart``, closed and made anew: the step reports the
    episode as truncated at the last good observation (so nothing learns from
    the broken transition), and the vector env's autoreset starts the new one.
    Without ``restart`` a broken value raises :class:`~corral.errors.EnvError`
    and an exception :class:`~corral.errors.EnvRunnerError`, both naming
    the runner, the sub-environment and the step.

    Args:
        make: makes the sub-environment (again, on a restart): ``(env, user_env, created)``, the env
            with corral's wrappers, the env as the user made it and the env as its creator returned it.
        index: the sub-environment's index in its runner.
        worker_index: the runner's index.
        restart: make the env anew when it fails, instead of raising.
        check_observations: check each observation against the observation space.
    """

    def __init__(
        self,
        make: Callable[[], tuple[gym.Env, Any, Any]],
        index: int,
        worker_index: int,
        restart: bool,
        check_observations: bool = True,
    ) -> None:
        env, self.user_env, self.created = make()
        """``user_env``: the env as the user made it, without corral's wrappers (checker, horizon, spaces, old-gym
        adapter): what ``foreach_env`` and the callbacks see. For a gymnasium id, the env its entry point made
        (``env.unwrapped``), while ``created`` is what ``gym.make`` returned, its time limit included."""
        super().__init__(env)
        self._make = make
        self.index = index
        self.worker_index = worker_index
        self.restart = restart
        self.restarts = 0
        self._last_obs: Any = None
        self._t = 0
        self._check = ObservationCheck(self.env.observation_space) if check_observations else None
        self._record: dict[str, Any] | None = None  # how the episode in progress began, and its actions (for replay)

    @property
    def where(self) -> str:
        """Which sub-environment this is, for messages."""
        return f"sub-environment {self.index} of env runner {self.worker_index}"

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        """Reset the sub-environment, check its first observation and remember it (and how the episode began)."""
        rng = self.env.unwrapped._np_random  # read without creating one (np_random would seed it from the OS)
        self._record = {
            "seed": kwargs.get("seed"),
            "options": kwargs.get("options"),
            "rng": generator_state(rng) if rng is not None else None,
            "actions": [],
        }
        obs, info = self.env.reset(**kwargs)
        self._t = 0
        found = self._check.problem(obs) if self._check is not None else None
        if found is not None:
            raise EnvError(f"{self.where}: the observation from reset() {found[1]}")
        self._last_obs = obs
        return obs, info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        """Step and check the result; on a failure, restart (if asked) or raise naming this sub-environment."""
        self._t += 1
        try:
            obs, reward, terminated, truncated, info = self.env.step(action)
        except Exception as exc:  # an environment may raise anything
            if not self.restart:
                raise EnvRunnerError(
                    f"{self.where} raised {type(exc).__name__}: {exc} at step {self._t} of its episode "
                    "(set fault_tolerance(restart_failed_sub_environments=True) to restart a failed sub-environment and go on)"
                ) from exc
            return self._restarted(f"raised {type(exc).__name__}: {exc}")
        problem = bad_reward(reward)
        if problem is None and self._check is not None:
            found = self._check.problem(obs)
            problem = f"returned an observation that {found[1]}" if found is not None else None
        if problem is not None:
            if not self.restart:
                raise EnvError(f"{self.where} {problem} at step {self._t} of its episode{_CHECK_ADVICE}")
            return self._restarted(problem)
        self._last_obs = obs
        if self._record is not None:
            if len(self._record["actions"]) < MAX_REPLAY_STEPS:
                self._record["actions"].append(_copied(action))
            else:
                self._record = None  # too long to keep: after a restore this episode starts anew
        return obs, reward, terminated, truncated, info

    def episode_record(self) -> dict[str, Any] | None:
        """How the episode in progress began and its actions, as JSON (None: it cannot be replayed)."""
        record = self._record
        if record is None:
            return None
        try:
            taken = record["actions"]
            # a Tuple or Dict action space's actions stay a list of structures; the others stack into one array
            actions = state_codec.encode(np.stack(taken) if isinstance(taken[0], np.ndarray) else taken) if taken else []
            encoded: dict[str, Any] = state_codec.encode({**record, "actions": actions})  # a dict encodes to a dict
            return encoded
        except (TypeError, ValueError):
            return None  # options or actions that are not plain data

    def replay(self, record: Any) -> None:
        """Bring a fresh sub-environment to where :meth:`episode_record` was taken: reset it as then, step the actions.

        Raises:
            ValueError: the record is malformed.
        """
        if record is None:
            logger.warning(
                "%s: its episode in progress was not recorded for replay; after the restore it starts anew", self.where
            )
            self.reset()
            return
        seed, options = prepare_replay(self.env, record, self.where)
        self.reset(seed=seed, options=options)
        actions = state_codec.decode(record["actions"])
        for action in actions:
            self.step(action)

    def _restarted(self, problem: str) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        logger.warning("%s %s at step %d of its episode; restarting it", self.where, problem, self._t)
        with contextlib.suppress(Exception):  # the broken env may fail to close too; it is dropped either way
            self.env.close()
        self.env, self.user_env, self.created = self._make()
        self.restarts += 1
        return self._last_obs, 0.0, False, True, {"corral_env_restarted": True}


def prepare_replay(env: gym.Env, record: Any, where: str) -> tuple[int | None, Any]:
    """Check a replay record and give ``env`` back the generator it had before the recorded episode's reset.

    Args:
        env: the fresh env to replay the episode in.
        record: a guard's episode record (``seed``, ``options``, ``rng``, ``actions``).
        where: names the sub-environment in messages.

    Returns:
        ``(seed, options)`` to reset it with, as the episode began.

    Raises:
        ValueError: the record is malformed.
    """
    if not isinstance(record, dict) or not {"seed", "options", "rng", "actions"} <= set(record):
        raise ValueError(f"{where}: a replay record needs seed, options, rng and actions")
    seed = record["seed"]
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ValueError(f"{where}: the replay seed {seed!r} is not an integer")
    if record["rng"] is not None:
        rng = np.random.default_rng()
        set_generator_state(rng, record["rng"])
        env.unwrapped.np_random = rng
    return seed, state_codec.decode(record["options"])


MAX_REPLAY_STEPS = 100_000
"""The longest episode a sub-environment records for replay after a restore (its actions are kept in memory)."""


def is_guarded(env: gym.vector.VectorEnv) -> TypeGuard[gym.vector.SyncVectorEnv]:
    """Whether a vector env steps its sub-environments in a loop, each in a :class:`SubEnvironmentGuard`."""
    return isinstance(env, gym.vector.SyncVectorEnv) and all(isinstance(e, SubEnvironmentGuard) for e in env.envs)


_CHECK_ADVICE = (
    " (fix the env; set fault_tolerance(restart_failed_sub_environments=True) to restart such a sub-environment, "
    "or environment(disable_env_checking=True) to stop checking observations against the space)"
)


def bad_reward(reward: Any) -> str | None:
    """Why a reward cannot be learned from (not a finite number), or None."""
    try:
        value = float(reward)
    except (TypeError, ValueError):
        return f"returned the reward {reward!r}, not a number"
    return None if math.isfinite(value) else f"returned the reward {value}"


def check_vector_step(
    obs: Any, rewards: np.ndarray, check: ObservationCheck | None, steps: np.ndarray, worker_index: int
) -> None:
    """The checks a :class:`SubEnvironmentGuard` makes, on a whole batch from a natively vectorised env.

    Args:
        obs: the batch of observations the vector env's ``step`` returned.
        rewards: ``[N]`` rewards of that step; each must be finite.
        check: the observation check of the env's single observation space; None skips it
            (``disable_env_checking``).
        steps: ``[N]`` steps each sub-environment's episode had taken before this one, for the message.
        worker_index: the env runner's index, for the message.

    Raises:
        EnvError: naming the sub-environment, its step and what was wrong.
    """
    finite = np.isfinite(rewards)
    if not finite.all():
        i = int(np.flatnonzero(~finite)[0])
        raise EnvError(
            f"sub-environment {i} of env runner {worker_index} returned the reward {rewards[i]} "
            f"at step {int(steps[i]) + 1} of its episode{_CHECK_ADVICE}"
        )
    found = check.problem(obs, batched=True) if check is not None else None
    if found is not None:
        i = found[0]
        raise EnvError(
            f"sub-environment {i} of env runner {worker_index} returned an observation that {found[1]} "
            f"at step {int(steps[i]) + 1} of its episode{_CHECK_ADVICE}"
        )


def _copied(action: Any) -> Any:
    """An action as the episode's record keeps it: arrays copied, a Tuple or Dict action space's structure kept."""
    if isinstance(action, dict):
        return {key: _copied(value) for key, value in action.items()}
    if isinstance(action, tuple):
        return tuple(_copied(value) for value in action)
    return np.array(action, copy=True)
