"""The IMPALA algorithm: sample sequences, learn on them with V-trace corrections."""

from __future__ import annotations

from corral.core import PLUGIN_API_VERSION, Algorithm
from corral.plugins.impala.config import IMPALAConfig
from corral.plugins.impala.policy import IMPALAPolicy


class IMPALA(Algorithm):
    """Importance-weighted actor-learner: V-trace corrects for sequences sampled with older weights."""

    config_class = IMPALAConfig
    policy_class = IMPALAPolicy
    corral_api = PLUGIN_API_VERSION
