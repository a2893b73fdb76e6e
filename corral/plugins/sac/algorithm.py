"""The SAC algorithm: corral's shared replay loop with SAC's policy."""

from __future__ import annotations

import gymnasium as gym

from corral.core import PLUGIN_API_VERSION, OffPolicyAlgorithm
from corral.plugins.sac.config import SACConfig
from corral.plugins.sac.policy import SACPolicy


class SAC(OffPolicyAlgorithm):
    """Soft Actor-Critic for Box actions, and its discrete variant for Discrete ones."""

    config_class = SACConfig
    policy_class = SACPolicy
    supported_action_spaces = (gym.spaces.Box, gym.spaces.Discrete)
    corral_api = PLUGIN_API_VERSION
