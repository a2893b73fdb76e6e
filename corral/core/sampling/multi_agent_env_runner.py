"""The multi-agent env runner: steps a list of multi-agent envs, each policy acting for its agents in one batch.

At every step the agents that were given observations, in every
sub-environment, are grouped by the policy that acts for them; each policy
runs one batched forward pass over all of its agents. Rows are kept per agent
(:mod:`corral.core.sampling.agent_collector`) and each policy's rows become
one time-major fragment, postprocessed in one call. A sub-environment whose
episode ended is reset on the next step, as gymnasium's vector envs do, so a
fragment never holds more rows per agent than the call had steps.

:func:`make_env_runner` picks this runner or the single-agent
:class:`~corral.core.sampling.env_runner.EnvRunner` by the env.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
from collections.abc import Collection, Hashable, Iterator, Mapping, MutableMapping
from typing import Any

import gymnasium as gym
import numpy as np

from corral.core.common import state_codec
from corral.core.common.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch
from corral.core.common.spaces import space_to_json, stack_observations
from corral.core.contracts.callbacks import CallbackRunner
from corral.core.contracts.config import AlgorithmConfig
from corral.core.environments.envs import EnvContext, env_name
from corral.core.environments.multi_agent_env import ALL_AGENTS, multi_agent_env_maker, probe_env
from corral.core.environments.multi_agent_guard import MultiAgentEnvGuard, plain_agent_id
from corral.core.learning.policy import Policy
from corral.core.learning.postprocessing import episode_ends
from corral.core.sampling.agent_collector import AgentCollector, PolicyFragment
from corral.core.sampling.env_runner import BaseEnvRunner, EnvRunner, EpisodeSummary, hist_lists, saved_episode_id
from corral.core.sampling.trajectories import postprocess_columns
from corral.core.seeding import generator_state, set_generator_state
from corral.errors import ConfigError

logger = logging.getLogger("corral")


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
    and the same arguments (see :class:`~corral.core.sampling.env_runner.BaseEnvRunner`);
    every episode's reset seed is drawn from the runner's generator.
    """

    @property
    def sub_environments(self) -> list[Any]:
        """The multi-agent envs this runner steps, one per sub-environment."""
        return [guard.env for guard in self.envs]

    def _make_envs(self, first_env: Any) -> None:
        config, worker_index = self.config, self.worker_index
        if config.observation_space is not None or config.action_space is not None:
            raise ConfigError(
                "environment(observation_space=..., action_space=...) is for single-agent envs; give each policy of a "
                "multi-agent env its spaces in its PolicySpec (multi_agent(policies={...}))"
            )
        if config.horizon is not None:
            raise ConfigError("horizon cuts single-agent envs; end a multi-agent env's episodes in the env itself")
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
        for i, env in enumerate(self.env):
            self.callbacks.environment_created(self, env, context.copy_with(vector_index=i))
        self._obs: list[dict[Hashable, Any]] | None = None
        self._reset_pending = np.zeros(self.num_envs, dtype=bool)
        self._discarding = np.zeros(self.num_envs, dtype=bool)
        """with batch_mode='complete_episodes': sub-environments whose episode began outside a fragment (not trained on)"""
        self._episodes: list[MultiAgentEpisode] = []
        self._forget_open_rows()

    @property
    def env(self) -> list[Any]:
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
        self._agent_indexes: dict[int, dict[Hashable, int]] = {}  # by sub-environment, for the output's agent_index

    # ------------------------------------------------------------------ #
    # policies
    # ------------------------------------------------------------------ #
    def map_agent(self, agent_id: Hashable, episode: MultiAgentEpisode) -> str:
        """The policy id ``policy_mapping_fn(agent_id, episode, worker=self)`` gives, checked to exist.

        Without a ``policy_mapping_fn`` every agent maps to ``default_policy``, or to
        the only policy if there is one.

        Args:
            agent_id: the agent.
            episode: its episode, which the mapping may read.

        Returns:
            The policy id.

        Raises:
            ConfigError: the id is not one of this runner's policies, or no mapping is set
                and there are several policies.
        """
        return self._map(agent_id, episode, self.policies)

    def _map(self, agent_id: Hashable, episode: MultiAgentEpisode, policy_ids: Collection[str]) -> str:
        """:meth:`map_agent` against ``policy_ids`` (the config's, before the policies are built)."""
        mapping = self.config.policy_mapping_fn
        if mapping is not None:
            policy_id: str = mapping(agent_id, episode, worker=self)
        elif DEFAULT_POLICY_ID in policy_ids or not policy_ids:
            policy_id = DEFAULT_POLICY_ID
        elif len(policy_ids) == 1:
            policy_id = next(iter(policy_ids))
        else:
            raise ConfigError(
                f"agent {agent_id!r} needs a policy: there are several ({sorted(policy_ids)}) and no policy_mapping_fn; "
                "set config.multi_agent(policy_mapping_fn=lambda agent_id, episode, **kwargs: ...)"
            )
        if policy_ids and policy_id not in policy_ids:
            raise ConfigError(
                f"policy_mapping_fn mapped agent {agent_id!r} to {policy_id!r}, which is not a policy; "
                f"the policies are {sorted(policy_ids)}"
            )
        return policy_id

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

        A policy's spaces are those of the agents mapped to it (its spec's, where
        given); a policy no agent maps to gets the spaces every agent shares, if
        they all share one pair (a self-play pool).

        Raises:
            ConfigError: agents with different spaces map to one policy, or a policy's
                spaces cannot be inferred (naming the policy and the agents).
        """
        env = self.envs[0].env
        specs = self.config.policies or {DEFAULT_POLICY_ID: None}
        probe = MultiAgentEpisode(0, self, episode_id=-1)  # a mapping may read the episode
        inferred: dict[str, tuple[Hashable, gym.Space[Any], gym.Space[Any]]] = {}
        for agent in env.possible_agents:
            spaces = (env.get_observation_space(agent), env.get_action_space(agent))
            policy_id = self._map(agent, probe, specs)
            first = inferred.setdefault(policy_id, (agent, *spaces))
            if [space_to_json(s) for s in first[1:]] != [space_to_json(s) for s in spaces]:
                raise ConfigError(
                    f"agents {first[0]!r} and {agent!r} both map to policy {policy_id!r} but have different spaces "
                    f"({first[1]}, {first[2]} and {spaces[0]}, {spaces[1]}); map them to different policies"
                )
        pairs = {json.dumps([space_to_json(s) for s in found[1:]], sort_keys=True): found[1:] for found in inferred.values()}
        shared = next(iter(pairs.values())) if len(pairs) == 1 else (None, None)
        result = {}
        for policy_id, spec in specs.items():
            found = inferred.get(policy_id, (None, *shared))
            observation_space = getattr(spec, "observation_space", None) or found[1]
            action_space = getattr(spec, "action_space", None) or found[2]
            if observation_space is None or action_space is None:
                raise ConfigError(
                    f"policy {policy_id!r}: no agent of the env ({env.possible_agents}) maps to it and the agents do not "
                    "share one pair of spaces, so its spaces cannot be inferred; give them: "
                    "PolicySpec(observation_space=..., action_space=...)"
                )
            result[policy_id] = (observation_space, action_space)
        return result

    # ------------------------------------------------------------------ #
    # sampling
    # ------------------------------------------------------------------ #
    def sample(self, num_steps: int | None = None, explore: bool | None = None) -> MultiAgentBatch:
        """Step every sub-environment up to ``num_steps`` times and return each policy's postprocessed samples.

        With ``count_steps_by="agent_steps"`` the call ends early once the agents
        took ``num_steps * num_envs`` actions.

        Args:
            num_steps: steps per sub-environment; default the config's rollout fragment length.
            explore: default ``config.explore``.

        Returns:
            A batch per policy that had rows close in this call; open rows (an agent
            waiting for its turn) go into the next call's.
        """
        steps = num_steps or self.config.get_rollout_fragment_length()
        explore = self.config.explore if explore is None else explore
        if self._obs is None:
            self._reset_all()
        agent_target = steps * self.num_envs if self.config.count_steps_by == "agent_steps" else None
        if self.config.batch_mode == "complete_episodes":
            env_steps, agent_steps, horizon = self._sample_complete_episodes(explore, steps, agent_target)
        else:
            env_steps = agent_steps = 0
            for _ in range(steps):
                stepped, acted = self._step(explore, record=True)
                env_steps, agent_steps = env_steps + stepped, agent_steps + acted
                if agent_target is not None and agent_steps >= agent_target:
                    break
            horizon = steps
        parts = self._collector.build(self.policies, horizon)
        self._write_output({pid: (part.fragment, part.bootstrap_obs) for pid, part in parts.items()})
        # the output above keeps the env's own flags; each policy learns from episode ends as its config says
        parts = {
            pid: dataclasses.replace(part, fragment=episode_ends(part.fragment, self.policies[pid].config.no_done_at_end))
            for pid, part in parts.items()
        }
        if self.callbacks.has_postprocess_trajectory:
            batches = self._postprocess_each_agent(parts)
        else:
            batches = {pid: self.policies[pid].postprocess_trajectory(p.fragment, p.bootstrap_obs) for pid, p in parts.items()}
        samples = MultiAgentBatch(batches, env_steps, agent_steps)
        self.callbacks.sample_end(self, samples)
        return samples

    def _postprocess_each_agent(self, parts: dict[str, PolicyFragment]) -> dict[str, SampleBatch]:
        """Postprocess each agent's trajectory on its own and show it to ``on_postprocess_trajectory``, as RLlib does.

        Each call also gets every agent's trajectory of the same sub-environment
        before postprocessing (``original_batches``), whatever policy acts for it.
        """
        policies = self.policies
        trajectories = {pid: postprocess_columns(policies[pid], part.fragment, part.bootstrap_obs) for pid, part in parts.items()}
        originals: dict[int, dict[Hashable, tuple[str, Policy, SampleBatch]]] = {}
        for pid, part in parts.items():
            for (env_index, agent_id), trajectory in zip(part.agents, trajectories[pid], strict=True):
                originals.setdefault(env_index, {})[agent_id] = (pid, policies[pid], trajectory.original)
        for pid, part in parts.items():
            for (env_index, agent_id), episode, trajectory in zip(part.agents, part.episodes, trajectories[pid], strict=True):
                self.callbacks.postprocess_trajectory(
                    self, pid, policies[pid], trajectory.postprocessed, agent_id=agent_id, episode=episode,
                    original_batches=originals[env_index],
                )  # fmt: skip
        return {pid: SampleBatch.concat([t.postprocessed for t in columns]) for pid, columns in trajectories.items()}

    def _sample_complete_episodes(self, explore: bool, steps: int, agent_target: int | None) -> tuple[int, int, int]:
        """Step at least ``steps`` times (or until ``agent_target`` agent steps), then until every recorded episode ended.

        The multi-agent form of :meth:`EnvRunner._sample_complete_episodes`: once
        the fragment is long enough, a sub-environment not inside an episode it
        records is closed (its rows are left out), and an episode cut that way is
        left out of the next call too. Every recorded episode ends in the call, so
        no agent's row stays open into the next.

        Returns:
            The env steps and agent steps recorded, and the number of steps taken.
        """
        trained = np.zeros(self.num_envs, dtype=bool)  # rows of the running episode are in the fragment
        closed = np.zeros(self.num_envs, dtype=bool)
        env_steps = agent_steps = t = 0
        while True:
            include = ~(self._discarding | closed)
            stepping = ~self._reset_pending  # a sub-environment whose episode ended is reset on this step, recording nothing
            stepped, acted = self._step(explore, record=True, include=include)
            env_steps, agent_steps, t = env_steps + stepped, agent_steps + acted, t + 1
            ended = self._reset_pending & stepping
            trained = (trained | (stepping & include)) & ~ended
            self._discarding &= ~ended
            if t >= steps or (agent_target is not None and agent_steps >= agent_target):
                closed |= ~trained
                if not trained.any():
                    break
        # an episode that began here but was cut: its next rows are not trained on
        self._discarding = np.array([episode.length > 0 for episode in self._episodes]) & ~self._reset_pending
        return env_steps, agent_steps, t

    def run_episodes(
        self, num_episodes: int | None = None, num_steps: int | None = None, explore: bool = False
    ) -> list[EpisodeSummary]:
        """Evaluate: run from fresh resets until ``num_episodes`` episodes end (or ``num_steps`` env steps pass).

        As :meth:`EnvRunner.run_episodes`; nothing is recorded for training.

        Args:
            num_episodes: stop once this many episodes have ended.
            num_steps: stop once this many env steps (summed over the sub-environments) have passed.
            explore: act with exploration; False acts deterministically.

        Returns:
            The finished episodes in the order they ended.
        """
        self._forget_open_rows()
        self._reset_all()
        self._completed = []
        steps = 0
        while (num_episodes is not None and len(self._completed) < num_episodes) or (num_steps is not None and steps < num_steps):
            steps += self._step(explore, record=False)[0]
        episodes = self._completed[:num_episodes] if num_episodes is not None else self._completed
        self._completed = []
        self._obs = None  # the next sample call starts afresh
        return episodes

    def _step(self, explore: bool, record: bool, include: np.ndarray | None = None) -> tuple[int, int]:
        """One step of every sub-environment (a reset for those whose episode ended).

        Args:
            explore: act with exploration.
            record: keep rows for training.
            include: with ``record``, the sub-environments whose rows are kept
                (``batch_mode="complete_episodes"``); the others act unrecorded. Default all.

        Returns:
            The env steps and agent steps taken in the sub-environments recorded (all of them when not recording).
        """
        assert self._obs is not None
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
            obs = policy.preprocess(stack_observations(raw), update_filter=record)
            actions, extras = policy.compute_actions(obs, explore=explore)
            env_actions = policy.action_adapter(actions)
            # Discrete actions as Python ints, which every env accepts
            as_list = env_actions.tolist() if isinstance(policy.action_space, gym.spaces.Discrete) else list(env_actions)
            for (i, agent, _), action in zip(items, as_list, strict=True):
                action_dicts[i][agent] = action
                self._open[i][agent] = None
            if record and include is not None and not include[[i for i, _, _ in items]].all():
                kept = [j for j, (i, _, _) in enumerate(items) if include[i]]
                items, raw, obs, actions = [items[j] for j in kept], [raw[j] for j in kept], obs[kept], actions[kept]
                extras = {key: value[kept] for key, value in extras.items()}
            if record and items:
                if self.output is not None:
                    extras = {**extras, **self._output_context(items)}
                self._collector.act(policy_id, [(i, agent) for i, agent, _ in items], raw, obs, actions, extras)
                policy.global_timestep += len(items)
            agent_steps += len(items)
        for i in stepping:
            self._step_env(i, action_dicts[i], record and (include is None or bool(include[i])))
        return sum(1 for i in stepping if include is None or include[i]), agent_steps

    def _output_context(self, items: list[tuple[int, Hashable, Any]]) -> dict[str, np.ndarray]:
        """The ``eps_id``, ``agent_index`` and ``t`` (its step in the episode) of each acting agent.

        An agent's index is its place in the env's ``possible_agents``; an agent not
        listed there gets the next free index of its sub-environment when it first acts.
        """
        episodes, n = self._episodes, len(items)
        for i in {i for i, _, _ in items} - self._agent_indexes.keys():
            possible = getattr(self.envs[i].env, "possible_agents", None) or []
            self._agent_indexes[i] = {a: k for k, a in enumerate(possible)}
        indexes = self._agent_indexes
        return {
            SampleBatch.EPS_ID: np.fromiter((episodes[i].episode_id for i, _, _ in items), np.int64, n),
            SampleBatch.AGENT_INDEX: np.fromiter((indexes[i].setdefault(a, len(indexes[i])) for i, a, _ in items), np.int64, n),
            SampleBatch.T: np.fromiter((episodes[i].agent_steps.get(a, 0) for i, a, _ in items), np.int64, n),
        }

    def _step_env(self, i: int, actions: dict[Hashable, Any], record: bool) -> None:
        observations, rewards, terminateds, truncateds, infos = self.envs[i].step(actions)
        episode = self._episodes[i]
        observations = self._observe(observations, i, episode)
        over = bool(terminateds[ALL_AGENTS] or truncateds[ALL_AGENTS])
        episode.length += 1
        for agent, reward in rewards.items():
            value = float(reward)
            episode.total_reward += value
            key = (agent, episode.policy_for(agent))
            episode.agent_rewards[key] = episode.agent_rewards.get(key, 0.0) + value
            if record:
                clip = self._clip_rewards
                self._collector.add_reward((i, agent), value if clip is None else float(clip(value)))
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
    def _reset_all(self) -> None:
        self._obs = [{} for _ in range(self.num_envs)]
        self._episodes = [MultiAgentEpisode(i, self, episode_id=-1) for i in range(self.num_envs)]  # replaced by _reset
        self._discarding[:] = False
        for i in range(self.num_envs):
            self._reset(i)

    def _reset(self, i: int) -> None:
        """Start a new episode in sub-environment ``i``, with a reset seed drawn from the runner's generator."""
        assert self._obs is not None
        # 31 bits: the widest seed every env accepts
        observations, infos = self.envs[i].reset(seed=int(self.np_rng.integers(2**31)))
        episode = self._episodes[i] = MultiAgentEpisode(i, self)
        episode.last_observations.update(observations)
        episode.last_infos.update(infos)
        if i == 0 and self.display is not None:
            self.envs[0].env.render()
        self._obs[i] = self._observe(observations, i, episode)
        self._reset_pending[i] = False
        if self.callbacks.has_episode_start:
            self.callbacks.episode_start(episode, self, i)

    # ------------------------------------------------------------------ #
    # state, for checkpoints
    # ------------------------------------------------------------------ #
    def get_state(self) -> dict[str, Any]:
        """Where sampling stands, as JSON: the generator, the episodes in progress and the rows still open.

        Each sub-environment's episode is kept as its reset and action dicts
        (see :class:`~corral.core.environments.multi_agent_guard.MultiAgentEnvGuard`),
        with the agents waiting to act, their policies, the episode's statistics and
        the open rows (an agent that acted and waits for its next turn). Restored
        with :meth:`set_state` into a runner built from the same config, the next
        sample call continues exactly where this one would. If an episode cannot be
        replayed (too long, or agent ids that are not strings or integers), only the
        generator is kept and every sub-environment starts anew after a restore.
        """
        state: dict[str, Any] = {
            "built_for": self._built_for(),
            "np_rng": generator_state(self.np_rng),
            "next_episode_id": self.next_episode_id,
        }
        if self._obs is not None:
            episodes = [self._episode_state(i) for i in range(self.num_envs)]
            if all(episode is not None for episode in episodes):
                state["episodes"] = episodes
                state["open_rows"] = self._collector.get_state()
        return state

    def _built_for(self) -> dict[str, Any]:
        """What a saved state depends on: as for every runner, the policies, and whether output is written.

        The open rows of a runner that writes output hold its columns (``eps_id``, ...);
        a runner that does not (or the other way round) starts its episodes anew.
        """
        built_for = {**super()._built_for(), "policies": sorted(self.policies)}
        return {**built_for, "writes_output": True} if self.output is not None else built_for

    def _episode_state(self, i: int) -> dict[str, Any] | None:
        """Sub-environment ``i``'s episode as JSON, None if it cannot be replayed."""
        assert self._obs is not None
        if self._reset_pending[i]:
            return {"reset_pending": True}
        record = self.envs[i].episode_record()
        episode = self._episodes[i]
        agents = {*self._obs[i], *self._open[i], *episode._policies, *episode.agent_steps}
        if record is None or not all(plain_agent_id(agent) for agent in agents):
            return None
        return {
            "reset_pending": False,
            "discarding": bool(self._discarding[i]),
            "record": record,
            "obs": state_codec.encode([[agent, obs] for agent, obs in self._obs[i].items()]),
            "open": list(self._open[i]),
            "episode_id": episode.episode_id,
            "length": episode.length,
            "total_reward": episode.total_reward,
            "agent_rewards": [[agent, policy_id, reward] for (agent, policy_id), reward in episode.agent_rewards.items()],
            "agent_steps": [[agent, steps] for agent, steps in episode.agent_steps.items()],
            "policies": [[agent, policy_id] for agent, policy_id in episode._policies.items()],
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`get_state`: the generator, and each sub-environment's episode replayed to where it was.

        A state saved by a runner built for another env, ``env_config`` or number
        of sub-environments, or one without its episodes, starts new episodes.

        Raises:
            ValueError: the state is malformed, names a policy this runner lacks, or
                an episode does not replay.
        """
        if not isinstance(state, dict) or "np_rng" not in state:
            raise ValueError("a multi-agent env runner state must be a dict with the runner's generator")
        self._obs = None
        self._forget_open_rows()
        if state.get("built_for") != self._built_for():
            logger.info("env runner %d starts new episodes: it is not built as the one whose state was saved", self.worker_index)
            return
        set_generator_state(self.np_rng, state["np_rng"])
        self.next_episode_id = saved_episode_id(state.get("next_episode_id", self.next_episode_id))
        episodes = state.get("episodes")
        if episodes is None:
            logger.info("multi-agent env runner %d starts new episodes after the restore", self.worker_index)
            return
        if not isinstance(episodes, list) or len(episodes) != self.num_envs or not all(isinstance(e, dict) for e in episodes):
            raise ValueError(f"a multi-agent env runner state must hold {self.num_envs} episodes, one per sub-environment")
        self._obs = [{} for _ in range(self.num_envs)]
        self._episodes = [MultiAgentEpisode(i, self, episode_id=-1) for i in range(self.num_envs)]
        for i, saved in enumerate(episodes):
            self._reset_pending[i] = bool(saved.get("reset_pending"))
            self._discarding[i] = bool(saved.get("discarding"))
            if not self._reset_pending[i]:
                self._restore_episode(i, saved)
        self._collector.set_state(state.get("open_rows"), self.policies)
        if self.callbacks.has_episode_start:  # callbacks see the episodes in progress anew (their user_data is not saved)
            for i, episode in enumerate(self._episodes):
                if not self._reset_pending[i]:
                    self.callbacks.episode_start(episode, self, i)

    def _restore_episode(self, i: int, saved: dict[str, Any]) -> None:
        assert self._obs is not None
        try:
            self.envs[i].replay(saved["record"])
            episode = self._episodes[i] = MultiAgentEpisode(i, self, episode_id=saved_episode_id(saved["episode_id"]))
            episode.length, episode.total_reward = int(saved["length"]), float(saved["total_reward"])
            episode.agent_rewards = {(agent, str(policy_id)): float(r) for agent, policy_id, r in saved["agent_rewards"]}
            episode.agent_steps = {agent: int(steps) for agent, steps in saved["agent_steps"]}
            episode._policies = dict(saved["policies"])
            self._obs[i] = dict(state_codec.decode(saved["obs"]))
            self._open[i] = dict.fromkeys(saved["open"])
        except (KeyError, TypeError) as exc:
            raise ValueError(f"the saved episode of sub-environment {i} is malformed: {exc!r}") from None
        unknown = sorted({str(p) for p in episode._policies.values()} - set(self.policies))
        if unknown:
            raise ValueError(f"the saved episode of sub-environment {i} maps agents to {unknown}, which are not policies")
        episode.last_observations.update(self._obs[i])

    # ------------------------------------------------------------------ #
    # lifecycle
    # ------------------------------------------------------------------ #
    def stop(self) -> None:
        """Close the environments and the output files."""
        for env in self.env:
            env.close()
        self.close_output()


AnyEnvRunner = EnvRunner | MultiAgentEnvRunner
"""Either kind of env runner."""


def make_env_runner(
    config: AlgorithmConfig,
    policies: MutableMapping[str, Policy],
    worker_index: int = 0,
    callbacks: CallbackRunner | None = None,
    num_envs: int | None = None,
    seed: int | None = None,
    stream: str = "sampling",
) -> AnyEnvRunner:
    """The env runner for the config's env: a :class:`MultiAgentEnvRunner` for a ``corral.MultiAgentEnv``, else an EnvRunner.

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
    multi_agent, first_env = probe_env(config, worker_index)
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


class PolicyModels(Mapping[str, Any]):
    """Each policy's model by policy id, read when asked (a policy a policy map keeps on disk loads only then).

    Args:
        policies: the runner's policies by id.
    """

    def __init__(self, policies: Mapping[str, Policy]) -> None:
        self._policies = policies

    def __getitem__(self, policy_id: str) -> Any:
        return self._policies[policy_id].model

    def __iter__(self) -> Iterator[str]:
        return iter(self._policies)

    def __len__(self) -> int:
        return len(self._policies)
