"""Ape-X DQN (Horgan et al., 2018): many exploring env runners, sharded prioritized replay, one learner thread.

With remote env runners, everything runs at once:

- every runner samples with its own constant epsilon
  (``PerWorkerEpsilonGreedy``) and computes its rows' initial replay
  priorities itself (``worker_side_prioritization``); it has up to
  ``max_requests_in_flight_per_env_runner`` sample calls queued;
- each batch that comes back goes to a replay shard drawn at random, a Ray
  actor holding a slice of the capacity;
- once ``learning_starts`` steps were sampled, shards are asked for
  ``training_intensity`` replayed rows per sampled step, in batches of
  ``train_batch_size``; their answers queue for the learner thread, which
  learns on them (copying the target network every
  ``target_network_update_freq`` trained steps) while the main thread sends
  the new priorities back to the shard each batch came from;
- the runners get the learner's newest weights once they sampled
  ``max_weight_sync_delay`` steps each, on average, since the last weights.

Results cover the episodes of the lowest-epsilon third of the runners (at
least one): the others explore too much to show what was learned (RLlib
reports the same runners). Without remote runners the same steps run one
after another in this process: sample, store in a shard, replay, learn.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from corral.core import AsyncSampler, MultiAgentBatch, SampleBatch, restored_count
from corral.core.learning.off_policy import OffPolicyPolicy
from corral.core.learning.schedules import linear_schedule
from corral.plugins.dqn.algorithm import DQN
from corral.plugins.dqn.config import ApexDQNConfig
from corral.plugins.dqn.replay_shards import Priorities, ReplayShards, row_shapes

LEARNER_QUEUE_SIZE = 16
"""replayed batches that may wait for the learner thread (RLlib's DQN learner thread holds as many)"""
LEARNER_QUEUE_TIMEOUT_S = 300.0
"""how long the main thread waits for room in that queue before the run fails"""

Work = tuple[int, MultiAgentBatch]
"""a replayed batch and the index of the shard it came from"""
Update = tuple[int, Priorities, dict[str, dict[str, Any]]]
"""the shard's index, the batch's new priorities, the update's stats"""


def metrics_runner_ids(num_runners: int) -> set[int]:
    """The runners whose episodes are reported: the lowest-epsilon third (the highest indexes), at least one.

    Args:
        num_runners: the remote env runners (1..N).

    Returns:
        Their indexes.
    """
    return set(range(num_runners - max(1, num_runners // 3) + 1, num_runners + 1))


class ApexDQN(DQN):
    """Distributed prioritized replay (RLlib's ``APEX``): DQN's loss fed by many runners through replay shards."""

    name = "APEX"  # RLlib's registered name, which checkpoints record
    config_class = ApexDQNConfig
    config: ApexDQNConfig

    def setup(self, config: Any = None) -> None:
        """The replay shards; with remote runners, asynchronous sampling and the learner thread."""
        cfg = self.config
        for policy in self.policies.values():
            self._check_replay_memory(policy)
        self.replay_buffers = {}  # the rows live in the shards
        self._replay_owed = 0.0
        self._last_target_update = 0  # num_env_steps_trained at the last hard copy (RLlib counts trained steps here)
        self._beta = linear_schedule(
            cfg.prioritized_replay_beta, cfg.final_prioritized_replay_beta, cfg.prioritized_replay_beta_annealing_timesteps
        )
        group = self.env_runner_group
        runners = group.num_healthy_remote_runners
        shards = cfg.num_replay_buffer_shards
        shard_config = {**cfg.replay_buffer_config, "capacity": cfg.replay_buffer_config["capacity"] // shards}
        self.shards = ReplayShards(shards, shard_config, runners > 0, cfg.seed)
        self.num_updates = 0
        self.sampler: AsyncSampler | None = None
        self._weights_copy: tuple[int, dict[str, Any]] | None = None  # taken by the learner thread when asked for
        self._weights_wanted = False
        self._sampled_since_weights = 0
        self._last_stats: dict[str, dict[str, Any]] = {}
        if runners:
            in_flight = cfg.max_requests_in_flight_per_env_runner
            self.sampler = AsyncSampler(group, in_flight, runners * in_flight)
            self.sampler.metrics_runners = metrics_runner_ids(cfg.num_env_runners)
            self.sampler.publish_weights(group.sampling_state(), self.num_updates)
            self.start_learner_thread(self._update, LEARNER_QUEUE_SIZE, LEARNER_QUEUE_TIMEOUT_S)

    def training_step(self) -> dict[str, dict[str, Any]]:
        """Store what was sampled, ask the shards for replays, learn on those that came back, send priorities back.

        Returns:
            The stats of the last update that finished (with the learner queue's length), or {} before any.
        """
        for batch in self._sampled():
            stored = {pid: rows for pid, rows in batch.policy_batches.items() if self._stores(pid, rows)}
            self.shards.add(MultiAgentBatch(stored, batch.env_steps))
            self._request_replays(batch.env_steps)
        thread = self.learner_thread
        updates: list[Update] = []
        for work in self.shards.replayed():
            if thread is None:
                updates.append(self._update(work))
            else:
                thread.put(work)
        if thread is not None:
            updates = thread.finished()
            self._send_weights()
        for shard, priorities, _ in updates:
            self.shards.update_priorities(shard, priorities)
        if updates:
            self._last_stats = updates[-1][2]
        stats = self._last_stats
        queue = {
            "learner_queue_size": thread.queued if thread is not None else 0,
            "replay_shard_failures": self.shards.failed_calls,
        }
        return {pid: {**policy_stats, **queue} for pid, policy_stats in stats.items()}

    def _sampled(self) -> list[MultiAgentBatch]:
        """The batches the remote runners finished (waiting for one), or one sampled here; counted as sampled."""
        if self.sampler is None:
            return [self.sample()]
        batches = [result.batch for result, _ in self.sampler.next_results()]
        for batch in batches:
            self.count_sampled(batch)
        return batches

    def _stores(self, policy_id: str, rows: SampleBatch) -> bool:
        """Whether a policy's sampled rows go to replay: it learns, and was not removed while they were on the way."""
        return policy_id in self.policies and self.is_policy_to_train(policy_id, rows)

    def _request_replays(self, sampled_steps: int) -> None:
        """Owe ``training_intensity`` replayed rows per sampled step once learning started; ask for the whole batches owed."""
        cfg = self.config
        self._sampled_since_weights += sampled_steps
        if self.counters["num_env_steps_sampled"] < cfg.learning_starts:
            return
        intensity = cfg.training_intensity or 1.0  # RLlib's Ape-X replays one row per sampled step without one
        self._replay_owed += sampled_steps * intensity / cfg.total_train_batch_size
        limit = cfg.max_requests_in_flight_per_replay_worker
        if limit is not None:  # as RLlib's: calls beyond the limit are not made, nor owed later
            room = limit * len(self.shards.shards) - self.shards.replays_in_flight
            self._replay_owed = max(0.0, min(self._replay_owed, room))
        count = int(self._replay_owed)
        if count > 0:
            self._replay_owed -= count
            self.shards.request_replays(count, cfg.total_train_batch_size, self._beta(self.counters["num_env_steps_sampled"]))

    def _update(self, work: Work) -> Update:
        """Learn on a replayed batch (in the learner thread, if there is one) and update the target networks as due."""
        shard, batch = work
        stats = self.learn_on_batch(batch)
        priorities: Priorities = {}
        for pid, policy_stats in stats.items():
            td_error = policy_stats.pop(OffPolicyPolicy.TD_ERROR, None)
            if td_error is not None:
                priorities[pid] = (batch.policy_batches[pid][SampleBatch.BATCH_INDEXES], td_error)
        self.num_updates += 1
        cfg = self.config
        trained = self.counters["num_env_steps_trained"]
        if cfg.tau < 1.0 or trained - self._last_target_update >= cfg.target_network_update_freq:
            for pid in stats:
                policy = self.policies[pid]
                if isinstance(policy, OffPolicyPolicy):
                    policy.update_targets(cfg.tau)
            if cfg.tau >= 1.0:
                self._last_target_update = trained
        if self._weights_wanted:
            self._weights_copy = (self.num_updates, self.get_weights())
            self._weights_wanted = False
        return shard, priorities, stats

    def _send_weights(self) -> None:
        """Once the runners sampled ``max_weight_sync_delay`` steps each since their weights: ask the thread for a
        copy after its next update, and publish a copy it took."""
        sampler = self.sampler
        if sampler is None:
            return
        copied = self._weights_copy
        if copied is not None and copied[0] > sampler.weights_version:
            sampler.publish_weights(self.env_runner_group.sampling_state(weights=copied[1]), copied[0])
            self._weights_copy = None
            self._sampled_since_weights = 0
        runners = max(1, self.env_runner_group.num_healthy_remote_runners)
        if self._sampled_since_weights >= self.config.max_weight_sync_delay * runners and self._weights_copy is None:
            self._weights_wanted = True

    def policy_added(self, policy_id: str) -> None:
        """A new policy's rows go to the shards like the others' (checked to fit in memory first)."""
        self._check_replay_memory(self.policies[policy_id])

    def policy_removed(self, policy_id: str) -> None:
        """The shards forget a removed policy's rows."""
        self.shards.each("remove_policy", policy_id)

    def get_state(self) -> dict[str, Any]:
        """The off-policy state and the learner's update count."""
        return {**super().get_state(), "num_updates": self.num_updates}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore; remote runners act with the restored weights from their next calls."""
        num_updates = restored_count(state.get("num_updates", 0), "num_updates")
        super().set_state(state)
        self.num_updates = num_updates
        if self.sampler is not None:
            self.sampler.publish_weights(self.env_runner_group.sampling_state(), num_updates)

    def get_checkpoint_arrays(self) -> dict[str, dict[str, np.ndarray]]:
        """Every shard's buffers, if ``save_replay_buffer``."""
        if not self.config.save_replay_buffer:
            return {}
        return {
            f"replay_shard_{index}_{pid}": arrays
            for index, shard_state in enumerate(self.shards.each("get_state"))
            for pid, arrays in shard_state.items()
        }

    def set_checkpoint_arrays(self, arrays: dict[str, dict[str, np.ndarray]]) -> None:
        """Refill the shards saved in the checkpoint (a checkpoint with fewer shards fills the first ones)."""
        shapes = {pid: row_shapes(self.policies[pid]) for pid in self.policies}
        for index in range(len(self.shards.shards)):
            prefix = f"replay_shard_{index}_"
            state = {key[len(prefix) :]: value for key, value in arrays.items() if key.startswith(prefix)}
            if state:
                self.shards.call(index, "set_state", state, shapes)

    def stop(self) -> None:
        """Stop as every algorithm does, and end the replay shards."""
        super().stop()
        self.shards.stop()
