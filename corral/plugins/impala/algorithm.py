"""The IMPALA algorithm: sample sequences, learn on them with V-trace corrections.

In one process it samples, then learns, in turn. With remote env runners it
is asynchronous: the runners keep sampling with the weights they last got
while the learner takes batches as they arrive, so a batch may come from a
policy several updates old; V-trace corrects for that.
"""

from __future__ import annotations

from typing import Any

from corral.core import PLUGIN_API_VERSION, Algorithm, AsyncSampler, restored_count
from corral.plugins.impala.config import IMPALAConfig
from corral.plugins.impala.policy import IMPALAPolicy


class IMPALA(Algorithm):
    """Importance-weighted actor-learner: V-trace corrects for sequences sampled with older weights."""

    config_class = IMPALAConfig
    config: IMPALAConfig
    policy_class = IMPALAPolicy
    corral_api = PLUGIN_API_VERSION
    sample_whole_fragments = True  # V-trace learns on sequences of one length

    def setup(self) -> None:
        """Start asynchronous sampling when there are remote runners."""
        self.num_updates = 0  # the learner's weights version: how many updates it has made
        self.sampler: AsyncSampler | None = None
        if self.env_runner_group.num_healthy_remote_runners:
            cfg = self.config
            self.sampler = AsyncSampler(self.env_runner_group, cfg.max_requests_in_flight_per_env_runner, cfg.learner_queue_size)
            self._broadcast()

    def training_step(self) -> dict[str, dict[str, Any]]:
        """One update on the next ``train_batch_size`` env steps: sampled just now, or as they arrived."""
        if self.sampler is None:
            stats = super().training_step()
            self.num_updates += 1
            return stats
        batch, versions = self.sampler.next_batch(self.config.total_train_batch_size)
        self.count_sampled(batch)
        stats = self.learn_on_batch(batch)
        lags = [self.num_updates - version for version in versions]
        self.num_updates += 1
        if self.num_updates % self.config.broadcast_interval == 0:
            self._broadcast()
        queue = {
            "policy_lag_mean": sum(lags) / len(lags),
            "policy_lag_max": max(lags),
            "learner_queue_size": self.sampler.queued_batches,
            "requests_in_flight": self.sampler.requests_in_flight,
        }
        return {pid: {**policy_stats, **queue} for pid, policy_stats in stats.items()}

    def _broadcast(self) -> None:
        assert self.sampler is not None
        self.sampler.publish_weights(self.env_runner_group.sampling_state(), self.num_updates)

    def get_state(self) -> dict[str, Any]:
        """The base state and the learner's update count."""
        return {**super().get_state(), "num_updates": self.num_updates}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore, and send the restored weights to the remote runners with their next calls."""
        num_updates = restored_count(state.get("num_updates", 0), "num_updates")
        super().set_state(state)
        self.num_updates = num_updates
        if self.sampler is not None:
            self._broadcast()
