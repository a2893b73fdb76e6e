"""The REINFORCE algorithm: sample a batch of episodes' worth of steps, take one gradient step."""

from __future__ import annotations

from typing import Any

from corral.core import Algorithm
from corral_reinforce.config import REINFORCEConfig
from corral_reinforce.policy import REINFORCEPolicy


class REINFORCE(Algorithm):
    """Williams' REINFORCE with a learned baseline, for Discrete, MultiDiscrete and Box actions."""

    config_class = REINFORCEConfig
    policy_class = REINFORCEPolicy
    corral_api = 1  # the corral plugin API this was written for; corral reports a mismatch instead of crashing

    def training_step(self) -> dict[str, dict[str, Any]]:
        """One train batch, one update."""
        return self.learn_on_batch(self.sample(self.config.train_batch_size))
