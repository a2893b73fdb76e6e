"""One sub-environment of a multi-agent env runner: held to the dict protocol, recorded for replay, restarted on failure.

:class:`MultiAgentEnvGuard` is to a :class:`~corral.core.environments.multi_agent_env.MultiAgentEnv`
what :class:`~corral.core.environments.envs.SubEnvironmentGuard` is to a
single-agent one:

- every call is checked against the protocol, and a mistake raises an
  :class:`~corral.errors.EnvError` naming the agent and the key;
- the episode in progress is recorded (its reset seed, options and generator
  state, then every action dict), so a checkpoint can bring a fresh env to the
  same point by replaying it (see :mod:`corral.core.environments.env_state`);
- with ``restart``, a step that raises or returns a reward or observation that
  fails the checks closes the env and makes it anew, and the episode ends
  there as truncated for every agent, so nothing learns from the broken step.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from corral.core.common import state_codec
from corral.core.common.spaces import ObservationCheck
from corral.core.environments.envs import MAX_REPLAY_STEPS, bad_reward, prepare_replay
from corral.core.environments.multi_agent_env import ALL_AGENTS, MultiAgentDict, MultiAgentEnv
from corral.core.seeding import generator_state
from corral.errors import EnvError, EnvRunnerError

logger = logging.getLogger("corral")

_RESULT_NAMES = ("observations", "rewards", "terminateds", "truncateds", "infos")
_RESTART_ADVICE = "set fault_tolerance(restart_failed_sub_environments=True) to restart a failed sub-environment and go on"


class MultiAgentEnvGuard:
    """Holds a multi-agent env to the dict protocol, records its episode for replay, and restarts it if asked.

    Checked on every call: ``reset`` and ``step`` return dicts of the right
    count; ``terminateds`` and ``truncateds`` hold ``"__all__"``; each
    observation belongs to its agent's space and each reward is a finite
    number; actions go only to agents that were given an observation; and no
    step follows the end of an episode without a reset.

    Args:
        env: the multi-agent env.
        label: names the env in messages (e.g. the env id and sub-environment index).
        check_observations: check each observation against its agent's space
            (False with ``disable_env_checking``); the protocol is always checked.
        make: makes the env anew, for a restart.
        restart: restart the env (with ``make``) when a step raises or returns a
            reward or observation that fails the checks, instead of raising.
    """

    def __init__(
        self,
        env: MultiAgentEnv,
        label: str,
        check_observations: bool = True,
        make: Callable[[], MultiAgentEnv] | None = None,
        restart: bool = False,
    ) -> None:
        if restart and make is None:
            raise ValueError("a sub-environment that restarts needs make, to make it anew")
        self.env = env
        self.label = label
        self.check_observations = check_observations
        self.restart = restart
        self.restarts = 0
        """how many times the env was made anew"""
        self.acting: set[Any] = set()
        self.episode_over = True
        self._make = make
        self._checks: dict[Any, ObservationCheck] = {}
        self._t = 0
        self._record: dict[str, Any] | None = None  # how the episode in progress began, and its action dicts

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[MultiAgentDict, MultiAgentDict]:
        """``env.reset``, checked and remembered for replay.

        Args:
            seed: as for :meth:`MultiAgentEnv.reset`.
            options: as for :meth:`MultiAgentEnv.reset`.

        Returns:
            ``(observations, infos)``.

        Raises:
            EnvError: the env broke the protocol.
        """
        rng = getattr(self.env.unwrapped, "_np_random", None)  # read without creating one (np_random would seed it)
        self._record = {
            "seed": seed,
            "options": options,
            "rng": generator_state(rng) if isinstance(rng, np.random.Generator) else None,
            "actions": [],
        }
        result = self.env.reset(seed=seed, options=options)
        if not (isinstance(result, tuple) and len(result) == 2):
            raise EnvError(f"{self.label}: reset() must return (observations, infos), two dicts by agent id; got {result!r:.200}")
        observations, infos = self._dicts(result, ("observations", "infos"), "reset()")
        if not observations:
            raise EnvError(f"{self.label}: reset() returned no observation; at least one agent must act first")
        problem = self._observation_problem(observations, "reset()")
        if problem is not None:
            raise EnvError(problem)
        self.acting, self.episode_over, self._t = set(observations), False, 0
        return observations, infos

    def step(
        self, action_dict: MultiAgentDict
    ) -> tuple[MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict]:
        """``env.step``, checked; on a failure, a restart (if asked) that ends the episode as truncated.

        Args:
            action_dict: an action for each agent the last observations named.

        Returns:
            ``(observations, rewards, terminateds, truncateds, infos)``; after a restart
            no observation, and every agent that was asked to act truncated with
            ``infos[agent]["corral_env_restarted"]`` True.

        Raises:
            EnvError: an action for an agent that was not asked to act, the env broke the
                protocol, or (without ``restart``) returned a bad reward or observation.
            EnvRunnerError: the env's step raised, without ``restart``.
        """
        if self.episode_over:
            raise EnvError(f"{self.label}: step() after the episode ended; reset() first")
        unasked = [agent for agent in action_dict if agent not in self.acting]
        if unasked:
            raise EnvError(
                f"{self.label}: an action for agent {unasked[0]!r}, which the env did not ask to act "
                f"(its last observations were for [{', '.join(sorted(map(repr, self.acting)))}])"
            )
        self._t += 1
        try:
            result = self.env.step(action_dict)
        except Exception as exc:  # an environment may raise anything
            if not self.restart:
                raise EnvRunnerError(
                    f"{self.label} raised {type(exc).__name__}: {exc} at step {self._t} of its episode ({_RESTART_ADVICE})"
                ) from exc
            return self._restarted(f"raised {type(exc).__name__}: {exc}")
        observations, rewards, terminateds, truncateds, infos = self._checked_protocol(result)
        problem = self._reward_problem(rewards) or self._observation_problem(observations, "step()")
        if problem is not None:
            if not self.restart:
                raise EnvError(f"{problem} at step {self._t} of its episode ({_RESTART_ADVICE})")
            return self._restarted(problem.removeprefix(f"{self.label}: "))
        self.episode_over = bool(terminateds[ALL_AGENTS] or truncateds[ALL_AGENTS])
        # An agent that just terminated or truncated gets its last observation, but does not act again.
        self.acting = set() if self.episode_over else {a for a in observations if not (terminateds.get(a) or truncateds.get(a))}
        if not self.episode_over and not self.acting:
            raise EnvError(f"{self.label}: step() gave no agent an observation to act on, but the episode goes on")
        self._remember(action_dict)
        return observations, rewards, terminateds, truncateds, infos

    def _checked_protocol(self, result: Any) -> tuple[MultiAgentDict, ...]:
        if not (isinstance(result, tuple) and len(result) == 5):
            raise EnvError(
                f"{self.label}: step() must return (observations, rewards, terminateds, truncateds, infos), "
                f"five dicts by agent id; got {result!r:.200}"
            )
        values = self._dicts(result, _RESULT_NAMES, "step()")
        for name, flags in (("terminateds", values[2]), ("truncateds", values[3])):
            if ALL_AGENTS not in flags:
                raise EnvError(
                    f"{self.label}: step() returned {name} without the {ALL_AGENTS!r} key; "
                    f"set {name}[{ALL_AGENTS!r}] to whether the episode ended for every agent"
                )
        return values

    def _dicts(self, result: tuple[Any, ...], names: tuple[str, ...], call: str) -> tuple[MultiAgentDict, ...]:
        for name, value in zip(names, result, strict=True):
            if not isinstance(value, dict):
                raise EnvError(f"{self.label}: {call} returned {name} as {type(value).__name__}; it must be a dict by agent id")
        return tuple(result)

    def _reward_problem(self, rewards: MultiAgentDict) -> str | None:
        for agent, reward in rewards.items():
            problem = bad_reward(reward)
            if problem is not None:
                return f"{self.label}: step() {problem} for agent {agent!r} (rewards[{agent!r}])"
        return None

    def _observation_problem(self, observations: MultiAgentDict, call: str) -> str | None:
        if not self.check_observations:
            return None
        for agent, obs in observations.items():
            check = self._checks.get(agent)
            if check is None:
                check = self._checks[agent] = ObservationCheck(self.env.get_observation_space(agent))
            problem = check.problem(obs)
            if problem is not None:
                where = f"an observation for agent {agent!r} (observations[{agent!r}])"
                return f"{self.label}: {call} returned {where} that {problem[1]}"
        return None

    def _restarted(self, problem: str) -> tuple[MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict]:
        logger.warning("%s %s at step %d of its episode; restarting it", self.label, problem, self._t)
        with contextlib.suppress(Exception):  # the broken env may fail to close too; it is dropped either way
            self.env.close()
        assert self._make is not None  # the constructor refuses restart without it
        self.env = self._make()
        self._checks.clear()
        self.restarts += 1
        acting, self.acting, self.episode_over, self._record = self.acting, set(), True, None
        truncateds: dict[Any, bool] = {ALL_AGENTS: True, **dict.fromkeys(acting, True)}
        return {}, {}, {ALL_AGENTS: False}, truncateds, {agent: {"corral_env_restarted": True} for agent in acting}

    # ------------------------------------------------------------------ #
    # replay
    # ------------------------------------------------------------------ #
    def _remember(self, action_dict: MultiAgentDict) -> None:
        record = self._record
        if record is None:
            return
        if len(record["actions"]) >= MAX_REPLAY_STEPS:
            self._record = None  # too long to keep: after a restore this episode starts anew
            return
        # copied: the runner may reuse its action arrays
        record["actions"].append([(agent, np.array(action, copy=True) if isinstance(action, np.ndarray) else action)
                                  for agent, action in action_dict.items()])  # fmt: skip

    def episode_record(self) -> dict[str, Any] | None:
        """How the episode in progress began and its action dicts, as JSON (None: it cannot be replayed).

        An episode cannot be replayed when it was longer than ``MAX_REPLAY_STEPS``, or when
        its options, actions or agent ids are not plain data (agent ids must be strings or integers).
        """
        record = self._record
        if record is None or self.episode_over:
            return None
        if not all(plain_agent_id(agent) for step in record["actions"] for agent, _ in step):
            return None
        try:
            encoded: dict[str, Any] = state_codec.encode(  # a dict encodes to a dict
                {**record, "actions": [[[agent, action] for agent, action in step] for step in record["actions"]]}
            )
            return encoded
        except (TypeError, ValueError):
            return None  # options or actions that are not plain data

    def replay(self, record: Any) -> None:
        """Bring the env to where :meth:`episode_record` was taken: reset it as then, then step the action dicts.

        Args:
            record: what :meth:`episode_record` returned.

        Raises:
            ValueError: the record is malformed, or the replay does not fit the env (an
                action for an agent it did not ask to act).
        """
        seed, options = prepare_replay(self.env, record, self.label)
        actions = state_codec.decode(record["actions"])
        if not isinstance(actions, list) or not all(
            isinstance(step, list) and all(isinstance(pair, list) and len(pair) == 2 for pair in step) for step in actions
        ):
            raise ValueError(f"{self.label}: the replay actions must be a list of [agent, action] lists per step")
        self.reset(seed=seed, options=options)
        for step in actions:
            try:
                self.step({agent: action for agent, action in step})
            except EnvError as exc:
                raise ValueError(f"the saved episode does not replay: {exc}") from exc


def plain_agent_id(agent: Hashable) -> bool:
    """Whether an agent id survives JSON as itself (a string or an integer)."""
    return isinstance(agent, str) or (isinstance(agent, int) and not isinstance(agent, bool))
