"""SAC's networks: an actor, an ensemble of critics and the entropy temperature, in one module.

A ``custom_model`` (RLlib's old stack: in ``policy_model_config`` and
``q_model_config``) replaces the actor or the critics. The actor's is built for
the observations with the action distribution's inputs as outputs (an RLModule
gives its ``action_dist_inputs``); the critics', as RLlib builds them, for the
flat observations with the actions concatenated (Box actions; one output) or for
the observations alone (Discrete actions; a Q-value per action), once per critic.
"""

from __future__ import annotations

import math
from typing import Any, cast

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from corral.core import Model, ModelConfig, SampleBatch, build_encoder
from corral.core.common.spaces import ObservationPreprocessor, is_image_space
from corral.core.networks.critics import EnsembleCritic
from corral.core.networks.custom_model import custom_network
from corral.core.networks.rl_module import is_rl_module
from corral.errors import ConfigError


class CustomCritics(nn.Module):
    """``k`` critics, each a ``custom_model``: the same interface as :class:`EnsembleCritic`, one network at a time.

    Args:
        cls: the ``custom_model`` class (a ModelV2, a plain module or a corral ``Model``; not an RLModule).
        obs_space: the observations' space, as the policy preprocesses them.
        action_space: the space the policy acts in.
        k: how many critics.
        action_dim: the width of the actions concatenated to the observations (0: Discrete actions).
        num_outputs: each critic's outputs (1 for Box actions, the number of actions for Discrete).
        config: the critics' model config.

    Raises:
        ConfigError: an RLModule, image observations with Box actions, or a model that cannot be built.
    """

    def __init__(
        self,
        cls: type,
        obs_space: gym.Space,
        action_space: gym.Space,
        k: int,
        action_dim: int,
        num_outputs: int,
        config: ModelConfig,
    ) -> None:
        super().__init__()
        if is_rl_module(cls):
            raise ConfigError(
                f"q_model_config.custom_model={cls.__qualname__} is an RLModule, a policy network whose outputs are "
                "an action distribution's inputs; SAC's critics take a ModelV2 or a plain torch module (Q-values out)"
            )
        space = obs_space
        if action_dim:
            if is_image_space(obs_space):
                raise ConfigError(
                    f"q_model_config.custom_model={cls.__qualname__}: with Box actions a critic reads the observations "
                    "and the actions as one flat vector, which images are not; leave the critics to SAC's own networks"
                )
            width = ObservationPreprocessor(obs_space).shape[0] + action_dim
            space = gym.spaces.Box(-np.inf, np.inf, (width,), np.float32)
        self.members = nn.ModuleList(
            custom_network(cls, space, action_space, num_outputs, config, "a SAC critic") for _ in range(k)
        )

    def forward(self, obs: torch.Tensor, actions: torch.Tensor | None = None, frozen: bool = False) -> torch.Tensor:
        """``[k, B, num_outputs]``: every critic's estimate.

        Args:
            obs: ``[B, ...]`` preprocessed observations.
            actions: ``[B, action_dim]`` actions, concatenated to the flat observations (Box actions); None for
                Discrete actions.
            frozen: the critics' weights get no gradient from the result, the actions still do.
        """
        x = obs.reshape(obs.shape[0], -1).float() if actions is not None else obs
        if actions is not None:
            x = torch.cat([x, actions], dim=-1)
        outputs = []
        for member in self.members:
            if frozen:  # the critic's weights get no gradient; the actions still do
                detached = {name: p.detach() for name, p in member.named_parameters()}
                outputs.append(torch.func.functional_call(member, detached, (x,)))
            else:
                outputs.append(member(x))
        return torch.stack(outputs)


