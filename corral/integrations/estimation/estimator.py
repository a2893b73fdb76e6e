"""The off-policy estimator contract, and how estimators are named in a config and built."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar, cast

import numpy as np

from corral.core.common.sample_batch import SampleBatch
from corral.core.contracts.plugin_classes import check_estimation_methods, estimator_class
from corral.errors import ConfigError

TARGET_LOGP = "target_logp"
"""the column of each row's action log-likelihood under the target policy, which the evaluation adds"""


class Episodes:
    """Whole episodes as one batch of rows and where each begins, so estimators work on arrays.

    Args:
        rows: ``obs``, ``actions``, ``rewards``, ``new_obs``, ``terminateds``, ``action_logp``
            (the behaviour policy's) and ``target_logp`` columns, episode after episode.
        starts: the row each episode begins at, ascending, the first 0.
    """

    def __init__(self, rows: dict[str, np.ndarray], starts: np.ndarray) -> None:
        self.rows = rows
        self.starts = np.asarray(starts, np.int64)
        self.ends = np.append(self.starts[1:], len(rows[SampleBatch.REWARDS]))

    def __len__(self) -> int:
        return len(self.starts)

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        for start, end in zip(self.starts, self.ends, strict=True):
            yield {k: v[start:end] for k, v in self.rows.items()}


def step_ratios(rows: dict[str, np.ndarray]) -> np.ndarray:
    """Each row's pi_target(a|s) / pi_behaviour(a|s).

    Args:
        rows: columns with ``target_logp`` and the behaviour's ``action_logp``.

    Returns:
        The ratios, float64.
    """
    return np.exp(rows[TARGET_LOGP].astype(np.float64) - rows[SampleBatch.ACTION_LOGP].astype(np.float64))


class OffPolicyEstimator:
    """Estimates what a target policy would return on episodes a behaviour policy played.

    A subclass writes :meth:`estimate_episode` (or :meth:`estimate`, when an
    episode's estimate depends on the others); one with a model fits it in
    :meth:`train`, which runs before every estimate. Its constructor's keyword
    arguments are the options of its config entry
    (``{"type": "DoublyRobust", "q_model_config": {...}}``).

    Args:
        policy: the target policy: the one being trained.
        gamma: the discount of the returns estimated.
    """

    discrete_actions_only: ClassVar[bool] = False
    """True if the estimator needs a Discrete action space (a Q model over every action)"""

    def __init__(self, policy: Any, gamma: float) -> None:
        self.policy = policy
        self.gamma = gamma

    def train(self, episodes: Episodes) -> dict[str, float]:
        """Fit what the estimator learns from the episodes (nothing, by default); returns its training stats.

        Args:
            episodes: the episodes about to be estimated.

        Returns:
            Stats by name (reported beside the estimate).
        """
        return {}

    def estimate_episode(self, episode: dict[str, np.ndarray]) -> tuple[float, float]:
        """One episode's ``(v_behavior, v_target)``: its discounted return, and the target policy's estimated one.

        Args:
            episode: one episode's columns (see :class:`Episodes`).

        Returns:
            The two values.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement estimate_episode() or estimate()")

    def estimate(self, episodes: Episodes) -> dict[str, float]:
        """The mean estimates over the episodes, with their standard deviations, gain and difference.

        Args:
            episodes: the episodes.

        Returns:
            See :func:`summarize`.
        """
        pairs = np.array([self.estimate_episode(episode) for episode in episodes], np.float64).reshape(-1, 2)
        return summarize(pairs[:, 0], pairs[:, 1])

    def discounted(self, rewards: np.ndarray) -> np.ndarray:
        """``gamma ** t`` times each reward.

        Args:
            rewards: one episode's rewards.

        Returns:
            The discounted rewards, float64.
        """
        return rewards.astype(np.float64) * self.gamma ** np.arange(len(rewards))


def summarize(v_behavior: np.ndarray, v_target: np.ndarray) -> dict[str, float]:
    """What an estimate reports, as RLlib's estimators do.

    Args:
        v_behavior: each episode's discounted return.
        v_target: each episode's estimate of the target policy's.

    Returns:
        ``v_behavior`` and ``v_target`` (means), their ``_std``, ``v_gain`` (the ratio
        v_target / v_behavior; NaN when v_behavior is 0) and ``v_delta`` (the difference).
    """
    behavior, target = float(np.mean(v_behavior)), float(np.mean(v_target))
    return {
        "v_behavior": behavior,
        "v_behavior_std": float(np.std(v_behavior)),
        "v_target": target,
        "v_target_std": float(np.std(v_target)),
        "v_gain": target / behavior if behavior else float("nan"),
        "v_delta": target - behavior,
    }


def make_estimator(spec: dict[str, Any], policy: Any, gamma: float) -> OffPolicyEstimator:
    """Build the estimator a config entry names.

    Args:
        spec: ``{"type": ..., **options}``.
        policy: the target policy.
        gamma: the discount.

    Returns:
        The estimator.

    Raises:
        ConfigError: see :func:`check_estimation_methods`; or the estimator needs Discrete actions.
    """
    check_estimation_methods({"estimator": spec})
    options = dict(spec)
    cls = cast(type[OffPolicyEstimator], estimator_class(options.pop("type")))
    if cls.discrete_actions_only and not hasattr(policy.action_adapter.policy_space, "n"):
        raise ConfigError(
            f"off-policy estimator {cls.__name__} fits a Q model over every action and needs a Discrete action space, "
            f"not {policy.action_space}; ImportanceSampling and WeightedImportanceSampling work with any"
        )
    return cls(policy, gamma, **options)
