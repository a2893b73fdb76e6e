"""Critics computed as one ensemble: twin (or more) Q networks in batched matmuls, for replay-based actor-critics."""

from __future__ import annotations

import itertools
import math
from typing import Any

import gymnasium as gym
import torch
from torch import nn

from corral.core.common.spaces import ObservationPreprocessor, is_image_space
from corral.core.contracts.config import ModelConfig
from corral.core.networks.default_models import ACTIVATIONS, build_encoder


class EnsembleLinear(nn.Module):
    """``k`` independent linear layers computed in one batched matmul: ``[k, B, in] -> [k, B, out]``."""

    def __init__(self, k: int, n_in: int, n_out: int, gain: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(k, n_in, n_out))
        self.bias = nn.Parameter(torch.zeros(k, 1, n_out))
        for member in self.weight.data:
            nn.init.orthogonal_(member, gain)

    def forward(self, x: torch.Tensor, frozen: bool = False) -> torch.Tensor:
        """Each member's affine map of its own slice of ``x``: one batched matmul for all of them.

        Args:
            x: ``[k, B, in]`` inputs.
            frozen: the weights get no gradient from the result (``x`` still does).
        """
        if frozen:
            return torch.baddbmm(self.bias.detach(), x, self.weight.detach())
        return torch.baddbmm(self.bias, x, self.weight)


class EnsembleCritic(nn.Module):
    """``k`` critics computed together: Q(s, a) for Box actions, Q(s, .) for Discrete ones.

    Twin critics as one ensemble halve the number of small operations per
    update, which is what bounds SAC's and TD3's speed with small networks on
    a CPU. Each critic reads the observations through an encoder of its own
    where ``encoder_config`` asks for one (DDPG's ``use_state_preprocessor``),
    and image observations always do (a CNN without fully connected layers by
    default); otherwise the flat observations, the actions concatenated.

    Args:
        obs_space: the observations' space, as the policy preprocesses them.
        k: how many critics.
        action_dim: the width of the actions concatenated to the features (0: Discrete actions, none).
        num_outputs: each critic's outputs (1 for Box actions, the number of actions for Discrete).
        config: ``fcnet_hiddens`` and ``fcnet_activation``: the critics' layers after the features.
        encoder_config: the model config of each critic's own encoder; None: flat observations (a bare CNN for images).
    """

    def __init__(
        self,
        obs_space: gym.Space[Any],
        k: int,
        action_dim: int,
        num_outputs: int,
        config: ModelConfig,
        encoder_config: ModelConfig | None = None,
    ) -> None:
        super().__init__()
        self.k = k
        if encoder_config is None and is_image_space(obs_space):
            encoder_config = config.model_copy(update={"fcnet_hiddens": []})
        if encoder_config is not None:
            encoders = [build_encoder(obs_space, encoder_config) for _ in range(k)]
            self.encoders: nn.ModuleList | None = nn.ModuleList(e for e, _ in encoders)
            features = encoders[0][1]
        else:
            self.encoders = None
            features = ObservationPreprocessor(obs_space).shape[0]
        sizes = [features + action_dim, *config.fcnet_hiddens]
        self.hidden = nn.ModuleList(EnsembleLinear(k, a, b, math.sqrt(2)) for a, b in itertools.pairwise(sizes))
        self.out = EnsembleLinear(k, sizes[-1], num_outputs, 1.0)
        self.activation = ACTIVATIONS[config.fcnet_activation]()

    def forward(self, obs: torch.Tensor, actions: torch.Tensor | None = None, frozen: bool = False) -> torch.Tensor:
        """``[k, B, num_outputs]``: every critic's estimate.

        Args:
            obs: ``[B, ...]`` preprocessed observations (``[B, features]``, or ``[B, H, W, C]`` images).
            actions: ``[B, action_dim]`` actions, concatenated to the features (Box actions);
                None for critics built with ``action_dim=0`` (Discrete actions).
            frozen: the critics' weights get no gradient from the result, the actions still do
                (SAC's actor reads the critics this way, so its loss moves only the actor).
        """
        if self.encoders is None:
            x = obs.reshape(obs.shape[0], -1).expand(self.k, -1, -1)
        else:
            x = torch.stack([encoder(obs) for encoder in self.encoders])
            if frozen:  # the features do not depend on the actions: no gradient is lost
                x = x.detach()
        if actions is not None:
            x = torch.cat([x, actions.expand(self.k, -1, -1)], dim=-1)
        for layer in self.hidden:
            x = self.activation(layer(x, frozen))
        out: torch.Tensor = self.out(x, frozen)
        return out
