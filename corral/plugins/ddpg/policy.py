"""DDPG's update: critics regress on one-step (or n-step) targets of the target actor; the actor climbs the first critic.

Both losses are computed on the same minibatch from the same weights and
stepped together, one optimizer with a param group each (``critic_lr``,
``actor_lr``). The actor reads the critics through detached weights, so its
loss moves only the actor. With ``policy_delay`` above 1 the actor's loss is
left out of all but every ``policy_delay``-th update, and the actor keeps no
gradient then, so its weights and its optimizer's moments stay as they are in
between (RLlib steps the actor's optimizer only then), on Learner actors too.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from corral.core import Deterministic, Optimizer, SampleBatch, TorchLearner, build_optimizer, restored_float
from corral.core.learning.off_policy import OffPolicyPolicy
from corral.plugins.ddpg.config import DDPGConfig
from corral.plugins.ddpg.model import DDPGModel


class DDPGPolicy(OffPolicyPolicy):
    """A deterministic actor for Box actions, explored with added noise, and one or two critics."""

    config: DDPGConfig
    thread_safe_learning = True
    data_parallel_learning = True
    action_distribution = Deterministic
    model: DDPGModel
    target_model: DDPGModel

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.critic_updates = 0
        """updates so far: the actor learns on every ``policy_delay``-th"""
        self._learns_actor = True
        self._l2_weights = {
            network: [p for name, p in getattr(self.model, network).named_parameters() if "bias" not in name]
            for network in ("actor", "critics")
        }
        """each network's weights the L2 term reads (biases excluded), listed once: the term is on every update"""

    def make_model(self) -> nn.Module:
        """Actor and critics in one module."""
        return DDPGModel(self.model_observation_space, self.action_adapter.policy_space, self.config)

    def make_optimizer(self) -> Optimizer:
        """One optimizer (Adam by default) over two param groups, critics and actor, each with its learning rate."""
        cfg = self.config
        groups = [
            {"params": list(self.model.critics.parameters()), "lr": cfg.critic_lr, "name": "critics"},
            {"params": list(self.model.actor.parameters()), "lr": cfg.actor_lr, "name": "actor"},
        ]
        return build_optimizer(groups, cfg.optimizer, lr=cfg.critic_lr)

    def learn_on_batch(self, batch: SampleBatch) -> dict[str, Any]:
        """One step of the critics (and, every ``policy_delay``-th, of the actor) on a replayed minibatch."""
        cfg = self.config
        t = self.share(self.to_tensors(batch, self.REPLAY_COLUMNS))
        obs, actions = t[SampleBatch.OBS], t[SampleBatch.ACTIONS]
        with torch.no_grad():
            next_obs = t[SampleBatch.NEXT_OBS]
            next_actions = self.target_model.actor(next_obs)
            if cfg.smooth_target_policy:
                width, device = next_actions.shape[1:], next_actions.device

                def draw(rows: int) -> torch.Tensor:
                    return torch.randn((rows, *width), generator=self.torch_rng, device=device)

                # drawn for the whole batch and cut to a Learner's share, so a Learner group draws what one process does
                noise = self.random_rows(draw, len(next_actions)) * cfg.target_noise
                noise = noise.clamp(-cfg.target_noise_clip, cfg.target_noise_clip)
                next_actions = (next_actions + noise).clamp(-1.0, 1.0)
            next_q = self.target_model.q_values(next_obs, next_actions).min(dim=0).values
            target = t[SampleBatch.REWARDS] + t[SampleBatch.DISCOUNTS] * next_q
        q = self.model.q_values(obs, actions)  # [k, B]
        if cfg.use_huber:
            errors = F.huber_loss(q, target.expand_as(q), reduction="none", delta=cfg.huber_threshold)
        else:
            errors = 0.5 * (q - target).pow(2)
        critic_loss = (t[SampleBatch.WEIGHTS] * errors.sum(dim=0)).mean() + self._l2("critics")
        terms = {"critic_loss": critic_loss}
        total = critic_loss
        learns_actor = self._learns_actor = self.critic_updates % cfg.policy_delay == 0
        if learns_actor:
            q_of_actor = self.model.q_values(obs, self.model.actor(obs), frozen=True)[0]
            terms["actor_loss"] = -q_of_actor.mean() + self._l2("actor")
            total = total + terms["actor_loss"]
        critic_norm, actor_norm = self.apply_gradients(total, terms, len(target))
        self.critic_updates += 1
        first = q[0].detach()
        stats: dict[str, Any] = {
            "critic_loss": float(critic_loss.detach()),
            "mean_q": float(first.mean()),
            "max_q": float(first.max()),
            "min_q": float(first.min()),
            "critic_gnorm": float(critic_norm),
            self.TD_ERROR: (first - target).cpu().numpy(),
        }
        if learns_actor:
            stats.update(actor_loss=float(terms["actor_loss"].detach()), actor_gnorm=float(actor_norm))
        return stats

    def average_gradients(self, weight: float) -> None:
        """Average the gradients across Learner actors; between delayed actor updates the actor keeps no gradient.

        A Learner group averages a gradient a parameter lacks as zero, and Adam
        would move the actor on a zero gradient (its moments); every Learner
        counts updates alike, so all of them leave the actor out together.
        """
        super().average_gradients(weight)
        if not self._learns_actor:
            for parameter in self.model.actor.parameters():
                parameter.grad = None

    def _l2(self, network: str) -> torch.Tensor | float:
        """``l2_reg`` times half the sum of squares of the network's weights (biases excluded), as RLlib's DDPG adds it."""
        if not self.config.l2_reg:
            return 0.0
        norms = torch._foreach_norm(self._l2_weights[network])  # one kernel for every tensor, where a sum of squares each is two
        return self.config.l2_reg * 0.5 * torch.stack(norms).pow(2).sum()

    def get_state(self) -> dict[str, Any]:
        """The base state plus the update count (where the actor's delay stands)."""
        return {**super().get_state(), "critic_updates": float(self.critic_updates)}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore the base state and the update count."""
        updates = int(restored_float(state.get("critic_updates", 0.0), "critic_updates", minimum=0.0))
        super().set_state(state)
        self.critic_updates = updates


class DDPGTorchLearner(TorchLearner):
    """DDPG's and TD3's Learner (RLlib's name): subclass it to replace a part of their update (see corral.core.Learner)."""

    policy_classes = (DDPGPolicy,)
