"""The DQN algorithm: corral's shared replay loop with DQN's policy."""

from __future__ import annotations

from corral.core.off_policy import OffPolicyAlgorithm
from corral.plugins.dqn.config import DQNConfig
from corral.plugins.dqn.policy import DQNPolicy


class DQN(OffPolicyAlgorithm):
    """DQN for Discrete actions: double Q, dueling, n-step, uniform or prioritized replay."""

    config_class = DQNConfig
    policy_class = DQNPolicy
