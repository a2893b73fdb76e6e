"""The A2C algorithm: sample one fragment from every sub-environment, update once."""

from __future__ import annotations

from corral.core import PLUGIN_API_VERSION, Algorithm
from corral.plugins.a2c.config import A2CConfig
from corral.plugins.a2c.policy import A2CPolicy


class A2C(Algorithm):
    """Synchronous advantage actor-critic for Discrete, MultiDiscrete and Box actions."""

    config_class = A2CConfig
    policy_class = A2CPolicy
    corral_api = PLUGIN_API_VERSION
