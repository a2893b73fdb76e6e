"""The multi-agent env runner: steps a list of multi-agent envs, each policy acting for its agents in one batch.

At every step the agents that were given observations, in every
sub-environment, are grouped by the policy that acts for them; each policy
runs one batched forward pass over all of its agents. Rows are kept per agent
(:mod:`corral.core.sampling.agent_collector`) and each policy's rows become
one time-major fragment, postprocessed in one call. A sub-environment whose
episode ended is reset on the next step, as gymnasium's vector envs do, so a
fragment never holds more rows per agent than the call had steps.

:func:`~corral.core.sampling.env_runner.make_env_runner` (importable from
here too) picks this runner or the single-agent
:class:`~corral.core.sampling.env_runner.EnvRunner` by the env.
"""

from __future__ import annotations

import functools
from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

import gymnasium as gym
import numpy as np

from corral.core.common.sample_batch import DEFAULT_POLICY_ID
from corral.core.common.spaces import stack_observations
from corral.core.environments.envs import EnvContext, env_name
from corral.core.environments.multi_agent_env import ALL_AGENTS, multi_agent_env_maker
from corral.core.environments.multi_agent_guard import MultiAgentEnvGuard
from corral.core.learning.policies.heuristic_policies import carries_state, stateful_actions
from corral.core.learning.recurrent.carry import AgentCarry, recorded_inputs
from corral.core.sampling.agent_collector import AgentCollector, PolicyFragment
from corral.core.sampling.agent_policies import PolicyModels as PolicyModels, infer_policy_spaces, map_agent
from corral.core.sampling.base_env_runner import BaseEnvRunner
from corral.core.sampling.env_runner import EnvRunner, make_env_runner as make_env_runner
from corral.core.sampling.metrics import EpisodeSummary, hist_lists
from corral.core.sampling.runner_state import multi_agent_runner_state, set_multi_agent_runner_state
from corral.errors import ConfigError

if TYPE_CHECKING:
    from corral.core.sampling.external.external_env_runner import ExternalEnvRunner


class MultiAgentEpisode:
    """One episode of one multi-agent sub-environment, as callbacks and ``policy_mapping_fn`` see it.

    ``agent_rewards`` sums each agent's rewards by ``(agent_id, policy_id)``;
    ``user_data`` is free for callbacks; numbers put in ``custom_metrics`` are
    aggregated into the results.

    Args:
        env_index: the sub-environment.
        runner: the env runner, whose policy mapping decides :meth:`policy_for`.
        episode_id: default the runner's next (see :meth:`BaseEnvRunner.new_episode_id`).
    """

    def __init__(self, env_index: int, runner: MultiAgentEnvRunner, episode_id: int | None = None) -> None:
        self.episode_id = runner.new_episode_id() if episode_id is None else episode_id
        self.env_index = env_index
        self.length = 0
        self.total_reward = 0.0
        self.agent_rewards: dict[tuple[Hashable, str], float] = {}
        self.agent_steps: dict[Hashable, int] = {}
        self.user_data: dict[str, Any] = {}
        self.custom_metrics: dict[str, float] = {}
        self.hist_data: dict[str, list[float]] = {}
        self.last_observations: dict[Hashable, Any] = {}
        self.last_actions: dict[Hashable, Any] = {}
        self.last_rewards: dict[Hashable, float] = {}
        self.last_infos: dict[Hashable, Any] = {}
        self.terminated = False
        self.truncated = False
        self._runner = runner
        self._policies: dict[Hashable, str] = {}

    def policy_for(self, agent_id: Hashable) -> str:
        """The id of the policy acting for ``agent_id`` in this episode (``policy_mapping_fn``, asked once per agent).

        Raises:
            ConfigError: the mapping names a policy the runner does not have.
        """
        policy_id = self._policies.get(agent_id)
        if policy_id is None:
            policy_id = self._policies[agent_id] = self._runner.map_agent(agent_id, self)
        return policy_id

    def get_agents(self) -> list[Hashable]:
        """The agents seen in this episode so far."""
        return list(self._policies)

    def last_observation_for(self, agent_id: Hashable) -> Any:
        """The agent's last observation (None before it got one)."""
        return self.last_observations.get(agent_id)

    def last_action_for(self, agent_id: Hashable) -> Any:
        """The agent's last action, in the env's action space (None before it acted)."""
        return self.last_actions.get(agent_id)

    def last_info_for(self, agent_id: Hashable) -> Any:
        """The agent's last info dict (None before it got one)."""
        return self.last_infos.get(agent_id)

    def summary(self) -> EpisodeSummary:
        """What metrics keep of the finished episode: totals, custom metrics and each policy's agents' rewards."""
        by_policy: dict[str, list[float]] = {}
        for (_, policy_id), reward in self.agent_rewards.items():
            by_policy.setdefault(policy_id, []).append(reward)
        return EpisodeSummary(self.total_reward, self.length, dict(self.custom_metrics), by_policy, hist_lists(self.hist_data))


