"""The on-policy actor-critic policy: a value head, GAE(lambda) advantages, and the vanilla policy-gradient loss."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from corral.core.common.sample_batch import SampleBatch
from corral.core.contracts.actor_critic import GAEConfig
from corral.core.learning.policies.updates import joint_norm, standardize, to_floats
from corral.core.learning.policy import Policy
from corral.core.learning.postprocessing import add_gae
from corral.core.learning.recurrent.sequences import inputs_after

POLICY_GRADIENT_COLUMNS = [SampleBatch.OBS, SampleBatch.ACTIONS, SampleBatch.ADVANTAGES, SampleBatch.VALUE_TARGETS]
"""The columns :meth:`ActorCriticPolicy.policy_gradient_loss` reads."""


class ActorCriticPolicy(Policy):
    """A policy whose model has a value head; its samples get GAE(lambda) advantages.

    Shared by the on-policy actor-critic algorithms (PPO, A2C, third-party ones
    such as REINFORCE). Their config must define ``lambda_`` (1.0 gives Monte
    Carlo returns over the fragment; ``use_gae=False``, where the config has
    that option, makes it 1), and ``vf_loss_coeff`` and ``entropy_coeff`` to
    use :meth:`policy_gradient_loss`.
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
        with_advantages = add_gae(fragment, last_values, self.config.gamma, self.gae_lambda)
        return self.training_rows(with_advantages)

    @property
    def gae_lambda(self) -> float:
        """The lambda of the advantages: the config's ``lambda_``; without ``use_gae``, 1 (RLlib's advantages then are
        the n-step return within the fragment less the value, which is GAE with lambda 1)."""
        # a plugin's own config may define lambda_ without use_gae (the scaffold's does): it keeps GAE
        return self.config.lambda_ if getattr(self.config, "use_gae", True) else 1.0

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
        policy_loss, vf_loss, entropy = self.actor_critic_terms(batch, fwd_out, torch.mean)
        return self.actor_critic_total(policy_loss, vf_loss, entropy)

    def actor_critic_terms(
        self,
        batch: dict[str, torch.Tensor],
        fwd_out: dict[str, torch.Tensor],
        reduce: Callable[[torch.Tensor], torch.Tensor],
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The policy-gradient, value and entropy terms of the actor-critic loss, each reduced over the rows.

        Args:
            batch: the minibatch's :data:`POLICY_GRADIENT_COLUMNS`, a row per step.
            fwd_out: the model's training outputs for it.
            reduce: how a term's rows become one value (``torch.mean``; A3C's is ``torch.sum``).

        Returns:
            ``(policy_loss, vf_loss, entropy)``.
        """
        dist = self.dist_class(fwd_out[SampleBatch.ACTION_DIST_INPUTS])
        policy_loss = -reduce(dist.logp(batch[SampleBatch.ACTIONS]) * batch[SampleBatch.ADVANTAGES])
        vf_loss = 0.5 * reduce((fwd_out[SampleBatch.VF_PREDS] - batch[SampleBatch.VALUE_TARGETS]).pow(2))
        return policy_loss, vf_loss, reduce(dist.entropy())

    def actor_critic_total(
        self, policy_loss: torch.Tensor, vf_loss: torch.Tensor, entropy: torch.Tensor
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """``policy_loss + vf_loss_coeff * vf_loss - entropy_coeff * entropy`` (the coefficient at its schedule's value).

        Args:
            policy_loss: the policy-gradient term.
            vf_loss: the value term.
            entropy: the entropy.

        Returns:
            The total loss, and it and its terms by name.
        """
        total = policy_loss + self.config.vf_loss_coeff * vf_loss - self.scheduled("entropy_coeff") * entropy
        return total, {"total_loss": total, "policy_loss": policy_loss, "vf_loss": vf_loss, "entropy": entropy}

    def learn_on_batch(self, batch: SampleBatch) -> dict[str, float]:
        """One gradient step on the whole batch (A2C's and A3C's update; PPO's takes minibatch epochs instead)."""
        lr = self.update_lr()
        t = self.to_tensors(batch, POLICY_GRADIENT_COLUMNS)
        if self.config.normalize_advantages:
            t[SampleBatch.ADVANTAGES] = standardize(t[SampleBatch.ADVANTAGES], self.step_mask(t))
        total, terms = self.policy_gradient_loss(self.share(t))  # on a Learner, its rows of the batch
        grad_norm = joint_norm(self.apply_gradients(total, terms))
        return {**to_floats({**terms, "grad_gnorm": grad_norm}), "cur_lr": lr}

    def policy_gradient_loss(self, t: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The loss of a batch of tensors (:meth:`minibatch_loss`): by default the vanilla actor-critic loss of
        :meth:`compute_loss`, or a ``learner_class``'s.

        Returns:
            The total loss, and its terms by name.
        """
        return self.minibatch_loss(t)
