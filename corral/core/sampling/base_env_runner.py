"""What the single-agent and the multi-agent env runner share, written once.

:class:`BaseEnvRunner` holds the config, the policies, the callbacks, the
runner's generator and episode ids, the finished episodes, the experience
output, and the shape of a sample call: step (``batch_mode``
``"truncate_episodes"`` or ``"complete_episodes"``), build each policy's
fragment, write the output, mark episode ends, postprocess (one trajectory at a
time when ``on_postprocess_trajectory`` is implemented), and tell the
callbacks. The same for an evaluation's ``run_episodes``. A runner writes how
its environments are made, stepped and reset, and what its fragments are.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, MutableMapping
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from corral.core.common.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch
from corral.core.contracts.callbacks import CallbackRunner
from corral.core.contracts.config import AlgorithmConfig
from corral.core.contracts.integrations import implemented, integration_hooks
from corral.core.environments.envs import EnvContext
from corral.core.environments.task_settable_env import set_tasks
from corral.core.learning.policies.heuristic_policies import postprocesses_trajectories
from corral.core.learning.policy import Policy
from corral.core.learning.postprocessing import episode_ends
from corral.core.sampling.agent_collector import PolicyFragment
from corral.core.sampling.agent_policies import map_agent
from corral.core.sampling.metrics import EpisodeSummary
from corral.core.sampling.offline_output import OUTPUT_CONTEXT_COLUMNS, experience_output_for
from corral.core.sampling.trajectories import postprocess_for_hook
from corral.core.seeding import numpy_generator
from corral.errors import ConfigError

if TYPE_CHECKING:
    from corral.core.sampling.multi_agent_env_runner import AnyEnvRunner

logger = logging.getLogger("corral")


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


def learned_rewards(config: AlgorithmConfig) -> Callable[[Any], Any] | None:
    """What learning sees of a reward under ``config``: its ``clip_rewards``, else an integration's default (Atari's sign).

    Args:
        config: the algorithm's config.

    Returns:
        The clipping function, or None when rewards are learned as they are.
    """
    clip = config.clip_rewards
    if clip is None:  # an integration's default: Atari's is RLlib's, the reward's sign
        clip = integration_hooks().default_clip_rewards(config=config)
    return reward_clipper(clip)


class BaseEnvRunner:
    """What both kinds of env runner share: config, policies, callbacks, generator, finished episodes, the sample call.

    A subclass builds its environments in :meth:`_make_envs` and writes
    :meth:`_reset_all`, :meth:`_step`, :meth:`_fragments`, :meth:`_episode_lengths`,
    ``policy_spaces``, the state methods (see :mod:`~corral.core.sampling.runner_state`) and ``stop``.
    What it steps is its ``base_env`` (a gymnasium vector env, the list of
    multi-agent envs, or the external env), which the episode hooks get as
    ``base_env``; :attr:`env` is RLlib's ``worker.env``, one sub-environment.

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
        hooks = integration_hooks()
        self._clip_rewards = learned_rewards(config)
        """what learning sees of a reward (``clip_rewards``); None: the reward as it is"""
        self.np_rng = numpy_generator(seed, "runner", stream, worker_index)
        self.display = hooks.sub_environment_display(config=config, worker_index=worker_index, stream=stream)
        """how this runner shows its sub-environment 0 (``render_env``, ``record_env``), or None"""
        if (config.render_env or config.record_env) and not implemented("sub_environment_display"):
            raise ConfigError(
                "render_env and record_env are shown by corral's rendering integration, which did not load "
                "(`corral list` shows why)"
            )
        self._completed: list[EpisodeSummary] = []
        # the high bits tell the algorithm's runners apart; the low ones count this runner's episodes
        self.next_episode_id = (2 * worker_index + (stream == "evaluation")) << 48
        self.output = experience_output_for(config, worker_index)
        """where this runner's sampled transitions are written (``offline_data(output=...)``), or None"""
        self._training_rows = True
        """whether recorded rows are training's (they move the policies' timesteps and filters), not an evaluation's"""
        self._obs: Any = None
        """the observations the policies act on next; None until the sub-environments are reset"""
        self._reset_pending = np.zeros(self.num_envs, dtype=bool)
        """sub-environments whose episode ended on the last step: they reset on the next"""
        self._discarding = np.zeros(self.num_envs, dtype=bool)
        """with batch_mode='complete_episodes': sub-environments whose episode began outside a fragment (not trained on)"""
        self._make_envs(first_env)
        check_env_to_module_connector(config, getattr(self, "base_env", None))

    def _make_envs(self, first_env: Any) -> None:
        """Build the sub-environments (``first_env`` is sub-environment 0 if given) and the sampling state."""
        raise NotImplementedError

    @property
    def num_workers(self) -> int:
        """The algorithm's remote env runners (RLlib's ``worker.num_workers``; 0: this local runner samples)."""
        return int(self.config.num_env_runners)

    def new_episode_id(self) -> int:
        """An id no other episode of the algorithm's runners has, the same in every run with the same seed.

        A ``policy_mapping_fn`` that reads ``episode.episode_id`` (to pick an opponent)
        is reproducible because of it, and a resumed run continues the sequence.
        """
        episode_id = self.next_episode_id
        self.next_episode_id += 1
        return episode_id

    def map_agent(self, agent_id: Any, episode: Any) -> str:
        """The policy id ``policy_mapping_fn(agent_id, episode, worker=self)`` gives, checked to exist (see ``agent_policies``).

        Args:
            agent_id: the agent.
            episode: its episode, which the mapping may read.

        Returns:
            The policy id.

        Raises:
            ConfigError: the id is not one of this runner's policies, or no mapping is set
                and there are several policies.
        """
        return map_agent(self.config.policy_mapping_fn, agent_id, episode, self.policies, self)

    def _reset_seed(self) -> int:
        """The seed of a sub-environment's next reset, drawn from the runner's generator."""
        return int(self.np_rng.integers(2**31))  # 31 bits: the widest seed every env accepts (some call np.random.seed)

    @property
    def policy_map(self) -> MutableMapping[str, Policy]:
        """The policies by id (RLlib's name)."""
        return self.policies

    def get_policy(self, policy_id: str = DEFAULT_POLICY_ID) -> Policy | None:
        """The policy ``policy_id`` of this runner, or None where it has none, as RLlib's ``worker.get_policy()``.

        Args:
            policy_id: the policy's id; default the single-agent policy.
        """
        return self.policies.get(policy_id)

    @property
    def env(self) -> Any:
        """Sub-environment 0 as its creator made it: RLlib's ``worker.env``, for stepping it by hand or reading it.

        What the runner steps as a whole, and what the episode hooks get as
        ``base_env``, is :attr:`base_env`. None where the runner has no env (a
        served run's runner that makes no external env).
        """
        subs = self.sub_environments
        return subs[0] if subs else None

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

    def get_metrics(self) -> list[EpisodeSummary]:
        """Episodes finished since the last call."""
        completed, self._completed = self._completed, []
        return completed

    def apply(self, fn: Any) -> Any:
        """Call ``fn(self)`` (what ``foreach_env_runner`` does on each runner)."""
        return fn(self)

    # ------------------------------------------------------------------ #
    # sampling, and what a runner writes for it
    # ------------------------------------------------------------------ #
    def sample(self, num_steps: int | None = None, explore: bool | None = None) -> MultiAgentBatch:
        """Step every sub-environment up to ``num_steps`` times and return each policy's postprocessed samples.

        With ``count_steps_by="agent_steps"`` a multi-agent call ends early once the
        agents took ``num_steps * num_envs`` actions.

        Args:
            num_steps: steps per sub-environment; default the config's rollout fragment length.
            explore: default ``config.explore``.

        Returns:
            A batch per policy that had rows in this call (a multi-agent runner's open
            rows, an agent waiting for its turn, go into the next call's).
        """
        steps = num_steps or self.config.get_rollout_fragment_length()
        explore = self.config.explore if explore is None else explore
        if self._obs is None:
            self._reset_all()
        # a single-agent runner's agent steps are its env steps: the target is reached only with the last step
        agent_target = steps * self.num_envs if self.config.count_steps_by == "agent_steps" else None
        if self.config.batch_mode == "complete_episodes":
            env_steps, agent_steps, horizon = self._sample_complete_episodes(explore, steps, agent_target)
        else:
            env_steps, agent_steps, horizon = self._sample_truncated(explore, steps, agent_target)
        parts = self._fragments(horizon)
        self._write_output(parts)
        # the output above keeps the env's own flags; each policy learns from episode ends as its config says
        parts = {
            pid: dataclasses.replace(part, fragment=episode_ends(part.fragment, self.policies[pid].config.no_done_at_end))
            for pid, part in parts.items()
        }
        runner = cast("AnyEnvRunner", self)
        if any(self.per_trajectory(self.policies[pid]) for pid in parts):
            batches = postprocess_for_hook(runner, parts)
        else:
            batches = {pid: self.policies[pid].postprocess_trajectory(p.fragment, p.bootstrap_obs) for pid, p in parts.items()}
        samples = MultiAgentBatch(batches, env_steps, agent_steps)
        self.callbacks.sample_end(runner, samples)
        return samples

    def per_trajectory(self, policy: Policy) -> bool:
        """Whether a policy's samples are postprocessed one trajectory at a time (see
        :mod:`corral.core.sampling.trajectories`): for an ``on_postprocess_trajectory`` hook, or a policy whose
        ``postprocess_trajectory`` takes RLlib's per-trajectory arguments.

        Args:
            policy: the policy.
        """
        return self.callbacks.has_postprocess_trajectory or postprocesses_trajectories(policy)

    def _sample_truncated(self, explore: bool, steps: int, agent_target: int | None) -> tuple[int, int, int]:
        """Step ``steps`` times (or until ``agent_target`` agent steps): ``batch_mode="truncate_episodes"``.

        Returns:
            The env steps and agent steps recorded, and the fragment's horizon (the steps taken).
        """
        env_steps = agent_steps = 0
        for t in range(steps):
            stepped, acted = self._step(explore, t, steps)
            env_steps, agent_steps = env_steps + stepped, agent_steps + acted
            if agent_target is not None and agent_steps >= agent_target:
                break
        return env_steps, agent_steps, steps

    def _sample_complete_episodes(self, explore: bool, steps: int, agent_target: int | None) -> tuple[int, int, int]:
        """Step at least ``steps`` times (or until ``agent_target`` agent steps), then until every recorded episode ended.

        RLlib's ``batch_mode="complete_episodes"``: the fragment holds whole
        episodes only. Once the fragment is long enough, a sub-environment not
        inside an episode it records is closed (its rows are left out); an
        episode cut that way is left out of the next call too (the
        sub-environment trains again from the episode after it).

        Returns:
            The env steps and agent steps recorded, and the number of steps taken.
        """
        trained = np.zeros(self.num_envs, dtype=bool)  # rows of the running episode are in the fragment
        closed = np.zeros(self.num_envs, dtype=bool)
        env_steps = agent_steps = t = 0
        while True:
            include = ~(self._discarding | closed)
            stepping = ~self._reset_pending  # a sub-environment whose episode ended is reset on this step, recording nothing
            stepped, acted = self._step(explore, t, steps, include=include)
            env_steps, agent_steps, t = env_steps + stepped, agent_steps + acted, t + 1
            ended = self._reset_pending & stepping
            trained = (trained | (stepping & include)) & ~ended
            self._discarding &= ~ended
            if t >= steps or (agent_target is not None and agent_steps >= agent_target):
                closed |= ~trained
                if not trained.any():
                    break
        # an episode that began here but was cut: its next rows are not trained on
        self._discarding = (self._episode_lengths() > 0) & ~self._reset_pending
        return env_steps, agent_steps, t

    def run_episodes(
        self, num_episodes: int | None = None, num_steps: int | None = None, explore: bool = False
    ) -> list[EpisodeSummary]:
        """Evaluate: run from fresh resets until ``num_episodes`` episodes end (or ``num_steps`` steps pass).

        Nothing is recorded for training and the policies' timesteps and observation
        filters do not move. With ``output`` the steps are written there, as RLlib's
        evaluation runners write theirs. With both limits given, both must be reached;
        with neither, nothing is run (but the sub-environments are still reset).

        Args:
            num_episodes: stop once this many episodes have ended.
            num_steps: stop once this many env steps (summed over the sub-environments)
                have passed; episodes still running then are not returned.
            explore: act with exploration; False acts deterministically.

        Returns:
            The finished episodes in the order they ended; with ``num_episodes``, the
            first ``num_episodes`` of them.
        """
        self._forget_open_rows()
        self._reset_all()
        self._completed = []
        steps = 0
        recording = self.output is not None
        t, horizon = 0, self.config.get_rollout_fragment_length()
        self._training_rows = False  # rows recorded for the output only: no timestep or filter moves
        try:
            while (num_episodes is not None and len(self._completed) < num_episodes) or (
                num_steps is not None and steps < num_steps
            ):
                steps += self._step(explore, t if recording else None, horizon)[0]
                if recording:
                    t += 1
                    if t == horizon:  # a fragment's worth of rows: out to the files, as a sample call's
                        self._write_output(self._fragments(t))
                        t = 0
            if t:
                self._write_output(self._fragments(t))
        finally:
            self._training_rows = True
        episodes = self._completed[:num_episodes] if num_episodes is not None else self._completed
        self._completed = []
        self._evaluated()
        return episodes

    def _reset_all(self) -> None:
        """Start a new episode in every sub-environment."""
        raise NotImplementedError

    def _step(self, explore: bool, t: int | None, horizon: int, include: np.ndarray | None = None) -> tuple[int, int]:
        """One step of every sub-environment (a reset for those whose episode ended).

        Args:
            explore: act with exploration.
            t: the fragment's row the step is recorded in, for training; None: not recorded.
            horizon: the fragment's length as planned (it grows if complete episodes need more rows).
            include: the sub-environments whose transitions count (``batch_mode="complete_episodes"``);
                the others act unrecorded. Default all.

        Returns:
            The env steps and agent steps recorded (taken, when not recording), reset rows not counted.
        """
        raise NotImplementedError

    def _fragments(self, horizon: int) -> dict[str, PolicyFragment]:
        """Each policy's ``[horizon, K]`` fragment of the call, with the agent and episode of each column."""
        raise NotImplementedError

    def _episode_lengths(self) -> np.ndarray:
        """The steps each sub-environment's running episode has taken so far."""
        raise NotImplementedError

    def _forget_open_rows(self) -> None:
        """Drop every row not yet in a fragment, before an evaluation (a single-agent runner keeps none)."""

    def _evaluated(self) -> None:
        """An evaluation ended (a single-agent runner samples on from where it stands)."""

    # ------------------------------------------------------------------ #
    # experience output
    # ------------------------------------------------------------------ #
    def _write_output(self, parts: dict[str, PolicyFragment]) -> None:
        """Hand each policy's fragment (with its bootstrap observations) to the output, and take the context out.

        The ``eps_id``, ``agent_index``, ``t`` and ``infos`` columns exist for the output only:
        they leave the fragments here, so training is the same with or without output.
        """
        if self.output is not None:
            self.output.write_fragments({pid: (part.fragment, part.bootstrap_obs) for pid, part in parts.items()})
        for part in parts.values():
            for key in OUTPUT_CONTEXT_COLUMNS:
                part.fragment.pop(key, None)

    def close_output(self) -> None:
        """Close the output files, so that every one is complete (see :mod:`corral.integrations.offline.experience_output`)."""
        if self.output is not None:
            self.output.close()


