"""Algorithm: the training loop every plugin shares; a plugin writes ``training_step()``.

``train()`` runs ``training_step()`` (at least once, longer if the reporting
minimums ask), gathers episode metrics, evaluates on schedule, calls the
``on_train_result`` hook, writes the result files and checkpoints on schedule.
Samples and learner stats are keyed by policy id throughout.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import logging
import math
import os
import time
from collections.abc import Callable, Collection, Container, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch

from corral._version import __version__
from corral.core.common import by_value
from corral.core.common.import_paths import object_path
from corral.core.common.restored import restored_count, restored_float
from corral.core.common.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch
from corral.core.common.space_codec import decode_space, encode_space
from corral.core.common.spaces import space_to_json
from corral.core.contracts.callbacks import CallbackRunner, installed_hook_plugins
from corral.core.contracts.config import LEGACY_KEYS, AlgorithmConfig
from corral.core.contracts.multi_agent_config import policy_config
from corral.core.contracts.policy_spec import PolicySpec
from corral.core.contracts.rllib_compat import as_config_of
from corral.core.devices import check_learner_device, restorable_here
from corral.core.environments.envs import env_name
from corral.core.environments.task_settable_env import task_settable
from corral.core.estimation.offline_evaluation import build_off_policy_evaluation
from corral.core.learning.acting import ActionComputation
from corral.core.learning.policy import Policy, PolicyBuild, build_policy
from corral.core.learning.policy_map import PolicyMap
from corral.core.persistence import checkpoints
from corral.core.persistence.checkpoint_classes import algorithm_class_of
from corral.core.persistence.experience_input import build_experience_input
from corral.core.persistence.loggers import (
    NOOP_LOGGERS,
    CustomResultLogger,
    NoopLogger,
    ResultWriter,
    default_storage_path,
    new_experiment_dir,
)
from corral.core.persistence.policy_export import export_policy_model
from corral.core.persistence.safe_loading import check_config_references
from corral.core.results import corral_result_key, finite_number, result_value
from corral.core.sampling.env_runner import evaluation_span
from corral.core.sampling.env_runner_group import EnvRunnerGroup, EvaluationRound
from corral.core.sampling.metrics import EpisodeHistory, summarize_episodes
from corral.core.sampling.multi_agent_env_runner import MultiAgentEnvRunner, make_env_runner
from corral.core.sampling.system_usage import SystemUsage
from corral.core.seeding import generator_state, numpy_generator, set_generator_state
from corral.core.threads import TorchThreads
from corral.errors import CheckpointError, ConfigError, CorralError, EnvError, TrainingError

logger = logging.getLogger("corral")

IN_MEMORY_STATE = ("algorithm_class", "config", "policy_states", "checkpoint_arrays")
"""the keys of :meth:`Algorithm.get_state` that a checkpoint keeps in files of their own (or, the class and config, names)"""


class Algorithm(ActionComputation):
    """Base class of every corral algorithm.

    A plugin subclass sets ``config_class`` and ``policy_class``, and overrides
    :meth:`training_step` when its loop is not one sample call, then one update.

    Args:
        config: the algorithm's config (a dict is read with ``from_dict``);
            default :meth:`get_default_config`.
        env: optionally the environment, overriding ``config.env``.
    """

    config_class: ClassVar[type[AlgorithmConfig]] = AlgorithmConfig
    policy_class: ClassVar[type[Policy]] = Policy
    name: ClassVar[str | None] = None
    """the registered name; defaults to the class name"""
    supported_action_spaces: ClassVar[tuple[type[gym.Space], ...]] = (
        gym.spaces.Discrete,
        gym.spaces.MultiDiscrete,
        gym.spaces.Box,
    )
    """the action-space types the algorithm can act in; any other is refused before training starts"""
    corral_api: ClassVar[int | None] = None
    """the plugin API version the plugin was written for (``corral.plugin_api``); None: not stated"""
    sample_whole_fragments: ClassVar[bool] = False
    """whether a train batch is made of full ``rollout_fragment_length`` fragments only (sequence learners such
    as IMPALA); False lets :meth:`sample` end a batch with a shorter call that samples just the steps missing"""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "config_class" in cls.__dict__ and "algo_class" not in cls.config_class.__dict__:
            cls.config_class.algo_class = cls  # PPOConfig().build() builds PPO
        if "name" not in cls.__dict__:
            cls.name = cls.__name__

    @classmethod
    def get_default_config(cls) -> AlgorithmConfig:
        """A fresh config with this algorithm's defaults."""
        return cls.config_class(algo_class=cls)

    def __init__(
        self, config: AlgorithmConfig | dict[str, Any] | None = None, env: Any = None, logger_creator: Any = None
    ) -> None:
        self.config = self._accept_config(config, env)
        self._custom_logger = logger_creator(self.config.to_dict()) if logger_creator is not None else None
        """RLlib's ``logger_creator(config_dict)``: the object given each result in place of corral's files, or None"""
        logger.setLevel(self.config.log_level)
        check_learner_device(self.config)
        self._torch_threads = TorchThreads(self.config.num_torch_threads)
        # Every generator this algorithm draws from is its own, derived from the seed (corral.core.seeding).
        seed = self.config.seed
        self.rng = numpy_generator(seed, "algorithm")
        self.callbacks = CallbackRunner(self.config.callbacks_class, installed_hook_plugins())
        self.policies = PolicyMap(self.config.policy_map_capacity, self._rebuild_policy, on_evict=self._verify_policy)
        """the learner's policies by id, at most ``policy_map_capacity`` in memory (the local runners share them)"""
        self._logdir: Path | None = None
        local = make_env_runner(self._runner_config(self.config), self.policies, 0, self.callbacks, seed=seed)
        try:
            self.policy_builds: dict[str, PolicyBuild] = {
                pid: self._policy_build(pid, *spaces) for pid, spaces in local.policy_spaces().items()
            }
            """how each policy is built, in this process and in every remote env runner"""
        except BaseException:
            local.stop()
            raise
        for pid, build in self.policy_builds.items():
            self.policies[pid] = build.build(pid)
            self.callbacks.create_policy(pid, self.policies[pid])
        self._check_storage_path()
        self._check_evaluation_env()
        if self.config.env_task_fn is not None:
            for env in local.sub_environments:  # before any training: each must take set_task()
                task_settable(env)
        self.experience_input = build_experience_input(self.config, self.policies)
        """where :meth:`sample` takes rows from besides the env runners (``offline_data(input_=...)``), or None"""
        self.off_policy_evaluation = build_off_policy_evaluation(self.config, self.policies)
        """the estimators that :meth:`evaluate` runs on recorded episodes (``off_policy_estimation_methods``), or None"""
        recreated = functools.partial(self.callbacks.env_runners_recreated, self, is_evaluation=False)
        self.env_runner_group = EnvRunnerGroup(
            local, self._runner_config(self.config), self.policy_builds, on_recreated=recreated
        )
        self.workers = self.env_runner_group
        self._eval_group: EnvRunnerGroup | None = None
        self._last_evaluation: dict[str, Any] | None = None
        self._last_result: dict[str, Any] | None = None
        """the latest train() result: its checkpoint_score_attribute scores the next checkpoint"""
        self._stopped = False
        self._system_usage = SystemUsage() if self.config.log_sys_usage else None
        self._fragments_reported = False  # said at INFO: an explicit fragment needs several calls per batch
        self.iteration = 0
        self.counters = {
            "num_env_steps_sampled": 0,
            "num_env_steps_trained": 0,
            "num_agent_steps_sampled": 0,
            "num_agent_steps_trained": 0,
        }
        self.time_total_s = 0.0
        self.history = EpisodeHistory(self.config.metrics_num_episodes_for_smoothing)
        self._learner_pool: ThreadPoolExecutor | None = None
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        self._num_learner_threads = self.config.num_learner_threads or max(1, cores // torch.get_num_threads())
        self._writer: ResultWriter | CustomResultLogger | None = None
        self.setup()
        self.callbacks.algorithm_init(self)

    def _accept_config(self, config: AlgorithmConfig | dict[str, Any] | None, env: Any) -> AlgorithmConfig:
        if config is None:
            config = self.get_default_config()
        elif isinstance(config, dict):
            config = self.config_class.from_dict(config)
        elif not isinstance(config, self.config_class):
            converted = as_config_of(config, self.config_class) if isinstance(config, AlgorithmConfig) else None
            if converted is not None:  # AlgorithmConfig(algo_class=PPO): RLlib builds the algorithm from it
                return self._accept_config(converted, env)
            raise ConfigError(
                f"{type(self).__name__} needs a {self.config_class.__name__}, got {type(config).__name__}; "
                f"start from {type(self).__name__}.get_default_config() or corral.get_config({self.name!r})"
            )
        config = config.copy()
        if env is not None:
            config.env = env
        config.validate()
        return config.freeze()

    def _policy_build(self, policy_id: str, observation_space: gym.Space, action_space: gym.Space) -> PolicyBuild:
        """How to build policy ``policy_id``: its spec's class or the algorithm's, its own options on the config's.

        Raises:
            ConfigError: the algorithm does not support its action space (naming the policy in a multi-agent run).
        """
        try:
            self.check_action_space(action_space)
        except ConfigError as exc:
            raise ConfigError(f"policy {policy_id!r}: {exc}" if self.config.policies else str(exc)) from None
        policy_class, config = _class_and_config(self.config, policy_id, self.policy_class)
        return PolicyBuild(policy_class, observation_space, action_space, config)

    def _runner_config(self, config: AlgorithmConfig) -> AlgorithmConfig:
        """``config`` as env runners get it: ``output="logdir"`` becomes this algorithm's experiment folder.

        ``record_env=True`` becomes the ``videos`` folder in it.
        """
        if config.output != "logdir" and config.record_env is not True:
            return config
        resolved = config.copy()
        if config.output == "logdir":
            resolved.output = str(self.logdir)
        if config.record_env is True:
            resolved.record_env = str(self.logdir / "videos")
        return resolved.freeze()

    def _check_storage_path(self) -> None:
        """Refuse, now, a results folder that could not be created when the first result is written."""
        root = default_storage_path(self.config.storage_path)
        existing = root
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
            raise ConfigError(
                f"results cannot be written under {str(root)!r}: {str(existing)!r} is not a folder this process may write in; "
                "choose another with .reporting(storage_path=...), --storage-path or CORRAL_RESULTS_DIR"
            )

    def _check_evaluation_env(self) -> None:
        """Build the evaluation env once, now, if ``evaluation_config`` changes it: it must exist and fit the policies.

        For a multi-agent env, each policy's spaces are those of the evaluation env's agents mapped to it.
        """
        overrides = self.config._canonical_keys(self.config.evaluation_config)
        if not {"env", "env_config"} & set(overrides):
            return
        eval_config = self.config.get_evaluation_config()
        try:
            runner = make_env_runner(eval_config, {}, num_envs=1, stream="evaluation")
        except (EnvError, ConfigError) as exc:
            raise type(exc)(f"evaluation_config: {exc}") from exc
        try:
            spaces = runner.policy_spaces()
        except ConfigError as exc:
            raise ConfigError(f"evaluation_config: {exc}") from exc
        finally:
            runner.stop()
        for policy_id, (observation_space, action_space) in spaces.items():
            policy = self.policies.get(policy_id)
            if policy is None:
                continue
            named = f"policy {policy_id!r}" if self.config.is_multi_agent else "the policy"
            for kind, space, trained in (
                ("observation", observation_space, policy.observation_space),
                ("action", action_space, policy.action_space),
            ):
                if space_to_json(space) != space_to_json(trained):
                    raise ConfigError(
                        f"the evaluation env {env_name(eval_config.env)!r} has the {kind} space {space} for {named}, "
                        f"which is trained on {trained} ({env_name(self.config.env)!r}); evaluate on an env with the same spaces"
                    )

    @classmethod
    def check_action_space(cls, action_space: gym.Space) -> None:
        """Refuse an action space the algorithm does not support, naming the installed ones that do.

        Raises:
            ConfigError: ``action_space`` is not one of ``supported_action_spaces``.
        """
        if isinstance(action_space, cls.supported_action_spaces):
            return
        kinds = " or ".join(t.__name__ for t in cls.supported_action_spaces)
        others = _algorithms_supporting(action_space)
        advice = f"; installed algorithms that support it: {', '.join(others)}" if others else ""
        raise ConfigError(f"{cls.name} needs a {kinds} action space, but the env has {action_space}{advice}")

    # ------------------------------------------------------------------ #
    # what a plugin writes
    # ------------------------------------------------------------------ #
    def setup(self) -> None:
        """Build what the algorithm needs beyond policies and env runners. Optional."""

    def training_step(self) -> dict[str, dict[str, Any]]:
        """One round of sampling and learning; returns learner stats by policy id.

        By default a train batch of at least ``train_batch_size`` steps (see
        :meth:`sample`) and one ``learn_on_batch``, the loop of PPO and A2C;
        replay-based and asynchronous algorithms override it.
        """
        return self.learn_on_batch(self.sample(self.config.train_batch_size))

    # ------------------------------------------------------------------ #
    # building blocks for training_step
    # ------------------------------------------------------------------ #
    def sample(self, min_env_steps: int | None = None) -> MultiAgentBatch:
        """Sample from the env runners until at least ``min_env_steps`` (default: one sample call).

        With ``offline_data(input_=...)`` the rows come from files instead, or from
        files and the env runners in the proportions asked for (see
        :mod:`corral.core.persistence.experience_input`).

        As RLlib does, steps are counted, not rows: the reset row between two
        episodes is no step. The first call samples a full fragment on every
        sub-environment; a later one samples only the steps still missing
        (unless :attr:`sample_whole_fragments`), so a batch overshoots
        ``min_env_steps`` by less than one step per sub-environment.

        Args:
            min_env_steps: steps to sample at least, counted as ``count_steps_by`` says
                (env steps, or agent steps in a multi-agent run).
        """
        group, source = self.env_runner_group, self.experience_input
        fragment = self.config.get_rollout_fragment_length()
        if min_env_steps is not None:
            self._report_fragments_per_batch(min_env_steps, fragment * group.num_sampling_envs)
        batches: list[MultiAgentBatch] = []
        steps = 0
        while not batches or (min_env_steps is not None and steps < min_env_steps):
            num_steps = None
            if batches and not self.sample_whole_fragments:
                assert min_env_steps is not None
                num_steps = min(fragment, -(-(min_env_steps - steps) // group.num_sampling_envs))
            if source is None:
                batch = group.sample(num_steps)
            else:
                rows = None if num_steps is None else num_steps * group.num_sampling_envs
                batch = source.next(functools.partial(group.sample, num_steps), rows)
            batches.append(batch)
            steps += batch.count_in(self.config.count_steps_by)
        samples = MultiAgentBatch.concat(batches)
        self.count_sampled(samples)
        return samples

    def _report_fragments_per_batch(self, batch_steps: int, steps_per_call: int) -> None:
        """Say once, at INFO, that an explicit fragment length needs several sample calls per train batch."""
        explicit = self.config.rollout_fragment_length
        if explicit == "auto" or steps_per_call >= batch_steps or self._fragments_reported:
            return
        self._fragments_reported = True
        logger.info(
            "rollout_fragment_length=%s on %d sub-environments samples %d steps per call; each train batch of "
            "%d steps joins %d calls", explicit, self.env_runner_group.num_sampling_envs, steps_per_call,
            batch_steps, -(-batch_steps // steps_per_call),
        )  # fmt: skip

    def count_sampled(self, samples: MultiAgentBatch) -> None:
        """Count samples as sampled; :meth:`sample` does, a loop that gets samples another way calls it."""
        self.counters["num_env_steps_sampled"] += samples.env_steps
        self.counters["num_agent_steps_sampled"] += samples.agent_steps

    def is_policy_to_train(self, policy_id: str, batch: Any = None) -> bool:
        """Whether ``policy_id`` learns: it is in ``policies_to_train``, or the predicate there says so (default: all).

        Args:
            policy_id: the policy.
            batch: the samples it would learn on, for a predicate ``fn(policy_id, batch)``.
        """
        to_train = self.config.policies_to_train
        if to_train is None:
            return True
        if callable(to_train):
            return bool(to_train(policy_id, batch))
        return policy_id in to_train

    def learn_on_batch(self, samples: MultiAgentBatch) -> dict[str, dict[str, Any]]:
        """Each policy that is to train learns on its own batch; returns their stats by policy id.

        Policies whose class allows it (:attr:`Policy.thread_safe_learning`) learn at
        once, each in its own thread, up to ``num_learner_threads`` of them, when they
        all fit in memory (``policy_map_capacity``). Each update touches only its own
        policy, so the results are the same as one after another; the
        ``on_learn_on_batch`` hooks run first, in this thread.
        """
        # left out: a policy removed while its samples were on the way, and one that does not learn
        jobs = [
            (pid, batch)
            for pid, batch in samples.policy_batches.items()
            if pid in self.policies and self.is_policy_to_train(pid, batch)
        ]
        stats: dict[str, dict[str, Any]] = {pid: {} for pid, _ in jobs}
        pool = self._learner_threads(jobs)
        if pool is None:
            for policy_id, batch in jobs:
                policy = self.policies[policy_id]  # looked up one at a time: the next lookup may move it to disk
                self.callbacks.learn_on_batch(policy, batch, stats[policy_id])
                self._learn(policy_id, policy, batch, stats[policy_id])
        else:
            policies = {pid: self.policies[pid] for pid, _ in jobs}
            for policy_id, batch in jobs:
                self.callbacks.learn_on_batch(policies[policy_id], batch, stats[policy_id])
            futures = [pool.submit(self._learn, pid, policies[pid], batch, stats[pid]) for pid, batch in jobs]
            wait(futures)  # every update ends before one's error is raised
            for future in futures:
                future.result()
        self.counters["num_env_steps_trained"] += samples.env_steps
        self.counters["num_agent_steps_trained"] += samples.agent_steps
        return stats

    def _learn(self, policy_id: str, policy: Policy, batch: SampleBatch, result: dict[str, Any]) -> None:
        """One policy's update, its stats added to ``result``; an error names the policy and the iteration."""
        try:
            result.update(policy.learn_on_batch(batch))
        except TrainingError as exc:
            raise exc.located(policy_id, self.iteration + 1) from None
        if policy.update_guard.skipped:
            result["num_nonfinite_updates_skipped"] = policy.update_guard.skipped

    def _learner_threads(self, jobs: list[tuple[str, SampleBatch]]) -> ThreadPoolExecutor | None:
        """The threads that update these policies at once, or None when they update one after another."""
        threads = self._num_learner_threads
        if (
            min(threads, len(jobs)) < 2
            or len(jobs) > self.policies.capacity  # each must stay in memory while it learns
            or not all(self.policy_builds[pid].policy_class.thread_safe_learning for pid, _ in jobs)
        ):
            return None
        if self._learner_pool is None:
            self._learner_pool = ThreadPoolExecutor(threads, thread_name_prefix="corral-learner")
        return self._learner_pool

    # ------------------------------------------------------------------ #
    # the training loop
    # ------------------------------------------------------------------ #
    def _verify_weights(self) -> None:
        """After a training step: no policy's last update may have left its weights non-finite (see UpdateGuard).

        A policy on disk was checked when it went there (see :meth:`_verify_policy`).
        """
        for policy_id, policy in self.policies.loaded().items():
            self._verify_policy(policy_id, policy)

    def _verify_policy(self, policy_id: str, policy: Policy) -> None:
        try:
            policy.update_guard.verify_weights()
        except TrainingError as exc:
            raise exc.located(policy_id, self.iteration + 1) from None

    def _rebuild_policy(self, policy_id: str) -> Policy:
        """A fresh learner copy of a policy that ``self.policies`` moved to disk (it loads the saved state into it)."""
        return self.policy_builds[policy_id].build(policy_id)

    def train(self) -> dict[str, Any]:
        """Run one training iteration and return its result dict (see README, "Results").

        Raises:
            CorralError: the algorithm was stopped (:meth:`stop` released what it trains with).
        """
        self._check_not_stopped("train")
        self._torch_threads.update()
        start = time.perf_counter()
        sampled_before, trained_before = self.counters["num_env_steps_sampled"], self.counters["num_env_steps_trained"]
        learner: dict[str, dict[str, Any]] = {}
        interval = self.config.evaluation_interval
        evaluate_now = interval is not None and (self.iteration + 1) % interval == 0
        in_parallel = (
            evaluate_now and self.config.evaluation_parallel_to_training and self.config.custom_evaluation_function is None
        )
        pending_evaluation = None
        if in_parallel:
            self.callbacks.evaluate_start(self)
            pending_evaluation = self._start_evaluation()
        while True:
            learner = self.training_step()
            self._verify_weights()
            if pending_evaluation is not None:
                self._evaluation_runners().continue_episodes(pending_evaluation)
            elapsed = time.perf_counter() - start
            enough_time = elapsed >= (self.config.min_time_s_per_iteration or 0)
            enough_steps = (
                self.counters["num_env_steps_sampled"] - sampled_before >= self.config.min_sample_timesteps_per_iteration
                and self.counters["num_env_steps_trained"] - trained_before >= self.config.min_train_timesteps_per_iteration
            )
            if enough_time and enough_steps:
                break
        self.iteration += 1
        finished = self.env_runner_group.get_metrics()
        self.history.add(finished)
        elapsed = time.perf_counter() - start
        self.time_total_s += elapsed
        sampled_this_iter = self.counters["num_env_steps_sampled"] - sampled_before
        result: dict[str, Any] = {
            "training_iteration": self.iteration,
            "timesteps_total": self.counters["num_env_steps_sampled"],
            "agent_timesteps_total": self.counters["num_agent_steps_sampled"],
            **self.counters,
            **summarize_episodes(self.history.episodes, self.config.keep_per_episode_custom_metrics),
            "episodes_this_iter": len(finished),
            "episodes_total": self.history.total,
            "num_env_steps_sampled_this_iter": sampled_this_iter,
            "num_env_steps_sampled_throughput_per_sec": sampled_this_iter / elapsed if elapsed > 0 else 0.0,
            "time_this_iter_s": elapsed,
            "time_total_s": self.time_total_s,
            "timestamp": int(time.time()),
            "num_healthy_env_runners": self.env_runner_group.num_healthy_remote_runners,
            "num_env_runner_restarts": self.env_runner_group.num_restarts,
            "info": {"learner": learner, **self.counters},
        }
        if self._system_usage is not None:
            result["perf"] = self._system_usage.perf()
        if self.config.env_task_fn is not None:
            function = self.config.env_task_fn
            self.env_runner_group.foreach_env_runner(lambda runner: runner.set_tasks(function, result))
        if evaluate_now:
            result["evaluation"] = self._finish_evaluation(pending_evaluation) if in_parallel else self.evaluate()
            self._last_evaluation = result["evaluation"]
        elif self.config.always_attach_evaluation_results and self._last_evaluation is not None:
            result["evaluation"] = self._last_evaluation
        self.callbacks.train_result(self, result)
        self._last_result = result
        self._result_writer().write(result)
        frequency = self.config.checkpoint_frequency
        if frequency and self.iteration % frequency == 0:
            self.save()
        return result

    def evaluate(self) -> dict[str, Any]:
        """Run ``evaluation_duration`` episodes (or timesteps) with ``evaluation_config`` applied.

        On the ``evaluation_num_env_runners`` Ray actors if there are any
        (sharing the duration), else in this process; or whatever
        ``custom_evaluation_function(algorithm, eval_workers)`` does instead.

        Returns:
            The evaluation metrics (``episode_reward_mean``, ...), or the custom function's.

        Raises:
            ConfigError: the custom evaluation function returned something other than a dict.
            CorralError: the algorithm was stopped.
        """
        self._check_not_stopped("evaluate")
        self.callbacks.evaluate_start(self)
        function = self.config.custom_evaluation_function
        if function is None:
            return self._finish_evaluation(self._start_evaluation())
        metrics = function(self, self._evaluation_runners())
        if not isinstance(metrics, dict):
            raise ConfigError(
                f"custom_evaluation_function {object_path(function)} returned {type(metrics).__name__}; it must return "
                "a dict of metrics"
            )
        self.callbacks.evaluate_end(self, metrics)
        return metrics

    def _evaluation_runners(self) -> EnvRunnerGroup:
        if self._eval_group is None:
            eval_config = self._runner_config(self.config.get_evaluation_config())
            num_envs = eval_config.evaluation_num_envs or eval_config.num_envs_per_env_runner
            if eval_config.evaluation_duration_unit == "episodes" and eval_config.evaluation_duration != "auto":
                num_envs = min(num_envs, eval_config.evaluation_duration)
            local = make_env_runner(
                eval_config, self.policies, 0, self.callbacks, num_envs=num_envs, seed=self.config.seed, stream="evaluation"
            )
            remote = self.config.evaluation_num_env_runners
            recreated = functools.partial(self.callbacks.env_runners_recreated, self, is_evaluation=True)
            self._eval_group = EnvRunnerGroup(
                local, eval_config, self.policy_builds, "evaluation", num_remote=remote, on_recreated=recreated
            )
        return self._eval_group

    def _start_evaluation(self) -> EvaluationRound | None:
        """Start evaluating on the evaluation actors (None: evaluation runs in this process, when finished)."""
        group = self._evaluation_runners()
        if not group.remote_env_runners:
            return None
        cfg = group.local_env_runner.config
        return group.start_episodes(cfg.evaluation_duration, cfg.evaluation_duration_unit, cfg.explore)

    def _finish_evaluation(self, pending: EvaluationRound | None) -> dict[str, Any]:
        group = self._evaluation_runners()
        if pending is not None:
            episodes = group.finish_episodes(pending)
        else:
            cfg = group.local_env_runner.config
            if cfg.evaluation_duration == "auto":  # every evaluation actor failed and was dropped: an episode per env here
                span = evaluation_span(group.local_env_runner.num_envs, "episodes")
            else:
                span = evaluation_span(cfg.evaluation_duration, cfg.evaluation_duration_unit)
            episodes = group.local_env_runner.run_episodes(explore=cfg.explore, **span)
        metrics: dict[str, Any] = {
            **summarize_episodes(episodes, self.config.keep_per_episode_custom_metrics),
            "episodes_this_iter": len(episodes),
        }
        if self.off_policy_evaluation is not None:
            cfg = self.config
            duration, unit = cfg.evaluation_duration, cfg.evaluation_duration_unit
            if duration == "auto":  # as many as the evaluation runners finished
                duration, unit = max(1, len(episodes)), "episodes"
            metrics["off_policy_estimator"] = self.off_policy_evaluation.run(int(duration), unit)
        self.callbacks.evaluate_end(self, metrics)
        return metrics

    # ------------------------------------------------------------------ #
    # acting
    # ------------------------------------------------------------------ #
    def export_policy_model(
        self, export_dir: str | os.PathLike[str], policy_id: str = DEFAULT_POLICY_ID, onnx: int | None = None
    ) -> Path:
        """Write a policy's deterministic acting as files that run with torch alone (and as ONNX).

        ``model.pt2`` (torch.export) and ``model.pt`` (TorchScript) map a batch of raw observations to
        ``(actions, action_dist_inputs)``: the same actions as
        ``compute_single_action(obs, explore=False)``, with the preprocessing and the
        observation filter inside (see :mod:`corral.core.persistence.policy_export`);
        ``model.json`` describes them.

        Args:
            export_dir: the folder to write into (created if missing).
            policy_id: the policy to export.
            onnx: an ONNX opset (e.g. 17) to also write ``model.onnx``; needs the ``onnx`` extra.

        Returns:
            The path of ``model.pt``.

        Raises:
            ConfigError: there is no policy ``policy_id``, its observations are not one
                array (Dict and Tuple spaces, action masks), or the ONNX opset or package is wrong.
        """
        return export_policy_model(self.get_policy(policy_id), export_dir, policy_id, onnx)

    def export_policy_checkpoint(self, export_dir: str | os.PathLike[str], policy_id: str = DEFAULT_POLICY_ID) -> str:
        """Write a checkpoint that holds one policy, for ``Policy.from_checkpoint(export_dir, policy_id)``.

        It is an algorithm checkpoint in every other way (config, counters), with only
        this policy in it: an opponent pool or a deployment takes it without the others.

        Args:
            export_dir: the checkpoint folder (an existing checkpoint there is replaced).
            policy_id: the policy to keep.

        Returns:
            The checkpoint's path.

        Raises:
            ConfigError: there is no policy ``policy_id``.
        """
        self.get_policy(policy_id)  # an unknown id is a ConfigError naming the ones that exist
        return self._write_checkpoint(Path(export_dir), [policy_id])

    def get_policy(self, policy_id: str = DEFAULT_POLICY_ID) -> Policy:
        """The policy with this id."""
        try:
            return self.policies[policy_id]
        except KeyError:
            raise ConfigError(f"no policy {policy_id!r}; this algorithm has {sorted(self.policies)}") from None

    def get_weights(self, policies: list[str] | None = None) -> dict[str, dict[str, np.ndarray]]:
        """Model weights by policy id (all policies unless ``policies`` names some)."""
        return {pid: self.get_policy(pid).get_weights() for pid in (policies or self.policies)}

    def set_weights(self, weights: dict[str, dict[str, Any]]) -> None:
        """Load weights by policy id, as :meth:`get_weights` returns them."""
        for pid, w in weights.items():
            self.get_policy(pid).set_weights(w)

    # ------------------------------------------------------------------ #
    # the policy set: policies added and removed while training
    # ------------------------------------------------------------------ #
    def add_policy(
        self,
        policy_id: str,
        policy_cls: type[Policy] | str | None = None,
        *,
        observation_space: gym.Space | None = None,
        action_space: gym.Space | None = None,
        config: dict[str, Any] | None = None,
        policy_state: dict[str, Any] | None = None,
        policy_mapping_fn: Callable[..., str] | str | None = None,
        policies_to_train: Container[str] | Callable[..., bool] | None = None,
    ) -> Policy:
        """Add a policy while training: to this process, every remote env runner and the evaluation runners.

        The policy joins ``config.policies`` (as a :class:`PolicySpec`), so a
        checkpoint saved afterwards holds it and restoring builds it again. Its
        weights reach the remote runners with the next broadcast. Episodes in
        progress keep their agents' policies; the new mapping applies to agents
        first seen from now on.

        Args:
            policy_id: the new policy's id.
            policy_cls: its class (or ``"module:qualname"``); None: the algorithm's own.
            observation_space: None: inferred from the agents mapped to it, else the
                spaces all agents share.
            action_space: as ``observation_space``.
            config: options that differ for this policy (``{"lr": 1e-4}``).
            policy_state: a :meth:`Policy.get_state` to start from (a snapshot of another
                policy, for a frozen opponent).
            policy_mapping_fn: the mapping from now on; None keeps the current one.
            policies_to_train: the policies that learn from now on; None keeps the current
                setting (with the default of all policies, the new one learns too).

        Returns:
            The new policy (the learner's copy).

        Raises:
            ConfigError: the id exists, the env is single-agent, an argument is invalid,
                or the spaces cannot be inferred; the algorithm is left as it was.
        """
        if policy_id in self.policies:
            raise ConfigError(f"policy {policy_id!r} exists already; remove_policy({policy_id!r}) first or choose another id")
        try:
            spec = PolicySpec(policy_cls, observation_space, action_space, config)
        except (ValueError, ImportError) as exc:
            raise ConfigError(f"add_policy({policy_id!r}): {exc}") from None
        runner = self._multi_agent_runner("add_policy")
        new_config = self._with_policy_set({**self._policy_specs(), policy_id: spec}, policy_mapping_fn, policies_to_train)
        previous = self.config
        self.config = runner.config = new_config
        try:
            build = self._policy_build(policy_id, *runner.policy_spaces()[policy_id])
            policy = build.build(policy_id)
            if policy_state is not None:
                policy.set_state(policy_state)
        except BaseException:
            self.config = runner.config = previous
            raise
        self.policy_builds[policy_id] = build
        self.policies[policy_id] = policy
        self.callbacks.create_policy(policy_id, policy)
        self._update_runners({policy_id: build}, [])
        self.policy_added(policy_id)
        return policy

    def remove_policy(
        self,
        policy_id: str,
        *,
        policy_mapping_fn: Callable[..., str] | str | None = None,
        policies_to_train: Container[str] | Callable[..., bool] | None = None,
    ) -> None:
        """Remove a policy everywhere it lives: this process, every remote env runner, the evaluation runners.

        Agents of episodes in progress that it acted for are mapped again at
        their next step (with the new mapping), and its rows not yet sampled are
        dropped. It leaves ``config.policies`` and, if named there, ``policies_to_train``.

        Args:
            policy_id: the policy to remove.
            policy_mapping_fn: the mapping from now on; it must no longer name ``policy_id``.
                None keeps the current one.
            policies_to_train: the policies that learn from now on; None keeps the current setting.

        Raises:
            ConfigError: no such policy, it is the last one, the env is single-agent, or an
                argument is invalid; the algorithm is left as it was.
        """
        self.get_policy(policy_id)
        if len(self.policies) == 1:
            raise ConfigError(f"policy {policy_id!r} is the only one; an algorithm needs at least one policy")
        runner = self._multi_agent_runner("remove_policy")
        if policies_to_train is None and isinstance(self.config.policies_to_train, list):
            policies_to_train = [pid for pid in self.config.policies_to_train if pid != policy_id]
        specs = {pid: spec for pid, spec in self._policy_specs().items() if pid != policy_id}
        self.config = runner.config = self._with_policy_set(specs, policy_mapping_fn, policies_to_train)
        del self.policies[policy_id], self.policy_builds[policy_id]
        self._update_runners({}, [policy_id])
        self.policy_removed(policy_id)

    def policy_added(self, policy_id: str) -> None:
        """Called once :meth:`add_policy` built a policy: a plugin that keeps state per policy (a replay buffer) makes it.

        Args:
            policy_id: the new policy, in :attr:`policies` already.
        """

    def policy_removed(self, policy_id: str) -> None:
        """Called once :meth:`remove_policy` removed a policy: a plugin lets go of what it kept for it.

        Args:
            policy_id: the removed policy, gone from :attr:`policies` already.
        """

    def _multi_agent_runner(self, method: str) -> MultiAgentEnvRunner:
        runner = self.env_runner_group.local_env_runner
        if not isinstance(runner, MultiAgentEnvRunner):
            raise ConfigError(
                f"{method} needs a multi-agent environment (a corral.MultiAgentEnv); {env_name(self.config.env)} "
                "is single-agent and has one policy, default_policy"
            )
        return runner

    def _policy_specs(self) -> dict[str, PolicySpec]:
        """The config's policies; a config that names none has the default policy."""
        return dict(self.config.policies) or {DEFAULT_POLICY_ID: PolicySpec()}

    def _with_policy_set(
        self, policies: dict[str, PolicySpec], policy_mapping_fn: Any, policies_to_train: Any
    ) -> AlgorithmConfig:
        """A frozen copy of the config with another policy set (and mapping, and policies to train, where given)."""
        options: dict[str, Any] = {"policies": policies}
        if policy_mapping_fn is not None:
            options["policy_mapping_fn"] = policy_mapping_fn
        if policies_to_train is not None:
            options["policies_to_train"] = policies_to_train
        new = self.config.copy().multi_agent(**options)
        new.validate()
        return new.freeze()

    def _update_runners(self, added: dict[str, PolicyBuild], removed: list[str]) -> None:
        """Tell every env runner group the policy set changed (the local runners share ``self.policies``)."""
        self.env_runner_group.update_policies(self._runner_config(self.config), added, removed)
        if self._eval_group is not None:
            self._eval_group.update_policies(self.config.get_evaluation_config(), added, removed)

    # ------------------------------------------------------------------ #
    # results folder and checkpoints
    # ------------------------------------------------------------------ #
    @property
    def logdir(self) -> Path:
        """The experiment folder (created on first use)."""
        if self._logdir is None:
            given = (self.config.logger_config or {}).get("logdir") or getattr(self._custom_logger, "logdir", None)
            if given:
                self._logdir = Path(given).expanduser()
                self._logdir.mkdir(parents=True, exist_ok=True)
            else:
                self._logdir = new_experiment_dir(
                    self.config.storage_path, self.name or type(self).__name__, env_name(self.config.env)
                )
        return self._logdir

    def _result_writer(self) -> ResultWriter | CustomResultLogger:
        if self._writer is None:
            kind = (self.config.logger_config or {}).get("type")
            if self._custom_logger is None and kind is not None:
                logger_class = NoopLogger if kind in NOOP_LOGGERS else kind
                self._custom_logger = logger_class(self.config.to_dict(), str(self.logdir))
            if self._custom_logger is not None:
                self._writer = CustomResultLogger(self._custom_logger)
            else:
                params = {"algorithm": self.name, **self.config.to_dict()}
                self._writer = ResultWriter(self.logdir, params, tensorboard=self.config.log_to_tensorboard)
        return self._writer

    def save(self, checkpoint_dir: str | os.PathLike[str] | None = None) -> str:
        """Write a checkpoint; default ``<experiment folder>/checkpoint_<iteration>``. Returns its path.

        Into the experiment folder, with ``keep_checkpoints_num``, the checkpoints beyond
        that many are then removed: the oldest, or the worst by ``checkpoint_score_attribute``
        (never the latest).
        """
        path = (
            Path(checkpoint_dir) if checkpoint_dir is not None else checkpoints.experiment_checkpoint(self.logdir, self.iteration)
        )
        saved = [
            pid for pid in self.policies if not self.config.checkpoint_trainable_policies_only or self.is_policy_to_train(pid)
        ]
        written = self._write_checkpoint(path, saved)
        if checkpoint_dir is None and self.config.keep_checkpoints_num:
            self._prune_checkpoints(self.config.keep_checkpoints_num)
        return written

    def _write_checkpoint(self, path: Path, saved: list[str]) -> str:
        """Write a checkpoint of the algorithm with the policies ``saved`` (and their native model files if asked)."""
        dist, version = _providing_distribution(type(self))
        meta: dict[str, Any] = {
            "algorithm": self.name,
            "algorithm_class": object_path(type(self)),
            "distribution": dist,
            "distribution_version": version,
            "corral_version": __version__,
            "policies": {
                pid: {
                    "observation_space": encode_space(self.policies[pid].observation_space),
                    "action_space": encode_space(self.policies[pid].action_space),
                }
                for pid in saved
            },
        }
        attribute = self.config.checkpoint_score_attribute
        if attribute is not None:  # what keep_checkpoints_num ranks the checkpoints by
            score = finite_number(result_value(self._last_result or {}, corral_result_key(attribute)))
            meta["score"] = {"attribute": attribute, "value": score}
        state = self.get_state()
        policy_states = {pid: state["policy_states"][pid] for pid in saved}
        native: dict[str, Callable[[Path], Any]] = {}
        if self.config.export_native_model_files:  # model.pt and model.json beside each policy's state
            native = {
                f"policies/{pid}": functools.partial(export_policy_model, self.policies[pid], policy_id=pid) for pid in saved
            }
        loop_state = {key: value for key, value in state.items() if key not in IN_MEMORY_STATE}  # algorithm_state.json
        written = checkpoints.write_checkpoint(
            path, meta, self.config.to_dict(), loop_state, policy_states, state["checkpoint_arrays"], native
        )
        return str(written)

    def _prune_checkpoints(self, keep: int) -> None:
        """Remove all but ``keep`` checkpoints of the experiment folder: the newest, or the best scored and the latest."""
        found = checkpoints.experiment_checkpoints(self.logdir)  # oldest first
        if len(found) <= keep:
            return
        kept = set(found[-keep:])
        if self.config.checkpoint_score_attribute is not None:
            sign = 1.0 if self.config.checkpoint_score_order == "max" else -1.0
            ranked = sorted(found, key=lambda path: sign * _checkpoint_score(path), reverse=True)  # stable: older first on ties
            kept = {ranked[0], found[-1]}  # the best and the latest, even with keep_checkpoints_num=1
            for path in ranked:
                if len(kept) >= keep:
                    break
                kept.add(path)
        for old in found:
            if old not in kept:
                checkpoints.remove_checkpoint(old)

    def get_state(self) -> dict[str, Any]:
        """The whole algorithm, in memory: ``Algorithm.from_state(algo.get_state())`` goes on exactly as it would.

        Its class (``algorithm_class``), its ``config``, each policy's state
        (``policy_states``: weights, optimizer, exploration, generators, filter;
        copies) and ``checkpoint_arrays`` (replay buffers), and the JSON state a
        checkpoint's ``algorithm_state.json`` holds: counters, generators, the
        episode history and where sampling stands (the env runners' generators,
        episodes in progress and environments, see :meth:`EnvRunner.get_state`,
        remote ones included).
        """
        state: dict[str, Any] = {
            "algorithm_class": type(self),
            "config": self.config,  # frozen
            "policy_states": {pid: copy.deepcopy(policy.get_state()) for pid, policy in self.policies.items()},
            "checkpoint_arrays": self.get_checkpoint_arrays(),
            "iteration": self.iteration,
            "counters": dict(self.counters),
            "time_total_s": self.time_total_s,
            "episodes_total": self.history.total,
            "seed": self.config.seed,
            "rng_state": generator_state(self.rng),
            "episode_history": self.history.get_state(),
            "env_runners": self.env_runner_group.get_state(),
        }
        if self._eval_group is not None:
            state["evaluation_env_runners"] = self._eval_group.get_state()
        if self.experience_input is not None:
            state["experience_input"] = self.experience_input.get_state()
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`get_state` returned (the keys corral 0.1 wrote are enough); its class and config are not used.

        Raises:
            ValueError: a value has the wrong type or range (a tampered checkpoint), or
                the state holds a policy this algorithm does not have.
        """
        policy_states = state.get("policy_states") or {}
        unknown = sorted(set(policy_states) - set(self.policies))
        if unknown:
            raise ValueError(f"the state holds policies {unknown}, which this algorithm does not have: {sorted(self.policies)}")
        iteration = restored_count(state["iteration"], "iteration")
        counters = state["counters"]
        if not isinstance(counters, dict) or set(counters) != set(self.counters):
            raise ValueError(f"counters must be a dict with the keys {sorted(self.counters)}")
        counters = {key: restored_count(value, f"counters.{key}") for key, value in counters.items()}
        time_total_s = restored_float(state.get("time_total_s", 0.0), "time_total_s", minimum=0.0)
        history = EpisodeHistory(self.config.metrics_num_episodes_for_smoothing)
        if "episode_history" in state:
            history.set_state(state["episode_history"])
        history.total = restored_count(state.get("episodes_total", history.total), "episodes_total")
        rng = np.random.default_rng()
        if "rng_state" in state:
            set_generator_state(rng, state["rng_state"])
        for pid, policy_state in policy_states.items():  # first, as from a checkpoint: the runners' state comes after
            self.policies[pid].set_state(policy_state)
        self.iteration, self.time_total_s, self.history, self.rng = iteration, time_total_s, history, rng
        self.counters.update(counters)
        if "env_runners" in state:
            self.env_runner_group.set_state(state["env_runners"])
        if "evaluation_env_runners" in state:
            self._evaluation_runners().set_state(state["evaluation_env_runners"])
        if "experience_input" in state and self.experience_input is not None:
            self.experience_input.set_state(state["experience_input"])
        if "checkpoint_arrays" in state:
            self.set_checkpoint_arrays(state["checkpoint_arrays"])

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Algorithm:
        """A new algorithm from what :meth:`get_state` returned: its class built with its config, then its state set.

        Args:
            state: the dict of :meth:`get_state`.

        Returns:
            The algorithm, ready to ``train()`` on from where the state was taken.

        Raises:
            CheckpointError: ``state`` lacks its algorithm class or config, or is of another
                algorithm than the class this is called on.
        """
        algorithm_class, config = state.get("algorithm_class"), state.get("config")
        if not (isinstance(algorithm_class, type) and issubclass(algorithm_class, Algorithm)) or config is None:
            raise CheckpointError(
                "from_state needs what Algorithm.get_state() returns, with its 'algorithm_class' and 'config'; "
                "for a checkpoint folder use Algorithm.from_checkpoint(path)"
            )
        if not issubclass(algorithm_class, cls):
            raise CheckpointError(
                f"the state is of {algorithm_class.__name__}, not {cls.__name__}; call Algorithm.from_state(state)"
            )
        algo = algorithm_class(config=config)
        try:
            algo.set_state(state)
        except BaseException:
            algo.stop()
            raise
        return algo

    def get_checkpoint_arrays(self) -> dict[str, dict[str, np.ndarray]]:
        """Named groups of numpy arrays to checkpoint beside the policies (replay buffers). Default none."""
        return {}

    def set_checkpoint_arrays(self, arrays: dict[str, dict[str, np.ndarray]]) -> None:
        """Restore what :meth:`get_checkpoint_arrays` returned (groups absent from the checkpoint are missing)."""

    def restore(self, checkpoint_path: checkpoints.CheckpointPath) -> None:
        """Load a checkpoint of this algorithm into this instance (weights, optimizers, counters, RNG states).

        Policies the checkpoint holds and this algorithm lacks (added with
        :meth:`add_policy` before it was saved) are added, built from their
        specs in the checkpoint; policies this algorithm has and the checkpoint
        lacks keep their state. Nothing else in the checkpoint's config is used,
        and a policy class it names is imported only if it is corral's or registered.

        Raises:
            CheckpointError: the checkpoint is damaged, of another algorithm, or does not fit
                this one's policies; this algorithm is left as it was.
        """
        self._apply_checkpoint(checkpoints.read_checkpoint(checkpoint_path))

    def _apply_checkpoint(self, ckpt: checkpoints.Checkpoint, policy_ids: list[str] | None = None) -> None:
        meta, folder = ckpt.meta, ckpt.folder
        if meta["algorithm"] != self.name and meta.get("algorithm_class") != object_path(type(self)):
            raise CheckpointError(
                f"checkpoint {str(folder)!r} is of algorithm {meta['algorithm']!r}, not {self.name!r}; "
                "load it with corral.Algorithm.from_checkpoint(path)"
            )
        stored = {pid: s for pid, s in meta["policies"].items() if policy_ids is None or pid in policy_ids}
        missing = [pid for pid in stored if pid not in self.policies]
        if missing and not isinstance(self.env_runner_group.local_env_runner, MultiAgentEnvRunner):
            raise CheckpointError(f"checkpoint has policies {missing}, which this algorithm does not: {sorted(self.policies)}")
        added: list[str] = []
        try:
            for pid in missing:
                self._add_checkpoint_policy(ckpt, pid)
                added.append(pid)
            self._load_checkpoint_policies(ckpt, stored)
        except BaseException:
            for pid in added:
                self.remove_policy(pid)
            raise
        self.callbacks.checkpoint_loaded(self)

    def _add_checkpoint_policy(self, ckpt: checkpoints.Checkpoint, policy_id: str) -> None:
        """Add a policy the checkpoint holds and this algorithm lacks, from its spec in the checkpoint's config."""
        saved_specs = ckpt.config.get("policies") or {}
        spec_value = saved_specs.get(policy_id) if isinstance(saved_specs, dict) else None
        if isinstance(spec_value, dict):
            check_config_references({"policies": {policy_id: spec_value}}, ckpt.folder, False, set())
        stored = ckpt.meta["policies"][policy_id]
        try:
            spec = PolicySpec.of(spec_value)
            observation_space = decode_space(stored.get("observation_space"), "observation_space")
            action_space = decode_space(stored.get("action_space"), "action_space")
        except (ValueError, ImportError) as exc:
            where = ckpt.folder / checkpoints.CONFIG_FILE
            raise CheckpointError(f"{where}: policy {policy_id!r} cannot be rebuilt: {exc}") from None
        self.add_policy(
            policy_id, spec.policy_class, observation_space=observation_space, action_space=action_space, config=spec.config
        )

    def _load_checkpoint_policies(self, ckpt: checkpoints.Checkpoint, stored: dict[str, Any]) -> None:
        """Check the stored policies' spaces against this algorithm's, then load them and the algorithm's state: all or none."""
        folder = ckpt.folder
        for pid, spaces in stored.items():
            policy = self.policies[pid]
            for kind, space in (("observation_space", policy.observation_space), ("action_space", policy.action_space)):
                trained = _stored_space_description(spaces.get(kind))
                if trained != space_to_json(space):
                    raise CheckpointError(
                        f"checkpoint policy {pid!r} was trained with {kind} {trained}, "
                        f"but this environment has {space_to_json(space)}; evaluate it on the env it was trained on"
                    )
        backup = self.get_state()
        try:
            for pid in stored:
                with _blame(folder / "policies" / pid / checkpoints.POLICY_FILE):
                    self.policies[pid].set_state(ckpt.policy_states[pid])
            with _blame(folder / checkpoints.STATE_FILE):
                self.set_state(ckpt.algorithm_state)
            with _blame(folder / checkpoints.ARRAYS_DIR):
                self.set_checkpoint_arrays(ckpt.arrays)
        except BaseException:
            self.set_state(backup)
            raise

    @classmethod
    def load_policy(cls, ckpt: checkpoints.Checkpoint, policy_id: str, trust_code: bool) -> Policy:
        """One policy of a checkpoint this algorithm wrote, built alone (what :meth:`Policy.from_checkpoint` calls).

        Args:
            ckpt: the checkpoint, read.
            policy_id: the policy to load.
            trust_code: as for :meth:`from_checkpoint`.

        Returns:
            The policy, with the checkpoint's weights, filter statistics and timestep.

        Raises:
            CheckpointError: the checkpoint has no such policy, stores its spaces only as
                descriptions (corral 0.1), or names code that is not registered.
        """
        return policy_of_checkpoint(cls, ckpt, policy_id, trust_code)

    @classmethod
    def from_checkpoint(
        cls,
        checkpoint_path: checkpoints.CheckpointPath,
        env: Any = None,
        config_overrides: dict[str, Any] | None = None,
        *,
        callbacks: Any = None,
        trust_code: bool = False,
        policy_ids: Collection[str] | None = None,
        policy_mapping_fn: Callable[..., str] | str | None = None,
        policies_to_train: Container[str] | Callable[..., bool] | None = None,
    ) -> Algorithm:
        """Rebuild whatever algorithm a checkpoint holds, with its config, weights and counters.

        Names in the checkpoint resolve only against what is registered or installed
        (algorithm plugins, ``register_env`` names, gymnasium ids, corral's own
        classes): a checkpoint never makes corral import other code unless you say
        you trust it. See :mod:`corral.core.persistence.safe_loading`.

        Args:
            checkpoint_path: the checkpoint folder, or an object with its ``path`` (Ray Tune's
                ``result.checkpoint``).
            env: the environment to use instead of the one the checkpoint names (same spaces).
            config_overrides: config fields to change (e.g. ``{"num_envs_per_env_runner": 1}``).
            callbacks: the callbacks class (or list) to use instead of the checkpoint's.
            trust_code: import what the checkpoint names even if it is not registered
                (an env class path, callbacks, a custom model, an algorithm class), and unpickle
                what the saving script defined itself (stored by value); only for checkpoints you
                trust. A module inside the checkpoint folder is never imported.
            policy_ids: restore only these of the checkpoint's policies (the others are not built).
            policy_mapping_fn: the mapping to use instead of the checkpoint's (one that maps only
                to ``policy_ids``).
            policies_to_train: the policies that learn, instead of the checkpoint's setting
                (whose ids outside ``policy_ids`` are dropped).

        Returns:
            The algorithm, restored.

        Raises:
            CheckpointError: the checkpoint is damaged, names code that is not registered
                (without ``trust_code``), or its algorithm is not installed.
        """
        ckpt = checkpoints.read_checkpoint(checkpoint_path)
        algo_class = algorithm_class_of(ckpt, trust_code)
        overrides = dict(config_overrides or {})
        if env is not None:
            overrides["env"] = env
        if callbacks is not None:
            overrides["callbacks_class"] = callbacks
        if policy_mapping_fn is not None:
            overrides["policy_mapping_fn"] = policy_mapping_fn
        if policies_to_train is not None:
            overrides["policies_to_train"] = policies_to_train
        wanted = None if policy_ids is None else list(policy_ids)
        if wanted is not None:
            overrides.update(_policy_subset(ckpt, wanted, trust_code, keep_to_train=policies_to_train is None))
        algo = algo_class(config=_checkpoint_config(ckpt, algo_class, overrides, trust_code))
        try:
            algo._apply_checkpoint(ckpt, wanted)
        except BaseException:
            algo.stop()
            raise
        return algo

    def _check_not_stopped(self, what: str) -> None:
        if self._stopped:
            raise CorralError(
                f"{what}() on a stopped {self.name}: stop() closed its environments and result files; build a new one, "
                "or load a checkpoint into a new one (Algorithm.from_checkpoint)"
            )

    def stop(self) -> None:
        """Release environments, close result files and stop reading input; train() and evaluate() then refuse."""
        if not self._stopped:
            self.callbacks.algorithm_stop(self)
        self._stopped = True
        if self.experience_input is not None:
            self.experience_input.close()
        self.env_runner_group.stop()
        if self._eval_group is not None:
            self._eval_group.stop()
        if self._learner_pool is not None:
            self._learner_pool.shutdown()
            self._learner_pool = None
        if self._writer is not None:
            self._writer.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(env={env_name(self.config.env)!r}, iteration={self.iteration})"


def _checkpoint_config(
    ckpt: checkpoints.Checkpoint, algo_class: type[Algorithm], overrides: dict[str, Any], trust_code: bool
) -> AlgorithmConfig:
    """The checkpoint's config with ``overrides`` on top; what the overrides replace is never resolved or imported."""
    supplied = set(algo_class.config_class._canonical_keys(overrides))
    check_config_references(ckpt.config, ckpt.folder, trust_code, supplied)
    saved = {k: v for k, v in ckpt.config.items() if LEGACY_KEYS.get(k, k) not in supplied}
    try:
        with by_value.trusted() if trust_code else contextlib.nullcontext():  # objects stored by value unpickle
            config = algo_class.config_class.from_dict(saved)
    except ConfigError as exc:
        raise CheckpointError(f"{ckpt.folder / checkpoints.CONFIG_FILE} is not a valid {algo_class.name} config: {exc}") from None
    return restorable_here(config.update_from_dict(overrides), supplied)


def _class_and_config(
    config: AlgorithmConfig, policy_id: str, default_class: type[Policy]
) -> tuple[type[Policy], AlgorithmConfig]:
    """A policy's class (its spec's, else the algorithm's) and frozen config (the algorithm's, with the spec's options on top)."""
    spec = config.policies.get(policy_id)
    policy_class = spec.policy_class if spec is not None and spec.policy_class is not None else default_class
    return policy_class, policy_config(config, policy_id).freeze() if spec is not None and spec.config else config


def _policy_subset(ckpt: checkpoints.Checkpoint, policy_ids: list[str], trust_code: bool, keep_to_train: bool) -> dict[str, Any]:
    """Config overrides that keep only ``policy_ids`` of a checkpoint's policies (their specs checked like the rest).

    Raises:
        CheckpointError: an id is not one of the checkpoint's policies, or a spec names code not registered.
    """
    stored = ckpt.meta["policies"]
    unknown = [pid for pid in policy_ids if pid not in stored]
    if unknown or not policy_ids:
        raise CheckpointError(f"policy_ids {policy_ids} must name some of the checkpoint's policies: {sorted(stored)}")
    saved_specs = ckpt.config.get("policies") or {}
    subset = {pid: saved_specs.get(pid) if isinstance(saved_specs, dict) else None for pid in policy_ids}
    check_config_references({"policies": subset}, ckpt.folder, trust_code, set())
    overrides: dict[str, Any] = {"policies": subset}
    saved_to_train = ckpt.config.get("policies_to_train")
    if keep_to_train and isinstance(saved_to_train, list):
        overrides["policies_to_train"] = [pid for pid in saved_to_train if pid in policy_ids]
    return overrides


def policy_of_checkpoint(algo_class: type[Algorithm], ckpt: checkpoints.Checkpoint, policy_id: str, trust_code: bool) -> Policy:
    """One policy of an algorithm checkpoint, built alone: no env, no env runners (see :meth:`Policy.from_checkpoint`).

    Args:
        algo_class: the algorithm the checkpoint names (:func:`algorithm_class_of`).
        ckpt: an algorithm checkpoint, read.
        policy_id: the policy to load.
        trust_code: as for :meth:`Algorithm.from_checkpoint` (a custom model or algorithm class by path).

    Returns:
        The policy, with the checkpoint's weights, filter statistics and timestep.

    Raises:
        CheckpointError: the checkpoint is damaged, has no such policy, stores its spaces
            only as descriptions (corral 0.1), or names code that is not registered.
    """
    spaces = ckpt.meta["policies"].get(policy_id)
    if not isinstance(spaces, dict):
        raise CheckpointError(
            f"checkpoint {str(ckpt.folder)!r} has no policy {policy_id!r}; it has {sorted(ckpt.meta['policies'])}"
        )
    try:
        observation_space, action_space = (decode_space(spaces.get(kind), kind) for kind in ("observation_space", "action_space"))
    except ValueError as exc:
        raise CheckpointError(
            f"{ckpt.folder / checkpoints.META_FILE} does not hold policy {policy_id!r}'s spaces exactly ({exc}); "
            "checkpoints of corral 0.1 describe them only: load the whole algorithm with Algorithm.from_checkpoint"
        ) from None
    # One policy needs neither the env, the callbacks nor the multi-agent functions: what the checkpoint names
    # for them is never imported.
    unused: dict[str, Any] = {
        "env": None,
        "callbacks_class": [],
        "policy_mapping_fn": None,
        "policies_to_train": None,
        "observation_fn": None,
    }
    config = _checkpoint_config(ckpt, algo_class, unused, trust_code).freeze()
    policy_class, own_config = _class_and_config(config, policy_id, algo_class.policy_class)
    policy = build_policy(policy_class, observation_space, action_space, own_config, "policy", policy_id, "sampling", 0)
    with _blame(ckpt.folder / "policies" / policy_id / checkpoints.POLICY_FILE):
        policy.set_state(ckpt.policy_states[policy_id])
    return policy


def _stored_space_description(stored: Any) -> Any:
    """The description (:func:`space_to_json`) of a space a checkpoint stores: exactly, or described (corral 0.1)."""
    try:
        return space_to_json(decode_space(stored))
    except ValueError:
        return stored


@contextlib.contextmanager
def _blame(file: Path) -> Iterator[None]:
    """Turn any failure while applying a checkpoint file into a CheckpointError that names the file."""
    try:
        yield
    except CorralError:
        raise
    except Exception as exc:  # a tampered file can make set_state fail in any way
        raise CheckpointError(
            f"{file} does not fit this algorithm: {type(exc).__name__}: {checkpoints._first_line(exc)}"
        ) from exc


def _checkpoint_score(path: Path) -> float:
    """The score a checkpoint was saved with (for pruning); -inf for one without (unscored, or saved before any result)."""
    try:
        value = checkpoints.read_meta(path).get("score", {}).get("value")
    except CorralError:
        return -math.inf
    score = finite_number(value)
    return -math.inf if score is None else score


def _providing_distribution(cls: type) -> tuple[str | None, str | None]:
    import importlib_metadata

    top = cls.__module__.split(".")[0]
    dists = importlib_metadata.packages_distributions().get(top, [])
    if not dists:
        return None, None
    try:
        return dists[0], importlib_metadata.version(dists[0])
    except importlib_metadata.PackageNotFoundError:
        return dists[0], None


def _algorithms_supporting(action_space: gym.Space) -> list[str]:
    """Names of the installed algorithms that act in ``action_space`` (for error messages only: imports them all)."""
    import corral.registry as registry

    names = []
    for info in registry.list_algorithms(check=True):
        if info.status == "ok":
            cls = registry.get_algorithm(info.name, dist=info.dist)
            if isinstance(action_space, getattr(cls, "supported_action_spaces", ())):
                names.append(info.name)
    return sorted(set(names))
