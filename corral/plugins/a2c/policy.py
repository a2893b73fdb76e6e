"""A2C's update: one gradient step on policy gradient, value and entropy terms per batch."""

from __future__ import annotations

import torch

from corral.core import ActorCriticPolicy, SampleBatch, adam


class A2CPolicy(ActorCriticPolicy):
    """Actor-critic policy with one synchronous update per train batch."""

    def make_optimizer(self) -> torch.optim.Optimizer:
        """RMSprop as in the paper (or Adam, by config)."""
        params = self.model.parameters()
        if self.config.optimizer == "rmsprop":
            return torch.optim.RMSprop(params, lr=self.config.lr, alpha=0.99, eps=1e-5)
        return adam(params, lr=self.config.lr, eps=1e-5)

    def learn_on_batch(self, batch: SampleBatch) -> dict[str, float]:
        """One gradient step on the whole batch."""
        cfg = self.config
        lr = self.update_lr()
        t = self.to_tensors(batch, [SampleBatch.OBS, SampleBatch.ACTIONS, SampleBatch.ADVANTAGES, SampleBatch.VALUE_TARGETS])
        advantages = t[SampleBatch.ADVANTAGES]
        if cfg.normalize_advantages:
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        out = self.model.forward_train(t[SampleBatch.OBS])
        dist = self.dist_class(out["action_dist_inputs"])
        policy_loss = -(dist.logp(t[SampleBatch.ACTIONS]) * advantages).mean()
        vf_loss = 0.5 * (out["vf_preds"] - t[SampleBatch.VALUE_TARGETS]).pow(2).mean()
        entropy = dist.entropy().mean()
        total = policy_loss + cfg.vf_loss_coeff * vf_loss - cfg.entropy_coeff * entropy
        (grad_norm,) = self.apply_gradients(total)
        names = ("total_loss", "policy_loss", "vf_loss", "entropy", "grad_gnorm")
        values = torch.stack([total.detach(), policy_loss.detach(), vf_loss.detach(), entropy.detach(), grad_norm]).tolist()
        return {**dict(zip(names, values)), "cur_lr": lr}
