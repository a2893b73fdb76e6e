"""The R2D2 algorithm: corral's shared replay loop, replaying sequences with R2D2's policy."""

from __future__ import annotations

import gymnasium as gym

from corral.core import PLUGIN_API_VERSION, OffPolicyAlgorithm
from corral.plugins.r2d2.config import R2D2Config
from corral.plugins.r2d2.policy import R2D2Policy


class R2D2(OffPolicyAlgorithm):
    """Recurrent replay DQN for Discrete actions: stored or zero start states, burn-in, value rescaling, double Q."""

    config_class = R2D2Config
    policy_class = R2D2Policy
    supported_action_spaces = (gym.spaces.Discrete,)
    corral_api = PLUGIN_API_VERSION
