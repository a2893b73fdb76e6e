"""SAC's update: soft Bellman targets, a reparameterised actor, automatic entropy tuning.

With ``twin_q=False`` the "ensemble" has one critic and the min over it is that critic.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from corral.core import SampleBatch, SquashedGaussian, adam
from corral.core.off_policy import OffPolicyPolicy
from corral.plugins.sac.model import SACModel

_COLUMNS = [SampleBatch.OBS, SampleBatch.ACTIONS, SampleBatch.REWARDS, SampleBatch.NEXT_OBS, "discounts", "weights"]


class SACPolicy(OffPolicyPolicy):
    """Squashed-Gaussian actor for Box actions, softmax actor for Discrete ones, twin Q critics."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cfg = self.config
        if not self.model.discrete:
            self.dist_class = SquashedGaussian
        self.actor_optimizer = adam(self.model.actor.parameters(), lr=cfg.actor_lr)
        self.alpha_optimizer = adam([self.model.log_alpha], lr=cfg.alpha_lr)
        if cfg.target_entropy != "auto":
            self.target_entropy = float(cfg.target_entropy)
        elif self.model.discrete:
            self.target_entropy = cfg.target_entropy_scale * math.log(int(self.action_space.n))
        else:
            self.target_entropy = -float(np.prod(self.action_space.shape))

    def make_model(self) -> nn.Module:
        """Actor, critics and temperature in one module."""
        cfg = self.config
        return SACModel(self.observation_space, self.action_adapter.policy_space, cfg.model, cfg.twin_q, cfg.initial_alpha)

    def make_optimizer(self) -> torch.optim.Optimizer:
        """The critics' optimizer (``self.optimizer``); the actor's and alpha's are made in ``__init__``."""
        return adam(self.model.critic_parameters(), lr=self.config.critic_lr)

    def target_pairs(self) -> list[tuple[nn.Module, nn.Module]]:
        """Only the critics have target copies."""
        return [(self.target_model.critics, self.model.critics)]

    def learn_on_batch(self, batch: SampleBatch) -> dict[str, Any]:
        """One critic step, one actor step, one temperature step on a replayed minibatch."""
        t = self.to_tensors(batch, _COLUMNS)
        obs, actions = t[SampleBatch.OBS], t[SampleBatch.ACTIONS]
        alpha = self.model.log_alpha.exp().detach()
        with torch.no_grad():
            target = t[SampleBatch.REWARDS] + t["discounts"] * self._soft_next_value(t[SampleBatch.NEXT_OBS], alpha)
        if self.model.discrete:
            q_all = self.model.q_values(obs)
            index = actions.long().view(1, -1, 1).expand(q_all.shape[0], -1, 1)
            q_taken = q_all.gather(2, index).squeeze(-1)
        else:
            q_taken = self.model.q_values(obs, actions)
        td_error = q_taken[0] - target
        critic_loss = 0.5 * (t["weights"] * (q_taken - target).pow(2)).mean(dim=1).sum()
        critic_norm = self.apply_gradients(critic_loss, self.optimizer)

        actor_loss, entropy = self._actor_loss(obs, alpha)
        actor_norm = self.apply_gradients(actor_loss, self.actor_optimizer)
        alpha_loss = self.model.log_alpha * (entropy.detach() - self.target_entropy)
        self.apply_gradients(alpha_loss, self.alpha_optimizer)

        names = ("critic_loss", "actor_loss", "alpha_loss", "alpha", "entropy", "mean_q", "critic_gnorm", "actor_gnorm")
        values = torch.stack(
            [critic_loss.detach(), actor_loss.detach(), alpha_loss.detach(), alpha, entropy.detach(),
             q_taken[0].detach().mean(), critic_norm, actor_norm]
        ).tolist()
        return {**dict(zip(names, values)), "target_entropy": self.target_entropy, "td_error": td_error.detach().cpu().numpy()}

    def _soft_next_value(self, next_obs: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
        """E over the next action of min(target Q) - alpha * log pi."""
        logits = self.model.actor(next_obs)
        if self.model.discrete:
            log_probs = F.log_softmax(logits, dim=-1)
            q = self.target_model.q_values(next_obs).min(dim=0).values
            return (log_probs.exp() * (q - alpha * log_probs)).sum(-1)
        next_actions, logp = SquashedGaussian(logits).rsample_with_logp()
        q = self.target_model.q_values(next_obs, next_actions).min(dim=0).values
        return q - alpha * logp

    def _actor_loss(self, obs: torch.Tensor, alpha: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The actor's loss and its mean entropy (an estimate, -log pi, for Box actions)."""
        logits = self.model.actor(obs)
        if self.model.discrete:
            log_probs = F.log_softmax(logits, dim=-1)
            probs = log_probs.exp()
            with torch.no_grad():
                q = self.model.q_values(obs).min(dim=0).values
            loss = (probs * (alpha * log_probs - q)).sum(-1).mean()
            return loss, -(probs * log_probs).sum(-1).mean()
        actions, logp = SquashedGaussian(logits).rsample_with_logp()
        q = self.model.q_values(obs, actions).min(dim=0).values
        return (alpha * logp - q).mean(), -logp.mean()

    def get_state(self) -> dict[str, Any]:
        """The base state plus the actor's and the temperature's optimizers."""
        return {
            **super().get_state(),
            "actor_optimizer": self.actor_optimizer.state_dict(),
            "alpha_optimizer": self.alpha_optimizer.state_dict(),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore the base state and the extra optimizers."""
        super().set_state(state)
        self.actor_optimizer.load_state_dict(state["actor_optimizer"])
        self.alpha_optimizer.load_state_dict(state["alpha_optimizer"])
