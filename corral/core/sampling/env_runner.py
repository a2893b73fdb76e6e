"""The env runner: steps a vector of sub-environments with a policy and records samples.

One batched forward pass per vector step, under ``torch.inference_mode()``
(inside :meth:`Policy.compute_actions`); samples go into preallocated ``[T, N]``
numpy arrays; episode statistics are kept in numpy counters. Episode objects
for callbacks are made only when a callback implements an episode hook.

Sub-environments reset on the step after an episode ends (gymnasium's
next-step autoreset). That step's row is recorded but marked invalid; its
observation is the episode's final one, which return estimators use to
bootstrap truncated episodes (see :mod:`corral.core.learning.postprocessing`).
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Iterable, MutableMapping
from dataclasses import dataclass, field
from typing import Any, cast

import gymnasium as gym
import numpy as np

from corral.core.common import state_codec
from corral.core.common.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch
from corral.core.common.spaces import ObservationCheck, ObservationPreprocessor
from corral.core.contracts.callbacks import CallbackRunner
from corral.core.contracts.config import AlgorithmConfig
from corral.core.environments.atari import atari_wanted
from corral.core.environments.env_state import get_env_state, set_env_state
from corral.core.environments.envs import (
    EnvContext,
    SubEnvironmentGuard,
    check_vector_step,
    env_name,
    is_guarded,
    make_vector_env,
)
from corral.core.environments.rendering import display_for
from corral.core.environments.task_settable_env import set_tasks
from corral.core.learning.policy import Policy
from corral.core.learning.postprocessing import episode_ends
from corral.core.memory import check_fits
from corral.core.persistence.experience_output import OUTPUT_CONTEXT_COLUMNS, ExperienceWriter, transitions
from corral.core.sampling.trajectories import postprocess_columns
from corral.core.seeding import generator_state, numpy_generator, set_generator_state
from corral.errors import EnvError

logger = logging.getLogger("corral")


class Episode:
    """One episode of one sub-environment, as callbacks see it.

    ``user_data`` is free for callbacks to use; numbers put in
    ``custom_metrics`` are aggregated (mean/min/max) into the results.
    """

    def __init__(self, env_index: int, first_observation: Any, episode_id: int) -> None:
        self.episode_id = episode_id
        self.env_index = env_index
        self.length = 0
        self.total_reward = 0.0
        self.user_data: dict[str, Any] = {}
        self.custom_metrics: dict[str, float] = {}
        self.hist_data: dict[str, list[float]] = {}
        self.last_observation: Any = first_observation
        self.last_action: Any = None
        self.last_reward = 0.0
        self.last_info: dict[str, Any] = {}
        self.terminated = False
        self.truncated = False


@dataclass
class EpisodeSummary:
    """What metrics need of a finished episode."""

    reward: float
    length: int
    custom_metrics: dict[str, float] = field(default_factory=dict)
    policy_rewards: dict[str, list[float]] = field(default_factory=dict)
    """multi-agent episodes: by policy id, the total reward of each agent that policy acted for"""
    hist_data: dict[str, list[float]] = field(default_factory=dict)
    """what callbacks put into the episode's ``hist_data``, reported whole under ``hist_stats``"""


def hist_lists(hist_data: dict[str, Any]) -> dict[str, list[float]]:
    """An episode's ``hist_data`` as plain float lists, for its :class:`EpisodeSummary` (numpy numbers and arrays too)."""
    return {key: [float(v) for v in values] for key, values in hist_data.items()}


def reward_clipper(clip_rewards: bool | float | None) -> Callable[[Any], Any] | None:
    """The function ``clip_rewards`` asks for, as RLlib reads it: True takes the sign, a number x clips to [-x, x].

    Args:
        clip_rewards: the config's value.

    Returns:
        A function of a reward or an array of them, or None when rewards are kept as they are.
    """
    if clip_rewards is None or clip_rewards is False:
        return None
    if clip_rewards is True:
        return np.sign
    # rewards are stored as float32: a bound beyond its range clips nothing, and must not overflow the cast
    bound = min(float(clip_rewards), float(np.finfo(np.float32).max))
    return lambda rewards: np.clip(rewards, -bound, bound)


