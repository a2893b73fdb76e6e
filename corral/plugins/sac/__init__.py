"""Soft Actor-Critic (Haarnoja et al., 2018), with its discrete-action variant (Christodoulou, 2019)."""

from corral.plugins.sac.algorithm import SAC
from corral.plugins.sac.config import SACConfig
from corral.plugins.sac.policy import SACPolicy

__all__ = ["SAC", "SACConfig", "SACPolicy"]
