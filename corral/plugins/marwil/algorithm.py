"""MARWIL and BC: one gradient step of weighted imitation per train batch (of recorded or sampled rows)."""

from __future__ import annotations

from corral.core import PLUGIN_API_VERSION, Algorithm
from corral.plugins.marwil.config import BCConfig, MARWILConfig
from corral.plugins.marwil.policy import BCPolicy, MARWILPolicy


class MARWIL(Algorithm):
    """Monotonic advantage re-weighted imitation learning, for Discrete, MultiDiscrete and Box actions."""

    config_class = MARWILConfig
    policy_class = MARWILPolicy
    corral_api = PLUGIN_API_VERSION


class BC(Algorithm):
    """Behaviour cloning: maximise the likelihood of the data's actions (MARWIL with ``beta=0``)."""

    config_class = BCConfig
    policy_class = BCPolicy
    corral_api = PLUGIN_API_VERSION
