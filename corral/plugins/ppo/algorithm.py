"""The PPO algorithm: sample a train batch, learn on it."""

from __future__ import annotations

from typing import Any

from corral.core.plugin_api import PLUGIN_API_VERSION
from corral.core import Algorithm
from corral.plugins.ppo.config import PPOConfig
from corral.plugins.ppo.policy import PPOPolicy


class PPO(Algorithm):
    """Proximal Policy Optimization with GAE, for Discrete, MultiDiscrete and Box actions."""

    config_class = PPOConfig
    policy_class = PPOPolicy
    corral_api = PLUGIN_API_VERSION

    def training_step(self) -> dict[str, dict[str, Any]]:
        """Collect one train batch (``train_batch_size`` env steps, less reset rows), then learn on it."""
        samples = self.sample()
        return self.learn_on_batch(samples)
