"""DDPG and TD3: corral's shared replay loop with the deterministic actor-critic policy (TD3 is its settings)."""

from __future__ import annotations

import gymnasium as gym

from corral.core import PLUGIN_API_VERSION, OffPolicyAlgorithm
from corral.plugins.ddpg.config import DDPGConfig, TD3Config
from corral.plugins.ddpg.policy import DDPGPolicy


class DDPG(OffPolicyAlgorithm):
    """Deep deterministic policy gradient for Box actions: a deterministic actor, a Q critic, noise to explore."""

    config_class = DDPGConfig
    policy_class = DDPGPolicy
    supported_action_spaces = (gym.spaces.Box,)
    corral_api = PLUGIN_API_VERSION


class TD3(DDPG):
    """Twin delayed DDPG: twin critics, delayed actor updates, smoothed target actions, Gaussian exploration."""

    config_class = TD3Config
