"""The env runner of an :class:`~corral.core.environments.external_env.ExternalEnv`: it answers, it does not step.

An external application plays any number of episodes at once and asks for
actions when it needs them. The runner polls what the episodes did, acts for
every episode waiting at that moment in one batched forward pass, and keeps
each episode's rows as a column of its own (the multi-agent runner's
:class:`~corral.core.sampling.agent_collector.AgentCollector`, keyed by the
episode's id), so GAE, n-step returns and V-trace run on them unchanged.

- A sample call records ``rollout_fragment_length`` actions (summed over the
  episodes); what the episodes said beyond that waits for the next call, and
  so do the episodes waiting for an action.
- A row closes when the episode's next observation comes, with the rewards
  logged in between; :meth:`~corral.core.environments.external_env.ExternalEnv.end_episode`
  ends it as terminated.
- An action the application took itself (``log_action``) is recorded as it
  was, with its log-likelihood under the policy, or the one the
  application gave (``action_prob`` or ``action_logp``), so an on-policy
  algorithm weighs it as what it was.
- An episode started with ``training_enabled=False`` is acted for and
  reported in the metrics, never trained on.
"""

from __future__ import annotations

import collections
import logging
from typing import Any

import gymnasium as gym
import numpy as np

from corral.core.common.sample_batch import DEFAULT_POLICY_ID, SampleBatch
from corral.core.common.spaces import stack_observations
from corral.core.environments.external_env import ExternalEnv, ExternalStep
from corral.core.sampling.agent_collector import AgentCollector, PolicyFragment
from corral.core.sampling.base_env_runner import BaseEnvRunner
from corral.core.sampling.env_runner import Episode
from corral.core.sampling.external.io_context import IOContext
from corral.core.sampling.metrics import EpisodeSummary, hist_lists
from corral.core.sampling.runner_state import built_for, restore_generator, state_fits
from corral.core.seeding import generator_state
from corral.errors import ConfigError

logger = logging.getLogger("corral")

POLL_S = 1.0
"""how long one poll waits for the application before the runner looks again"""


class ExternalEpisode(Episode):
    """One episode of an external application, as callbacks see it (``external_id`` is the application's id).

    Args:
        first_observation: its first observation.
        episode_id: the runner's id for it (an integer, as every episode has).
        external_id: the id the application gave it.
    """

    def __init__(self, first_observation: Any, episode_id: int, external_id: str) -> None:
        super().__init__(0, first_observation, episode_id)
        self.external_id = external_id


