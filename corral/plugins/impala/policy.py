"""IMPALA's update: an actor-critic loss on V-trace targets, from sequences sampled with older weights."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from corral.core import Policy, SampleBatch, to_floats, vtrace
from corral.plugins.impala.config import IMPALAConfig

_SEQUENCE_COLUMNS = [
    SampleBatch.OBS,
    SampleBatch.ACTIONS,
    SampleBatch.REWARDS,
    SampleBatch.TERMINATEDS,
    SampleBatch.TRUNCATEDS,
    SampleBatch.ACTION_LOGP,
    SampleBatch.VALID,
]


class IMPALAPolicy(Policy):
    """Keeps each sub-environment's fragment as one sequence; V-trace runs at learning time.

    The targets must use the learner's current value function and policy, so
    nothing is estimated when sampling: a batch row is a whole sequence
    (``[B, T, ...]`` columns) plus the observation to bootstrap from.
    """

    config: IMPALAConfig
    thread_safe_learning = True
    required_model_outputs = (SampleBatch.ACTION_DIST_INPUTS, SampleBatch.VF_PREDS)
    input_columns = (*_SEQUENCE_COLUMNS, SampleBatch.BOOTSTRAP_OBS)
    postprocessing_columns = (SampleBatch.VALID, SampleBatch.BOOTSTRAP_OBS)  # sequences: only postprocessing cuts them

    def postprocess_trajectory(self, fragment: SampleBatch, bootstrap_obs: np.ndarray) -> SampleBatch:
        """One row per sub-environment: its ``[T, ...]`` sequence and its bootstrap observation."""
        # copies: the runner writes its next fragment into the same buffers
        sequences = {k: np.ascontiguousarray(np.swapaxes(fragment[k], 0, 1)) for k in _SEQUENCE_COLUMNS}
        return SampleBatch({**sequences, SampleBatch.BOOTSTRAP_OBS: np.asarray(bootstrap_obs)})

    def learn_on_batch(self, batch: SampleBatch) -> dict[str, Any]:
        """One gradient step on the V-trace actor-critic loss over every sequence of the batch."""
        cfg = self.config
        lr = self.update_lr()
        t = self.to_tensors(batch, [*_SEQUENCE_COLUMNS, SampleBatch.BOOTSTRAP_OBS])
        time_major = {k: t[k].transpose(0, 1) for k in _SEQUENCE_COLUMNS}  # [T, B, ...]
        steps, sequences = time_major[SampleBatch.REWARDS].shape
        obs = time_major[SampleBatch.OBS].reshape(steps * sequences, *time_major[SampleBatch.OBS].shape[2:])
        out = self.model.forward_train(obs)
        dist = self.dist_class(out[SampleBatch.ACTION_DIST_INPUTS])
        actions = time_major[SampleBatch.ACTIONS].reshape(steps * sequences, *time_major[SampleBatch.ACTIONS].shape[2:])
        target_logp = dist.logp(actions).view(steps, sequences)
        values = out[SampleBatch.VF_PREDS].view(steps, sequences)
        with torch.no_grad():
            last_values = self.model.forward_train(t[SampleBatch.BOOTSTRAP_OBS])[SampleBatch.VF_PREDS]
        valid = time_major[SampleBatch.VALID].float()
        vs, pg_advantages = vtrace(
            time_major[SampleBatch.ACTION_LOGP], target_logp, time_major[SampleBatch.REWARDS], values, last_values,
            time_major[SampleBatch.TERMINATEDS], time_major[SampleBatch.TRUNCATEDS], valid, cfg.gamma,
            cfg.vtrace_clip_rho_threshold, cfg.vtrace_clip_c_threshold, cfg.vtrace_clip_pg_rho_threshold,
        )  # fmt: skip
        count = valid.sum().clamp(min=1.0)
        policy_loss = -(target_logp * pg_advantages).sum() / count
        vf_loss = 0.5 * ((values - vs).pow(2) * valid).sum() / count
        entropy = (dist.entropy().view(steps, sequences) * valid).sum() / count
        total = policy_loss + cfg.vf_loss_coeff * vf_loss - self.scheduled("entropy_coeff") * entropy
        (grad_norm,) = self.apply_gradients(total, {"policy_loss": policy_loss, "vf_loss": vf_loss, "entropy": entropy})
        stats = {"total_loss": total, "policy_loss": policy_loss, "vf_loss": vf_loss, "entropy": entropy, "grad_gnorm": grad_norm}
        return {**to_floats(stats), "cur_lr": lr}
