"""The on-policy actor-critic policy: a value head, GAE(lambda) advantages, and the vanilla policy-gradient loss."""

from __future__ import annotations

import numpy as np
import torch

from corral.core.common.sample_batch import SampleBatch
from corral.core.contracts.actor_critic import GAEConfig
from corral.core.learning.policy import Policy
from corral.core.learning.postprocessing import add_gae
from corral.core.learning.recurrent.sequences import inputs_after

POLICY_GRADIENT_COLUMNS = [SampleBatch.OBS, SampleBatch.ACTIONS, SampleBatch.ADVANTAGES, SampleBatch.VALUE_TARGETS]
"""The columns :meth:`ActorCriticPolicy.policy_gradient_loss` reads."""


class ActorCriticPolicy(Policy):
    """A policy whose model has a value head; its samples get GAE(lambda) advantages.

    Shared by the on-policy actor-critic algorithms (PPO, A2C, third-party ones
    such as REINFORCE). Their config must define ``lambda_`` (1.0 gives Monte
    Carlo returns over the fragment), and ``vf_loss_coeff`` and
    ``entropy_coeff`` to use :meth:`policy_gradient_loss`.
    """

    required_model_outputs = (SampleBatch.ACTION_DIST_INPUTS, SampleBatch.VF_PREDS)
    config: GAEConfig
    input_columns = (*POLICY_GRADIENT_COLUMNS, SampleBatch.VF_PREDS)  # vf_preds: what GAE starts from
    postprocessing_columns = (SampleBatch.ADVANTAGES, SampleBatch.VALUE_TARGETS)

    def postprocess_trajectory(self, fragment: SampleBatch, bootstrap_obs: np.ndarray) -> SampleBatch:
        """Add ``advantages`` and ``value_targets``, then flatten (or cut into sequences, see :meth:`training_rows`)."""
        if self.is_recurrent:
            last_values = self.compute_values(bootstrap_obs, **inputs_after(fragment, self.get_initial_state()))
        else:
            last_values = self.compute_values(bootstrap_obs)
        with_advantages = add_gae(fragment, last_values, self.config.gamma, self.config.lambda_)
        return self.training_rows(with_advantages)

    def compute_loss(
        self, batch: dict[str, torch.Tensor], fwd_out: dict[str, torch.Tensor]
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The vanilla actor-critic loss on the :data:`POLICY_GRADIENT_COLUMNS` of a minibatch, from the model's outputs.

        ``-log pi(a|s) * A + vf_loss_coeff * (V(s) - target)^2 / 2 - entropy_coeff * H[pi(.|s)]``,
        each term a mean over the batch.

        Returns:
            The total loss, and it and its terms as tensors by name (``total_loss``,
            ``policy_loss``, ``vf_loss``, ``entropy``), for :func:`to_floats`.
        """
        cfg = self.config
        dist = self.dist_class(fwd_out[SampleBatch.ACTION_DIST_INPUTS])
        policy_loss = -(dist.logp(batch[SampleBatch.ACTIONS]) * batch[SampleBatch.ADVANTAGES]).mean()
        vf_loss = 0.5 * (fwd_out[SampleBatch.VF_PREDS] - batch[SampleBatch.VALUE_TARGETS]).pow(2).mean()
        entropy = dist.entropy().mean()
        total = policy_loss + cfg.vf_loss_coeff * vf_loss - self.scheduled("entropy_coeff") * entropy
        return total, {"total_loss": total, "policy_loss": policy_loss, "vf_loss": vf_loss, "entropy": entropy}

    def policy_gradient_loss(self, t: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The loss of a batch of tensors (:meth:`minibatch_loss`): by default the vanilla actor-critic loss of
        :meth:`compute_loss`, or a ``learner_class``'s.

        Returns:
            The total loss, and its terms by name.
        """
        return self.minibatch_loss(t)
