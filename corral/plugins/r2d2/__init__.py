"""R2D2 (Kapturowski et al., 2019): DQN with a recurrent Q-network learning on replayed sequences, as RLlib's R2D2."""

from corral.plugins.r2d2.algorithm import R2D2
from corral.plugins.r2d2.config import R2D2Config
from corral.plugins.r2d2.policy import R2D2Policy

__all__ = ["R2D2", "R2D2Config", "R2D2Policy"]
