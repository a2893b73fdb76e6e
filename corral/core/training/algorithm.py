"""Algorithm: what every plugin extends; a plugin writes ``setup()`` and ``training_step()``.

This module holds what an algorithm is made of (its config, policies, env
runners, offline input and estimators, built in ``__init__``), ``train()`` (one
iteration: ``training_step()`` at least once, longer if the reporting minimums
ask, then episode metrics, evaluation on schedule, the ``on_train_result``
hook, result files and checkpoints on schedule) and what a plugin overrides.
The rest comes from its parts, a module each, which a reader opens by concern:

- :mod:`~corral.core.training.training_loop`: ``sample()``, ``learn_on_batch()``, where results go;
- :mod:`~corral.core.training.evaluation`: ``evaluate()``;
- :mod:`~corral.core.training.policy_set`: ``get_policy()``, weights, ``add_policy()``/``remove_policy()``, export;
- :mod:`~corral.core.training.checkpointing`: ``save()``, ``restore()``, ``from_checkpoint()``;
- :mod:`~corral.core.training.state`: ``get_state()``, ``set_state()``, ``from_state()``;
- :mod:`~corral.core.learning.acting`: ``compute_single_action()``, ``compute_actions()``;
- :mod:`~corral.core.training.part` types the attributes they share.
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import torch

from corral.core.common.spaces import space_to_json
from corral.core.contracts.callbacks import CallbackRunner, installed_hook_plugins
from corral.core.contracts.config import AlgorithmConfig
from corral.core.contracts.options.input_names import input_creator
from corral.core.contracts.options.resource_request import resource_bundles
from corral.core.contracts.rllib_compat import as_config_of
from corral.core.devices import check_learner_device
from corral.core.environments.envs import env_name
from corral.core.environments.task_settable_env import task_settable
from corral.core.learning.acting import ActionComputation
from corral.core.learning.learners.learner_group import LearnerGroup
from corral.core.learning.learners.learner_group_handle import LearnerGroupHandle
from corral.core.learning.learners.learner_thread import LearnerThread
from corral.core.learning.policy import Policy, PolicyBuild
from corral.core.learning.policy_map import PolicyMap
from corral.core.persistence.loggers import (
    CustomResultLogger,
    ResultWriter,
    default_storage_path,
)
from corral.core.results import learner_info, with_rllib_groups
from corral.core.sampling.env_runner_group import EnvRunnerGroup
from corral.core.sampling.external.external_env_runner import ExternalEnvRunner
from corral.core.sampling.metrics import EpisodeHistory, summarize_episodes
from corral.core.sampling.multi_agent_env_runner import make_env_runner
from corral.core.sampling.system_usage import SystemUsage
from corral.core.seeding import numpy_generator
from corral.core.threads import TorchThreads
from corral.core.training.checkpoint_loading import class_and_config
from corral.core.training.checkpointing import Checkpointing
from corral.core.training.evaluation import Evaluation
from corral.core.training.off_policy_evaluation import check_estimation_integration, off_policy_evaluation_for
from corral.core.training.offline_input import check_offline_integrations, experience_input_for
from corral.core.training.part import COUNTERS
from corral.core.training.training_loop import TrainingLoop
from corral.errors import ConfigError, CorralError, EnvError

logger = logging.getLogger("corral")
ACTION_SPACES = (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.Box, gym.spaces.Tuple, gym.spaces.Dict)


class Algorithm(TrainingLoop, Evaluation, Checkpointing, ActionComputation):
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
    supported_action_spaces: ClassVar[tuple[type[gym.Space[Any]], ...]] = ACTION_SPACES
    """the action-space types the algorithm can act in; any other is refused before training starts (a Tuple or
    Dict of Discrete, MultiDiscrete and Box parts: see :mod:`corral.core.common.actions`)"""
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

    @classmethod
    def default_resource_request(cls, config: AlgorithmConfig | dict[str, Any]) -> Any:
        """What a run of this algorithm with ``config`` reserves on Ray, as RLlib's classmethod gives it.

        Tune reserves it for every trial; a script that builds the algorithm in a
        Tune function of its own passes it on:
        ``tune.with_resources(train_fn, PPO.default_resource_request(config))``.

        Args:
            config: the run's config or its dict; only the resource options are read.

        Returns:
            A ``ray.tune.PlacementGroupFactory``: one bundle for this process, one per remote env
            runner and per Learner actor (:func:`~corral.core.contracts.options.resource_request.resource_bundles`).

        Raises:
            ModuleNotFoundError: Ray is not installed (``pip install 'corral[ray]'``).
        """
        from ray.tune.execution.placement_groups import PlacementGroupFactory  # Ray is an extra

        bundles, strategy = resource_bundles(cls.get_default_config(), config)
        return PlacementGroupFactory(bundles, strategy=strategy)

    def __init__(
        self, config: AlgorithmConfig | dict[str, Any] | None = None, env: Any = None, logger_creator: Any = None
    ) -> None:
        self.config = self._accept_config(config, env)
        self._custom_logger = logger_creator(self.config.to_dict()) if logger_creator is not None else None
        """RLlib's ``logger_creator(config_dict)``: the object given each result in place of corral's files, or None"""
        logger.setLevel(self.config.log_level)
        check_learner_device(self.config)
        check_offline_integrations(self.config)  # before any env is made: what the config asks of an integration
        check_estimation_integration(self.config)
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
        try:
            self.learner_actors = self._start_learners()
            """the Learner actors that update the policies (``learners(num_learners=N)``), or None: this process does"""
            self.learner_group = LearnerGroupHandle(self, self.learner_actors)
            """RLlib's ``algo.learner_group``: ``update_from_batch``, ``get_weights``, ... in this process or on the actors"""
        except BaseException:
            local.stop()
            raise
        reader = local.input_reader if isinstance(local, ExternalEnvRunner) else None  # an input creator's InputReader
        self.experience_input = experience_input_for(self.config, self.policies, reader)
        """where :meth:`sample` takes rows from besides the env runners (``offline_data(input_=...)``), or None"""
        self.off_policy_evaluation = off_policy_evaluation_for(self.config, self.policies)
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
        self.counters: Counter[str] = Counter(dict.fromkeys(COUNTERS, 0))
        """steps sampled and trained, and whatever else an overridden training_step counts (``self._counters``,
        RLlib's name, is the same): each goes into every result, and checkpoints keep them"""
        self.time_total_s = 0.0
        self.history = self.new_episode_history()
        self._learner_pool: ThreadPoolExecutor | None = None
        self.learner_thread: LearnerThread[Any, Any] | None = None
        """the thread the updates run in while the main thread samples, if the algorithm started one
        (:meth:`start_learner_thread`)"""
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        self._num_learner_threads = self.config.num_learner_threads or max(1, cores // torch.get_num_threads())
        self._writer: ResultWriter | CustomResultLogger | None = None
        takes_config = bool(inspect.signature(self.setup).parameters)  # RLlib's setup(self, config) or setup(self)
        self.setup(self.config) if takes_config else self.setup()
        self.callbacks.algorithm_init(self)

    def _start_learners(self) -> LearnerGroup | None:
        """The Learner actors ``num_learners`` asks for, once every policy's class can learn on them.

        Raises:
            ConfigError: a policy's class updates in ways Learners cannot share (``data_parallel_learning``).
        """
        if self.config.num_learners == 0:
            return None
        alone = sorted(
            {
                build.policy_class.__name__
                for build in self.policy_builds.values()
                if not build.policy_class.data_parallel_learning
            }
        )
        if alone:
            raise ConfigError(
                f"learners(num_learners={self.config.num_learners}): {', '.join(alone)} cannot learn on Learner actors "
                "(its class does not set data_parallel_learning); set num_learners=0 "
                "to learn in this process"
            )
        return LearnerGroup(self.config)

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

    def _policy_build(self, policy_id: str, observation_space: gym.Space[Any], action_space: gym.Space[Any]) -> PolicyBuild:
        """How to build policy ``policy_id``: its spec's class or the algorithm's, its own options on the config's.

        Raises:
            ConfigError: the algorithm does not support its action space (naming the policy in a multi-agent run).
        """
        try:
            self.check_action_space(action_space)
        except ConfigError as exc:
            raise ConfigError(f"policy {policy_id!r}: {exc}" if self.config.policies else str(exc)) from None
        policy_class, config = class_and_config(self.config, policy_id, type(self))
        return PolicyBuild(policy_class, observation_space, action_space, config)

    def _runner_config(self, config: AlgorithmConfig) -> AlgorithmConfig:
        """``config`` as env runners get it: ``output="logdir"`` becomes this algorithm's experiment folder.

        ``record_env=True`` becomes the ``videos`` folder in it, and a name given
        to ``register_input`` its creator (remote runners have no registry).
        """
        creator = input_creator(config.input_)
        registered = creator not in (None, config.input_)
        if config.output != "logdir" and config.record_env is not True and not registered:
            return config
        resolved = config.copy()
        resolved.input_ = creator if registered else config.input_
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
    def check_action_space(cls, action_space: gym.Space[Any]) -> None:
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

    def setup(self, config: Any = None) -> None:
        """Build what the algorithm needs beyond policies and env runners. Optional.

        Write it as ``setup(self)`` or, as RLlib's subclasses do, ``setup(self, config)``
        calling ``super().setup(config)``: it is called as it is written.

        Args:
            config: the algorithm's config (:attr:`config`), for a ``setup`` that takes it.
        """

    def new_episode_history(self) -> EpisodeHistory:
        """The window of finished episodes the smoothed metrics read (made at build and on restore).

        By default the last ``metrics_num_episodes_for_smoothing`` episodes; an
        algorithm that reports over another window (ES's last ``report_length``
        iterations) returns its own.
        """
        return EpisodeHistory(self.config.metrics_num_episodes_for_smoothing)

    def training_step(self) -> dict[str, dict[str, Any]]:
        """One round of sampling and learning; returns learner stats by policy id.

        By default a train batch of at least ``total_train_batch_size`` steps (see
        :meth:`sample`) and one ``learn_on_batch``, the loop of PPO and A2C;
        replay-based and asynchronous algorithms override it.
        """
        return self.learn_on_batch(self.sample(self.config.total_train_batch_size))

    def train(self) -> dict[str, Any]:
        """Run one training iteration and return its result dict (see docs/checkpoints.md, "Results").

        Raises:
            CorralError: the algorithm was stopped (:meth:`stop` released what it trains with).
        """
        self._check_not_stopped("train")
        self._torch_threads.update()
        start = time.perf_counter()
        sampled_before, trained_before = self.counters["num_env_steps_sampled"], self.counters["num_env_steps_trained"]
        interval = self.config.evaluation_interval
        evaluate_now = interval is not None and (self.iteration + 1) % interval == 0
        in_parallel = evaluate_now and self.config.evaluation_parallel_to_training and not self.config.custom_evaluation_function
        pending_evaluation = None
        if in_parallel:
            self.callbacks.evaluate_start(self._as_algorithm)
            pending_evaluation = self._start_evaluation()
        # RLlib's dataset_num_iters_per_learner: at least that many updates on input files in an iteration
        updates, min_updates = 0, (self.config.dataset_num_iters_per_learner or 1) if self.experience_input is not None else 1
        while True:
            learner = self.training_step()
            updates += 1
            if self.learner_thread is None:  # a learner thread verifies each update as it ends
                self._verify_weights()
            if pending_evaluation is not None:
                self._evaluation_runners().continue_episodes(pending_evaluation)
            elapsed = time.perf_counter() - start
            enough_time = elapsed >= (self.config.min_time_s_per_iteration or 0)
            enough_steps = (
                self.counters["num_env_steps_sampled"] - sampled_before >= self.config.min_sample_timesteps_per_iteration
                and self.counters["num_env_steps_trained"] - trained_before >= self.config.min_train_timesteps_per_iteration
            )
            if enough_time and enough_steps and updates >= min_updates:
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
            "info": {"learner": learner_info(learner), **self.counters},
        }
        with_rllib_groups(result, self.config.to_dict())
        if self._system_usage is not None:
            result["perf"] = self._system_usage.perf()
        if isinstance(self.env_runner_group.local_env_runner, ExternalEnvRunner):
            dropped = self.env_runner_group.foreach_env_runner(lambda runner: getattr(runner, "episodes_dropped", 0))
            result["external"] = {"episodes_dropped": sum(dropped)}  # since the runners started
        if self.config.env_task_fn is not None:
            function = self.config.env_task_fn
            self.env_runner_group.foreach_env_runner(lambda runner: runner.set_tasks(function, result))
        if evaluate_now:
            result["evaluation"] = self._finish_evaluation(pending_evaluation) if in_parallel else self.evaluate()
            self._last_evaluation = result["evaluation"]
        elif self.config.always_attach_evaluation_results and self._last_evaluation is not None:
            result["evaluation"] = self._last_evaluation
        self.callbacks.train_result(self._as_algorithm, result)
        self._last_result = result
        self._result_writer().write(result)
        frequency = self.config.checkpoint_frequency
        if frequency and self.iteration % frequency == 0:
            self.save()
        return result

    @property
    def _counters(self) -> Counter[str]:
        """RLlib's name for :attr:`counters`, which an overridden ``training_step`` adds to
        (``self._counters["num_env_steps_sampled"] += batch.env_steps``)."""
        return self.counters

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
        if self.learner_thread is not None:
            self.learner_thread.stop()
        if self.learner_actors is not None:
            self.learner_actors.stop()
        if self._writer is not None:
            self._writer.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(env={env_name(self.config.env)!r}, iteration={self.iteration})"


def _algorithms_supporting(action_space: gym.Space[Any]) -> list[str]:
    """Names of the installed algorithms that act in ``action_space`` (for error messages only: imports them all)."""
    import corral.registry as registry

    names = []
    for info in registry.list_algorithms(check=True):
        if info.status == "ok":
            cls = registry.get_algorithm(info.name, dist=info.dist)
            if isinstance(action_space, getattr(cls, "supported_action_spaces", ())):
                names.append(info.name)
    return sorted(set(names))
