"""The A3C algorithm: env runners compute gradients on their own samples; the learner applies them as they arrive.

RLlib's A3C on remote env runners: every runner has one call in flight,
which samples a fragment with the weights the runner last got and returns
the gradients of the actor-critic loss on it, not the samples. Each training
step applies every result that has arrived, one after another, each an
optimizer step of its own; the runners whose results were applied get the
new weights with their next call. A runner's gradients are thus computed
with weights a few updates old (``policy_lag`` in the stats says how many),
which A3C tolerates. Without remote runners the learner samples one call
itself and makes the same update.
"""

from __future__ import annotations

from typing import Any

from corral.core import PLUGIN_API_VERSION, Algorithm, AsyncSampler, restored_count
from corral.core.learning.learners.learner_group import mean_stats
from corral.plugins.a3c.config import A3CConfig
from corral.plugins.a3c.policy import A3CPolicy


class A3C(Algorithm):
    """Asynchronous advantage actor-critic (RLlib's ``A3C``): the env runners compute the gradients."""

    config_class = A3CConfig
    config: A3CConfig
    policy_class = A3CPolicy
    corral_api = PLUGIN_API_VERSION

    def setup(self, config: Any = None) -> None:
        """With remote runners, start their calls' weights at version 0 (the learner's update count)."""
        self.num_updates = 0
        self.sampler: AsyncSampler | None = None
        group = self.env_runner_group
        if group.num_healthy_remote_runners:
            self.sampler = AsyncSampler(group, 1, group.num_healthy_remote_runners, method="sample_gradients")
            self.sampler.publish_weights(group.sampling_state(), self.num_updates)

    def training_step(self) -> dict[str, dict[str, Any]]:
        """Apply every runner's gradients that arrived (waiting for one), or sample and update here.

        Returns:
            By policy id, the mean of the applied updates' stats (RLlib's), with the
            learning rate and the policy lag of the gradients applied.
        """
        if self.sampler is None:
            return self.learn_on_batch(self.sample())
        applied: dict[str, list[dict[str, Any]]] = {}
        for result, version in self.sampler.next_results():
            self.count_sampled(result.batch)
            for policy_id, (gradients, stats) in (result.gradients or {}).items():
                if policy_id not in self.policies:  # removed while the runner computed
                    continue
                policy = self.policies[policy_id]
                policy.apply_gradients(gradients)
                lr = policy.scheduled("lr")
                applied.setdefault(policy_id, []).append({**stats, "cur_lr": lr, "policy_lag": self.num_updates - version})
            self.counters["num_env_steps_trained"] += result.batch.env_steps
            self.counters["num_agent_steps_trained"] += result.batch.agent_steps
            self.num_updates += 1
        self.sampler.publish_weights(self.env_runner_group.sampling_state(), self.num_updates)
        return {pid: mean_stats(updates) for pid, updates in applied.items()}

    def get_state(self) -> dict[str, Any]:
        """The base state and the learner's update count."""
        return {**super().get_state(), "num_updates": self.num_updates}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore; the remote runners act with the restored weights from their next calls."""
        num_updates = restored_count(state.get("num_updates", 0), "num_updates")
        super().set_state(state)
        self.num_updates = num_updates
        if self.sampler is not None:
            self.sampler.publish_weights(self.env_runner_group.sampling_state(), num_updates)
