"""A2C's update: one gradient step on policy gradient, value and entropy terms per batch."""

from __future__ import annotations

from corral.core import POLICY_GRADIENT_COLUMNS, ActorCriticPolicy, SampleBatch, joint_norm, standardize, to_floats
from corral.plugins.a2c.config import A2CConfig


class A2CPolicy(ActorCriticPolicy):
    """Actor-critic policy with one synchronous update per train batch."""

    config: A2CConfig
    thread_safe_learning = True
    data_parallel_learning = True
    recurrent_models = True

    def learn_on_batch(self, batch: SampleBatch) -> dict[str, float]:
        """One gradient step on the whole batch."""
        lr = self.update_lr()
        t = self.to_tensors(batch, POLICY_GRADIENT_COLUMNS)
        if self.config.normalize_advantages:
            t[SampleBatch.ADVANTAGES] = standardize(t[SampleBatch.ADVANTAGES], self.step_mask(t))
        total, terms = self.policy_gradient_loss(self.share(t))  # on a Learner, its rows of the batch
        grad_norm = joint_norm(self.apply_gradients(total, terms))
        return {**to_floats({**terms, "grad_gnorm": grad_norm}), "cur_lr": lr}
