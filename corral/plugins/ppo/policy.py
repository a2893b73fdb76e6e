"""PPO's loss and update: clipped surrogate, value loss, entropy bonus, adaptive KL penalty."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from corral.core import Policy, SampleBatch
from corral.core.postprocessing import add_gae

_TRAIN_COLUMNS = [
    SampleBatch.OBS,
    SampleBatch.ACTIONS,
    SampleBatch.ACTION_LOGP,
    SampleBatch.ACTION_DIST_INPUTS,
    SampleBatch.ADVANTAGES,
    SampleBatch.VALUE_TARGETS,
    SampleBatch.VF_PREDS,
]


class PPOPolicy(Policy):
    """Actor-critic policy trained by several epochs of clipped-surrogate minibatch SGD."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kl_coeff = self.config.kl_coeff

    def postprocess_trajectory(self, fragment: SampleBatch, bootstrap_obs: np.ndarray) -> SampleBatch:
        """Add GAE advantages and value targets, then flatten."""
        last_values = self.compute_values(bootstrap_obs)
        with_advantages = add_gae(fragment, last_values, self.config.gamma, self.config.lambda_)
        return self.flatten_fragment(with_advantages)

    def loss(self, t: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """PPO's total loss on one minibatch of tensors, and its parts (detached)."""
        cfg = self.config
        out = self.model.forward_train(t[SampleBatch.OBS])
        dist = self.dist_class(out["action_dist_inputs"])
        old_dist = self.dist_class(t[SampleBatch.ACTION_DIST_INPUTS])
        advantages = t[SampleBatch.ADVANTAGES]
        ratio = torch.exp(dist.logp(t[SampleBatch.ACTIONS]) - t[SampleBatch.ACTION_LOGP])
        surrogate = torch.min(advantages * ratio, advantages * ratio.clamp(1 - cfg.clip_param, 1 + cfg.clip_param))
        policy_loss = -surrogate.mean()
        kl = old_dist.kl(dist).mean()
        entropy = dist.entropy().mean()
        values, targets = out["vf_preds"], t[SampleBatch.VALUE_TARGETS]
        vf_loss = (values - targets).pow(2)
        if cfg.vf_clip_param is not None:
            old = t[SampleBatch.VF_PREDS]
            clipped = old + (values - old).clamp(-cfg.vf_clip_param, cfg.vf_clip_param)
            vf_loss = torch.max(vf_loss, (clipped - targets).pow(2))
        vf_loss = 0.5 * vf_loss.mean()
        total = policy_loss + cfg.vf_loss_coeff * vf_loss - cfg.entropy_coeff * entropy
        if self.kl_coeff > 0:
            total = total + self.kl_coeff * kl
        parts = {"total_loss": total, "policy_loss": policy_loss, "vf_loss": vf_loss, "kl": kl, "entropy": entropy}
        return total, {k: v.detach() for k, v in parts.items()}

    def learn_on_batch(self, batch: SampleBatch) -> dict[str, float]:
        """Several epochs of shuffled minibatch SGD; then adapt the KL coefficient."""
        cfg = self.config
        lr = self.update_lr()
        t = self.to_tensors(batch, _TRAIN_COLUMNS)
        if cfg.normalize_advantages:
            adv = t[SampleBatch.ADVANTAGES]
            t[SampleBatch.ADVANTAGES] = (adv - adv.mean()) / (adv.std() + 1e-8)
        n = batch.count
        sums: dict[str, torch.Tensor] = {}
        updates = 0
        for _ in range(cfg.num_epochs):
            order = torch.randperm(n, device=self.device)
            for start in range(0, n, cfg.minibatch_size):
                rows = order[start : start + cfg.minibatch_size]
                loss, parts = self.loss({k: v[rows] for k, v in t.items()})
                parts["grad_gnorm"] = self.apply_gradients(loss).detach()
                for k, v in parts.items():
                    sums[k] = sums[k] + v if k in sums else v
                updates += 1
        stats = {k: float(v) / updates for k, v in zip(sums, torch.stack(list(sums.values())).tolist())}
        if cfg.kl_coeff > 0:
            if stats["kl"] > 2.0 * cfg.kl_target:
                self.kl_coeff *= 1.5
            elif stats["kl"] < 0.5 * cfg.kl_target:
                self.kl_coeff *= 0.5
        targets, values = batch[SampleBatch.VALUE_TARGETS], batch[SampleBatch.VF_PREDS]
        variance = float(np.var(targets))
        stats.update(
            cur_kl_coeff=self.kl_coeff,
            cur_lr=lr,
            num_sgd_updates=updates,
            vf_explained_var=1.0 - float(np.var(targets - values)) / variance if variance > 0 else float("nan"),
        )
        return stats

    def get_state(self) -> dict[str, Any]:
        """The base state plus the adapted KL coefficient."""
        return {**super().get_state(), "kl_coeff": float(self.kl_coeff)}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore the base state and the KL coefficient."""
        super().set_state(state)
        self.kl_coeff = float(state.get("kl_coeff", self.config.kl_coeff))
