"""A3C's update: one gradient step on the actor-critic loss, its terms summed over the batch's rows (RLlib's A3C)."""

from __future__ import annotations

import numpy as np
import torch

from corral.core import ActorCriticPolicy, SampleBatch, add_discounted_returns
from corral.plugins.a3c.config import A3CConfig


class A3CPolicy(ActorCriticPolicy):
    """Actor-critic policy whose update an env runner can compute and the learner apply (:meth:`compute_gradients`)."""

    config: A3CConfig
    thread_safe_learning = True
    recurrent_models = True

    def postprocess_trajectory(self, fragment: SampleBatch, bootstrap_obs: np.ndarray) -> SampleBatch:
        """Add ``advantages`` and ``value_targets`` as ``use_critic`` and ``use_gae`` say, then flatten."""
        cfg = self.config
        if cfg.use_critic:
            return super().postprocess_trajectory(fragment, bootstrap_obs)
        with_returns = add_discounted_returns(fragment, cfg.gamma)
        # the value loss reads value_targets; without a critic it is left out of the loss
        return self.training_rows(SampleBatch({**with_returns, SampleBatch.VALUE_TARGETS: with_returns[SampleBatch.ADVANTAGES]}))

    def compute_loss(
        self, batch: dict[str, torch.Tensor], fwd_out: dict[str, torch.Tensor]
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The actor-critic loss with each term summed over the rows; without ``use_critic``, no value term.

        Returns:
            The total loss, and it and its terms by name.
        """
        policy_loss, vf_loss, entropy = self.actor_critic_terms(batch, fwd_out, torch.sum)
        if not self.config.use_critic:
            vf_loss = torch.zeros_like(vf_loss)
        return self.actor_critic_total(policy_loss, vf_loss, entropy)
