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
from collections.abc import Hashable, Iterable, MutableMapping
from typing import TYPE_CHECKING, Any, cast

import gymnasium as gym
import numpy as np

from corral.core.common.sample_batch import DEFAULT_POLICY_ID, SampleBatch
from corral.core.common.spaces import ObservationCheck, ObservationPreprocessor
from corral.core.contracts.callbacks import CallbackRunner
from corral.core.contracts.config import AlgorithmConfig
from corral.core.contracts.options.input_names import input_creator
from corral.core.environments.envs import (
    EnvContext,
    SubEnvironmentGuard,
    check_vector_step,
    env_name,
    is_guarded,
    make_remote_vector_env,
    make_vector_env,
    one_sub_environment,
)
from corral.core.environments.external_env import ExternalEnv
from corral.core.environments.multi_agent_env import probe_env
from corral.core.environments.remote_sub_environments import RemoteVectorEnv
from corral.core.learning.policies.heuristic_policies import carries_state, postprocesses_trajectories, stateful_actions
from corral.core.learning.policy import Policy
from corral.core.learning.recurrent.carry import RecurrentCarry
from corral.core.memory import check_fits
from corral.core.sampling.agent_collector import PolicyFragment

# defined here before: BaseEnvRunner, evaluation_span, reward_clipper, EpisodeSummary, hist_lists, saved_episode_id
from corral.core.sampling.base_env_runner import (
    BaseEnvRunner as BaseEnvRunner,
    evaluation_span as evaluation_span,
    reward_clipper as reward_clipper,
)
from corral.core.sampling.metrics import EpisodeSummary as EpisodeSummary, hist_lists as hist_lists
from corral.core.sampling.offline_output import OUTPUT_CONTEXT_COLUMNS
from corral.core.sampling.runner_state import env_runner_state, saved_episode_id as saved_episode_id, set_env_runner_state
from corral.errors import ConfigError, EnvError

if TYPE_CHECKING:
    from corral.core.sampling.multi_agent_env_runner import AnyEnvRunner


_SINGLE_AGENT_ID = "agent0"
"""the agent id RLlib gives the one agent of a single-agent episode"""


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

    def _for(self, agent_id: Hashable, value: Any) -> Any:
        return value if agent_id == _SINGLE_AGENT_ID else None  # RLlib's: None for an agent the episode has not

    def last_observation_for(self, agent_id: Hashable = _SINGLE_AGENT_ID) -> Any:
        """RLlib's per-agent getter: the last observation, as the env gave it (the one agent is ``"agent0"``)."""
        return self._for(agent_id, self.last_observation)

    last_raw_obs_for = last_observation_for

    def last_action_for(self, agent_id: Hashable = _SINGLE_AGENT_ID) -> Any:
        """RLlib's per-agent getter: the last action (None before the first)."""
        return self._for(agent_id, self.last_action)

    def last_reward_for(self, agent_id: Hashable = _SINGLE_AGENT_ID) -> Any:
        """RLlib's per-agent getter: the last reward."""
        return self._for(agent_id, self.last_reward)

    def last_info_for(self, agent_id: Hashable = _SINGLE_AGENT_ID) -> Any:
        """RLlib's per-agent getter: the last info dict."""
        return self._for(agent_id, self.last_info)


