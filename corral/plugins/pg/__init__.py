"""Vanilla policy gradient (PG; Williams, 1992, without a baseline) as a corral plugin, RLlib's ``PG``."""

from corral.plugins.pg.algorithm import PG
from corral.plugins.pg.config import PGConfig
from corral.plugins.pg.policy import PGPolicy, PGTorchLearner

__all__ = ["PG", "PGConfig", "PGPolicy", "PGTorchLearner"]
