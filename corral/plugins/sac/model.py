"""SAC's networks: an actor, twin critics and the entropy temperature, in one module."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from corral.core import Model, ModelConfig, build_encoder, mlp


class ContinuousQ(nn.Module):
    """Q(s, a) for Box actions: an observation encoder, then an MLP over [features, action]."""

    def __init__(self, obs_space: gym.Space, action_dim: int, config: ModelConfig) -> None:
        super().__init__()
        self.encoder, features = build_encoder(obs_space, config.model_copy(update={"fcnet_hiddens": []}))
        self.head = mlp([features + action_dim, *config.fcnet_hiddens], config.fcnet_activation, out_size=1)

    def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        return self.head(torch.cat([self.encoder(obs), actions], dim=-1)).squeeze(-1)


class DiscreteQ(nn.Module):
    """Q(s, .) for Discrete actions: one output per action."""

    def __init__(self, obs_space: gym.Space, num_actions: int, config: ModelConfig) -> None:
        super().__init__()
        self.encoder, features = build_encoder(obs_space, config)
        self.head = nn.Linear(features, num_actions)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(obs))


class SACModel(Model):
    """Actor, twin critics and ``log_alpha``; acting reads only the actor.

    Keeping all of them in one module means weights, checkpoints and target
    copies need no special handling.
    """

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, config: ModelConfig, twin_q: bool, initial_alpha: float) -> None:
        super().__init__()
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        encoder, features = build_encoder(obs_space, config)
        if self.discrete:
            n = int(action_space.n)
            self.actor = nn.Sequential(encoder, nn.Linear(features, n))
            make_q = lambda: DiscreteQ(obs_space, n, config)  # noqa: E731
        else:
            dim = int(np.prod(action_space.shape))
            self.actor = nn.Sequential(encoder, nn.Linear(features, 2 * dim))
            make_q = lambda: ContinuousQ(obs_space, dim, config)  # noqa: E731
        self.q1 = make_q()
        self.q2 = make_q() if twin_q else None
        self.log_alpha = nn.Parameter(torch.tensor(math.log(initial_alpha)))

    def _forward(self, obs: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"action_dist_inputs": self.actor(obs)}

    def q_values(self, obs: torch.Tensor, actions: torch.Tensor | None = None) -> list[torch.Tensor]:
        """Each critic's estimate: Q(s, a) for Box actions, Q(s, .) for Discrete ones."""
        critics = [q for q in (self.q1, self.q2) if q is not None]
        return [q(obs) if self.discrete else q(obs, actions) for q in critics]

    def critic_parameters(self) -> list[nn.Parameter]:
        """Parameters of the Q networks."""
        return [p for q in (self.q1, self.q2) if q is not None for p in q.parameters()]
