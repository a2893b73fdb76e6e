"""The DQN algorithm: corral's shared replay loop with DQN's policy."""

from __future__ import annotations

import gymnasium as gym

from corral.core import PLUGIN_API_VERSION, OffPolicyAlgorithm
from corral.plugins.dqn.config import DQNConfig, SimpleQConfig
from corral.plugins.dqn.policy import DQNPolicy


class DQN(OffPolicyAlgorithm):
    """DQN for Discrete actions: double Q, dueling, n-step, uniform or prioritized replay."""

    config_class = DQNConfig
    policy_class = DQNPolicy
    supported_action_spaces = (gym.spaces.Discrete,)
    corral_api = PLUGIN_API_VERSION


class SimpleQ(DQN):
    """RLlib's SimpleQ: DQN's loop and loss with one-step targets, one Q head and hard target-network copies."""

    config_class = SimpleQConfig
