"""The IMPALA algorithm: sample sequences, learn on them with V-trace corrections.

With remote env runners sampling is asynchronous: the runners keep
sampling with the weights they last got while the learner takes batches as
they arrive, so a batch may come from a policy several updates old; V-trace
corrects for that.

The updates run in a learner thread (``learner_thread``, on by default as in
RLlib), so learning overlaps sampling. With remote runners the main thread
collects their batches into the learner queue and sends out the weights the
thread copied after every ``broadcast_interval``-th update. In one process
the main thread samples the next batch while the thread learns on the last
one: the env runner acts with a copy of each policy's model holding the
weights from before that update, so a batch is sampled with weights one
update old (``broadcast_interval`` updates old, at most, with a larger
interval) and a seed gives the same run every time. Without the thread,
sampling and learning take turns.
"""

from __future__ import annotations

import contextlib
import copy
import logging
from typing import Any

import torch

from corral.core import PLUGIN_API_VERSION, Algorithm, AsyncSampler, LearnerThread, MultiAgentBatch, restored_count
from corral.plugins.impala.config import IMPALAConfig
from corral.plugins.impala.policy import IMPALAPolicy

logger = logging.getLogger("corral")

Weights = dict[str, dict[str, Any]]
Work = tuple[MultiAgentBatch, list[int], dict[str, int]]
"""a train batch, the weights version of each sample call in it, and each policy's timestep when it was handed over"""