class SACModel(Model):
    """Actor, critics and ``log_alpha``; acting reads only the actor.

    Keeping all of them in one module means weights, checkpoints and target
    copies need no special handling.
    """

    def __init__(
        self,
        obs_space: gym.Space,
        action_space: gym.Space,
        config: ModelConfig,
        twin_q: bool,
        initial_alpha: float,
        critic_config: ModelConfig | None = None,
    ) -> None:
        super().__init__()
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        k = 2 if twin_q else 1
        critic_config = critic_config or config
        if isinstance(action_space, gym.spaces.Discrete):
            actor_outputs = n = int(action_space.n)
            action_dim, q_outputs = 0, n
        else:
            action_dim = int(np.prod(cast(gym.spaces.Box, action_space).shape))  # SAC acts in a Box or a Discrete space
            actor_outputs, q_outputs = 2 * action_dim, 1
        actor_class, critic_class = config.model_class(), critic_config.model_class()
        if actor_class is None:
            encoder, features = build_encoder(obs_space, config)
            self.actor: nn.Module = nn.Sequential(encoder, nn.Linear(features, actor_outputs))
        else:
            self.actor = custom_network(actor_class, obs_space, action_space, actor_outputs, config, "SAC's actor")
        if critic_class is None:
            self.critics: nn.Module = EnsembleCritic(obs_space, k, action_dim, q_outputs, critic_config)
        else:
            self.critics = CustomCritics(critic_class, obs_space, action_space, k, action_dim, q_outputs, critic_config)
        self.log_alpha = nn.Parameter(torch.tensor(math.log(initial_alpha)))

    def _forward(self, obs: torch.Tensor) -> dict[str, torch.Tensor]:
        return {SampleBatch.ACTION_DIST_INPUTS: self.actor(obs)}

    def forward(self, obs: Any) -> Any:  # RLlib's input dict too
        """The actor's outputs for a batch of observations; given RLlib's input dict, RLlib's ``(model_out, [])``.

        RLlib's SAC model passes the observations on as the features its heads
        read (``model_out, _ = model({"obs": obs})``, then :meth:`get_q_values`).

        Args:
            obs: ``[B, ...]`` preprocessed observations, or a dict holding them under ``obs``.
        """
        if isinstance(obs, dict):
            return torch.as_tensor(obs[SampleBatch.OBS]).float(), []
        return self._forward(obs)

    def q_values(self, obs: torch.Tensor, actions: torch.Tensor | None = None, frozen: bool = False) -> torch.Tensor:
        """Every critic's estimate: ``[k, B]`` Q(s, a) for Box actions, ``[k, B, n]`` Q(s, .) for Discrete ones.

        Args:
            obs: ``[B, ...]`` preprocessed observations.
            actions: ``[B, action_dim]`` actions in the policy's action space; required for
                Box actions, ignored for Discrete ones (every action's value comes back).
            frozen: the critics' weights get no gradient from the result (see :class:`EnsembleCritic`).
        """
        if self.discrete:
            return self.critics(obs, frozen=frozen)
        return self.critics(obs, actions, frozen).squeeze(-1)

    def get_q_values(self, model_out: torch.Tensor, actions: torch.Tensor | None = None) -> tuple[torch.Tensor, list[Any]]:
        """RLlib's ``SACTorchModel.get_q_values``: the first critic's Q(s, a) (Q(s, .) for Discrete actions).

        Args:
            model_out: ``[B, ...]`` observations, as RLlib's SAC model passes them on (cast to float32, as its
                networks do).
            actions: ``[B, action_dim]`` actions, for Box action spaces.

        Returns:
            ``[B, 1]`` values (``[B, n]`` for Discrete actions), and the empty state list RLlib returns beside.
        """
        return self._critic_values(model_out, actions, 0), []

    def get_twin_q_values(self, model_out: torch.Tensor, actions: torch.Tensor | None = None) -> tuple[torch.Tensor, list[Any]]:
        """RLlib's ``SACTorchModel.get_twin_q_values``: the second critic's values, as :meth:`get_q_values`.

        Args:
            model_out: ``[B, ...]`` observations.
            actions: ``[B, action_dim]`` actions, for Box action spaces.

        Raises:
            ValueError: the model has one critic (``twin_q=False``).
        """
        return self._critic_values(model_out, actions, 1), []

    def _critic_values(self, model_out: torch.Tensor, actions: torch.Tensor | None, index: int) -> torch.Tensor:
        q = self.q_values(model_out.float(), None if actions is None else actions.float())
        if index >= q.shape[0]:
            raise ValueError("this SAC model has one Q network (twin_q=False): there are no twin Q values")
        return q[index] if self.discrete else q[index].unsqueeze(-1)

    def critic_parameters(self) -> list[nn.Parameter]:
        """Parameters of the critics."""
        return list(self.critics.parameters())
