"""Soft Actor-Critic (Haarnoja et al., 2018), its discrete-action variant (Christodoulou, 2019), and CQL on it."""

from corral.plugins.sac.algorithm import SAC
from corral.plugins.sac.config import SACConfig
from corral.plugins.sac.cql import CQL, CQLConfig, CQLPolicy, CQLTorchLearner
from corral.plugins.sac.policy import SACPolicy, SACTorchLearner

__all__ = ["CQL", "SAC", "CQLConfig", "CQLPolicy", "CQLTorchLearner", "SACConfig", "SACPolicy", "SACTorchLearner"]
