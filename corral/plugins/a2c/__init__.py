"""Synchronous advantage actor-critic (A2C; Mnih et al., 2016) as a corral plugin."""

from corral.plugins.a2c.algorithm import A2C
from corral.plugins.a2c.config import A2CConfig
from corral.plugins.a2c.policy import A2CPolicy

__all__ = ["A2C", "A2CConfig", "A2CPolicy"]