class IMPALA(Algorithm):
    """Importance-weighted actor-learner: V-trace corrects for sequences sampled with older weights."""

    config_class = IMPALAConfig
    config: IMPALAConfig
    policy_class = IMPALAPolicy
    corral_api = PLUGIN_API_VERSION
    sample_whole_fragments = True  # V-trace learns on sequences of one length

    def setup(self, config: Any = None) -> None:
        """Start asynchronous sampling when there are remote runners, and the learner thread."""
        cfg = self.config
        self.num_updates = 0  # the learner's weights version: how many updates it has made
        self._weights_copy: tuple[int, Weights] | None = None  # (version, weights), copied after an update
        self._acting_models: dict[str, Any] = {}  # in one process with a learner thread: the copies that act
        self._acting_version = 0  # the weights version they hold
        self._batch_ahead = False  # a batch sampled here is in the learner thread (or learned on, unreported)
        self._last_stats: dict[str, dict[str, Any]] = {}
        self.sampler: AsyncSampler | None = None
        if self.env_runner_group.num_healthy_remote_runners:
            self.sampler = AsyncSampler(self.env_runner_group, cfg.max_requests_in_flight_per_env_runner, cfg.learner_queue_size)
            self.sampler.publish_weights(self.env_runner_group.sampling_state(), self.num_updates)
        if not cfg.learner_thread:
            return
        if len(self.policies) > self.policies.capacity:
            logger.info(
                "learner_thread=True: %d policies do not fit policy_map_capacity=%d, and a learner thread needs them "
                "all in memory; learning between sample calls instead", len(self.policies), self.policies.capacity,
            )  # fmt: skip
            return
        # One train batch waits for the thread: in one process the next is sampled meanwhile; with remote
        # runners, the learner queue of their batches (learner_queue_size) is the sampler's, as without it.
        self.start_learner_thread(self._update, 1, cfg.learner_queue_timeout)

    def training_step(self) -> dict[str, dict[str, Any]]:
        """Learn on one train batch of ``train_batch_size`` env steps: sampled just now, or as they arrived.

        Returns the stats of the last update that finished. In one process with
        the learner thread, that is this step's update, of the batch sampled in
        the step before (the first step samples two); with remote runners, the
        newest one finished, the first waited for.
        """
        thread = self.learner_thread
        if thread is None:
            stats = self._update(self._next_batch())
        elif self.sampler is None:
            stats = self._pipelined_step(thread)
        else:
            self._send_weights()  # the newest weights go with the sample calls next_batch starts
            thread.put(self._next_batch())
            finished = thread.finished()
            if not finished and not self._last_stats:  # before the first update ends: wait, so results have its stats
                thread.wait_idle()
                finished = thread.finished()
            stats = finished[-1] if finished else self._last_stats
        self._last_stats = stats
        self._send_weights()
        if self.sampler is not None:
            queue = {"learner_queue_size": self.sampler.queued_batches, "requests_in_flight": self.sampler.requests_in_flight}
        else:
            queue = {"learner_queue_size": thread.queued if thread is not None else 0}
        return {pid: {**policy_stats, **queue} for pid, policy_stats in stats.items()}

    def _next_batch(self) -> Work:
        """A train batch, the weights versions it was sampled with, and the policies' timesteps after it.

        From the remote runners, or sampled here; here with a learner thread,
        each policy acts with its acting copy.
        """
        total = self.config.total_train_batch_size
        if self.sampler is not None:
            batch, versions = self.sampler.next_batch(total)
            self.count_sampled(batch)
        elif self.learner_thread is None:
            batch, versions = self.sample(total), [self.num_updates]
        else:
            with contextlib.ExitStack() as acting:
                for pid, model in self._acting_models.items():
                    if pid in self.policies:
                        acting.enter_context(self.policies[pid].acting_with(model))
                batch, versions = self.sample(total), [self._acting_version]
        return batch, versions, {pid: policy.global_timestep for pid, policy in self.policies.loaded().items()}

    def _pipelined_step(self, thread: LearnerThread[Work, dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
        """In one process: sample the next batch while the thread learns on the last, then hand it over.

        The acting copies take the weights between two updates, so the next
        batch is sampled with weights one update older than the learner's.
        """
        if not self._batch_ahead:  # a fresh pipeline: the first batch goes to the thread before the next is sampled
            self._refresh_acting_models()
            thread.put(self._next_batch())
        work = self._next_batch()
        thread.wait_idle()
        done = thread.finished()  # taken while the thread is idle: the update of the batch handed over last
        self._refresh_acting_models()
        thread.put(work)
        self._batch_ahead = True
        # Empty only where the pipeline was started afresh meanwhile (which drops unreported stats): the last ones stand.
        return done[-1] if done else self._last_stats

    def _update(self, work: Work) -> dict[str, dict[str, Any]]:
        """One update on a batch (see :meth:`_next_batch`); in the learner thread if there is one.

        Schedules read the timesteps the batch was handed over at, however far sampling went on meanwhile.
        """
        batch, versions, timesteps = work
        lags = [self.num_updates - version for version in versions]
        with contextlib.ExitStack() as pinned:
            for pid, timestep in timesteps.items():
                if pid in self.policies:
                    pinned.enter_context(self.policies[pid].timestep_pinned(timestep))
            stats = self.learn_on_batch(batch)
        self.after_update(stats)
        self.num_updates += 1
        sends_weights = self.sampler is not None or self.learner_thread is not None
        if sends_weights and self.num_updates % self.config.broadcast_interval == 0:
            self._weights_copy = (self.num_updates, self.get_weights())
        lag = {"policy_lag_mean": sum(lags) / len(lags), "policy_lag_max": max(lags)}
        return {pid: {**policy_stats, **lag} for pid, policy_stats in stats.items()}

    def after_update(self, stats: dict[str, dict[str, Any]]) -> None:
        """What follows each update, where the update ran (APPO updates its target networks here).

        Args:
            stats: the update's learner stats by policy id.
        """

    def _refresh_acting_models(self) -> None:
        """In one process, with the learner thread idle: the acting copies take the newest copied weights.

        A policy without a copy (the first batch, or one added since) gets one of its weights as they are.
        """
        copied = self._weights_copy
        if copied is not None:
            self._acting_version = copied[0]
        for pid, policy in self.policies.items():
            if pid not in self._acting_models:
                self._acting_models[pid] = copy.deepcopy(policy.model).requires_grad_(False)
            elif copied is not None and pid in copied[1]:
                weights = copied[1][pid]
                self._acting_models[pid].load_state_dict({k: torch.as_tensor(v) for k, v in weights.items()})

    def _send_weights(self) -> None:
        """With remote runners: the newest copied weights go out with the next sample calls."""
        copied = self._weights_copy
        if self.sampler is None or copied is None or copied[0] <= self.sampler.weights_version:
            return
        self.sampler.publish_weights(self.env_runner_group.sampling_state(weights=copied[1]), copied[0])

    def get_state(self) -> dict[str, Any]:
        """The base state and the learner's update count.

        In one process with the learner thread, the pipeline starts afresh
        afterwards, as it does after :meth:`set_state`: the run goes on as one
        restored from this state would, bit for bit.
        """
        state = {**super().get_state(), "num_updates": self.num_updates}
        self._fresh_pipeline()
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore, and act (in this process, or on the remote runners with their next calls) with the restored weights."""
        num_updates = restored_count(state.get("num_updates", 0), "num_updates")
        super().set_state(state)
        self.num_updates = num_updates
        if self.sampler is not None:
            self._weights_copy = (num_updates, self.get_weights())
            self.sampler.publish_weights(self.env_runner_group.sampling_state(weights=self._weights_copy[1]), num_updates)
        self._fresh_pipeline()

    def _fresh_pipeline(self) -> None:
        """In one process with the learner thread, idle: start the pipeline again from the policies' weights.

        The stats of an update not yet reported are dropped; the next step samples a batch ahead again.
        """
        if self.sampler is not None or self.learner_thread is None:
            return
        self.learner_thread.finished()
        self._batch_ahead = False
        self._weights_copy = None  # the new copies take the policies' weights as they are
        self._acting_version = self.num_updates
        self._acting_models.clear()
        self._refresh_acting_models()
