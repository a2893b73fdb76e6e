"""Deep Q-Networks (Mnih et al., 2015) with double Q, dueling heads, n-step and prioritized replay; and RLlib's SimpleQ."""

from corral.plugins.dqn.algorithm import DQN, SimpleQ
from corral.plugins.dqn.config import DQNConfig, SimpleQConfig
from corral.plugins.dqn.policy import DQNPolicy, DQNTorchLearner

__all__ = ["DQN", "DQNConfig", "DQNPolicy", "DQNTorchLearner", "SimpleQ", "SimpleQConfig"]
