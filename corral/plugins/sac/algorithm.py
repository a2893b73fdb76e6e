"""The SAC algorithm: corral's shared replay loop with SAC's policy."""

from __future__ import annotations

from corral.core.off_policy import OffPolicyAlgorithm
from corral.plugins.sac.config import SACConfig
from corral.plugins.sac.policy import SACPolicy


class SAC(OffPolicyAlgorithm):
    """Soft Actor-Critic for Box actions, and its discrete variant for Discrete ones."""

    config_class = SACConfig
    policy_class = SACPolicy
