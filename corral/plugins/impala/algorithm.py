"""The IMPALA algorithm: sample sequences, learn on them with V-trace corrections."""

from __future__ import annotations

from typing import Any

from corral.core import Algorithm
from corral.core.plugin_api import PLUGIN_API_VERSION
from corral.plugins.impala.config import IMPALAConfig
from corral.plugins.impala.policy import IMPALAPolicy


class IMPALA(Algorithm):
    """Importance-weighted actor-learner: V-trace corrects for sequences sampled with older weights."""

    config_class = IMPALAConfig
    policy_class = IMPALAPolicy
    corral_api = PLUGIN_API_VERSION

    def training_step(self) -> dict[str, dict[str, Any]]:
        """Sample one train batch of sequences, learn on it."""
        return self.learn_on_batch(self.sample())
