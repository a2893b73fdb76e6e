"""MARWIL's update: log-likelihood of the data's actions, weighted by exp(beta * advantage / scale), plus a value loss."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import nn

from corral.core import Policy, SampleBatch, TorchLearner, add_gae, build_model, joint_norm, restored_float, to_floats
from corral.core.learning.recurrent.sequences import inputs_after, step_inputs
from corral.plugins.marwil.config import MARWILConfig

_MAX_EXPONENT = 20.0
"""exp(20) already outweighs every other row of a batch; a larger exponent would only overflow"""


class MARWILPolicy(Policy):
    """A policy with a value head, learning to imitate the actions that did better than its value expects.

    Postprocessing gives every row its discounted return to the end of the
    episode (``value_targets``; the value of the next observation bootstraps a
    truncated one); the advantage is that return minus the value estimate.
    A recurrent model (``use_lstm``, ``use_attention``) learns on sequences that
    start from the recorded state (``state_in_k``), as RLlib's does.
    """

    config: MARWILConfig
    thread_safe_learning = True
    data_parallel_learning = True
    recurrent_models = True
    required_model_outputs: tuple[str, ...] = (SampleBatch.ACTION_DIST_INPUTS, SampleBatch.VF_PREDS)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ma_sqd_adv_norm = self.config.moving_average_sqd_adv_norm_start

    def postprocess_trajectory(self, fragment: SampleBatch, bootstrap_obs: np.ndarray) -> SampleBatch:
        """Add each row's discounted return to the episode's end (or to a bootstrap value), then flatten (or cut into sequences).

        A recurrent model's values are each step's as it acted: from the
        recorded state at the step (see :func:`step_inputs`).
        """
        if self.config.beta == 0:
            return self.training_rows(fragment)
        obs = fragment[SampleBatch.OBS]
        initial = self.get_initial_state()  # [] without memory
        at_rows = step_inputs(fragment, initial) if initial else {}
        values = self.compute_values(obs.reshape(-1, *obs.shape[2:]), **at_rows).reshape(obs.shape[:2])
        with_values = SampleBatch({**fragment, SampleBatch.VF_PREDS: values.astype(np.float32)})
        after = inputs_after(fragment, initial) if initial else {}
        # lambda 1: value_targets are the discounted returns, bootstrapped where an episode is truncated
        returns = add_gae(with_values, self.compute_values(bootstrap_obs, **after), self.config.gamma, 1.0)
        return self.training_rows(returns)

    def learn_on_batch(self, batch: SampleBatch) -> dict[str, float]:
        """One gradient step on the whole batch."""
        cfg = self.config
        lr = self.update_lr()
        keys = [SampleBatch.OBS, SampleBatch.ACTIONS] + ([SampleBatch.VALUE_TARGETS] if cfg.beta > 0 else [])
        total, terms = self.minibatch_loss(self.share(self.to_tensors(batch, keys)))
        grad_norm = joint_norm(self.apply_gradients(total, terms))
        stats = {**to_floats({**terms, "grad_gnorm": grad_norm}), "cur_lr": lr}
        if cfg.beta > 0:
            stats["moving_average_sqd_adv_norm"] = float(self.ma_sqd_adv_norm)
        return stats

    def compute_loss(
        self, batch: dict[str, torch.Tensor], fwd_out: dict[str, torch.Tensor]
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """MARWIL's loss (BC's with ``beta`` 0) on the batch, from the model's outputs; it moves the advantages' scale."""
        cfg = self.config
        dist = self.dist_class(fwd_out[SampleBatch.ACTION_DIST_INPUTS])
        logp = dist.logp(batch[SampleBatch.ACTIONS])
        log_std = getattr(dist, "log_std", None)  # Box actions' Gaussians have one
        if cfg.bc_logstd_coeff > 0 and log_std is not None:
            logp = logp + cfg.bc_logstd_coeff * log_std.sum(-1)
        terms: dict[str, torch.Tensor] = {}
        if cfg.beta > 0:
            advantages = batch[SampleBatch.VALUE_TARGETS] - fwd_out[SampleBatch.VF_PREDS]
            sqd_adv = self.batch_mean(advantages.detach().pow(2))  # on Learners, of every share
            self.ma_sqd_adv_norm += cfg.moving_average_sqd_adv_norm_update_rate * (float(sqd_adv) - self.ma_sqd_adv_norm)
            scale = 1e-8 + math.sqrt(self.ma_sqd_adv_norm)
            weights = torch.exp((cfg.beta * advantages.detach() / scale).clamp(max=_MAX_EXPONENT))
            policy_loss = -(weights * logp).mean()
            terms["vf_loss"] = 0.5 * advantages.pow(2).mean()
            total = policy_loss + cfg.vf_coeff * terms["vf_loss"]
        else:
            policy_loss = total = -logp.mean()
        terms.update(policy_loss=policy_loss, total_loss=total)
        return total, terms

    def get_state(self) -> dict[str, Any]:
        """The base state plus the running mean of squared advantages."""
        return {**super().get_state(), "ma_sqd_adv_norm": float(self.ma_sqd_adv_norm)}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore the base state and the running mean of squared advantages."""
        start = self.config.moving_average_sqd_adv_norm_start
        norm = restored_float(state.get("ma_sqd_adv_norm", start), "ma_sqd_adv_norm", minimum=0.0)
        super().set_state(state)
        self.ma_sqd_adv_norm = norm


class BCPolicy(MARWILPolicy):
    """Behaviour cloning: it reads only observations and actions, and needs no returns nor a value function."""

    input_columns = (SampleBatch.OBS, SampleBatch.ACTIONS)
    required_model_outputs = (SampleBatch.ACTION_DIST_INPUTS,)

    def make_model(self) -> nn.Module:
        """The catalog's model, or a plain custom model, without a value head."""
        return build_model(
            self.model_observation_space, self.model_action_space, self.num_outputs, self.config.model, value_function=False
        )


class MARWILTorchLearner(TorchLearner):
    """MARWIL's Learner (RLlib's name): subclass it to replace a part of MARWIL's update (see corral.core.Learner)."""

    policy_classes = (MARWILPolicy,)


class BCTorchLearner(TorchLearner):
    """BC's Learner (RLlib's name): subclass it to replace a part of BC's update (see corral.core.Learner)."""

    policy_classes = (BCPolicy,)
