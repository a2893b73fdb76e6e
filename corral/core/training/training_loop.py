"""The blocks a training step is built from, and where an iteration's results go.

``sample()`` fills a train batch from the env runners (or the offline input),
``learn_on_batch()`` updates each policy to train, in learner threads when
several learn at once; ``logdir`` and the result writer hold what ``train()``
reports. Samples and learner stats are keyed by policy id.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any, TypeVar

import torch

from corral.core.common.sample_batch import MultiAgentBatch, SampleBatch
from corral.core.contracts.multi_agent_config import is_policy_to_train
from corral.core.environments.envs import env_name
from corral.core.learning.learners.learner_thread import LearnerThread
from corral.core.learning.policy import Policy
from corral.core.persistence.loggers import (
    NOOP_LOGGERS,
    CustomResultLogger,
    NoopLogger,
    ResultWriter,
    new_experiment_dir,
)
from corral.core.training.part import AlgorithmPart
from corral.errors import TrainingError

logger = logging.getLogger("corral")

Work = TypeVar("Work")
Result = TypeVar("Result")


class TrainingLoop(AlgorithmPart):
    """Part of :class:`~corral.core.training.algorithm.Algorithm` (see the module docstring)."""

    def sample(self, min_env_steps: int | None = None) -> MultiAgentBatch:
        """Sample from the env runners until at least ``min_env_steps`` (default: one sample call).

        With ``offline_data(input_=...)`` the rows come from files instead, or from
        files and the env runners in the proportions asked for (see
        :mod:`corral.integrations.offline.experience_input`).

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
        return is_policy_to_train(self.config, policy_id, batch)

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
        # what on_learn_on_batch callbacks add goes under custom_metrics, as in RLlib
        stats: dict[str, dict[str, Any]] = {pid: {"custom_metrics": {}} for pid, _ in jobs}
        pool = self._learner_threads(jobs)
        if pool is None:
            for policy_id, batch in jobs:
                policy = self.policies[policy_id]  # looked up one at a time: the next lookup may move it to disk
                self.callbacks.learn_on_batch(policy, batch, stats[policy_id]["custom_metrics"])
                self._learn(policy_id, policy, batch, stats[policy_id])
        else:
            policies = {pid: self.policies[pid] for pid, _ in jobs}
            for policy_id, batch in jobs:
                self.callbacks.learn_on_batch(policies[policy_id], batch, stats[policy_id]["custom_metrics"])
            threads = torch.get_num_threads()
            futures = [pool.submit(self._learn_in_thread, threads, pid, policies[pid], batch, stats[pid]) for pid, batch in jobs]
            wait(futures)  # every update ends before one's error is raised
            for future in futures:
                future.result()
        self.counters["num_env_steps_trained"] += samples.env_steps
        self.counters["num_agent_steps_trained"] += samples.agent_steps
        return stats

    def _learn_in_thread(self, threads: int, *args: Any) -> None:
        """:meth:`_learn` in a learner thread, with the main thread's intra-op threads.

        OpenMP keeps its thread count per calling thread: a new thread would
        compute with one per core whatever ``num_torch_threads`` says, and its
        sums would split differently from the main thread's.
        """
        torch.set_num_threads(threads)
        self._learn(*args)

    def _learn(self, policy_id: str, policy: Policy, batch: SampleBatch, result: dict[str, Any]) -> None:
        """One policy's update, its stats added to ``result``; an error names the policy and the iteration."""
        result["num_agent_steps_trained"] = batch.count
        try:
            if self.learner_actors is not None:  # the Learner actors update it; the stats come back with its state
                result.update(self.learner_actors.update(policy_id, self.policy_builds[policy_id], policy, batch))
                return
            result.update(policy.learn_and_report(batch))
        except TrainingError as exc:
            raise exc.located(policy_id, self.iteration + 1) from None

    def learners_keeping_state(self) -> contextlib.AbstractContextManager[None]:
        """A block of many updates in a row, after which the policies catch up with the Learner actors (if any).

        With ``num_learners > 0``, the Learner actors keep each policy's state
        from one update to the next within the block, instead of sending it
        both ways every update (:meth:`~corral.core.learning.learners.learner_group.LearnerGroup.keeping_state`):
        nothing within may read the policies. Without Learner actors, the block changes nothing.

        Returns:
            The context manager.
        """
        if self.learner_actors is None:
            return contextlib.nullcontext()
        return self.learner_actors.keeping_state(lambda policy_id: self.policies[policy_id])

    def _learner_threads(self, jobs: list[tuple[str, SampleBatch]]) -> ThreadPoolExecutor | None:
        """The threads that update these policies at once, or None when they update one after another."""
        threads = self._num_learner_threads
        if (
            self.learner_actors is not None  # its Learners update one policy at a time, all of them together
            or min(threads, len(jobs)) < 2
            or len(jobs) > self.policies.capacity  # each must stay in memory while it learns
            or not all(self.policy_builds[pid].policy_class.thread_safe_learning for pid, _ in jobs)
            or _share_parameters([self.policies[pid] for pid, _ in jobs])  # RLlib's shared-weights models
        ):
            return None
        if self._learner_pool is None:
            self._learner_pool = ThreadPoolExecutor(threads, thread_name_prefix="corral-learner")
        return self._learner_pool

    def start_learner_thread(
        self, update: Callable[[Work], Result], queue_size: int, timeout_s: float
    ) -> LearnerThread[Work, Result]:
        """From now on, updates run in a thread of their own (:class:`LearnerThread`), each verified as it ends.

        The algorithm puts work into :attr:`learner_thread`; ``get_state``,
        ``set_state``, ``evaluate``, ``add_policy`` and ``remove_policy`` wait for
        the queued updates first (:meth:`settle_learning`), and ``stop`` ends the thread.

        Args:
            update: one update (it calls :meth:`learn_on_batch`); it runs in the thread.
            queue_size: items that may wait for the thread.
            timeout_s: how long putting an item waits for room before the run fails.

        Returns:
            The thread, also :attr:`learner_thread`.
        """

        def update_and_verify(work: Work) -> Result:
            result = update(work)
            self._verify_weights()
            return result

        thread = LearnerThread(update_and_verify, queue_size=queue_size, timeout_s=timeout_s)
        self.learner_thread = thread
        return thread

    def settle_learning(self) -> None:
        """Wait until a learner thread has learned on everything queued (at once without one), so the policies hold still.

        Raises:
            BaseException: what an update in the learner thread raised.
        """
        if self.learner_thread is not None:
            self.learner_thread.wait_idle()

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


def _share_parameters(policies: list[Policy]) -> bool:
    """Whether two of these policies' models hold the same parameter (a layer made once and used by both), so
    their updates touch each other's weights and gradients: they cannot run at once."""
    ids = [id(param) for policy in policies for param in policy.model.parameters()]  # each model's are distinct
    return len(ids) != len(set(ids))
