"""The PG algorithm: sample a train batch, take one gradient step on it."""

from __future__ import annotations

from corral.core import PLUGIN_API_VERSION, Algorithm
from corral.plugins.pg.config import PGConfig
from corral.plugins.pg.policy import PGPolicy


class PG(Algorithm):
    """Vanilla policy gradient for Discrete, MultiDiscrete, Box and structured actions (RLlib's ``PG``)."""

    config_class = PGConfig
    policy_class = PGPolicy
    corral_api = PLUGIN_API_VERSION
