"""R2D2's update: double-Q targets within each replayed sequence, after a burn-in, on rescaled values.

A replayed row is a sequence of at most ``max_seq_len`` steps (the env
runners' fragments cut as for any recurrent policy). The online and target
networks run over it from its start state: zeros with ``zero_init_states``,
else the state stored with it. Step ``t`` learns towards
``r_t + gamma * Q_target(s_{t+1}, argmax_a Q(s_{t+1}, a))`` (through the
h-function with ``use_h_function``), so a sequence's last step learns only
where its episode terminated there. With ``replay_burn_in``, each sequence
starts with up to that many steps before it, which only warm up the state. A
sequence's priority is the mean absolute TD error of the steps it learns
from, as RLlib's R2D2 computes it.
"""

from __future__ import annotations

from typing import Any, cast

import gymnasium as gym
import torch
import torch.nn.functional as F
from torch import nn

from corral.core import SampleBatch, build_model, joint_norm
from corral.core.common.sample_batch import STATE_IN_PREFIX, state_columns
from corral.core.learning.off_policy import OffPolicyPolicy
from corral.core.learning.recurrent.sequences import chop_into_sequences
from corral.core.networks.recurrent import RecurrentModel, initial_state
from corral.plugins.r2d2.config import R2D2Config


def h_function(x: torch.Tensor, epsilon: float) -> torch.Tensor:
    """R2D2's value rescaling: ``sign(x) * (sqrt(|x| + 1) - 1) + epsilon * x``.

    Args:
        x: values.
        epsilon: the linear term's weight.

    Returns:
        The rescaled values.
    """
    return torch.sign(x) * (torch.sqrt(x.abs() + 1) - 1) + epsilon * x


def h_inverse(x: torch.Tensor, epsilon: float) -> torch.Tensor:
    """The inverse of :func:`h_function`.

    Args:
        x: rescaled values.
        epsilon: the h-function's linear term's weight.

    Returns:
        The values before rescaling.
    """
    root = (torch.sqrt(1 + 4 * epsilon * (x.abs() + 1 + epsilon)) - 1) / (2 * epsilon)
    return torch.sign(x) * (root.pow(2) - 1)


