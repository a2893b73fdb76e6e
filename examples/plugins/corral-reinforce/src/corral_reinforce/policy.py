"""REINFORCE's update: the score-function gradient with a learned state-value baseline."""

from __future__ import annotations

from typing import Any

from corral.core import POLICY_GRADIENT_COLUMNS, ActorCriticPolicy, SampleBatch, standardize, to_floats


class REINFORCEPolicy(ActorCriticPolicy):
    """A policy network and a baseline network, stepped together once per batch.

    ``ActorCriticPolicy`` samples with log-probabilities and baseline values,
    computes the returns (``value_targets``) and returns minus the baseline
    (``advantages``), and provides the score-function loss with the baseline's
    regression term (``policy_gradient_loss``). What is REINFORCE's own: Monte
    Carlo returns (``lambda_=1``), one step per batch, no entropy bonus by default.
    """

    def learn_on_batch(self, batch: SampleBatch) -> dict[str, Any]:
        """One gradient step on ``-log pi(a|s) * (G - b(s))`` plus the baseline's squared error."""
        lr = self.update_lr()
        t = self.to_tensors(batch, POLICY_GRADIENT_COLUMNS)
        if self.config.normalize_advantages:
            t[SampleBatch.ADVANTAGES] = standardize(t[SampleBatch.ADVANTAGES])
        total, terms = self.policy_gradient_loss(t)
        self.apply_gradients(total)
        return {**to_floats(terms), "cur_lr": lr}