class BaseEnvRunner:
    """What both kinds of env runner share: config, policies, callbacks, generator, finished episodes.

    A subclass builds its environments in :meth:`_make_envs` and writes
    ``sample``, ``run_episodes``, ``policy_spaces``, the state methods and ``stop``.

    Args:
        config: the algorithm's config (the evaluation config for evaluation runners).
        policies: policies by id; a local runner shares the algorithm's.
        worker_index: 0 for the local runner, 1..N for remote ones.
        callbacks: the hook facade; none runs if omitted.
        num_envs: sub-environments; default ``config.num_envs_per_env_runner``.
        seed: the algorithm's seed; the runner's generator, which seeds every full
            reset of the sub-environments, derives from it, ``stream`` and ``worker_index``.
        stream: ``"sampling"`` or ``"evaluation"``, so the two kinds of runner draw apart.
        first_env: sub-environment 0, already made by the env's creator (see ``probe_env``).
    """

    def __init__(
        self,
        config: AlgorithmConfig,
        policies: MutableMapping[str, Policy],
        worker_index: int = 0,
        callbacks: CallbackRunner | None = None,
        num_envs: int | None = None,
        seed: int | None = None,
        stream: str = "sampling",
        first_env: Any = None,
    ) -> None:
        self.config = config
        self.worker_index = worker_index
        self.policies = policies
        self.callbacks = callbacks or CallbackRunner([])
        self.num_envs = num_envs or config.num_envs_per_env_runner
        atari = config.clip_rewards is None and atari_wanted(config)  # RLlib's default for Atari: the reward's sign
        self._clip_rewards = reward_clipper(True if atari else config.clip_rewards)
        """what learning sees of a reward (``clip_rewards``); None: the reward as it is"""
        self.np_rng = numpy_generator(seed, "runner", stream, worker_index)
        self.display = display_for(config, worker_index, stream)
        """how this runner shows its sub-environment 0 (``render_env``, ``record_env``), or None"""
        self._completed: list[EpisodeSummary] = []
        # the high bits tell the algorithm's runners apart; the low ones count this runner's episodes
        self.next_episode_id = (2 * worker_index + (stream == "evaluation")) << 48
        self.output = ExperienceWriter.from_config(config, worker_index)
        """where this runner's sampled transitions are written (``offline_data(output=...)``), or None"""
        self._make_envs(first_env)

    def _make_envs(self, first_env: Any) -> None:
        """Build the sub-environments (``first_env`` is sub-environment 0 if given) and the sampling state."""
        raise NotImplementedError

    def new_episode_id(self) -> int:
        """An id no other episode of the algorithm's runners has, the same in every run with the same seed.

        A ``policy_mapping_fn`` that reads ``episode.episode_id`` (to pick an opponent)
        is reproducible because of it, and a resumed run continues the sequence.
        """
        episode_id = self.next_episode_id
        self.next_episode_id += 1
        return episode_id

    @property
    def policy_map(self) -> MutableMapping[str, Policy]:
        """The policies by id (RLlib's name)."""
        return self.policies

    def get_policy(self, policy_id: str = DEFAULT_POLICY_ID) -> Policy:
        """The policy ``policy_id`` of this runner, as RLlib's ``worker.get_policy()``.

        Args:
            policy_id: the policy's id; default the single-agent policy.

        Raises:
            KeyError: no policy has that id (the message lists those there are).
        """
        if policy_id not in self.policies:
            raise KeyError(f"this env runner has no policy {policy_id!r}; it has {sorted(self.policies)}")
        return self.policies[policy_id]

    @property
    def sub_environments(self) -> list[Any]:
        """The environments this runner steps as the user made them, one per sub-environment (a natively vectorised env is one).

        corral's own wrappers (the env checker, ``horizon``, the spaces of
        ``environment(observation_space=...)``, the old-gym adapter, the guards)
        are not there, so an env's own methods and attributes can be reached:
        ``env.set_task(5)``. For a gymnasium id, the env its entry point made.
        """
        raise NotImplementedError

    def set_tasks(self, function: Any, result: dict[str, Any]) -> list[Any]:
        """Curriculum: each sub-environment gets ``function(result, env, env_context)`` as its task (``env_task_fn``).

        Args:
            function: ``env_task_fn``.
            result: the iteration's result.

        Returns:
            The tasks set, one per sub-environment.
        """
        cfg, envs = self.config, self.sub_environments
        contexts = [EnvContext(cfg.env_config, self.worker_index, k, cfg.num_env_runners) for k in range(len(envs))]
        return set_tasks(envs, contexts, function, result)

    def foreach_env(self, fn: Callable[[Any], Any]) -> list[Any]:
        """``fn(env)`` on each sub-environment, as RLlib's ``worker.foreach_env`` (to read or set env state).

        Args:
            fn: called with each of :attr:`sub_environments`: the env as the user made it, or a
                natively vectorised env whole (it has no sub-environment objects), as in RLlib.

        Returns:
            What ``fn`` returned, one per sub-environment.
        """
        return [fn(env) for env in self.sub_environments]

    def forget_policy(self, policy_id: str) -> None:
        """A policy was removed from :attr:`policies`: let go of whatever still refers to it (nothing, by default).

        Args:
            policy_id: the removed policy.
        """

    def _built_for(self) -> dict[str, Any]:
        """What a saved state depends on: the env, its config and how many sub-environments."""
        config = self.config
        return {
            "env": env_name(config.env),
            "env_config": json.dumps(config.env_config, sort_keys=True, default=str),
            "num_envs": self.num_envs,
        }

    def get_metrics(self) -> list[EpisodeSummary]:
        """Episodes finished since the last call."""
        completed, self._completed = self._completed, []
        return completed

    def apply(self, fn: Any) -> Any:
        """Call ``fn(self)`` (what ``foreach_env_runner`` does on each runner)."""
        return fn(self)

    def _write_output(self, fragments: dict[str, tuple[SampleBatch, np.ndarray]]) -> None:
        """Write each policy's fragment (with its bootstrap observations) as transitions, and take the context out.

        The ``eps_id``, ``agent_index``, ``t`` and ``infos`` columns exist for the output only:
        they leave the fragments here, so training is the same with or without output.
        """
        if self.output is not None:
            self.output.write({pid: transitions(fragment, bootstrap) for pid, (fragment, bootstrap) in fragments.items()})
        for fragment, _ in fragments.values():
            for key in OUTPUT_CONTEXT_COLUMNS:
                fragment.pop(key, None)

    def close_output(self) -> None:
        """Close the output files, so that every one is complete (see :class:`ExperienceWriter`)."""
        if self.output is not None:
            self.output.close()


