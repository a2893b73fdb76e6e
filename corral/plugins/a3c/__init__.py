"""Asynchronous advantage actor-critic (A3C; Mnih et al., 2016) as a corral plugin, RLlib's ``A3C``."""

from corral.plugins.a3c.algorithm import A3C
from corral.plugins.a3c.config import A3CConfig
from corral.plugins.a3c.policy import A3CPolicy

__all__ = ["A3C", "A3CConfig", "A3CPolicy"]