def check_env_to_module_connector(config: AlgorithmConfig, env: Any) -> None:
    """Build RLlib's ``env_to_module_connector`` pieces with the env and check corral does each one's work.

    Each piece answers ``corral_does(config)`` (see :mod:`corral.rllib.support.connectors`), said at INFO.

    Args:
        config: the algorithm's config.
        env: the runner's vector env, which RLlib gives the builder.

    Raises:
        ConfigError: the option is not a function, or a piece is one corral does not do.
    """
    build = config.env_to_module_connector
    if build is None:
        return
    if not callable(build):
        raise ConfigError(f"env_to_module_connector is fn(env) -> connector pieces, not {type(build).__name__}")
    built = build(env)
    for piece in built if isinstance(built, (list, tuple)) else [built]:
        describe = getattr(piece, "corral_does", None)
        if describe is None:
            raise ConfigError(
                f"env_to_module_connector gives {type(piece).__name__}, which is no connector piece of RLlib's; corral's "
                "env runners have no pipeline (corral.rllib.connectors lists the pieces they do the work of)"
            )
        logger.info("env_to_module_connector's %s: %s", type(piece).__name__, describe(config))


def evaluation_span(duration: int, unit: str) -> dict[str, int]:
    """:meth:`BaseEnvRunner.run_episodes` keyword arguments for ``duration`` in ``unit`` ('episodes' or 'timesteps').

    Args:
        duration: how many episodes or timesteps.
        unit: ``"episodes"``; any other value is taken as timesteps.

    Returns:
        ``{"num_episodes": duration}`` or ``{"num_steps": duration}``.
    """
    return {"num_episodes": duration} if unit == "episodes" else {"num_steps": duration}
