"""Deep Q-Networks (Mnih et al., 2015) with double Q, dueling heads, n-step and prioritized replay."""

from corral.plugins.dqn.algorithm import DQN
from corral.plugins.dqn.config import DQNConfig
from corral.plugins.dqn.policy import DQNPolicy

__all__ = ["DQN", "DQNConfig", "DQNPolicy"]
