"""SAC's update: soft Bellman targets, a reparameterised actor, automatic entropy tuning.

The critic, actor and temperature losses are computed on the same minibatch
from the same weights and stepped together: one backward pass and one fused
Adam step over three param groups, each with its own learning rate. The actor
reads the critics through detached weights, so its loss moves only the actor.
With ``twin_q=False`` the "ensemble" has one critic and the min over it is that critic.
"""

from __future__ import annotations

import math
from typing import Any, cast

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from corral.core import Optimizer, SampleBatch, SquashedGaussian, TorchLearner, build_optimizer
from corral.core.learning.off_policy import OffPolicyPolicy
from corral.core.networks.action_masking import mask_logits
from corral.plugins.sac.config import SACConfig
from corral.plugins.sac.model import SACModel


class SACPolicy(OffPolicyPolicy):
    """Squashed-Gaussian actor for Box actions, softmax actor for Discrete ones, twin Q critics."""

    config: SACConfig
    thread_safe_learning = True
    data_parallel_learning = True
    model: SACModel
    target_model: SACModel

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cfg = self.config
        if not self.model.discrete:
            self.dist_class = SquashedGaussian
        if cfg.target_entropy != "auto":
            self.target_entropy = float(cfg.target_entropy)
        elif self.model.discrete:
            self.target_entropy = cfg.target_entropy_scale * math.log(int(cast(gym.spaces.Discrete, self.action_space).n))
        else:
            self.target_entropy = -float(np.prod(cast(gym.spaces.Box, self.action_space).shape))

    def make_model(self) -> nn.Module:
        """Actor, critics and temperature in one module."""
        cfg = self.config
        return SACModel(
            self.model_observation_space,
            self.action_adapter.policy_space,
            cfg.network_config("actor"),
            cfg.twin_q,
            cfg.initial_alpha,
            critic_config=cfg.network_config("critic"),
        )

    def make_optimizer(self) -> Optimizer:
        """One optimizer (Adam by default) over three param groups: critics, actor, temperature, each with its learning rate."""
        cfg = self.config
        groups = [
            {"params": self.model.critic_parameters(), "lr": cfg.critic_lr, "name": "critics"},
            {"params": list(self.model.actor.parameters()), "lr": cfg.actor_lr, "name": "actor"},
            {"params": [self.model.log_alpha], "lr": cfg.alpha_lr, "name": "alpha"},
        ]
        return build_optimizer(groups, cfg.optimizer, lr=cfg.critic_lr)

    def target_pairs(self) -> list[tuple[nn.Module, nn.Module]]:
        """Only the critics have target copies."""
        return [(self.target_model.critics, self.model.critics)]

    def learn_on_batch(self, batch: SampleBatch) -> dict[str, Any]:
        """One step of the critics, the actor and the temperature on a replayed minibatch."""
        t = self.share(self.to_tensors(batch, self.REPLAY_COLUMNS))
        # with an action mask, the actor and critics read the observations and the actor's logits are masked
        obs, legal = self.split_action_mask(t[SampleBatch.OBS])
        actions = t[SampleBatch.ACTIONS]
        alpha = self.model.log_alpha.exp().detach()
        with torch.no_grad():
            next_value = self._soft_next_value(*self.split_action_mask(t[SampleBatch.NEXT_OBS]), alpha)
            target = t[SampleBatch.REWARDS] + t[SampleBatch.DISCOUNTS] * next_value
        q_all: torch.Tensor | None = None
        if self.model.discrete:
            q_all = self.model.q_values(obs)
            index = actions.long().view(1, -1, 1).expand(q_all.shape[0], -1, 1)
            q_taken = q_all.gather(2, index).squeeze(-1)
        else:
            q_taken = self.model.q_values(obs, actions)
        actor_loss, entropy = self.actor_loss(obs, legal, alpha, q_all, actions)
        td_error = q_taken[0] - target
        critic_loss = 0.5 * (t[SampleBatch.WEIGHTS] * (q_taken - target).pow(2)).mean(dim=1).sum()
        alpha_loss = self.model.log_alpha * (entropy.detach() - self.target_entropy)
        terms = {"critic_loss": critic_loss, "actor_loss": actor_loss, "alpha_loss": alpha_loss}
        extra = self.critic_regularizer(obs, t[SampleBatch.NEXT_OBS], legal, q_taken, q_all)
        if extra is not None:
            critic_loss = critic_loss + extra
            terms["critic_regularizer"] = extra
        # every term is a mean over the rows: a Learner's weighs as many
        critic_norm, actor_norm, _ = self.apply_gradients(critic_loss + actor_loss + alpha_loss, terms, len(target))

        names = ("critic_loss", "actor_loss", "alpha_loss", "alpha", "entropy", "mean_q", "critic_gnorm", "actor_gnorm")
        values = torch.stack(
            [
                critic_loss.detach(),
                actor_loss.detach(),
                alpha_loss.detach(),
                alpha,
                entropy.detach(),
                q_taken[0].detach().mean(),
                critic_norm,
                actor_norm,
            ]
        ).tolist()
        stats = {
            **dict(zip(names, values, strict=True)),
            "target_entropy": self.target_entropy,
            self.TD_ERROR: td_error.detach().cpu().numpy(),
        }
        if extra is not None:
            stats["critic_regularizer"] = float(extra.detach())
        return stats

    def actor_loss(
        self,
        obs: torch.Tensor,
        legal: torch.Tensor | None,
        alpha: torch.Tensor,
        q_all: torch.Tensor | None,
        actions: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The actor's loss and its entropy estimate; CQL overrides it (behaviour cloning first).

        Args:
            obs: ``[B, ...]`` observations (without the action mask).
            legal: ``[B, n]`` the legal actions, or None.
            alpha: the entropy temperature (detached).
            q_all: for Discrete actions, the critics' detached ``[k, B, n]`` Q(s, .); None for Box ones.
            actions: ``[B, ...]`` the batch's actions.

        Returns:
            ``(loss, entropy)``: the loss moves only the actor.
        """
        if q_all is not None:
            return self._discrete_actor_loss(obs, legal, alpha, q_all.detach())
        return self._box_actor_loss(obs, alpha)

    def critic_regularizer(
        self,
        obs: torch.Tensor,
        next_obs: torch.Tensor,
        legal: torch.Tensor | None,
        q_taken: torch.Tensor,
        q_all: torch.Tensor | None,
    ) -> torch.Tensor | None:
        """A term added to the critics' loss; SAC adds none, CQL its conservative penalty.

        Args:
            obs: ``[B, ...]`` observations (without the action mask).
            next_obs: ``[B, ...]`` the observations n steps later (with the mask, if any).
            legal: ``[B, n]`` the legal actions, or None.
            q_taken: ``[k, B]`` every critic's Q of the batch's actions.
            q_all: for Discrete actions, ``[k, B, n]`` Q(s, .) (with gradients); None for Box ones.

        Returns:
            The term (a scalar tensor), or None.
        """
        return None

    def _soft_next_value(self, next_obs: torch.Tensor, legal: torch.Tensor | None, alpha: torch.Tensor) -> torch.Tensor:
        """E over the next (legal) action of min(target Q) - alpha * log pi."""
        logits = self.model.actor(next_obs)
        if self.model.discrete:
            log_probs = F.log_softmax(mask_logits(logits, legal), dim=-1)
            q = self.target_model.q_values(next_obs).min(dim=0).values
            return (log_probs.exp() * (q - alpha * log_probs)).sum(-1)
        next_actions, logp = self.squashed_sample(logits)
        q = self.target_model.q_values(next_obs, next_actions).min(dim=0).values
        return q - alpha * logp

    def _discrete_actor_loss(
        self, obs: torch.Tensor, legal: torch.Tensor | None, alpha: torch.Tensor, q_all: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The actor's loss against the critics' Q(s, .) (``[k, B, n]``, detached) and its mean entropy, over legal actions."""
        log_probs = F.log_softmax(mask_logits(self.model.actor(obs), legal), dim=-1)
        probs = log_probs.exp()
        loss = (probs * (alpha * log_probs - q_all.min(dim=0).values)).sum(-1).mean()
        return loss, -(probs * log_probs).sum(-1).mean()

    def _box_actor_loss(self, obs: torch.Tensor, alpha: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The actor's loss through the critics' detached weights, and its entropy estimate -log pi."""
        actions, logp = self.squashed_sample(self.model.actor(obs))
        # The critics run on detached weights: the actor's gradient flows through the
        # reparameterised actions into the actor, while the critics' weights get none from this loss.
        q = self.model.q_values(obs, actions, frozen=True).min(dim=0).values
        return (alpha * logp - q).mean(), -logp.mean()

    def squashed_sample(self, logits: torch.Tensor, repeats: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparameterised squashed-Gaussian sample of the actor's outputs, and its log-density.

        The noise comes from the policy's generator, drawn as one process draws
        it for the whole batch (see :meth:`random_rows`).

        Args:
            logits: ``[B * repeats, 2 * dim]`` the actor's outputs, each row of the batch's ``repeats`` in a row.
            repeats: outputs per row of the batch.

        Returns:
            ``(actions, logp)``.
        """
        dist = SquashedGaussian(logits)
        mean = dist.mean
        rows = mean.shape[0] // repeats

        def draw(n: int) -> torch.Tensor:
            return torch.randn((n, *mean.shape[1:]), generator=self.torch_rng, device=mean.device, dtype=mean.dtype)

        return dist.rsample_with_logp(noise=self.random_rows(draw, rows, repeats))


class SACTorchLearner(TorchLearner):
    """SAC's Learner (RLlib's name): subclass it to replace a part of SAC's update (see corral.core.Learner)."""

    policy_classes = (SACPolicy,)
