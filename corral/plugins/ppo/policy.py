"""PPO's loss and update: clipped surrogate, value loss, entropy bonus, adaptive KL penalty."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from corral.core import (
    ActorCriticPolicy,
    SampleBatch,
    TorchLearner,
    joint_norm,
    overrides_rllib_loss,
    saturate,
    standardize,
    update_loss,
)
from corral.core.learning.policies.kl_penalty import AdaptiveKLPolicy
from corral.plugins.ppo.config import PPOConfig

_TRAIN_COLUMNS = [
    SampleBatch.OBS,
    SampleBatch.ACTIONS,
    SampleBatch.ACTION_LOGP,
    SampleBatch.ACTION_DIST_INPUTS,
    SampleBatch.ADVANTAGES,
    SampleBatch.VALUE_TARGETS,
    SampleBatch.VF_PREDS,
]


class PPOPolicy(AdaptiveKLPolicy, ActorCriticPolicy):
    """Actor-critic policy trained by several epochs of clipped-surrogate minibatch SGD.

    RLlib's ``PPOTorchPolicy`` protocol holds: a subclass may override
    :meth:`loss` (each minibatch's loss then comes from it) and the
    per-trajectory ``postprocess_trajectory(sample_batch, other_agent_batches,
    episode)``, whose extra columns reach the train batch, as RLlib's
    centralized-critic example does.
    """

    config: PPOConfig
    thread_safe_learning = True
    data_parallel_learning = True
    recurrent_models = True
    input_columns = tuple(_TRAIN_COLUMNS)

    def compute_loss(
        self, batch: dict[str, torch.Tensor], fwd_out: dict[str, torch.Tensor]
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """PPO's total loss on one minibatch, from the model's outputs for it, and its terms by name.

        Terms whose coefficient is zero are not computed; :meth:`_batch_stats`
        reports all of them once per update instead of once per minibatch.
        """
        return self._loss_terms(batch, fwd_out, every_term=False)

    def _loss_terms(
        self, t: dict[str, torch.Tensor], out: dict[str, torch.Tensor], every_term: bool
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The total loss and its terms (zero-coefficient ones only if ``every_term``)."""
        cfg = self.config
        dist = self.dist_class(out[SampleBatch.ACTION_DIST_INPUTS])
        advantages = t[SampleBatch.ADVANTAGES]
        ratio = torch.exp(dist.logp(t[SampleBatch.ACTIONS]) - t[SampleBatch.ACTION_LOGP])
        surrogate = torch.min(
            advantages * ratio, advantages * ratio.clamp(saturate(1 - cfg.clip_param), saturate(1 + cfg.clip_param))
        )
        terms = {"policy_loss": -surrogate.mean(), "vf_loss": self._vf_loss(out[SampleBatch.VF_PREDS], t)}
        total = terms["policy_loss"] + cfg.vf_loss_coeff * terms["vf_loss"]
        entropy_coeff = self.scheduled("entropy_coeff")
        if every_term or entropy_coeff > 0:
            terms["entropy"] = dist.entropy().mean()
            total = total - entropy_coeff * terms["entropy"]
        if every_term or self.kl_coeff > 0:
            terms["kl"] = self.dist_class(t[SampleBatch.ACTION_DIST_INPUTS]).kl(dist).mean()
            total = total + self.kl_coeff * terms["kl"]
        return total, terms

    @update_loss
    def loss(self, model: nn.Module, dist_class: Any, train_batch: SampleBatch) -> torch.Tensor:
        """RLlib's ``PPOTorchPolicy.loss``: PPO's total loss on a minibatch, for a subclass's override to call.

        The model's training pass runs on ``train_batch`` as PPO's own update
        runs it, so an override that swaps ``model.value_function`` before
        calling this (a centralized critic) gets PPO's loss over its values.

        Args:
            model: the policy's model (``self.model``, as RLlib passes it).
            dist_class: the action distribution class (the policy's own is used).
            train_batch: the minibatch's columns as tensors.

        Returns:
            The total loss.
        """
        out, rows = self.train_forward(dict(train_batch))
        self.__dict__["_rllib_forward"] = (out, rows)  # the stats pass reads the outputs the override's loss used
        return self._loss_terms(rows, out, every_term=False)[0]

    def _vf_loss(self, values: torch.Tensor, t: dict[str, torch.Tensor]) -> torch.Tensor:
        """RLlib's value loss: the mean squared error, each row's clamped at ``vf_clip_param`` where it is set."""
        vf_loss = (values - t[SampleBatch.VALUE_TARGETS]).pow(2)
        if self.config.vf_clip_param is not None:
            vf_loss = vf_loss.clamp(max=saturate(self.config.vf_clip_param))
        return vf_loss.mean()

    @torch.no_grad()
    def _batch_stats(self, t: dict[str, torch.Tensor]) -> dict[str, float]:
        """Loss terms of the updated policy on the whole train batch, in one pass."""
        self.__dict__.pop("_rllib_forward", None)
        if overrides_rllib_loss(self):  # the subclass's loss, which may swap the values PPO's loss reads
            self.loss(self.model, self.rllib_dist_class, SampleBatch(t))
        out, rows = self.__dict__.pop("_rllib_forward", None) or self.train_forward(t)
        total, terms = self._loss_terms(rows, out, every_term=True)
        targets = rows[SampleBatch.VALUE_TARGETS]
        explained = 1.0 - torch.var(targets - out[SampleBatch.VF_PREDS]) / torch.var(targets)
        stats = {"total_loss": total, **terms, "vf_explained_var": explained}
        return dict(zip(stats, torch.stack(list(stats.values())).tolist(), strict=True))

    def learn_on_batch(self, batch: SampleBatch) -> dict[str, float]:
        """Several epochs of shuffled minibatch SGD; then adapt the KL coefficient.

        A recurrent policy's batch is sequences: they are shuffled whole, and a
        minibatch holds ``minibatch_size // max_seq_len`` of them (at least one), as in RLlib.
        """
        cfg = self.config
        lr = self.update_lr()
        # a subclass's own loss may read the columns its postprocessing added
        columns = [k for k, v in batch.items() if v.dtype != object] if overrides_rllib_loss(self) else _TRAIN_COLUMNS
        t = self.to_tensors(batch, columns)
        if cfg.normalize_advantages:
            t[SampleBatch.ADVANTAGES] = standardize(t[SampleBatch.ADVANTAGES], self.step_mask(t))
        n = batch.count
        size = cfg.whole_minibatch_size
        if self.is_recurrent:
            size = max(1, size // cfg.model.max_seq_len)
        grad_norms = []
        covered = self.group_rows(n)  # DD-PPO's runners loop over as many minibatches, however many rows each holds
        for _ in range(cfg.num_epochs):
            order = torch.randperm(n, device=self.device, generator=self.torch_rng)
            shuffled = {k: v[order] for k, v in t.items()}  # one gather per epoch; minibatches are then views
            for start in range(0, covered, size):
                minibatch = self.share({k: v[start : start + size] for k, v in shuffled.items()})  # a Learner's part
                grad_norm = joint_norm(self.apply_gradients(*self.minibatch_loss(minibatch)))
                grad_norms.append(grad_norm)
        stats = self._batch_stats(t)
        if cfg.kl_coeff > 0:
            self.adapt_kl_coeff(stats["kl"])
        stats.update(
            grad_gnorm=float(torch.stack(grad_norms).mean()),
            cur_kl_coeff=self.kl_coeff,
            cur_lr=lr,
            num_sgd_updates=len(grad_norms),
        )
        return stats


class PPOTorchLearner(TorchLearner):
    """PPO's Learner (RLlib's name): subclass it to replace a part of PPO's update (see corral.core.Learner)."""

    policy_classes = (PPOPolicy,)
