"""RLlib's ``PPOTorchRLModule``: PPO's actor and critic as an RLModule, for scripts that subclass it.

RLlib's examples wrap its forward passes (action masking reads the mask, hands
the rest of the observation to ``super()._forward_*`` and masks the logits it
returns), so the class is built as RLlib's is: ``setup()`` makes an actor and a
critic network from ``model_config`` (``fcnet_hiddens``, ``fcnet_activation``,
``vf_share_layers``, RLlib's defaults where absent), and the three passes
return ``action_dist_inputs``, exploration and training ``vf_preds`` too.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from corral.core.common.sample_batch import SampleBatch
from corral.core.networks.default_models import init_linear, mlp
from corral.core.networks.distributions import distribution_for
from corral.core.networks.rl_module import TorchRLModule
from corral.errors import ConfigError


class PPOTorchRLModule(TorchRLModule):
    """PPO's default RLModule: an actor network with a distribution head and a critic network with a value head.

    Raises:
        ConfigError: a recurrent ``model_config`` (``use_lstm``, ``use_attention``), which this
            feed-forward module does not build, or an observation space that is not a Box.
    """

    def setup(self) -> None:
        """Build the networks from ``model_config`` and the spaces."""
        config = self.model_config
        if config.get("use_lstm") or config.get("use_attention"):
            raise ConfigError(
                "PPOTorchRLModule builds feed-forward networks; for a recurrent PPO leave the RLModule out and set "
                "model={'use_lstm': True}"
            )
        if not isinstance(self.observation_space, gym.spaces.Box):
            raise ConfigError(f"PPOTorchRLModule reads Box observations, not {self.observation_space}")
        inputs = int(np.prod(self.observation_space.shape))
        hiddens = list(config.get("fcnet_hiddens", [256, 256]))
        activation = config.get("fcnet_activation", "tanh")
        self.actor_encoder = mlp([inputs, *hiddens], activation)
        self.critic_encoder = self.actor_encoder if config.get("vf_share_layers") else mlp([inputs, *hiddens], activation)
        assert self.action_space is not None  # corral builds modules with both spaces
        _, outputs = distribution_for(self.action_space)
        width = hiddens[-1] if hiddens else inputs
        self.pi = init_linear(nn.Linear(width, outputs), 0.01)  # corral's policy heads: outputs near zero at first
        self.vf = init_linear(nn.Linear(width, 1), 1.0)

    def _flat_obs(self, batch: dict[str, Any]) -> torch.Tensor:
        obs = batch[SampleBatch.OBS]
        return obs.reshape(obs.shape[0], -1).float()

    # each pass computes on its own: a subclass wraps them one by one (RLlib's action masking), so none calls another
    def _forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """The action distribution's inputs."""
        return {SampleBatch.ACTION_DIST_INPUTS: self.pi(self.actor_encoder(self._flat_obs(batch)))}

    def _forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """The action distribution's inputs and the value estimates."""
        return self._with_values(batch)

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """The action distribution's inputs and the value estimates."""
        return self._with_values(batch)

    def _with_values(self, batch: dict[str, Any]) -> dict[str, Any]:
        obs = self._flat_obs(batch)
        features = self.actor_encoder(obs)
        critic = features if self.critic_encoder is self.actor_encoder else self.critic_encoder(obs)  # vf_share_layers
        return {SampleBatch.ACTION_DIST_INPUTS: self.pi(features), SampleBatch.VF_PREDS: self.vf(critic).squeeze(-1)}

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        """The critic's value estimates of the batch's observations (where a pass returned none).

        Args:
            batch: the batch, ``obs`` as this module reads it.
            embeddings: RLlib's argument; this module computes from the observations.

        Returns:
            ``[B]`` values.
        """
        return self.vf(self.critic_encoder(self._flat_obs(batch))).squeeze(-1)
