"""The replay training loop every off-policy algorithm shares.

The loop: sample a fragment, turn it into n-step transitions, store them in a
replay buffer per policy id, and once ``learning_starts`` env steps were
sampled, replay ``training_intensity`` rows per sampled env step in minibatches
of ``train_batch_size``, updating priorities and target networks as
configured. DQN and SAC subclass :class:`OffPolicyAlgorithm`; their config and
policy bases are in :mod:`corral.core.learning.off_policy`, re-exported here so
that a plugin imports the three from one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import numpy as np

from corral.core.common.restored import restored_count, restored_float
from corral.core.common.sample_batch import MultiAgentBatch, SampleBatch
from corral.core.learning.off_policy import OffPolicyConfig as OffPolicyConfig, OffPolicyPolicy as OffPolicyPolicy
from corral.core.learning.policies.target_networks import update_target as update_target
from corral.core.learning.policy import Policy
from corral.core.learning.replay.replay_buffers import (
    ReplayBuffer,
    check_replay_buffer_config,
    make_replay_buffer,
    replay_row_bytes,
)
from corral.core.learning.schedules import linear_schedule
from corral.core.memory import check_fits
from corral.core.seeding import int_seed
from corral.core.training.algorithm import Algorithm
from corral.core.training.offline_input import SAMPLER
from corral.errors import ConfigError


class OffPolicyAlgorithm(Algorithm):
    """The replay training loop; subclasses set ``config_class`` and ``policy_class``."""

    config_class = OffPolicyConfig
    config: OffPolicyConfig

    def setup(self, config: Any = None) -> None:
        """One replay buffer per policy id."""
        if not isinstance(self.config, OffPolicyConfig):
            raise ConfigError(f"{type(self).__name__} needs a config derived from OffPolicyConfig")
        for policy in self.policies.values():
            self._check_replay_memory(policy)
        self.replay_buffers: dict[str, ReplayBuffer] = {pid: self._new_replay_buffer(pid) for pid in self.policies}
        self._replay_owed = 0.0
        self._last_target_update = 0
        cfg = self.config
        self._beta = linear_schedule(
            cfg.prioritized_replay_beta, cfg.final_prioritized_replay_beta, cfg.prioritized_replay_beta_annealing_timesteps
        )

    def _new_replay_buffer(self, policy_id: str) -> ReplayBuffer:
        seed = self.config.seed
        return make_replay_buffer(self.config.replay_buffer_config, None if seed is None else int_seed(seed, "replay", policy_id))

    def policy_added(self, policy_id: str) -> None:
        """The new policy gets its own replay buffer (checked to fit in memory first)."""
        self._check_replay_memory(self.policies[policy_id])
        self.replay_buffers[policy_id] = self._new_replay_buffer(policy_id)

    def policy_removed(self, policy_id: str) -> None:
        """The removed policy's replay buffer goes with it."""
        self.replay_buffers.pop(policy_id, None)

    def _check_replay_memory(self, policy: Policy) -> None:
        """Refuse a replay capacity whose rows cannot fit in memory (the buffer is allocated at the first sample)."""
        _, options = check_replay_buffer_config(self.config.replay_buffer_config)
        obs = (policy.preprocessor.shape, policy.preprocessor.dtype)
        action_space = policy.action_adapter.policy_space
        # the policy acts in a Discrete, MultiDiscrete or Box space, which always has a shape and a dtype
        action_shape, action_dtype = cast(tuple[int, ...], action_space.shape), cast(np.dtype, action_space.dtype)
        columns = {
            SampleBatch.OBS: obs,
            SampleBatch.NEXT_OBS: obs,
            SampleBatch.ACTIONS: (action_shape, np.int64 if action_dtype.kind in "iu" else np.float32),
            "rewards, discounts, priorities and flags": ((), np.dtype("V32")),
        }
        rows = options["capacity"]
        steps = _row_steps(policy)
        if steps > 1:  # a sequence's next observations are its own
            del columns[SampleBatch.NEXT_OBS]
        row_bytes = replay_row_bytes(columns) * steps
        check_fits(
            f"the replay buffer ({rows:,} rows of {row_bytes} bytes)",
            rows * row_bytes,
            "lower replay_buffer_config['capacity']",
        )

    def training_step(self) -> dict[str, dict[str, Any]]:
        """Sample, store, and replay at the configured ratio once learning has started."""
        cfg = self.config
        samples = self.sample()
        for pid, batch in samples.policy_batches.items():
            # the others act with their weights and learn nothing; a policy removed meanwhile has no buffer
            if pid in self.replay_buffers and self.is_policy_to_train(pid, batch):
                self.replay_buffers[pid].add(batch)
        sampled = self.counters["num_env_steps_sampled"]
        if sampled < cfg.learning_starts:
            return {}
        if cfg.training_intensity is not None:
            self._replay_owed += samples.env_steps * cfg.training_intensity / cfg.total_train_batch_size
        elif self.experience_input is not None and not (isinstance(cfg.input_, Mapping) and SAMPLER in cfg.input_):
            # RLlib's native ratio for rows read (a file or a reader, not sampled): one update per train batch read
            self._replay_owed += samples.env_steps / cfg.total_train_batch_size
        else:  # RLlib's native ratio; corral samples 'auto' fragments in bigger calls, but replays as often
            fragment = 1 if cfg.rollout_fragment_length == "auto" else cfg.rollout_fragment_length
            self._replay_owed += samples.env_steps / (fragment * self.env_runner_group.num_sampling_envs)
        updates, self._replay_owed = int(self._replay_owed), self._replay_owed - int(self._replay_owed)
        stats: dict[str, dict[str, Any]] = {}
        with self.learners_keeping_state():  # Learner actors keep the state from one replayed update to the next
            for _ in range(updates):
                stats = self._replay_once()
                if cfg.tau < 1.0:
                    self._update_targets(cfg.tau)
            if cfg.tau >= 1.0 and sampled - self._last_target_update >= cfg.target_network_update_freq:
                self._update_targets(1.0)
                self._last_target_update = sampled
        return stats

    def _update_targets(self, tau: float) -> None:
        """Update the target networks of the policies that learn from replay.

        A policy that does not learn (a frozen opponent, a RandomPolicy) has an empty
        buffer and is left alone: its weights do not move, so neither would its
        target, and it stays on disk if ``policy_map_capacity`` put it there. Each
        policy is updated as soon as it is looked up: looking up the next one may
        move it to disk.
        """
        for policy_id, buffer in self.replay_buffers.items():
            policy = self.policies[policy_id] if len(buffer) else None
            if not isinstance(policy, OffPolicyPolicy):
                continue
            if self.learner_actors is None:
                policy.update_targets(tau)
            else:  # on the copy that is newest: the Learners' within a training step
                self.learner_actors.call(policy_id, policy, OffPolicyPolicy.update_targets, tau)

    def _replay_once(self) -> dict[str, dict[str, Any]]:
        beta = self._beta(self.counters["num_env_steps_sampled"])
        batches = {pid: self._replayed(pid, buffer, beta) for pid, buffer in self.replay_buffers.items() if len(buffer)}
        stats = self.learn_on_batch(MultiAgentBatch(batches, self.config.total_train_batch_size))
        for pid, policy_stats in stats.items():
            td_error = policy_stats.pop(OffPolicyPolicy.TD_ERROR, None)
            if td_error is not None:
                self.replay_buffers[pid].update_priorities(batches[pid][SampleBatch.BATCH_INDEXES], np.abs(td_error))
        return stats

    def _replayed(self, policy_id: str, buffer: ReplayBuffer, beta: float) -> SampleBatch:
        """A replayed minibatch of ``train_batch_size`` env steps: that many rows, or sequences until they hold as many.

        As RLlib's replay of sequences does, sequences (a row of up to
        ``replay_row_steps`` steps, ``seq_lens`` each) are drawn until their steps
        add up to at least ``train_batch_size``.
        """
        steps = _row_steps(self.policies[policy_id])
        wanted = self.config.total_train_batch_size
        if steps == 1:
            return buffer.sample(wanted, beta=beta)
        drawn: list[SampleBatch] = []
        held = 0
        while held < wanted:
            batch = buffer.sample(max(1, -(-(wanted - held) // steps)), beta=beta)  # at least enough full sequences
            drawn.append(batch)
            held += int(batch[SampleBatch.SEQ_LENS].sum())
        return SampleBatch.concat(drawn)

    def get_state(self) -> dict[str, Any]:
        """The base state plus the replay schedule's bookkeeping."""
        return {**super().get_state(), "replay_owed": self._replay_owed, "last_target_update": self._last_target_update}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore the base state and the replay bookkeeping."""
        replay_owed = restored_float(state.get("replay_owed", 0.0), "replay_owed", minimum=0.0)
        last_target_update = restored_count(state.get("last_target_update", 0), "last_target_update")
        super().set_state(state)
        self._replay_owed, self._last_target_update = replay_owed, last_target_update

    def get_checkpoint_arrays(self) -> dict[str, dict[str, np.ndarray]]:
        """The replay buffers, if ``save_replay_buffer``."""
        if not self.config.save_replay_buffer:
            return {}
        return {f"replay_buffer_{pid}": buffer.get_state() for pid, buffer in self.replay_buffers.items()}

    def set_checkpoint_arrays(self, arrays: dict[str, dict[str, np.ndarray]]) -> None:
        """Refill the replay buffers saved in the checkpoint (each checked against this algorithm's spaces first)."""
        for pid, buffer in self.replay_buffers.items():
            if f"replay_buffer_{pid}" in arrays:
                policy = self.policies[pid]
                steps = _row_steps(policy)
                lead = (steps,) if steps > 1 else ()  # a row of sequences holds its steps
                shapes = {
                    SampleBatch.OBS: (*lead, *policy.preprocessor.shape),
                    SampleBatch.ACTIONS: (*lead, *cast(tuple[int, ...], policy.action_adapter.policy_space.shape)),
                }
                if not lead:
                    shapes[SampleBatch.NEXT_OBS] = policy.preprocessor.shape
                buffer.set_state(arrays[f"replay_buffer_{pid}"], expected_shapes=shapes)


def _row_steps(policy: Policy) -> int:
    """Env steps in one of a policy's replay rows: more than one where a row is a sequence (R2D2's)."""
    return policy.replay_row_steps if isinstance(policy, OffPolicyPolicy) else 1
