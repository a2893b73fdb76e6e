"""An adaptive KL penalty: the weight of a policy's KL term, moved towards a target divergence after each update.

PPO adapts it after every update, APPO at every target-network update; both
use RLlib's rule (half again above twice ``kl_target``, half below half of it)
and keep the weight in the policy's state, so checkpoints and Learner actors
carry it.
"""

from __future__ import annotations

from typing import Any

from corral.core.common.restored import restored_float
from corral.core.learning.policy import Policy


class AdaptiveKLPolicy(Policy):
    """A policy whose config has ``kl_coeff`` (the starting weight) and ``kl_target``; its weight is ``self.kl_coeff``.

    It may come first among a policy class's bases, before another ``Policy`` subclass.
    """

    config: Any  # a config with kl_coeff and kl_target (PPO's, APPO's)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kl_coeff: float = self.config.kl_coeff

    def adapt_kl_coeff(self, kl: float) -> None:
        """RLlib's rule: the weight grows by half where ``kl`` is above twice ``kl_target``, halves below half of it.

        Args:
            kl: the mean KL divergence the last update (or updates) made.
        """
        if kl > 2.0 * self.config.kl_target:
            self.kl_coeff *= 1.5
        elif kl < 0.5 * self.config.kl_target:
            self.kl_coeff *= 0.5

    def get_state(self) -> dict[str, Any]:
        """The base state plus the adapted KL weight."""
        return {**super().get_state(), "kl_coeff": float(self.kl_coeff)}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore the base state and the KL weight."""
        kl_coeff = restored_float(state.get("kl_coeff", self.config.kl_coeff), "kl_coeff", minimum=0.0)
        super().set_state(state)
        self.kl_coeff = kl_coeff
