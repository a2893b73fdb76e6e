"""Offline imitation: MARWIL (Wang et al., 2018; advantage-weighted) and BC, its ``beta=0`` case, as corral plugins."""

from corral.plugins.marwil.algorithm import BC, MARWIL
from corral.plugins.marwil.config import BCConfig, MARWILConfig
from corral.plugins.marwil.policy import BCPolicy, BCTorchLearner, MARWILPolicy, MARWILTorchLearner

__all__ = ["BC", "MARWIL", "BCConfig", "BCPolicy", "BCTorchLearner", "MARWILConfig", "MARWILPolicy", "MARWILTorchLearner"]
