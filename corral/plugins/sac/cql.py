"""Conservative Q-learning (Kumar et al., 2020) on SAC's machinery, for learning from recorded experiences.

CQL is SAC with two changes: the critics' loss gains a penalty that pushes
Q down on actions the data does not take (a soft maximum over sampled actions)
and up on the data's actions, so the policy cannot exploit Q values that no
data supports; and for the first ``bc_iters`` updates the actor clones the
data's actions instead of maximising Q. Box actions sample the soft maximum
(uniform actions and the policy's own, each weighed by its density);
Discrete ones take it over every action.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from corral.core import SampleBatch, SquashedGaussian, TorchLearner, option, restored_count
from corral.core.networks.action_masking import mask_logits
from corral.plugins.sac.algorithm import SAC
from corral.plugins.sac.config import SACConfig
from corral.plugins.sac.policy import SACPolicy


class CQLConfig(SACConfig, defaults={"postprocess_inputs": True}):
    """Config of :class:`CQL`: SAC's options plus the conservative penalty's.

    Its input is usually recorded experiences (``offline_data(input_=...)``):
    the rows read go into the replay buffer as sampled ones would, and are
    replayed at ``training_intensity``; ``postprocess_inputs`` turns them into
    n-step transitions (without it, a file's rows are one-step transitions as
    they are, and ``n_step`` must be 1).
    """

    bc_iters: int = option(20_000, "training", ge=0, le=2**53)
    """updates in which the actor clones the data's actions before it maximises Q"""
    temperature: float = option(1.0, "training", gt=0)
    """the temperature of the soft maximum over actions in the penalty"""
    num_actions: int = option(10, "training", ge=1, le=10_000)
    """for Box actions: actions sampled per observation from each of the uniform, current and next policies"""
    min_q_weight: float = option(5.0, "training", ge=0)
    """the weight of the conservative penalty (soft maximum of Q minus Q of the data's actions)"""


class CQLPolicy(SACPolicy):
    """SAC's policy with the conservative penalty on its critics and a behaviour-cloning start for its actor."""

    config: CQLConfig

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.num_updates = 0

    def learn_on_batch(self, batch: SampleBatch) -> dict[str, Any]:
        """SAC's step with CQL's terms; counts the updates (for ``bc_iters``)."""
        stats = super().learn_on_batch(batch)
        self.num_updates += 1
        return {**stats, "num_updates": self.num_updates}

    def actor_loss(
        self,
        obs: torch.Tensor,
        legal: torch.Tensor | None,
        alpha: torch.Tensor,
        q_all: torch.Tensor | None,
        actions: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """For the first ``bc_iters`` updates: alpha * log pi - log pi(data's action); then SAC's."""
        if self.num_updates >= self.config.bc_iters:
            return super().actor_loss(obs, legal, alpha, q_all, actions)
        logits = self.model.actor(obs)
        if q_all is not None:
            log_probs = F.log_softmax(mask_logits(logits, legal), dim=-1)
            probs = log_probs.exp()
            data_logp = log_probs.gather(1, actions.long().view(-1, 1)).squeeze(1)
            loss = (alpha * (probs * log_probs).sum(-1) - data_logp).mean()
            return loss, -(probs * log_probs).sum(-1).mean()
        _, logp = self.squashed_sample(logits)
        return (alpha * logp - SquashedGaussian(logits).logp(actions)).mean(), -logp.mean()

    def critic_regularizer(
        self,
        obs: torch.Tensor,
        next_obs: torch.Tensor,
        legal: torch.Tensor | None,
        q_taken: torch.Tensor,
        q_all: torch.Tensor | None,
    ) -> torch.Tensor | None:
        """min_q_weight * (temperature * logsumexp(Q(s, .) / temperature) - Q(s, a)), summed over the critics."""
        cfg = self.config
        if q_all is not None:
            q = q_all if legal is None else mask_logits(q_all, legal)
            soft_max = torch.logsumexp(q / cfg.temperature, dim=-1) * cfg.temperature
            return cfg.min_q_weight * (soft_max - q_taken).mean(dim=1).sum()
        rows, n = obs.shape[0], cfg.num_actions
        dim = math.prod(self.action_adapter.policy_space.shape or ())  # SAC acts in a flat Box here
        repeated = obs.repeat_interleave(n, 0)
        with torch.no_grad():  # the penalty moves the critics only
            uniform = self.random_rows(lambda k: torch.rand((k, dim), generator=self.torch_rng, device=obs.device), rows, n)
            uniform = uniform * 2.0 - 1.0
            current, current_logp = self.squashed_sample(self.model.actor(repeated), n)
            following = self.split_action_mask(next_obs)[0].repeat_interleave(n, 0)
            following_actions, following_logp = self.squashed_sample(self.model.actor(following), n)
        q = self.model.q_values(repeated.repeat(3, *[1] * (obs.dim() - 1)), torch.cat([uniform, current, following_actions]))
        q = q.view(q.shape[0], 3, rows, n)
        # each sample weighed by its density: uniform on [-1, 1]^dim, and the policy's own
        log_density = torch.stack(
            [
                torch.full((rows, n), -dim * math.log(2.0), device=obs.device),
                current_logp.view(rows, n),
                following_logp.view(rows, n),
            ]
        )
        weighed = (q - log_density).permute(0, 2, 1, 3).reshape(q.shape[0], rows, 3 * n)
        soft_max = torch.logsumexp(weighed / cfg.temperature, dim=-1) * cfg.temperature
        return cfg.min_q_weight * (soft_max - q_taken).mean(dim=1).sum()

    def get_state(self) -> dict[str, Any]:
        """SAC's state plus the update count."""
        return {**super().get_state(), "num_updates": self.num_updates}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore SAC's state and the update count."""
        num_updates = restored_count(state.get("num_updates", 0), "num_updates")
        super().set_state(state)
        self.num_updates = num_updates


class CQL(SAC):
    """Conservative Q-learning for Box and Discrete actions, usually from recorded experiences."""

    config_class = CQLConfig
    policy_class = CQLPolicy


class CQLTorchLearner(TorchLearner):
    """CQL's Learner (RLlib's name): subclass it to replace a part of CQL's update (see corral.core.Learner)."""

    policy_classes = (CQLPolicy,)
