"""Deep deterministic policy gradient (DDPG; Lillicrap et al., 2016) and TD3 (Fujimoto et al., 2018) as corral plugins."""

from corral.plugins.ddpg.algorithm import DDPG, TD3
from corral.plugins.ddpg.config import DDPGConfig, TD3Config
from corral.plugins.ddpg.policy import DDPGPolicy, DDPGTorchLearner

__all__ = ["DDPG", "TD3", "DDPGConfig", "DDPGPolicy", "DDPGTorchLearner", "TD3Config"]
