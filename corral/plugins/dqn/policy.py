"""DQN's update: TD(n) targets with double Q, Huber loss, prioritized-replay weights."""

from __future__ import annotations

from typing import Any, cast

import gymnasium as gym
import torch
import torch.nn.functional as F
from torch import nn

from corral.core import SampleBatch, TorchLearner, build_q_model, joint_norm
from corral.core.learning.off_policy import OffPolicyPolicy
from corral.plugins.dqn.config import DQNConfig


class DQNPolicy(OffPolicyPolicy):
    """A Q-network acting through its exploration (EpsilonGreedy by default)."""

    config: DQNConfig
    thread_safe_learning = True
    data_parallel_learning = True

    def make_model(self) -> nn.Module:
        """Q-values for every action, dueling if configured; a custom_model is the network under the Q head."""
        cfg = self.config
        actions = cast(gym.spaces.Discrete, self.action_space)
        return build_q_model(self.model_observation_space, actions, cfg.model, dueling=cfg.dueling, hiddens=cfg.hiddens)

    def learn_on_batch(self, batch: SampleBatch) -> dict[str, Any]:
        """One gradient step on a replayed minibatch; returns stats and per-row TD errors."""
        cfg = self.config
        lr = self.update_lr()
        t = self.share(self.to_tensors(batch, self.REPLAY_COLUMNS))
        q_all = self.model.forward_train(t[SampleBatch.OBS])[SampleBatch.ACTION_DIST_INPUTS]
        q = q_all.gather(1, t[SampleBatch.ACTIONS].long().unsqueeze(1)).squeeze(1)
        target = self._td_targets(t, self.target_model)
        td_error = q - target
        per_row = F.smooth_l1_loss(q, target, reduction="none") if cfg.td_error_loss_fn == "huber" else 0.5 * td_error.pow(2)
        loss = (t[SampleBatch.WEIGHTS] * per_row).mean()
        grad_norm = joint_norm(self.apply_gradients(loss, {"q_values": q, "td_targets": target}, len(q)))
        names = ("loss", "mean_q", "max_q", "mean_td_error", "grad_gnorm")
        values = torch.stack(
            [loss.detach(), q.detach().mean(), q.detach().max(), td_error.detach().abs().mean(), grad_norm]
        ).tolist()
        stats: dict[str, Any] = dict(zip(names, values, strict=True))
        stats.update(cur_lr=lr, **self.exploration.get_info(self.global_timestep))
        stats[self.TD_ERROR] = td_error.detach().cpu().numpy()
        return stats

    @torch.no_grad()
    def _td_targets(self, t: dict[str, torch.Tensor], target_model: nn.Module) -> torch.Tensor:
        """n-step TD targets: double Q picks the next action with the online network, ``target_model`` values it."""
        next_target = target_model(t[SampleBatch.NEXT_OBS])[SampleBatch.ACTION_DIST_INPUTS]
        if self.config.double_q:
            best = self.model(t[SampleBatch.NEXT_OBS])[SampleBatch.ACTION_DIST_INPUTS].argmax(dim=1, keepdim=True)
            next_q = next_target.gather(1, best).squeeze(1)
        else:
            next_q = next_target.max(dim=1).values
        return t[SampleBatch.REWARDS] + t[SampleBatch.DISCOUNTS] * next_q

    def postprocess_trajectory(self, fragment: SampleBatch, bootstrap_obs: Any) -> SampleBatch:
        """n-step transitions; with ``worker_side_prioritization``, each row's replay priority ``|TD error|`` too.

        The priorities are computed where the rows were sampled (an env runner in
        Ape-X), with that copy's weights. A runner holds no target network, so its
        own network values the next step (Horgan et al., 2018: actors prioritize
        with their local copy).
        """
        rows = super().postprocess_trajectory(fragment, bootstrap_obs)
        if not self.config.replay_buffer_config.get("worker_side_prioritization") or not len(rows):
            return rows
        t = self.to_tensors(rows, [c for c in self.REPLAY_COLUMNS if c != SampleBatch.WEIGHTS])
        with torch.no_grad():
            q_all = self.model(t[SampleBatch.OBS])[SampleBatch.ACTION_DIST_INPUTS]
            q = q_all.gather(1, t[SampleBatch.ACTIONS].long().unsqueeze(1)).squeeze(1)
            td_error = q - self._td_targets(t, self.model)
        rows[SampleBatch.PRIORITIES] = td_error.abs().cpu().numpy()
        return rows


class DQNTorchLearner(TorchLearner):
    """DQN's Learner (RLlib's name): subclass it to replace a part of DQN's update (see corral.core.Learner)."""

    policy_classes = (DQNPolicy,)