class EnvRunner(BaseEnvRunner):
    """Steps ``num_envs`` single-agent sub-environments (a gymnasium vector env) with the policy; see :class:`BaseEnvRunner`."""

    def _make_envs(self, first_env: Any) -> None:
        config = self.config
        created = functools.partial(self.callbacks.sub_environment_created, self)
        if config.remote_worker_envs:
            self.base_env = make_remote_vector_env(config, self.num_envs, self.worker_index, first_env, created)
        else:
            self.base_env = make_vector_env(config, self.num_envs, self.worker_index, first_env, self.display, created)
        self._check_buffer_memory()
        # Sub-environments stepped in a loop check themselves (SubEnvironmentGuard); a native vector env is checked here.
        self._native = not is_guarded(self.base_env)
        self._single_env: gym.Env | None = None
        """a native vector env's one copy, made when ``env`` is first read"""
        self._obs_check = ObservationCheck(self.observation_space) if self._native and not config.disable_env_checking else None
        context = EnvContext(config.env_config, self.worker_index, 0, config.num_env_runners)
        self.callbacks.environment_created(self, self.base_env, context)
        self._ep_return = np.zeros(self.num_envs, dtype=np.float64)
        self._ep_len = np.zeros(self.num_envs, dtype=np.int64)
        self._episodes: list[Episode | None] = [None] * self.num_envs
        self._fragment_episodes: list[list[Episode]] = [[] for _ in range(self.num_envs)]
        """where trajectories are postprocessed one by one: the episodes of each sub-environment's rows in the fragment"""
        self._episode_ids = np.full(self.num_envs, -1, dtype=np.int64)
        """each sub-environment's episode id, kept while output is written (its rows name their episode)"""
        self._buffers: dict[str, np.ndarray] = {}
        self._carry: RecurrentCarry | None = None
        """a recurrent policy's state, previous action and reward in each sub-environment"""

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
    def env(self) -> Any:
        """Sub-environment 0 as its creator made it (RLlib's ``worker.env``): for a gymnasium id, ``gym.make``'s env.

        A native vector env has no sub-environment objects, so this is one copy
        of its env, made by ``gym.make`` beside it on first use: it has the same
        spaces and dynamics, but stepping it does not step the runner's envs.
        """
        if is_guarded(self.base_env):
            return cast(SubEnvironmentGuard, self.base_env.envs[0]).created
        if isinstance(self.base_env, RemoteVectorEnv):
            return self.base_env.actors[0]  # as RLlib's worker.env with remote_worker_envs: an actor
        if self._single_env is None:
            self._single_env = one_sub_environment(self.config, self.worker_index)
        return self._single_env

    @property
    def sub_environments(self) -> list[Any]:
        """The sub-environments stepped in a loop, as the user made them, their actors (``remote_worker_envs``), or the
        native vector env itself."""
        if isinstance(self.base_env, RemoteVectorEnv):
            return list(self.base_env.actors)
        if not is_guarded(self.base_env):
            return [self.base_env]
        return [cast(SubEnvironmentGuard, guard).user_env for guard in self.base_env.envs]

    @property
    def module(self) -> Any:
        """The model that acts (RLlib's ``env_runner.module``): the policy's."""
        return self.policy.model

    @property
    def observation_space(self) -> gym.Space[Any]:
        """One sub-environment's observation space."""
        return self.base_env.single_observation_space

    @property
    def action_space(self) -> gym.Space[Any]:
        """One sub-environment's action space."""
        return self.base_env.single_action_space

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
    def _fragments(self, horizon: int) -> dict[str, PolicyFragment]:
        """The policy's ``[horizon, N]`` fragment: a column per sub-environment."""
        fragment = SampleBatch({key: column[:horizon] for key, column in self._buffers.items()})
        agents: list[tuple[int, Hashable]] = [(k, None) for k in range(self.num_envs)]
        episodes, self._fragment_episodes = self._fragment_episodes, [[] for _ in range(self.num_envs)]
        return {DEFAULT_POLICY_ID: PolicyFragment(fragment, self.policy.preprocess(self._obs), agents, episodes)}

    def _episode_lengths(self) -> np.ndarray:
        return self._ep_len

    def _step(self, explore: bool, t: int | None, horizon: int, include: np.ndarray | None = None) -> tuple[int, int]:
        """One vector step; records row ``t`` if given (see :meth:`BaseEnvRunner._step`).

        The rows of sub-environments left out by ``include`` are recorded as invalid.
        """
        policy = self.policy
        training = t is not None and self._training_rows
        obs = policy.preprocess(self._obs, update_filter=training)  # training samples update the filter
        carry = self._recurrent_carry(policy)
        if carry is None:
            actions, extras = policy.compute_actions(obs, explore=explore)
            columns = extras
        else:
            actions, extras = stateful_actions(policy, obs, self._obs, carry.inputs(), explore)
            columns = {**extras, **carry.columns()}
        next_obs, rewards, terminateds, truncateds, infos = self.base_env.step(policy.action_adapter(actions))
        if self._native:
            check_vector_step(next_obs, rewards, self._obs_check, self._ep_len, self.worker_index)
        # gymnasium's vector envs autoreset on the step after an episode ends: that step's action is
        # ignored and its row is a reset, not a transition. It stays in the time-major fragment (every
        # column keeps its [T, N] shape) and VALID marks it False, so it is neither counted nor trained on.
        valid = ~self._reset_pending
        recorded = valid if include is None else valid & include
        n_valid = int(recorded.sum())
        recorded_rewards = rewards if self._clip_rewards is None else self._clip_rewards(rewards)
        if t is not None:
            if not self._buffers or (t == 0 and self._buffers[SampleBatch.OBS].shape[0] != horizon):
                self._allocate(horizon, obs, actions, columns)
            elif t == self._buffers[SampleBatch.OBS].shape[0]:  # a complete episode runs past the fragment
                self._buffers = {k: np.concatenate([v, np.zeros_like(v)]) for k, v in self._buffers.items()}
            buf = self._buffers
            buf[SampleBatch.OBS][t] = obs
            buf[SampleBatch.ACTIONS][t] = actions
            buf[SampleBatch.REWARDS][t] = recorded_rewards
            buf[SampleBatch.TERMINATEDS][t] = terminateds
            buf[SampleBatch.TRUNCATEDS][t] = truncateds
            buf[SampleBatch.VALID][t] = recorded
            for key, value in columns.items():
                buf[key][t] = value
            if self.output is not None:
                buf[SampleBatch.EPS_ID][t] = self._episode_ids
                buf[SampleBatch.T][t] = self._ep_len
                buf[SampleBatch.INFOS][t] = None
                if infos:  # most vector envs return none: then no row needs one
                    for k in range(self.num_envs):
                        buf[SampleBatch.INFOS][t, k] = _info_row(infos, k)
            policy.global_timestep += n_valid if training else 0
            if self.per_trajectory(policy):  # the episodes each sub-environment's rows belong to
                for i in np.flatnonzero(recorded):
                    seen, episode = self._fragment_episodes[i], self._episodes[i]
                    if episode is not None and (not seen or seen[-1] is not episode):
                        seen.append(episode)
        self._track_episodes(rewards, terminateds, truncateds, valid, next_obs, actions, infos)
        if carry is not None:
            carry.advance(extras, actions, recorded_rewards, starting=~valid)  # after a reset row, an episode starts
        self._obs = next_obs
        return n_valid, n_valid

    def _recurrent_carry(self, policy: Policy) -> RecurrentCarry | None:
        """The recurrent policy's carry between steps (made when it first acts, anew for another); None without memory."""
        if not carries_state(policy):
            return None
        if self._carry is None or self._carry.policy is not policy:
            self._carry = RecurrentCarry(policy, self.num_envs)
        return self._carry

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
    def _reset_all(self) -> None:
        self._obs, _ = self.base_env.reset(seed=self._reset_seed())
        found = self._obs_check.problem(self._obs, batched=True) if self._obs_check is not None else None
        if found is not None:
            raise EnvError(
                f"sub-environment {found[0]} of env runner {self.worker_index}: the observation from reset() {found[1]}"
            )
        self._reset_pending[:] = False
        self._discarding[:] = False
        self._carry = None  # every episode starts over
        self._ep_return[:] = 0.0
        self._ep_len[:] = 0
        self._begin_episodes(range(self.num_envs), self._obs)

    def _begin_episodes(self, indexes: Iterable[int], first_obs: Any) -> None:
        """New episodes in these sub-environments: an Episode for the callbacks that want one, or an id for the output."""
        keeps_episodes = self._keeps_episodes
        for i in indexes:
            if keeps_episodes:
                self._start_episode(int(i), _row(first_obs, i))
            elif self.output is not None:
                self._episode_ids[i] = self.new_episode_id()

    @property
    def _keeps_episodes(self) -> bool:
        """Whether episodes are kept as :class:`Episode` objects: for callbacks that want them, or a policy that
        postprocesses each episode in RLlib's form (it is given the episode)."""
        return self.callbacks.needs_episodes or postprocesses_trajectories(self.policy)

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
        if self._keeps_episodes or self.output is not None:
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

    def _resume_episodes(self, episode_ids: list[Any]) -> None:
        """After a restore: callbacks see the episodes in progress anew (their user_data is not saved); the output their ids.

        Args:
            episode_ids: each sub-environment's saved episode id, or None.

        Raises:
            ValueError: a saved id is not an integer.
        """
        if self._keeps_episodes:
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
    # state, for checkpoints (see runner_state)
    # ------------------------------------------------------------------ #
    def get_state(self) -> dict[str, Any]:
        """Where sampling stands, as JSON: the generator, the episodes in progress and the environments' state."""
        return env_runner_state(self)

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`get_state`; the environments are brought to the same point (see ``environments.env_state``).

        A state saved by a runner built otherwise is not used: this runner starts afresh (see ``runner_state``).

        Raises:
            ValueError: the state is malformed.
        """
        set_env_runner_state(self, state)

    # ------------------------------------------------------------------ #
    # lifecycle
    # ------------------------------------------------------------------ #
    def stop(self) -> None:
        """Close the environments and the output files."""
        self.base_env.close()
        if self._single_env is not None:
            self._single_env.close()
        self.close_output()


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


def make_env_runner(
    config: AlgorithmConfig,
    policies: MutableMapping[str, Policy],
    worker_index: int = 0,
    callbacks: CallbackRunner | None = None,
    num_envs: int | None = None,
    seed: int | None = None,
    stream: str = "sampling",
) -> AnyEnvRunner:
    """The env runner for the config's env: a MultiAgentEnvRunner for a ``corral.MultiAgentEnv``, an ExternalEnvRunner for an
    ``ExternalEnv`` (or an input creator as ``input_``, which makes one, or a reader), else an EnvRunner.

    Args:
        config: the algorithm's config.
        policies: policies by id, shared with the caller (filled after the runner is built).
        worker_index: 0 for the local runner, 1..N for remote ones.
        callbacks: the hook facade.
        num_envs: sub-environments; default ``config.num_envs_per_env_runner``.
        seed: the algorithm's seed.
        stream: ``"sampling"`` or ``"evaluation"``.

    Returns:
        The runner, its environments built but not reset.

    Raises:
        ConfigError: the config sets ``multi_agent()`` policies or a mapping for a single-agent env.
        EnvError: the env cannot be made.
    """
    from corral.core.sampling.external.external_env_runner import ExternalEnvRunner  # it builds on this module
    from corral.core.sampling.multi_agent_env_runner import MultiAgentEnvRunner  # it builds on this module

    if input_creator(config.input_) is not None:  # RLlib's input creator: each runner's ExternalEnv, or a reader
        return ExternalEnvRunner(config, policies, worker_index, callbacks, num_envs, seed, stream)
    multi_agent, first_env = probe_env(config, worker_index)
    if isinstance(first_env, ExternalEnv):
        return ExternalEnvRunner(config, policies, worker_index, callbacks, num_envs, seed, stream, first_env)
    if multi_agent:
        return MultiAgentEnvRunner(config, policies, worker_index, callbacks, num_envs, seed, stream, first_env)
    if config.is_multi_agent:
        if first_env is not None:
            first_env.close()
        raise ConfigError(
            f"config.multi_agent() sets the policies {sorted(config.policies)}, but {env_name(config.env)!r} is a single-agent "
            "env; give a corral.MultiAgentEnv (corral.make_multi_agent(env) makes one agent per copy of a single-agent env)"
        )
    return EnvRunner(config, policies, worker_index, callbacks, num_envs, seed, stream, first_env)