class R2D2Policy(OffPolicyPolicy):
    """A recurrent Q-network acting through its exploration (EpsilonGreedy by default), learning on replayed sequences."""

    config: R2D2Config
    recurrent_models = True
    thread_safe_learning = True
    data_parallel_learning = True

    def make_model(self) -> nn.Module:
        """The catalog's recurrent model (``use_lstm``, ``use_attention``) or a recurrent custom model: Q-values out."""
        actions = cast(gym.spaces.Discrete, self.action_space)
        return build_model(self.model_observation_space, actions, int(actions.n), self.config.model, value_function=False)

    @property
    def replay_row_steps(self) -> int:
        """A replayed row is a sequence of up to ``replay_burn_in + max_seq_len`` steps (RLlib's count)."""
        return self.config.replay_burn_in + self.config.model.max_seq_len

    def postprocess_trajectory(self, fragment: SampleBatch, bootstrap_obs: Any) -> SampleBatch:
        """The fragment as sequences with their start states (targets are computed within them when replayed)."""
        return self.training_rows(fragment)

    def training_rows(self, fragment: SampleBatch) -> SampleBatch:
        """Sequences of ``max_seq_len`` steps, each with up to ``replay_burn_in`` steps of its episode before it."""
        return chop_into_sequences(fragment, self.config.model.max_seq_len, self.config.replay_burn_in)

    def input_rows(self, rows: SampleBatch, postprocessed: bool) -> SampleBatch:
        """Rows read from files: already sequences with their start states (:meth:`training_rows`), replayed as they are."""
        return rows

    def _start_states(self, t: dict[str, torch.Tensor], sequences: int) -> list[torch.Tensor]:
        """Each sequence's start state: zeros with ``zero_init_states``, else the state stored with it."""
        if self.config.zero_init_states:
            return [part.expand(sequences, *part.shape) for part in initial_state(self.model)]
        return [t[key] for key in state_columns(t, STATE_IN_PREFIX)]

    def learn_on_batch(self, batch: SampleBatch) -> dict[str, Any]:
        """One gradient step on replayed sequences; returns stats and each sequence's TD error (its new priority).

        Args:
            batch: sequences from the replay buffer, with their ``weights``.

        Returns:
            The learner stats.
        """
        cfg = self.config
        lr = self.update_lr()
        columns = (SampleBatch.OBS, SampleBatch.ACTIONS, SampleBatch.REWARDS, SampleBatch.TERMINATEDS, SampleBatch.WEIGHTS)
        t = self.share(self.to_tensors(batch, (*columns, *([SampleBatch.BURN_IN] if SampleBatch.BURN_IN in batch else []))))
        obs, seq_lens = t[SampleBatch.OBS], t[SampleBatch.SEQ_LENS]
        sequences, steps = obs.shape[:2]
        state = self._start_states(t, sequences)
        inputs = (obs, state, seq_lens, t.get(SampleBatch.PREV_ACTIONS), t.get(SampleBatch.PREV_REWARDS))
        q_all = cast(RecurrentModel, self.model).forward_train(*inputs)[SampleBatch.ACTION_DIST_INPUTS]
        q_all = q_all.reshape(sequences, steps, -1)
        q = q_all.gather(-1, t[SampleBatch.ACTIONS].long().unsqueeze(-1)).squeeze(-1)
        terminated = t[SampleBatch.TERMINATEDS].bool()
        with torch.no_grad():
            target_all = cast(RecurrentModel, self.target_model).forward_train(*inputs)[SampleBatch.ACTION_DIST_INPUTS]
            target_all = target_all.reshape(sequences, steps, -1)
            if cfg.double_q:
                following = target_all.gather(-1, q_all.argmax(dim=-1, keepdim=True)).squeeze(-1)
            else:
                following = target_all.max(dim=-1).values
            next_q = torch.zeros_like(q)
            next_q[:, :-1] = following[:, 1:]  # each step's successor within the sequence
            if cfg.use_h_function:
                next_q = h_inverse(next_q, cfg.h_function_epsilon)
            target = t[SampleBatch.REWARDS] + cfg.gamma * (~terminated).float() * next_q
            if cfg.use_h_function:
                target = h_function(target, cfg.h_function_epsilon)
        step = torch.arange(steps, device=obs.device).unsqueeze(0)
        ends = seq_lens.unsqueeze(1)
        # a step learns where its successor is in the sequence, or where its episode ended; not in the burn-in
        burn_in = t[SampleBatch.BURN_IN].unsqueeze(1) if SampleBatch.BURN_IN in t else 0
        learns = (step >= burn_in) & ((step + 1 < ends) | ((step < ends) & terminated))
        td_error = (q - target) * learns
        per_step = F.smooth_l1_loss(q, target, reduction="none") if cfg.td_error_loss_fn == "huber" else 0.5 * td_error.pow(2)
        counted = learns.sum().clamp(min=1)
        loss = (t[SampleBatch.WEIGHTS].unsqueeze(1) * per_step * learns).sum() / counted
        grad_norm = joint_norm(self.apply_gradients(loss, {"q_values": q, "td_targets": target}, int(learns.sum())))
        learned_q = q.detach()[learns]
        names = ("loss", "mean_q", "max_q", "mean_td_error", "grad_gnorm")
        values = [
            loss.detach(),
            learned_q.mean() if learned_q.numel() else q.new_zeros(()),
            learned_q.max() if learned_q.numel() else q.new_zeros(()),
            td_error.detach().abs().sum() / counted,
            grad_norm,
        ]
        stats: dict[str, Any] = dict(zip(names, torch.stack(values).tolist(), strict=True))
        stats.update(cur_lr=lr, **self.exploration.get_info(self.global_timestep))
        per_sequence = td_error.detach().abs().sum(dim=1) / learns.sum(dim=1).clamp(min=1)
        stats[self.TD_ERROR] = per_sequence.cpu().numpy()
        return stats
