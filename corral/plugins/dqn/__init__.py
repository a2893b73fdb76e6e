"""Deep Q-Networks (Mnih et al., 2015) with double Q, dueling heads, n-step and prioritized replay; RLlib's SimpleQ; Ape-X DQN."""

from corral.plugins.dqn.algorithm import DQN, SimpleQ
from corral.plugins.dqn.apex import ApexDQN
from corral.plugins.dqn.config import ApexDQNConfig, DQNConfig, SimpleQConfig
from corral.plugins.dqn.policy import DQNPolicy, DQNTorchLearner

__all__ = ["DQN", "ApexDQN", "ApexDQNConfig", "DQNConfig", "DQNPolicy", "DQNTorchLearner", "SimpleQ", "SimpleQConfig"]
