"""The env runner of an :class:`~corral.core.environments.external_env.ExternalEnv`: it answers, it does not step.

An external application plays any number of episodes at once and asks for
actions when it needs them. The runner polls what the episodes did, acts for
every episode waiting at that moment in one batched forward pass per
policy, and keeps each episode's rows (each agent's, in an
:class:`~corral.core.environments.external_multi_agent_env.ExternalMultiAgentEnv`)
as a column of its own (the multi-agent runner's
:class:`~corral.core.sampling.agent_collector.AgentCollector`, keyed by the
episode's id and the agent), so GAE, n-step returns and V-trace run on them
unchanged. ``policy_mapping_fn`` picks each agent's policy, once per episode.

- A sample call records ``rollout_fragment_length`` observation steps (summed
  over the episodes); what the episodes said beyond that waits for the next
  call, and so do the episodes waiting for an action.
- A row closes when the episode's next observation comes, with the rewards
  logged in between; :meth:`~corral.core.environments.external_env.ExternalEnv.end_episode`
  ends it as terminated.
- An action the application took itself (``log_action``) is recorded as it
  was, with its log-likelihood under the policy, or the one the
  application gave (``action_prob`` or ``action_logp``), so an on-policy
  algorithm weighs it as what it was.
- A recurrent policy carries each episode's state (and previous action and
  reward) from its step to the next, whichever polls and sample calls they
  fall in.
- An episode started with ``training_enabled=False`` is acted for and
  reported in the metrics, never trained on.
"""

from __future__ import annotations

import collections
import logging
from typing import Any, cast

import gymnasium as gym
import numpy as np

from corral.core.common.sample_batch import DEFAULT_POLICY_ID, SampleBatch
from corral.core.common.spaces import stack_observations
from corral.core.contracts.options.input_names import input_creator
from corral.core.environments.envs import one_sub_environment
from corral.core.environments.external_env import ExternalEnv, ExternalStep
from corral.core.environments.multi_agent_env import MultiAgentEnv
from corral.core.learning.recurrent.carry import AgentCarry, recorded_inputs
from corral.core.sampling.agent_collector import AgentCollector, PolicyFragment
from corral.core.sampling.agent_policies import PolicyModels
from corral.core.sampling.base_env_runner import BaseEnvRunner
from corral.core.sampling.env_runner import Episode
from corral.core.sampling.external.io_context import IOContext
from corral.core.sampling.external.logged_ahead import NOTHING_AHEAD, LoggedAhead, with_logged_actions
from corral.core.sampling.metrics import EpisodeSummary, hist_lists
from corral.core.sampling.multi_agent_env_runner import MultiAgentEpisode
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


class ExternalMultiAgentEpisode(MultiAgentEpisode):
    """One episode of an :class:`ExternalMultiAgentEnv`, as callbacks see it (``external_id`` is the application's id).

    Args:
        runner: the env runner, whose policy mapping decides each agent's policy.
        episode_id: the runner's id for it.
        external_id: the id the application gave it.
    """

    def __init__(self, runner: ExternalEnvRunner, episode_id: int, external_id: str) -> None:
        super().__init__(0, cast(Any, runner), episode_id)
        self.external_id = external_id


