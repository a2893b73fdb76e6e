"""IMPALA (Espeholt et al., 2018) as a corral plugin: actor-critic learning corrected by V-trace."""

from corral.plugins.impala.algorithm import IMPALA
from corral.plugins.impala.config import IMPALAConfig
from corral.plugins.impala.policy import IMPALAPolicy, IMPALATorchLearner

__all__ = ["IMPALA", "IMPALAConfig", "IMPALAPolicy", "IMPALATorchLearner"]
