"""The A2C algorithm: sample one fragment from every sub-environment, update once."""

from __future__ import annotations

from typing import Any

from corral.core import Algorithm
from corral.core.plugin_api import PLUGIN_API_VERSION
from corral.plugins.a2c.config import A2CConfig
from corral.plugins.a2c.policy import A2CPolicy


class A2C(Algorithm):
    """Synchronous advantage actor-critic for Discrete, MultiDiscrete and Box actions."""

    config_class = A2CConfig
    policy_class = A2CPolicy
    corral_api = PLUGIN_API_VERSION

    def training_step(self) -> dict[str, dict[str, Any]]:
        """One fragment of ``rollout_fragment_length`` steps per sub-environment, one update."""
        return self.learn_on_batch(self.sample())