class ExternalEnvRunner(BaseEnvRunner):
    """Samples an :class:`ExternalEnv` (see the module docstring); the arguments are :class:`BaseEnvRunner`'s.

    Raises:
        ConfigError: more than one env per runner, ``batch_mode="complete_episodes"``, or
            ``first_env`` is not an ExternalEnv.
    """

    def _make_envs(self, first_env: Any) -> None:
        config = self.config
        self.input_reader: Any = None
        """what the input creator made where it is an ``InputReader``: the algorithm reads it, this runner samples nothing"""
        creator = input_creator(config.input_)
        if first_env is None and creator is not None:
            first_env = creator(IOContext(config=config, worker_index=self.worker_index, worker=self))
            if callable(getattr(first_env, "next", None)) and not isinstance(first_env, ExternalEnv):
                self.input_reader, first_env = first_env, None
            elif first_env is not None and not isinstance(first_env, ExternalEnv):
                raise ConfigError(
                    f"offline_data(input_=...) made a {type(first_env).__name__} for env runner {self.worker_index}; "
                    "an input creator makes an InputReader (next() gives a batch), an ExternalEnv (a PolicyServerInput) "
                    "or None, and a folder or file of recorded experiences is given as input_ itself"
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
        self._by_agent = first_env is not None and first_env.by_agent
        """whether observations, actions and rewards are dicts by agent"""
        if config.is_multi_agent and first_env is not None and not self._by_agent:
            raise ConfigError(
                f"config.multi_agent() sets the policies {sorted(config.policies)}, but {type(first_env).__name__} plays "
                "single-agent episodes: subclass corral.ExternalMultiAgentEnv for episodes of several agents"
            )
        self.num_envs = 1
        self.base_env: ExternalEnv | None = first_env
        """the application's episodes; None where ``input_`` made nothing for this runner (it samples nothing)"""
        self._running: dict[str, Any] = {}
        """the application's episodes in progress, by its ids"""
        self.episodes_dropped = 0
        """episodes given up because their application went away (reported as ``external/episodes_dropped``)"""
        self._backlog: collections.deque[ExternalStep] = collections.deque()
        """what the episodes said beyond the last sample call's steps"""
        self._carry = AgentCarry()
        """a recurrent policy's state, previous action and reward in each running episode"""
        self._ahead = NOTHING_AHEAD
        """the logged steps' outputs computed ahead while a poll's steps are handled"""
        self._forget_open_rows()

    @property
    def sub_environments(self) -> list[Any]:
        """The ExternalEnv, as the one sub-environment (none where ``input_`` made none)."""
        return [] if self.base_env is None else [self.base_env]

    @property
    def module(self) -> Any:
        """The model that acts (RLlib's ``env_runner.module``): the policy's; several agents': each policy's by id."""
        return PolicyModels(self.policies) if self._by_agent else self.policies[DEFAULT_POLICY_ID].model

    def policy_spaces(self) -> dict[str, tuple[gym.Space[Any], gym.Space[Any]]]:
        """Each policy's spaces (see :func:`external_policy_spaces`), the ExternalEnv's where nothing else gives them.

        Raises:
            ConfigError: a policy's spaces are given nowhere.
        """
        env_spaces = (getattr(self.base_env, "observation_space", None), getattr(self.base_env, "action_space", None))
        if self.input_reader is not None and self.config.env is not None:  # as RLlib's worker beside a reader: the env's
            env_spaces = _env_spaces(self.config, self.worker_index)
        return external_policy_spaces(self.config, *env_spaces, f"env runner {self.worker_index}")

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
        """Record ``steps`` observation steps (or ``agent_target`` agents' actions) over the episodes, however many polls
        it takes (see ``BaseEnvRunner``)."""
        recorded = agent_steps = 0
        while recorded < steps and (agent_target is None or agent_steps < agent_target):
            agents_left = None if agent_target is None else agent_target - agent_steps
            env_steps, acted = self._advance(explore, record=True, limit=steps - recorded, agent_limit=agents_left)
            recorded, agent_steps = recorded + env_steps, agent_steps + acted
        return recorded, agent_steps, self._collector.longest_chunk()

    def _step(self, explore: bool, t: int | None, horizon: int, include: np.ndarray | None = None) -> tuple[int, int]:
        """Take one poll's worth of what the episodes said (recorded when ``t`` is given); see :meth:`BaseEnvRunner._step`."""
        return self._advance(explore, record=t is not None, limit=None)

    def _advance(self, explore: bool, record: bool, limit: int | None, agent_limit: int | None = None) -> tuple[int, int]:
        """Handle what the episodes said, in order, acting in batches.

        Returns the observation steps recorded (at most ``limit``, or until ``agent_limit`` agents' actions) and the
        agents' actions among them.
        """
        if self.base_env is None:
            raise ConfigError(
                f"env runner {self.worker_index} has nothing to sample: offline_data(input_=...) made None for it "
                "(RLlib's scripts make a PolicyServerInput on the remote runners, or on the local one with num_env_runners=0)"
            )
        if not self._backlog:
            self._backlog.extend(self.base_env.poll(timeout=POLL_S))
        policy = None if self._by_agent else self.policies[DEFAULT_POLICY_ID]
        self._ahead = LoggedAhead.forward(policy, self._backlog, explore, limit)
        acting: list[tuple[ExternalStep, Any]] = []
        waiting: set[str] = set()
        recorded = agent_steps = 0
        while self._backlog and (limit is None or recorded < limit) and (agent_limit is None or agent_steps < agent_limit):
            step = self._backlog.popleft()
            if step.episode_id in waiting:  # its next step: act on the one before first
                self._act(acting, explore, record)
                acting, waiting = [], set()
            agents = self._observe(step)
            if agents:
                acting += [(step, agent) for agent in agents]
                waiting.add(step.episode_id)
                counted = record and step.training_enabled
                recorded, agent_steps = recorded + counted, agent_steps + counted * len(agents)
        self._act(acting, explore, record)
        self._ahead = NOTHING_AHEAD
        return recorded, agent_steps

    def _observe(self, step: ExternalStep) -> list[Any]:
        """Close the episode's open rows with the step's observations and rewards; return the agents that act on it."""
        by_agent = self._by_agent
        episode_id = step.episode_id
        episode = self._running.get(episode_id)
        if step.dropped is not None:
            if episode is not None:
                for key in (_key(episode_id, agent) for agent in self._agents_of(episode)):
                    self._collector.drop_open_row(key)
                    self._carry.forget(key)
                del self._running[episode_id]
                self.episodes_dropped += 1
                logger.warning("env runner %d dropped episode %s: %s", self.worker_index, episode_id, step.dropped)
            return []
        observations = step.observation if by_agent else {None: step.observation}
        rewards = step.reward if by_agent else {None: step.reward}
        infos = step.info if by_agent else {None: step.info}
        first = episode is None  # its first observation (or the first this runner saw, after a restore)
        if episode is None:
            episode = self._running[episode_id] = self._new_episode(step)
            if self.callbacks.has_episode_start:
                self.callbacks.episode_start(episode, self, 0)
        else:
            episode.length += 1
        for agent, reward in rewards.items():
            episode.total_reward += reward
            if by_agent:
                share = (agent, episode.policy_for(agent))
                episode.agent_rewards[share] = episode.agent_rewards.get(share, 0.0) + reward
            key = _key(episode_id, agent)
            learned = reward if self._clip_rewards is None else float(self._clip_rewards(reward))
            self._carry.add_reward(key, learned)
            if self._collector.has_open_row(key):
                self._collector.add_reward(key, learned)
        for agent in self._agents_of(episode):
            key = _key(episode_id, agent)
            done = step.ended or step.dones.get(agent, False)
            if (agent in observations or done) and self._collector.has_open_row(key):
                info = infos.get(agent) if self.output is not None else None
                self._collector.close(key, observations.get(agent), done, False, info, episode)
            if done:
                self._carry.forget(key)
        self._remember(episode, observations, rewards, infos)
        if not first and self.callbacks.has_episode_step:
            self.callbacks.episode_step(episode, self, 0)
        if not step.ended:
            return [agent for agent in observations if not step.dones.get(agent, False)]
        episode.terminated = True
        if self.callbacks.has_episode_end:
            self.callbacks.episode_end(episode, self, 0)
        summary = episode.summary() if by_agent else EpisodeSummary(
            episode.total_reward, episode.length, dict(episode.custom_metrics), {}, hist_lists(episode.hist_data)
        )  # fmt: skip
        self._completed.append(summary)
        del self._running[episode_id]
        return []

    def _new_episode(self, step: ExternalStep) -> Any:
        if self._by_agent:
            return ExternalMultiAgentEpisode(self, self.new_episode_id(), step.episode_id)
        return ExternalEpisode(step.observation, self.new_episode_id(), step.episode_id)

    def _agents_of(self, episode: Any) -> list[Any]:
        """The agents the episode has seen (a single-agent episode's one agent is None)."""
        return episode.get_agents() if self._by_agent else [None]

    def _remember(self, episode: Any, observations: dict[Any, Any], rewards: dict[Any, float], infos: Any) -> None:
        """What callbacks read of the episode's last step."""
        if not self._by_agent:
            episode.last_observation, episode.last_reward, episode.last_info = observations[None], rewards[None], infos[None]
            return
        for agent in observations:
            episode.policy_for(agent)  # an agent is in the episode from its first observation
        episode.last_observations.update(observations)
        episode.last_rewards = dict(rewards)
        episode.last_infos.update(infos)

    def _act(self, items: list[tuple[ExternalStep, Any]], explore: bool, record: bool) -> None:
        """A forward pass per policy for the agents' observations: answer the waiting episodes, record logged actions."""
        by_policy: dict[str, list[tuple[ExternalStep, Any]]] = {}
        for step, agent in items:
            policy_id = self._running[step.episode_id].policy_for(agent) if self._by_agent else DEFAULT_POLICY_ID
            by_policy.setdefault(policy_id, []).append((step, agent))
        answers: dict[str, Any] = {}
        for policy_id, acting in by_policy.items():
            self._act_for(policy_id, acting, explore, record, answers)
        if answers:
            assert self.base_env is not None  # _advance checked
            self.base_env.send_actions(answers)

    def _act_for(
        self, policy_id: str, items: list[tuple[ExternalStep, Any]], explore: bool, record: bool, answers: dict[str, Any]
    ) -> None:
        """One policy's forward pass for its agents (see :meth:`_act`); their actions go into ``answers``."""
        by_agent = self._by_agent
        policy = self.policies[policy_id]
        kept = [j for j, (step, _) in enumerate(items) if record and step.training_enabled]
        raw = [step.observation[agent] if by_agent else step.observation for step, agent in items]
        keys = [_key(step.episode_id, agent) for step, agent in items]
        inputs = self._carry.inputs(policy_id, policy, keys) if policy.is_recurrent else {}
        ahead = self._ahead.rows_of([step for step, _ in items])
        if ahead is not None:  # logged steps, weighed in one pass with the steps ahead
            obs, actions, extras = self._ahead.outputs(ahead)
        else:
            obs = policy.preprocess(stack_observations(raw, policy.observation_space), update_filter=bool(kept))
            actions, extras = policy.compute_actions(obs, explore=explore, **inputs)
            logged = [j for j, (step, _) in enumerate(items) if step.action is not None]
            if logged:
                taken = [items[j][0].action[items[j][1]] if by_agent else items[j][0].action for j in logged]
                logps = [items[j][0].action_logp for j in logged]
                actions, extras = with_logged_actions(policy, logged, taken, logps, obs, actions, extras, inputs)
        if inputs:  # the state moves on with the action taken, the application's own included
            self._carry.advance(policy_id, keys, extras, actions)
            extras = {**extras, **recorded_inputs(inputs)}
        env_actions = policy.action_adapter.rows(policy.action_adapter(actions))
        for (step, agent), action in zip(items, env_actions, strict=True):
            episode = self._running[step.episode_id]
            if by_agent:
                episode.last_actions[agent] = action
                episode.agent_steps[agent] = episode.agent_steps.get(agent, 0) + 1
            else:
                episode.last_action = action
            if step.action is None:
                if by_agent:
                    answers.setdefault(step.episode_id, {})[agent] = action
                else:
                    answers[step.episode_id] = action
        if not kept:
            return
        if len(kept) < len(items):  # an episode not trained on, or evaluation
            keys, raw, items = [keys[j] for j in kept], [raw[j] for j in kept], [items[j] for j in kept]
            obs, actions, extras = obs[kept], actions[kept], {key: value[kept] for key, value in extras.items()}
        if self.output is not None:
            extras = {**extras, **self._output_context(items)}
        self._collector.act(policy_id, keys, raw, obs, actions, extras)
        policy.global_timestep += len(kept)

    def _output_context(self, items: list[tuple[ExternalStep, Any]]) -> dict[str, np.ndarray]:
        """The columns offline output writes beside each row: its episode, agent index and step."""
        episodes = [self._running[step.episode_id] for step, _ in items]
        agents = [self._agents_of(e).index(agent) for e, (_, agent) in zip(episodes, items, strict=True)]
        return {
            SampleBatch.EPS_ID: np.array([e.episode_id for e in episodes], np.int64),
            SampleBatch.AGENT_INDEX: np.array(agents, np.int64),
            SampleBatch.T: np.array([e.length for e in episodes], np.int64),
        }

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
        if self.base_env is not None:
            self.base_env.close()
        self.close_output()


def _env_spaces(config: Any, worker_index: int) -> tuple[gym.Space[Any] | None, gym.Space[Any] | None]:
    """A single-agent env's spaces, from one copy made and closed; none for a multi-agent env (its PolicySpecs give them)."""
    env = one_sub_environment(config, worker_index)
    try:
        return (None, None) if isinstance(env, MultiAgentEnv) else (env.observation_space, env.action_space)
    finally:
        env.close()


def external_policy_spaces(
    config: Any, observation_space: gym.Space[Any] | None, action_space: gym.Space[Any] | None, where: str
) -> dict[str, tuple[gym.Space[Any], gym.Space[Any]]]:
    """Each policy's spaces for external episodes: its ``PolicySpec``'s, else the config's
    (``environment(observation_space=..., action_space=...)``), else the given ones (the application's).

    Args:
        config: the algorithm's config.
        observation_space: the application's observation space, if it has one.
        action_space: its action space, likewise.
        where: who asks, for the error (``"env runner 1"``).

    Returns:
        ``(observation_space, action_space)`` by policy id.

    Raises:
        ConfigError: a policy's spaces are given nowhere.
    """
    shared = (config.observation_space or observation_space, config.action_space or action_space)
    spaces = {}
    for policy_id, spec in (config.policies or {DEFAULT_POLICY_ID: None}).items():
        own_observations = getattr(spec, "observation_space", None) or shared[0]
        own_actions = getattr(spec, "action_space", None) or shared[1]
        if own_observations is None or own_actions is None:
            raise ConfigError(
                f"{where} has no spaces for policy {policy_id!r}: give them in "
                "environment(observation_space=..., action_space=...) or the policy's PolicySpec"
            )
        spaces[policy_id] = (own_observations, own_actions)
    return spaces


def _key(episode_id: str, agent: Any) -> tuple[int, Any]:
    """An agent's column in the collector and the recurrent carry (``(sub-environment, agent)``: there is one)."""
    return (0, (episode_id, agent))
