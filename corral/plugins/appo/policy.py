"""APPO's update: PPO's clipped surrogate on V-trace advantages, measured against a target network's policy.

As in RLlib's APPO, the target network (a copy of the policy updated every
``target_network_update_freq`` trained env steps) plays PPO's "old policy":
V-trace corrects the sampled sequences towards it, and the surrogate's ratio
is the learner's probability over the target's, written as
``min(mu / pi_target, 2) * pi / mu`` with ``mu`` the probability the sampler
acted with: the clip bounds what a step the sampler took far more often than
the target would counts for.
"""

from __future__ import annotations

from typing import Any

import torch

from corral.core import SampleBatch, TargetNetworkPolicy, TorchLearner, joint_norm, to_floats
from corral.core.learning.nonfinite import saturate
from corral.core.learning.policies.kl_penalty import AdaptiveKLPolicy
from corral.plugins.appo.config import APPOConfig
from corral.plugins.impala.policy import IMPALAPolicy, flat_steps

_MAX_IMPORTANCE_WEIGHT = 2.0
"""the largest sampler-over-target probability ratio a step counts with (RLlib's)"""


class APPOPolicy(TargetNetworkPolicy, AdaptiveKLPolicy, IMPALAPolicy):
    """IMPALA's policy with a target network, PPO's clipped surrogate and its adaptive KL weight."""

    config: APPOConfig

    def learn_on_batch(self, batch: SampleBatch) -> dict[str, Any]:
        """``num_epochs`` gradient steps on the batch's sequences, the target network fixed among them."""
        cfg = self.config
        lr = self.update_lr()
        t, time_major = self.sequence_tensors(batch)
        valid = time_major[SampleBatch.VALID].float()
        count = valid.sum().clamp(min=1.0)
        actions = flat_steps(time_major[SampleBatch.ACTIONS])
        with torch.no_grad():
            old_inputs, _, _ = self.sequence_outputs(self.target_model, t, time_major)
            old_dist = self.dist_class(old_inputs)
            old_logp = old_dist.logp(actions).view_as(valid)
            behaviour_logp = time_major[SampleBatch.ACTION_LOGP]
        low, high = saturate(1 - cfg.clip_param), saturate(1 + cfg.clip_param)
        rows = float(valid.sum()) if self.gradient_sync is not None else None  # a Learner's weight: its valid steps
        for _ in range(cfg.num_epochs):
            dist_inputs, values, last_values = self.sequence_outputs(self.model, t, time_major)
            dist = self.dist_class(dist_inputs)
            logp = dist.logp(actions).view_as(valid)
            vs, advantages = self.vtrace_targets(time_major, valid, old_logp, values.detach(), last_values)
            ratio = surrogate_ratio(logp, old_logp, behaviour_logp)
            surrogate = torch.min(advantages * ratio, advantages * ratio.clamp(low, high))
            kl_steps = old_dist.kl(dist).view_as(valid)
            terms = {
                "policy_loss": -(surrogate * valid).sum() / count,
                "vf_loss": 0.5 * ((values - vs).pow(2) * valid).sum() / count,
                "entropy": (dist.entropy().view_as(valid) * valid).sum() / count,
                "kl": (kl_steps * valid).sum() / count,
            }
            total = terms["policy_loss"] + cfg.vf_loss_coeff * terms["vf_loss"]
            total = total - self.scheduled("entropy_coeff") * terms["entropy"]
            if cfg.use_kl_loss:
                total = total + self.kl_coeff * terms["kl"]
            grad_norm = joint_norm(self.apply_gradients(total, terms, rows))
        stats = {**to_floats({"total_loss": total, **terms, "grad_gnorm": grad_norm}), "cur_lr": lr}
        # the KL weight adapts to the whole batch's divergence, also on Learners that each hold a share
        stats["kl"] = float(self.batch_mean(kl_steps.detach()[valid > 0]))
        stats["cur_kl_coeff"] = self.kl_coeff
        return stats

    def update_target_network(self, kl: float | None) -> None:
        """Move the target network towards the policy (``tau``); with ``use_kl_loss``, adapt the KL weight first.

        Args:
            kl: the mean KL divergence of the last update (its ``kl`` stat), or None if it made none.
        """
        if self.config.use_kl_loss and kl is not None:
            self.adapt_kl_coeff(kl)
        self.update_targets(self.config.tau)


def surrogate_ratio(logp: torch.Tensor, target_logp: torch.Tensor, behaviour_logp: torch.Tensor) -> torch.Tensor:
    """APPO's probability ratio, RLlib's way: ``min(mu / pi_target, 2) * pi / mu``, which is ``pi / pi_target`` unless
    the sampler took the step more than twice as often as the target network would.

    Args:
        logp: log pi, the learner's (with gradients).
        target_logp: log pi_target, the target network's.
        behaviour_logp: log mu, what the sampler acted with.

    Returns:
        The ratio, a tensor shaped like ``logp``.
    """
    weight = torch.exp(behaviour_logp - target_logp).clamp(0.0, _MAX_IMPORTANCE_WEIGHT)
    return weight * torch.exp(logp - behaviour_logp)


class APPOTorchLearner(TorchLearner):
    """APPO's Learner (RLlib's name): subclass it to replace a part of APPO's update (see corral.core.Learner)."""

    policy_classes = (APPOPolicy,)
