"""Model-based estimators on a fitted Q model: the direct method and doubly robust estimation."""

from __future__ import annotations

from typing import Any

import numpy as np

from corral.core.common.sample_batch import SampleBatch
from corral.integrations.estimation.estimator import Episodes, OffPolicyEstimator, step_ratios
from corral.integrations.estimation.fitted_q import FittedQ

_Q, _V = "q_model_q", "q_model_v"
"""the columns :meth:`DirectMethod.estimate` adds for its episodes: Q(s_t, a_t) and V(s_t) of the Q model"""


class DirectMethod(OffPolicyEstimator):
    """v_target = V(s_0) of a Q model of the target policy (fitted Q evaluation), fitted before each estimate.

    Low variance; as biased as the model. Discrete actions only.

    Args:
        policy: the target policy.
        gamma: the discount.
        q_model_config: the Q model's options (see :data:`corral.integrations.estimation.fitted_q.Q_MODEL_DEFAULTS`).
    """

    discrete_actions_only = True

    def __init__(self, policy: Any, gamma: float, q_model_config: dict[str, Any] | None = None) -> None:
        super().__init__(policy, gamma)
        self.q_model = FittedQ(policy, gamma, q_model_config)

    def train(self, episodes: Episodes) -> dict[str, float]:
        """Fit the Q model on the episodes' transitions."""
        return self.q_model.train(episodes.rows)

    def estimate(self, episodes: Episodes) -> dict[str, float]:
        """Each episode's estimate from the Q model's values of its rows (see :meth:`estimate_episode`)."""
        q, v = self.q_model.q_and_v(episodes.rows[SampleBatch.OBS], episodes.rows[SampleBatch.ACTIONS])
        return super().estimate(Episodes({**episodes.rows, _Q: q, _V: v}, episodes.starts))

    def estimate_episode(self, episode: dict[str, np.ndarray]) -> tuple[float, float]:
        """The episode's discounted return, and V(s_0)."""
        return float(self.discounted(episode[SampleBatch.REWARDS]).sum()), float(episode[_V][0])


class DoublyRobust(DirectMethod):
    """The direct method corrected by importance-weighted TD errors, backwards over each episode.

    v = V(s_t) + rho_t * (r_t + gamma * v - Q(s_t, a_t)), with rho_t the step's
    ratio; unbiased when either the ratios or the model are right. Discrete actions only.
    """

    def estimate_episode(self, episode: dict[str, np.ndarray]) -> tuple[float, float]:
        """The episode's discounted return, and the doubly robust estimate."""
        ratios = step_ratios(episode)
        rewards = episode[SampleBatch.REWARDS].astype(np.float64)
        value = 0.0
        for t in range(len(rewards) - 1, -1, -1):
            value = episode[_V][t] + ratios[t] * (rewards[t] + self.gamma * value - episode[_Q][t])
        return float(self.discounted(rewards).sum()), float(value)
