"""The PPO algorithm: sample a train batch, learn on it."""

from __future__ import annotations

from corral.core import PLUGIN_API_VERSION, Algorithm
from corral.plugins.ppo.config import PPOConfig
from corral.plugins.ppo.policy import PPOPolicy


class PPO(Algorithm):
    """Proximal Policy Optimization with GAE, for Discrete, MultiDiscrete and Box actions."""

    config_class = PPOConfig
    policy_class = PPOPolicy
    corral_api = PLUGIN_API_VERSION
