"""DDPG's networks: a deterministic actor and an ensemble of critics, in one module (targets copy it whole)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from corral.core import Model, SampleBatch, build_encoder, mlp
from corral.core.networks.critics import EnsembleCritic

if TYPE_CHECKING:
    from corral.plugins.ddpg.config import DDPGConfig


class DDPGModel(Model):
    """The actor (observations to actions in [-1, 1] through tanh) and ``k`` critics Q(s, a); acting reads the actor.

    Args:
        obs_space: the observations' space, as the policy preprocesses them.
        action_space: the Box the policy acts in ([-1, 1] per dimension).
        config: the algorithm's config (its layers, ``twin_q``, ``use_state_preprocessor``, ``model``).
    """

    def __init__(self, obs_space: gym.Space[Any], action_space: gym.Space[Any], config: DDPGConfig) -> None:
        super().__init__()
        action_dim = int(np.prod(cast(gym.spaces.Box, action_space).shape))  # DDPG acts in a Box
        model = config.model
        # without the state preprocessor the layers read the flat observations (an image still goes through the CNN)
        in_front = model if config.use_state_preprocessor else model.model_copy(update={"fcnet_hiddens": []})
        encoder, features = build_encoder(obs_space, in_front)
        layers = mlp([features, *config.actor_hiddens], config.actor_hidden_activation, out_size=action_dim)
        self.actor = nn.Sequential(encoder, layers, nn.Tanh())
        # the critics' own layers, after model's conv settings (an image critic's CNN)
        critic_layers = model.model_copy(
            update={"fcnet_hiddens": config.critic_hiddens, "fcnet_activation": config.critic_hidden_activation}
        )
        encoder_config = model if config.use_state_preprocessor else None
        self.critics = EnsembleCritic(obs_space, 2 if config.twin_q else 1, action_dim, 1, critic_layers, encoder_config)

    def _forward(self, obs: torch.Tensor) -> dict[str, torch.Tensor]:
        return {SampleBatch.ACTION_DIST_INPUTS: self.actor(obs)}

    def q_values(self, obs: torch.Tensor, actions: torch.Tensor, frozen: bool = False) -> torch.Tensor:
        """``[k, B]``: every critic's Q(s, a).

        Args:
            obs: ``[B, ...]`` preprocessed observations.
            actions: ``[B, action_dim]`` actions in the policy's [-1, 1] space.
            frozen: the critics' weights get no gradient from the result, the actions still do (the actor's loss).
        """
        return self.critics(obs, actions, frozen).squeeze(-1)
