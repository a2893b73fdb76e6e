"""The APPO algorithm: IMPALA's sampling, asynchronous with remote env runners, and APPO's update with a target network."""

from __future__ import annotations

from typing import Any, cast

from corral.core import PLUGIN_API_VERSION, restored_count
from corral.plugins.appo.config import APPOConfig
from corral.plugins.appo.policy import APPOPolicy
from corral.plugins.impala import IMPALA


class APPO(IMPALA):
    """Asynchronous PPO: IMPALA's actor-learner loop with a clipped surrogate against a target network."""

    config_class = APPOConfig
    config: APPOConfig
    policy_class = APPOPolicy
    corral_api = PLUGIN_API_VERSION

    def setup(self, config: Any = None) -> None:
        """The trained-steps mark of the last target update, and IMPALA's setup."""
        self._last_target_update = 0
        super().setup()

    def after_update(self, stats: dict[str, dict[str, Any]]) -> None:
        """Every ``target_network_update_freq`` trained env steps, the target networks' update (in the learner thread)."""
        trained = self.counters["num_env_steps_trained"]
        if stats and trained - self._last_target_update >= self.config.target_network_update_freq:
            for policy_id, policy_stats in stats.items():
                policy = self.policies[policy_id]
                if isinstance(policy, APPOPolicy):  # not a RandomPolicy that plays along
                    policy.update_target_network(cast(float | None, policy_stats.get("kl")))
            self._last_target_update = trained

    def get_state(self) -> dict[str, Any]:
        """IMPALA's state and the mark of the last target update."""
        return {**super().get_state(), "last_target_update": self._last_target_update}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore IMPALA's state and the mark of the last target update."""
        last = restored_count(state.get("last_target_update", 0), "last_target_update")
        super().set_state(state)
        self._last_target_update = last
