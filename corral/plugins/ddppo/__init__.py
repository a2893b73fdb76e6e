"""DD-PPO (decentralized distributed PPO) as a corral plugin: each env runner learns on its own samples."""

from corral.plugins.ddppo.algorithm import DDPPO
from corral.plugins.ddppo.config import DDPPOConfig

__all__ = ["DDPPO", "DDPPOConfig"]