class ExternalEnvRunner(BaseEnvRunner):
    """Samples an :class:`ExternalEnv` (see the module docstring); the arguments are :class:`BaseEnvRunner`'s.

    Raises:
        ConfigError: more than one env per runner, ``batch_mode="complete_episodes"``, a recurrent model, or
            ``first_env`` is not an ExternalEnv.
    """

    def _make_envs(self, first_env: Any) -> None:
        config = self.config
        if first_env is None and callable(config.input_):
            first_env = config.input_(IOContext(config=config, worker_index=self.worker_index, worker=self))
            if first_env is not None and not isinstance(first_env, ExternalEnv):
                raise ConfigError(
                    f"offline_data(input_=...) made a {type(first_env).__name__} for env runner {self.worker_index}; "
                    "a function given as input_ makes an ExternalEnv (a PolicyServerInput) or None, and a folder or "
                    "file of recorded experiences is given as input_ itself"
                )
        elif not isinstance(first_env, ExternalEnv):
            raise ConfigError(f"an ExternalEnvRunner samples an ExternalEnv, not {type(first_env).__name__}")
        # corral's default of several sub-environments is for envs it steps: it becomes 1 (a config read back from a
        # checkpoint has every option set, so the default is told by its value)
        if self.num_envs not in (1, type(config).model_fields["num_envs_per_env_runner"].default):
            raise ConfigError(
                f"num_envs_per_env_runner={self.num_envs}, but an ExternalEnv is one application that runs its episodes "
                "concurrently itself (max_concurrent): set num_envs_per_env_runner=1, or add env runners"
            )
        if config.batch_mode == "complete_episodes":
            raise ConfigError(
                "an ExternalEnv is sampled with batch_mode='truncate_episodes': its application decides when an episode "
                "ends, and a sample call cannot wait for it"
            )
        if config.model.get("use_lstm") or config.model.get("use_attention"):
            raise ConfigError(
                "corral does not yet carry a recurrent model's state through an ExternalEnv's episodes: "
                "use a feed-forward model (model use_lstm=False, use_attention=False)"
            )
        self.num_envs = 1
        self.env: ExternalEnv | None = first_env
        """the application's episodes; None where ``input_`` made nothing for this runner (it samples nothing)"""
        self._running: dict[str, ExternalEpisode] = {}
        """the application's episodes in progress, by its ids"""
        self.episodes_dropped = 0
        """episodes given up because their application went away (reported as ``external/episodes_dropped``)"""
        self._backlog: collections.deque[ExternalStep] = collections.deque()
        """what the episodes said beyond the last sample call's steps"""
        self._forget_open_rows()

    @property
    def sub_environments(self) -> list[Any]:
        """The ExternalEnv, as the one sub-environment (none where ``input_`` made none)."""
        return [] if self.env is None else [self.env]

    @property
    def module(self) -> Any:
        """The model that acts (RLlib's ``env_runner.module``): the policy's."""
        return self.policies[DEFAULT_POLICY_ID].model

    def policy_spaces(self) -> dict[str, tuple[gym.Space[Any], gym.Space[Any]]]:
        """The policy's spaces: ``environment(observation_space=..., action_space=...)``, else the ExternalEnv's."""
        config = self.config
        observation_space = config.observation_space or getattr(self.env, "observation_space", None)
        action_space = config.action_space or getattr(self.env, "action_space", None)
        if observation_space is None or action_space is None:
            raise ConfigError(
                f"env runner {self.worker_index} has no ExternalEnv to take the policy's spaces from: give them in "
                "environment(observation_space=..., action_space=...)"
            )
        return {DEFAULT_POLICY_ID: (observation_space, action_space)}

    # ------------------------------------------------------------------ #
    # sampling
    # ------------------------------------------------------------------ #
    def _forget_open_rows(self) -> None:
        self._collector = AgentCollector(keep_infos=self.output is not None)

    def _reset_all(self) -> None:
        self._obs = {}  # nothing to reset: the application's episodes run on; this marks the runner started

    def _episode_lengths(self) -> np.ndarray:
        return np.zeros(1, dtype=np.int64)  # only complete_episodes asks, which an ExternalEnv refuses

    def _fragments(self, horizon: int) -> dict[str, PolicyFragment]:
        return self._collector.build(self.policies, horizon)

    def _sample_truncated(self, explore: bool, steps: int, agent_target: int | None) -> tuple[int, int, int]:
        """Record ``steps`` actions over the episodes, however many polls it takes (see ``BaseEnvRunner``)."""
        recorded = 0
        while recorded < steps:
            recorded += self._advance(explore, record=True, limit=steps - recorded)
        return recorded, recorded, self._collector.longest_chunk()

    def _step(self, explore: bool, t: int | None, horizon: int, include: np.ndarray | None = None) -> tuple[int, int]:
        """Take one poll's worth of what the episodes said (recorded when ``t`` is given); see :meth:`BaseEnvRunner._step`."""
        acted = self._advance(explore, record=t is not None, limit=None)
        return acted, acted

    def _advance(self, explore: bool, record: bool, limit: int | None) -> int:
        """Handle what the episodes said, in order, acting in batches; return the actions recorded (at most ``limit``)."""
        if self.env is None:
            raise ConfigError(
                f"env runner {self.worker_index} has nothing to sample: offline_data(input_=...) made None for it "
                "(RLlib's scripts make a PolicyServerInput on the remote runners, or on the local one with num_env_runners=0)"
            )
        if not self._backlog:
            self._backlog.extend(self.env.poll(timeout=POLL_S))
        acting: list[ExternalStep] = []
        waiting: set[str] = set()
        recorded = 0
        while self._backlog and (limit is None or recorded < limit):
            step = self._backlog.popleft()
            if step.episode_id in waiting:  # its next step: act on the one before first
                self._act(acting, explore, record)
                acting, waiting = [], set()
            if self._observe(step, record):
                acting.append(step)
                waiting.add(step.episode_id)
                recorded += record and step.training_enabled
        self._act(acting, explore, record)
        return recorded

    def _observe(self, step: ExternalStep, record: bool) -> bool:
        """Close the episode's open row with the step's observation and rewards; return whether it needs an action."""
        key = (0, step.episode_id)
        if step.dropped is not None:
            self._collector.drop_open_row(key)
            if self._running.pop(step.episode_id, None) is not None:
                self.episodes_dropped += 1
                logger.warning("env runner %d dropped episode %s: %s", self.worker_index, step.episode_id, step.dropped)
            return False
        episode = self._running.get(step.episode_id)
        if episode is None:  # its first observation (or the first this runner saw, after a restore)
            episode = self._running[step.episode_id] = ExternalEpisode(step.observation, self.new_episode_id(), step.episode_id)
            episode.total_reward += step.reward
            if self.callbacks.has_episode_start:
                self.callbacks.episode_start(episode, self, 0)
        else:
            episode.total_reward += step.reward
            episode.length += 1
            if self._collector.has_open_row(key):
                learned = step.reward if self._clip_rewards is None else float(self._clip_rewards(step.reward))
                self._collector.add_reward(key, learned)
                info = step.info if self.output is not None else None
                self._collector.close(key, step.observation, step.ended, False, info, episode)
            episode.last_observation, episode.last_reward, episode.last_info = step.observation, step.reward, step.info
            if self.callbacks.has_episode_step:
                self.callbacks.episode_step(episode, self, 0)
        if not step.ended:
            return True
        episode.terminated = True
        if self.callbacks.has_episode_end:
            self.callbacks.episode_end(episode, self, 0)
        self._completed.append(
            EpisodeSummary(episode.total_reward, episode.length, dict(episode.custom_metrics), {}, hist_lists(episode.hist_data))
        )
        del self._running[step.episode_id]
        return False

    def _act(self, steps: list[ExternalStep], explore: bool, record: bool) -> None:
        """One forward pass for the steps' observations: answer those waiting, record the logged actions as given."""
        if not steps:
            return
        policy = self.policies[DEFAULT_POLICY_ID]
        kept = [j for j, step in enumerate(steps) if record and step.training_enabled]
        raw = [step.observation for step in steps]
        obs = policy.preprocess(stack_observations(raw), update_filter=bool(kept))
        actions, extras = policy.compute_actions(obs, explore=explore)
        logged = [j for j, step in enumerate(steps) if step.action is not None]
        if logged:
            actions, extras = self._logged(policy, steps, logged, obs, actions, extras)
        env_actions = policy.action_adapter.rows(policy.action_adapter(actions))
        answers = {}
        for step, action in zip(steps, env_actions, strict=True):
            self._running[step.episode_id].last_action = action
            if step.action is None:
                answers[step.episode_id] = action
        if kept:
            keys = [(0, steps[j].episode_id) for j in kept]
            extras = {key: value[kept] for key, value in extras.items()}
            if self.output is not None:
                episodes = [self._running[steps[j].episode_id] for j in kept]
                extras[SampleBatch.EPS_ID] = np.array([e.episode_id for e in episodes], np.int64)
                extras[SampleBatch.AGENT_INDEX] = np.zeros(len(kept), np.int64)
                extras[SampleBatch.T] = np.array([e.length for e in episodes], np.int64)
            self._collector.act(DEFAULT_POLICY_ID, keys, [raw[j] for j in kept], obs[kept], actions[kept], extras)
            policy.global_timestep += len(kept)
        if answers:
            assert self.env is not None  # _advance checked
            self.env.send_actions(answers)

    @staticmethod
    def _logged(
        policy: Any, steps: list[ExternalStep], logged: list[int], obs: np.ndarray, actions: np.ndarray,
        extras: dict[str, np.ndarray],
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:  # fmt: skip
        """The actions with the application's own in place, and their log-likelihoods (or its probabilities) beside them."""
        actions = actions.copy()
        actions[logged] = policy.action_adapter.policy_actions([steps[j].action for j in logged])
        if SampleBatch.ACTION_LOGP in extras:
            logp = extras[SampleBatch.ACTION_LOGP].copy()
            given = [j for j in logged if steps[j].action_logp is not None]
            logp[given] = [steps[j].action_logp for j in given]
            unknown = [j for j in logged if steps[j].action_logp is None]
            if unknown:  # a second forward pass only for what the application did not weigh itself
                logp[unknown] = policy.compute_log_likelihoods(obs[unknown], actions[unknown])
            extras = {**extras, SampleBatch.ACTION_LOGP: logp}
        return actions, extras

    # ------------------------------------------------------------------ #
    # state and lifecycle
    # ------------------------------------------------------------------ #
    def get_state(self) -> dict[str, Any]:
        """The generator and the next episode id (the application's episodes run on in it, not in a checkpoint)."""
        return {
            "built_for": built_for(self),
            "np_rng": generator_state(self.np_rng),
            "next_episode_id": self.next_episode_id,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`get_state` (a state saved by a runner built otherwise is not used).

        Raises:
            ValueError: the state is malformed.
        """
        if not isinstance(state, dict) or "np_rng" not in state:
            raise ValueError("an external env runner's state needs np_rng")
        if state_fits(self, state, built_for(self)):
            restore_generator(self, state)

    def stop(self) -> None:
        """Close the ExternalEnv (episodes waiting for an action get an error) and the output files."""
        if self.env is not None:
            self.env.close()
        self.close_output()