class EnvRunner(BaseEnvRunner):
    """Steps ``num_envs`` single-agent sub-environments (a gymnasium vector env) with the policy; see :class:`BaseEnvRunner`."""

    def _make_envs(self, first_env: Any) -> None:
        config = self.config
        self.env = make_vector_env(
            config, self.num_envs, self.worker_index, first_env, self.display,
            on_sub_environment=functools.partial(self.callbacks.sub_environment_created, self),
        )  # fmt: skip
        self._check_buffer_memory()
        # Sub-environments stepped in a loop check themselves (SubEnvironmentGuard); a native vector env is checked here.
        self._native = not is_guarded(self.env)
        self._obs_check = ObservationCheck(self.observation_space) if self._native and not config.disable_env_checking else None
        context = EnvContext(config.env_config, self.worker_index, 0, config.num_env_runners)
        self.callbacks.environment_created(self, self.env, context)
        self._obs: Any = None
        self._reset_pending = np.zeros(self.num_envs, dtype=bool)
        self._discarding = np.zeros(self.num_envs, dtype=bool)
        """with batch_mode='complete_episodes': sub-environments whose episode began outside a fragment (not trained on)"""
        self._ep_return = np.zeros(self.num_envs, dtype=np.float64)
        self._ep_len = np.zeros(self.num_envs, dtype=np.int64)
        self._episodes: list[Episode | None] = [None] * self.num_envs
        self._last_episodes: list[Episode | None] = [None] * self.num_envs
        """with an ``on_postprocess_trajectory`` hook: the episode of each sub-environment's last row in the fragment"""
        self._episode_ids = np.full(self.num_envs, -1, dtype=np.int64)
        """each sub-environment's episode id, kept while output is written (its rows name their episode)"""
        self._buffers: dict[str, np.ndarray] = {}

    def _check_buffer_memory(self) -> None:
        """Refuse a fragment whose ``[T, N]`` sample buffers cannot fit in memory, before they are allocated."""
        steps = self.config.get_rollout_fragment_length()
        floats = np.prod(ObservationPreprocessor(self.observation_space).shape, dtype=np.float64)
        row = 8 * floats + 64  # observations (up to 8 bytes per value), and a margin for actions and extras
        check_fits(
            f"the sample buffers of one env runner ({steps:,} steps x {self.num_envs:,} envs, "
            f"observations of {int(floats):,} values)",
            int(steps * self.num_envs * row),
            "lower train_batch_size or rollout_fragment_length, or num_envs_per_env_runner",
        )

    @property
    def sub_environments(self) -> list[Any]:
        """The sub-environments stepped in a loop, as the user made them, or the native vector env itself."""
        if not is_guarded(self.env):
            return [self.env]
        return [cast(SubEnvironmentGuard, guard).user_env for guard in self.env.envs]

    @property
    def module(self) -> Any:
        """The model that acts (RLlib's ``env_runner.module``): the policy's."""
        return self.policy.model

    @property
    def observation_space(self) -> gym.Space[Any]:
        """One sub-environment's observation space."""
        return self.env.single_observation_space

    @property
    def action_space(self) -> gym.Space[Any]:
        """One sub-environment's action space."""
        return self.env.single_action_space

    @property
    def policy(self) -> Policy:
        """The policy acting in this (single-agent) runner."""
        return self.policies[DEFAULT_POLICY_ID]

    def policy_spaces(self) -> dict[str, tuple[gym.Space[Any], gym.Space[Any]]]:
        """The one policy's (observation, action) spaces: the env's."""
        return {DEFAULT_POLICY_ID: (self.observation_space, self.action_space)}

    # ------------------------------------------------------------------ #
    # sampling
    # ------------------------------------------------------------------ #
    def sample(self, num_steps: int | None = None, explore: bool | None = None) -> MultiAgentBatch:
        """Step every sub-environment ``num_steps`` times and return the postprocessed samples.

        Args:
            num_steps: steps per sub-environment; default the config's rollout fragment length.
            explore: default ``config.explore``.
        """
        steps = num_steps or self.config.get_rollout_fragment_length()
        explore = self.config.explore if explore is None else explore
        if self._obs is None:
            self._reset()
        policy = self.policy
        self._last_episodes = [None] * self.num_envs
        if self.config.batch_mode == "complete_episodes":
            valid_steps, horizon = self._sample_complete_episodes(policy, explore, steps)
        else:
            valid_steps, horizon = sum(self._step(policy, explore, t, steps) for t in range(steps)), steps
        fragment = SampleBatch({key: column[:horizon] for key, column in self._buffers.items()})
        bootstrap_obs = policy.preprocess(self._obs)
        self._write_output({DEFAULT_POLICY_ID: (fragment, bootstrap_obs)})
        fragment = episode_ends(fragment, policy.config.no_done_at_end)  # the output above keeps the env's own flags
        if self.callbacks.has_postprocess_trajectory:
            batch = self._postprocess_each_sub_environment(policy, fragment, bootstrap_obs)
        else:
            batch = policy.postprocess_trajectory(fragment, bootstrap_obs)
        samples = MultiAgentBatch({DEFAULT_POLICY_ID: batch}, valid_steps, valid_steps)
        self.callbacks.sample_end(self, samples)
        return samples

    def _postprocess_each_sub_environment(self, policy: Policy, fragment: SampleBatch, bootstrap_obs: np.ndarray) -> SampleBatch:
        """Postprocess each sub-environment's trajectory on its own and show it to ``on_postprocess_trajectory``."""
        trajectories = postprocess_columns(policy, fragment, bootstrap_obs)
        for trajectory in trajectories:
            episode = self._last_episodes[trajectory.column]
            if trajectory.has_transitions and episode is not None:
                self.callbacks.postprocess_trajectory(
                    self, DEFAULT_POLICY_ID, policy, trajectory.postprocessed, agent_id=None, episode=episode,
                    original_batches={None: (DEFAULT_POLICY_ID, policy, trajectory.original)},
                )  # fmt: skip
        return SampleBatch.concat([trajectory.postprocessed for trajectory in trajectories])

    def _sample_complete_episodes(self, policy: Policy, explore: bool, steps: int) -> tuple[int, int]:
        """Step at least ``steps`` times, then on until no sub-environment is inside an episode it trains on.

        RLlib's ``batch_mode="complete_episodes"``: the fragment holds whole
        episodes only. A sub-environment whose episode ends after ``steps`` is
        closed: its next rows are left out, and since that episode is then cut,
        it is left out of the next call's fragment too (the sub-environment
        trains again from the episode after it).

        Returns:
            The number of steps recorded as valid and the fragment's length.
        """
        trained = np.zeros(self.num_envs, dtype=bool)  # a row of the running episode is in the fragment
        closed = np.zeros(self.num_envs, dtype=bool)
        valid_steps = t = 0
        while t < steps or trained.any():
            valid_steps += self._step(policy, explore, t, steps, include=~(self._discarding | closed))
            recorded = self._buffers[SampleBatch.VALID][t]
            ended = self._reset_pending  # the episode ended on this step
            trained = (trained | recorded) & ~ended
            self._discarding &= ~ended
            t += 1
            if t >= steps:
                closed |= ~trained
        self._discarding = self._ep_len > 0  # an episode that began here but was cut: its next rows are not trained on
        return valid_steps, t

    def run_episodes(
        self, num_episodes: int | None = None, num_steps: int | None = None, explore: bool = False
    ) -> list[EpisodeSummary]:
        """Evaluate: run from fresh resets until ``num_episodes`` episodes end (or ``num_steps`` steps pass).

        Nothing is recorded for training and the policies' timesteps do not move.
        With both limits given, both must be reached; with neither, nothing is run
        (but the sub-environments are still reset).

        Args:
            num_episodes: stop once this many episodes have ended.
            num_steps: stop once this many transitions (summed over the sub-environments)
                have passed; episodes still running then are not returned.
            explore: act with exploration; False acts deterministically.

        Returns:
            The finished episodes in the order they ended; with ``num_episodes``, the
            first ``num_episodes`` of them.
        """
        self._reset()
        self._completed = []
        policy, steps = self.policy, 0
        while (num_episodes is not None and len(self._completed) < num_episodes) or (num_steps is not None and steps < num_steps):
            steps += self._step(policy, explore, None, 0)
        episodes = self._completed[:num_episodes] if num_episodes is not None else self._completed
        self._completed = []
        return episodes

    def _step(self, policy: Policy, explore: bool, t: int | None, horizon: int, include: np.ndarray | None = None) -> int:
        """One vector step; records row ``t`` if given. Returns the number of transitions recorded as valid.

        Args:
            include: the sub-environments whose transitions count (``batch_mode="complete_episodes"``);
                the others' rows are recorded as invalid. Default all.
        """
        obs = policy.preprocess(self._obs, update_filter=t is not None)  # training samples update the filter
        actions, extras = policy.compute_actions(obs, explore=explore)
        next_obs, rewards, terminateds, truncateds, infos = self.env.step(policy.action_adapter(actions))
        if self._native:
            check_vector_step(next_obs, rewards, self._obs_check, self._ep_len, self.worker_index)
        # gymnasium's vector envs autoreset on the step after an episode ends: that step's action is
        # ignored and its row is a reset, not a transition. It stays in the time-major fragment (every
        # column keeps its [T, N] shape) and VALID marks it False, so it is neither counted nor trained on.
        valid = ~self._reset_pending
        recorded = valid if include is None else valid & include
        n_valid = int(recorded.sum())
        if t is not None:
            if not self._buffers or (t == 0 and self._buffers[SampleBatch.OBS].shape[0] != horizon):
                self._allocate(horizon, obs, actions, extras)
            elif t == self._buffers[SampleBatch.OBS].shape[0]:  # a complete episode runs past the fragment
                self._buffers = {k: np.concatenate([v, np.zeros_like(v)]) for k, v in self._buffers.items()}
            buf = self._buffers
            buf[SampleBatch.OBS][t] = obs
            buf[SampleBatch.ACTIONS][t] = actions
            buf[SampleBatch.REWARDS][t] = rewards if self._clip_rewards is None else self._clip_rewards(rewards)
            buf[SampleBatch.TERMINATEDS][t] = terminateds
            buf[SampleBatch.TRUNCATEDS][t] = truncateds
            buf[SampleBatch.VALID][t] = recorded
            for key, value in extras.items():
                buf[key][t] = value
            if self.output is not None:
                buf[SampleBatch.EPS_ID][t] = self._episode_ids
                buf[SampleBatch.T][t] = self._ep_len
                buf[SampleBatch.INFOS][t] = None
                if infos:  # most vector envs return none: then no row needs one
                    for k in range(self.num_envs):
                        buf[SampleBatch.INFOS][t, k] = _info_row(infos, k)
            policy.global_timestep += n_valid
            if self.callbacks.has_postprocess_trajectory:  # the episode each sub-environment's trajectory ends in
                for i in np.flatnonzero(recorded):
                    self._last_episodes[i] = self._episodes[i]
        self._track_episodes(rewards, terminateds, truncateds, valid, next_obs, actions, infos)
        self._obs = next_obs
        return n_valid

    def _allocate(self, horizon: int, obs: np.ndarray, actions: np.ndarray, extras: dict[str, np.ndarray]) -> None:
        n = self.num_envs
        self._buffers = {
            SampleBatch.OBS: np.zeros((horizon, *obs.shape), dtype=obs.dtype),
            SampleBatch.ACTIONS: np.zeros((horizon, *actions.shape), dtype=actions.dtype),
            SampleBatch.REWARDS: np.zeros((horizon, n), dtype=np.float32),
            SampleBatch.TERMINATEDS: np.zeros((horizon, n), dtype=bool),
            SampleBatch.TRUNCATEDS: np.zeros((horizon, n), dtype=bool),
            SampleBatch.VALID: np.zeros((horizon, n), dtype=bool),
        }
        for key, value in extras.items():
            self._buffers[key] = np.zeros((horizon, *value.shape), dtype=value.dtype)
        if self.output is not None:
            for key in OUTPUT_CONTEXT_COLUMNS:
                self._buffers[key] = np.zeros((horizon, n), dtype=object if key == SampleBatch.INFOS else np.int64)

    # ------------------------------------------------------------------ #
    # episodes
    # ------------------------------------------------------------------ #
    def _reset(self) -> None:
        # 31 bits: the widest seed every env accepts (some call the legacy np.random.seed with it)
        self._obs, _ = self.env.reset(seed=int(self.np_rng.integers(2**31)))
        found = self._obs_check.problem(self._obs, batched=True) if self._obs_check is not None else None
        if found is not None:
            raise EnvError(
                f"sub-environment {found[0]} of env runner {self.worker_index}: the observation from reset() {found[1]}"
            )
        self._reset_pending[:] = False
        self._discarding[:] = False
        self._ep_return[:] = 0.0
        self._ep_len[:] = 0
        self._begin_episodes(range(self.num_envs), self._obs)

    def _begin_episodes(self, indexes: Iterable[int], first_obs: Any) -> None:
        """New episodes in these sub-environments: an Episode for the callbacks that want one, or an id for the output."""
        for i in indexes:
            if self.callbacks.needs_episodes:
                self._start_episode(int(i), _row(first_obs, i))
            elif self.output is not None:
                self._episode_ids[i] = self.new_episode_id()

    def _start_episode(self, index: int, first_obs: Any, episode_id: int | None = None) -> None:
        episode = Episode(index, first_obs, self.new_episode_id() if episode_id is None else episode_id)
        self._episodes[index] = episode
        self._episode_ids[index] = episode.episode_id
        if self.callbacks.has_episode_start:
            self.callbacks.episode_start(episode, self, index)

    def _track_episodes(
        self,
        rewards: np.ndarray,
        terminateds: np.ndarray,
        truncateds: np.ndarray,
        valid: np.ndarray,
        next_obs: Any,
        actions: np.ndarray,
        infos: dict[str, Any],
    ) -> None:
        self._ep_return += rewards * valid
        self._ep_len += valid
        done = (terminateds | truncateds) & valid
        callbacks = self.callbacks
        if callbacks.needs_episodes or self.output is not None:
            self._begin_episodes(np.flatnonzero(~valid), next_obs)  # reset rows: a new episode begins with next_obs
        if callbacks.has_episode_step:
            for i in np.flatnonzero(valid):
                episode = self._episodes[i]
                assert episode is not None
                episode.length, episode.total_reward = int(self._ep_len[i]), float(self._ep_return[i])
                episode.last_observation, episode.last_action = _row(next_obs, i), actions[i]
                episode.last_reward, episode.last_info = float(rewards[i]), _info_row(infos, i)
                callbacks.episode_step(episode, self, int(i))
        for i in np.flatnonzero(done):
            summary = EpisodeSummary(float(self._ep_return[i]), int(self._ep_len[i]))
            episode = self._episodes[i]
            if episode is not None:
                episode.length, episode.total_reward = summary.length, summary.reward
                episode.terminated, episode.truncated = bool(terminateds[i]), bool(truncateds[i])
                episode.last_observation = _row(next_obs, i)
                if callbacks.has_episode_end:
                    callbacks.episode_end(episode, self, int(i))
                summary.custom_metrics = dict(episode.custom_metrics)
                summary.hist_data = hist_lists(episode.hist_data)
            self._completed.append(summary)
            self._ep_return[i] = 0.0
            self._ep_len[i] = 0
        self._reset_pending = done

    # ------------------------------------------------------------------ #
    # state, for checkpoints
    # ------------------------------------------------------------------ #
    def get_state(self) -> dict[str, Any]:
        """Where sampling stands, as JSON: the generator, the episodes in progress and the environments' state.

        Restored with :meth:`set_state` into a runner built from the same
        config, the next sample call continues exactly where this one would.
        The policies are not included (the algorithm saves them).
        """
        state: dict[str, Any] = state_codec.encode(  # a dict encodes to a dict
            {
                "built_for": self._built_for(),
                "np_rng": generator_state(self.np_rng),
                "obs": self._obs,
                "reset_pending": self._reset_pending,
                "discarding": self._discarding,
                "ep_return": self._ep_return,
                "ep_len": self._ep_len,
                "next_episode_id": self.next_episode_id,
                "episode_ids": [None if episode_id < 0 else int(episode_id) for episode_id in self._episode_ids],
                "env": get_env_state(self.env) if self._obs is not None else None,
            }
        )
        return state

    def _built_for(self) -> dict[str, Any]:
        """What a saved state depends on: as for every runner, and how the sub-environments are stepped."""
        return {**super()._built_for(), "stepped_in_a_loop": not self._native}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`get_state`; the environments are brought to the same point (see ``environments.env_state``).

        A state saved by a runner built for another env, ``env_config`` or
        number of sub-environments (``from_checkpoint`` with overrides, as
        ``corral evaluate`` does) is not used: this runner starts afresh.

        Raises:
            ValueError: the state is malformed.
        """
        if not isinstance(state, dict):
            raise ValueError("an env runner state must be a dict")
        if state.get("built_for") != self._built_for():
            logger.info("env runner %d starts new episodes: it is not built as the one whose state was saved", self.worker_index)
            return
        state = state_codec.decode(state)
        counters = {key: np.asarray(state[key]) for key in ("reset_pending", "ep_return", "ep_len")}
        for key, value in counters.items():
            if value.shape != (self.num_envs,):
                raise ValueError(
                    f"env runner state {key!r} has shape {value.shape}, this runner {self.num_envs} sub-environments"
                )
        set_generator_state(self.np_rng, state["np_rng"])
        self.next_episode_id = saved_episode_id(state.get("next_episode_id", self.next_episode_id))
        if state["obs"] is None:
            self._obs = None
            return
        episode_ids = state.get("episode_ids") or [None] * self.num_envs
        if not isinstance(episode_ids, list) or len(episode_ids) != self.num_envs:
            raise ValueError(f"env runner state 'episode_ids' must list {self.num_envs} ids, one per sub-environment")
        found = (
            None
            if self.config.disable_env_checking
            else ObservationCheck(self.observation_space).problem(state["obs"], batched=True)
        )
        if found is not None:
            raise ValueError(f"the saved observations of sub-environment {found[0]} {found[1]}")
        set_env_state(self.env, state["env"], counters["reset_pending"])
        self._obs = state["obs"]
        self._reset_pending = counters["reset_pending"].astype(bool)
        self._ep_return = counters["ep_return"].astype(np.float64)
        self._ep_len = counters["ep_len"].astype(np.int64)
        discarding = np.asarray(state.get("discarding", np.zeros(self.num_envs, dtype=bool)), dtype=bool)
        if discarding.shape != (self.num_envs,):
            raise ValueError(
                f"env runner state 'discarding' has shape {discarding.shape}, this runner {self.num_envs} sub-environments"
            )
        self._discarding = discarding
        if self.callbacks.needs_episodes:  # callbacks see the episodes in progress anew (their user_data is not saved)
            for i in range(self.num_envs):
                episode_id = episode_ids[i]
                self._start_episode(i, _row(self._obs, i), None if episode_id is None else saved_episode_id(episode_id))
                episode = self._episodes[i]
                assert episode is not None
                episode.length, episode.total_reward = int(self._ep_len[i]), float(self._ep_return[i])
        elif self.output is not None:
            for i, episode_id in enumerate(episode_ids):
                self._episode_ids[i] = self.new_episode_id() if episode_id is None else saved_episode_id(episode_id)

    # ------------------------------------------------------------------ #
    # lifecycle
    # ------------------------------------------------------------------ #
    def stop(self) -> None:
        """Close the environments and the output files."""
        self.env.close()
        self.close_output()


def saved_episode_id(value: Any) -> int:
    """An episode id read back from a checkpoint, checked to be an integer.

    Raises:
        ValueError: it is not one.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"a saved episode id must be an integer, not {value!r:.40}")
    return value


def evaluation_span(duration: int, unit: str) -> dict[str, int]:
    """:meth:`EnvRunner.run_episodes` keyword arguments for ``duration`` in ``unit`` ('episodes' or 'timesteps').

    Args:
        duration: how many episodes or timesteps.
        unit: ``"episodes"``; any other value is taken as timesteps.

    Returns:
        ``{"num_episodes": duration}`` or ``{"num_steps": duration}``.
    """
    return {"num_episodes": duration} if unit == "episodes" else {"num_steps": duration}


def _row(obs: Any, index: int | np.integer[Any]) -> Any:
    if isinstance(obs, dict):
        return {k: _row(v, index) for k, v in obs.items()}
    if isinstance(obs, tuple):
        return tuple(_row(v, index) for v in obs)
    return obs[index]


def _info_row(infos: dict[str, Any], index: int | np.integer[Any]) -> dict[str, Any]:
    row = {}
    for key, value in infos.items():
        if key.startswith("_"):
            continue
        mask = infos.get("_" + key)
        if mask is None or mask[index]:
            row[key] = _info_row(value, index) if isinstance(value, dict) else value[index]
    return row
