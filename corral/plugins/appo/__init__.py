"""APPO (asynchronous PPO) as a corral plugin: IMPALA's asynchronous sampling and V-trace with PPO's clipped surrogate."""

from corral.plugins.appo.algorithm import APPO
from corral.plugins.appo.config import APPOConfig
from corral.plugins.appo.policy import APPOPolicy, APPOTorchLearner

__all__ = ["APPO", "APPOConfig", "APPOPolicy", "APPOTorchLearner"]
