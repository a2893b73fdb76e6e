"""Importance sampling estimators: the behaviour's rewards reweighed by how much likelier the target makes its actions."""

from __future__ import annotations

from typing import Any

import numpy as np

from corral.core.common.sample_batch import SampleBatch
from corral.integrations.estimation.estimator import Episodes, OffPolicyEstimator, step_ratios, summarize


class ImportanceSampling(OffPolicyEstimator):
    """Per-decision importance sampling: v_target = sum_t gamma^t * p_t * r_t, p_t the product of the ratios up to t.

    Unbiased, and as variable as the products of ratios over an episode.
    """

    def estimate_episode(self, episode: dict[str, np.ndarray]) -> tuple[float, float]:
        """The episode's discounted return, and its rewards reweighed by the cumulative ratios."""
        discounted = self.discounted(episode[SampleBatch.REWARDS])
        weights = np.cumprod(step_ratios(episode))
        return float(discounted.sum()), float((weights * discounted).sum())


class WeightedImportanceSampling(OffPolicyEstimator):
    """Per-decision weighted importance sampling: each p_t divided by the mean p_t of every episode seen so far.

    Biased (consistent), and much less variable than :class:`ImportanceSampling`.
    The means are kept over all evaluations, step by step.
    """

    def __init__(self, policy: Any, gamma: float) -> None:
        super().__init__(policy, gamma)
        self._sums = np.zeros(0)
        self._counts = np.zeros(0)

    def estimate(self, episodes: Episodes) -> dict[str, float]:
        """The estimates over the episodes, after adding their cumulative ratios to the running means."""
        weights = [np.cumprod(step_ratios(e)) for e in episodes]
        longest = max((len(w) for w in weights), default=0)
        if longest > len(self._sums):
            grow = longest - len(self._sums)
            self._sums, self._counts = np.append(self._sums, np.zeros(grow)), np.append(self._counts, np.zeros(grow))
        for w in weights:
            self._sums[: len(w)] += w
            self._counts[: len(w)] += 1
        means = self._sums / np.maximum(self._counts, 1)
        behavior, target = [], []
        for episode, w in zip(episodes, weights, strict=True):
            discounted = self.discounted(episode[SampleBatch.REWARDS])
            behavior.append(discounted.sum())
            target.append((w / means[: len(w)] * discounted).sum())
        return summarize(np.array(behavior), np.array(target))