class MultiAgentEnvRunner(BaseEnvRunner):
    """Steps ``num_envs`` multi-agent sub-environments with the policies and returns samples by policy.

    The same interface as :class:`~corral.core.sampling.env_runner.EnvRunner`
    and the same arguments (see :class:`~corral.core.sampling.base_env_runner.BaseEnvRunner`);
    every episode's reset seed is drawn from the runner's generator.
    """

    _obs: list[dict[Hashable, Any]] | None
    _episodes: list[MultiAgentEpisode]

    @property
    def sub_environments(self) -> list[Any]:
        """The multi-agent envs this runner steps, one per sub-environment."""
        return self.base_env

    def _make_envs(self, first_env: Any) -> None:
        config, worker_index = self.config, self.worker_index
        self._carry = AgentCarry()
        """recurrent policies' state, previous action and reward of each agent"""
        if config.observation_space is not None or config.action_space is not None:
            raise ConfigError(
                "environment(observation_space=..., action_space=...) is for single-agent envs; give each policy of a "
                "multi-agent env its spaces in its PolicySpec (multi_agent(policies={...}))"
            )
        if config.horizon is not None:
            raise ConfigError("horizon cuts single-agent envs; end a multi-agent env's episodes in the env itself")
        if config.remote_worker_envs:
            raise ConfigError(
                "remote_worker_envs makes actors of single-agent envs; a multi-agent env's sub-environments run inside "
                "their env runner (num_env_runners samples in parallel processes)"
            )
        if self.display is not None and self.display.video_folder is not None:
            raise ConfigError(
                "record_env records single-agent envs (gymnasium's RecordVideo needs one env's frames); "
                "show a multi-agent env with render_env=True, which calls its render() at every step"
            )
        context = EnvContext(config.env_config, worker_index=worker_index, num_workers=config.num_env_runners)
        make = multi_agent_env_maker(config, worker_index)

        def made(i: int, given: Any = None) -> Any:  # called again to remake sub-environment i on restart
            env = make(i) if given is None else given
            self.callbacks.sub_environment_created(self, env, context.copy_with(vector_index=i))
            return env

        self.envs = [
            MultiAgentEnvGuard(
                made(i, first_env if i == 0 else None),
                f"sub-environment {i} of env runner {worker_index} ({env_name(config.env)})",
                check_observations=not config.disable_env_checking,
                make=functools.partial(made, i),
                restart=config.restart_failed_sub_environments,
            )
            for i in range(self.num_envs)
        ]
        for i, env in enumerate(self.base_env):
            self.callbacks.environment_created(self, env, context.copy_with(vector_index=i))
        self._episodes = []
        self._forget_open_rows()

    @property
    def base_env(self) -> list[Any]:
        """The sub-environments, as the episode hooks get them (``base_env``); a restarted one is its new env."""
        return [guard.env for guard in self.envs]

    @property
    def module(self) -> Mapping[str, Any]:
        """The models that act (RLlib's ``env_runner.module``, a MultiRLModule): each policy's model by policy id."""
        return PolicyModels(self.policies)

    def _forget_open_rows(self) -> None:
        """Drop every row not yet closed: episodes start anew (an evaluation, a restore)."""
        # dicts, not sets: rows close in the order the agents acted, so a resumed run builds its columns in the same order
        self._open: list[dict[Hashable, None]] = [{} for _ in range(self.num_envs)]
        self._collector = AgentCollector(keep_infos=self.output is not None)

    def _possible_agents(self, i: int) -> list[Hashable]:
        """The agents sub-environment ``i`` lists (its ``possible_agents``), if it does."""
        return getattr(self.envs[i].env, "possible_agents", None) or []

    # ------------------------------------------------------------------ #
    # policies
    # ------------------------------------------------------------------ #
    def forget_policy(self, policy_id: str) -> None:
        """A policy was removed: agents of episodes in progress that it acted for are mapped again at their next step.

        Its rows not yet sampled are dropped, so no fragment is built for it.

        Args:
            policy_id: the removed policy.
        """
        for i, episode in enumerate(self._episodes):
            for agent in [agent for agent, pid in episode._policies.items() if pid == policy_id]:
                del episode._policies[agent]
                self._open[i].pop(agent, None)
        self._collector.forget_policy(policy_id)

    def policy_spaces(self) -> dict[str, tuple[gym.Space[Any], gym.Space[Any]]]:
        """The (observation, action) spaces of every policy the config names, inferred where the spec leaves them out.

        See :func:`~corral.core.sampling.agent_policies.infer_policy_spaces`.

        Raises:
            ConfigError: agents with different spaces map to one policy, or a policy's
                spaces cannot be inferred (naming the policy and the agents).
        """
        specs = self.config.policies or {DEFAULT_POLICY_ID: None}
        probe = self._new_episode(0, episode_id=-1)  # a mapping may read the episode
        return infer_policy_spaces(
            self.envs[0].env, specs, lambda agent: map_agent(self.config.policy_mapping_fn, agent, probe, specs, self)
        )

    # ------------------------------------------------------------------ #
    # sampling
    # ------------------------------------------------------------------ #
    def _fragments(self, horizon: int) -> dict[str, PolicyFragment]:
        """Each policy's closed rows, a column per agent chunk (open rows wait for the next call)."""
        return self._collector.build(self.policies, horizon)

    def _episode_lengths(self) -> np.ndarray:
        return np.array([episode.length for episode in self._episodes])

    def _evaluated(self) -> None:
        self._obs = None  # the open rows were dropped for the evaluation: the next sample call starts afresh

    def _step(self, explore: bool, t: int | None, horizon: int, include: np.ndarray | None = None) -> tuple[int, int]:
        """One step of every sub-environment (a reset for those whose episode ended); see :meth:`BaseEnvRunner._step`.

        Recorded rows go to the agent collector (``t`` only says whether to record).
        """
        assert self._obs is not None
        record = t is not None
        acting: dict[str, list[tuple[int, Hashable, Any]]] = {}
        stepping = []
        for i, episode in enumerate(self._episodes):
            if self._reset_pending[i]:
                self._reset(i)
                continue
            for agent, obs in self._obs[i].items():
                acting.setdefault(episode.policy_for(agent), []).append((i, agent, obs))
            stepping.append(i)
        action_dicts: list[dict[Hashable, Any]] = [{} for _ in range(self.num_envs)]
        agent_steps = 0
        for policy_id, items in acting.items():
            policy = self.policies[policy_id]
            raw = [obs for _, _, obs in items]
            stacked = stack_observations(raw, policy.observation_space)
            obs = policy.preprocess(stacked, update_filter=record and self._training_rows)
            if carries_state(policy):
                keys = [(i, agent) for i, agent, _ in items]
                inputs = self._carry.inputs(policy_id, policy, keys)
                actions, extras = stateful_actions(policy, obs, stacked, inputs, explore)
                self._carry.advance(policy_id, keys, extras, actions)
                extras = {**extras, **recorded_inputs(inputs)}
            else:
                actions, extras = policy.compute_actions(obs, explore=explore)
            as_list = policy.action_adapter.rows(policy.action_adapter(actions))
            for (i, agent, _), action in zip(items, as_list, strict=True):
                action_dicts[i][agent] = action
                self._open[i][agent] = None
            if record and include is not None and not include[[i for i, _, _ in items]].all():
                kept = [j for j, (i, _, _) in enumerate(items) if include[i]]
                items, raw, obs, actions = [items[j] for j in kept], [raw[j] for j in kept], obs[kept], actions[kept]
                extras = {key: value[kept] for key, value in extras.items()}
            if record and items:
                keys = [(i, agent) for i, agent, _ in items]
                if self.output is not None:
                    extras = {**extras, **self._collector.output_context(keys, self._episodes, self._possible_agents)}
                self._collector.act(policy_id, keys, raw, obs, actions, extras)
                policy.global_timestep += len(items) if self._training_rows else 0
            agent_steps += len(items)
        for i in stepping:
            self._step_env(i, action_dicts[i], record and (include is None or bool(include[i])))
        return sum(1 for i in stepping if include is None or include[i]), agent_steps

    def _step_env(self, i: int, actions: dict[Hashable, Any], record: bool) -> None:
        observations, rewards, terminateds, truncateds, infos = self.envs[i].step(actions)
        episode = self._episodes[i]
        observations = self._observe(observations, i, episode)
        over = bool(terminateds[ALL_AGENTS] or truncateds[ALL_AGENTS])
        episode.length += 1
        clip = self._clip_rewards
        for agent, reward in rewards.items():
            value = float(reward)
            episode.total_reward += value
            key = (agent, episode.policy_for(agent))
            episode.agent_rewards[key] = episode.agent_rewards.get(key, 0.0) + value
            learned = value if clip is None else float(clip(value))
            self._carry.add_reward((i, agent), learned)
            if record:
                self._collector.add_reward((i, agent), learned)
        for agent in actions:
            episode.agent_steps[agent] = episode.agent_steps.get(agent, 0) + 1
        open_agents = self._open[i]
        for agent in list(open_agents):
            terminated, truncated = bool(terminateds.get(agent, False)), bool(truncateds.get(agent, False))
            if over and not (terminated or truncated):
                terminated = bool(terminateds[ALL_AGENTS])
                truncated = not terminated
            if terminated or truncated or agent in observations:
                if record:
                    info = infos.get(agent) if self.output is not None else None
                    self._collector.close((i, agent), observations.get(agent), terminated, truncated, info, episode)
                if terminated or truncated:
                    self._carry.forget((i, agent))
                del open_agents[agent]
        if i == 0 and self.display is not None:
            self.envs[0].env.render()
        if self.callbacks.has_episode_step:
            episode.last_observations.update(observations)
            episode.last_actions.update(actions)
            episode.last_rewards = {agent: float(r) for agent, r in rewards.items()}
            episode.last_infos.update(infos)
            self.callbacks.episode_step(episode, self, i)
        self._obs[i] = {}  # type: ignore[index]  # _step ran, so observations exist
        if over:
            episode.terminated, episode.truncated = bool(terminateds[ALL_AGENTS]), bool(truncateds[ALL_AGENTS])
            episode.last_observations.update(observations)
            if self.callbacks.has_episode_end:
                self.callbacks.episode_end(episode, self, i)
            self._completed.append(episode.summary())
            self._reset_pending[i] = True
            return
        self._obs[i] = {  # type: ignore[index]
            agent: obs for agent, obs in observations.items() if not (terminateds.get(agent) or truncateds.get(agent))
        }

    def _observe(self, observations: dict[Hashable, Any], i: int, episode: MultiAgentEpisode) -> dict[Hashable, Any]:
        """The observations the policies see: the env's, or what ``observation_fn`` makes of them."""
        function = self.config.observation_fn
        if function is None:
            return observations
        observed: dict[Hashable, Any] = function(
            agent_obs=observations, worker=self, base_env=self.envs[i].env, policies=self.policies, episode=episode
        )
        return observed

    # ------------------------------------------------------------------ #
    # episodes
    # ------------------------------------------------------------------ #
    def _new_episode(self, i: int, episode_id: int | None = None) -> MultiAgentEpisode:
        """A new episode object for sub-environment ``i`` (with the next episode id unless one is given)."""
        return MultiAgentEpisode(i, self, episode_id)

    def _reset_all(self) -> None:
        self._carry = AgentCarry()  # every agent starts over
        self._obs = [{} for _ in range(self.num_envs)]
        self._episodes = [self._new_episode(i, episode_id=-1) for i in range(self.num_envs)]  # replaced by _reset
        self._discarding[:] = False
        for i in range(self.num_envs):
            self._reset(i)

    def _reset(self, i: int) -> None:
        """Start a new episode in sub-environment ``i``, with a reset seed drawn from the runner's generator."""
        assert self._obs is not None
        observations, infos = self.envs[i].reset(seed=self._reset_seed())
        self._carry.forget_sub_environment(i)
        episode = self._episodes[i] = self._new_episode(i)
        episode.last_observations.update(observations)
        episode.last_infos.update(infos)
        if i == 0 and self.display is not None:
            self.envs[0].env.render()
        self._obs[i] = self._observe(observations, i, episode)
        self._reset_pending[i] = False
        if self.callbacks.has_episode_start:
            self.callbacks.episode_start(episode, self, i)

    # ------------------------------------------------------------------ #
    # state, for checkpoints (see runner_state)
    # ------------------------------------------------------------------ #
    def get_state(self) -> dict[str, Any]:
        """Where sampling stands, as JSON: the generator, each episode in progress (to replay) and the rows still open."""
        return multi_agent_runner_state(self)

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`get_state`: the generator, and each sub-environment's episode replayed to where it was.

        A state saved by a runner built otherwise, or without its episodes, starts new episodes (see ``runner_state``).

        Raises:
            ValueError: the state is malformed, names a policy this runner lacks, or an episode does not replay.
        """
        set_multi_agent_runner_state(self, state)

    # ------------------------------------------------------------------ #
    # lifecycle
    # ------------------------------------------------------------------ #
    def stop(self) -> None:
        """Close the environments and the output files."""
        for env in self.base_env:
            env.close()
        self.close_output()


AnyEnvRunner: TypeAlias = "EnvRunner | MultiAgentEnvRunner | ExternalEnvRunner"
"""Any kind of env runner (a name for type checkers: the external runner builds on this module)."""
