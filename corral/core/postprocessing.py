"""Return and advantage estimation over time-major sample fragments.

Fragments are ``[T, N]`` arrays (time, sub-environment) as env runners record
them. Sub-environments reset one step *after* an episode ends (gymnasium's
next-step autoreset), so the row after a done is a "reset row": its action was
ignored, it is marked invalid, and its value estimate is the value of the
episode's final observation — exactly what a truncated episode bootstraps from.
"""

from __future__ import annotations

import numpy as np

from corral.core.sample_batch import SampleBatch


def compute_gae(
    rewards: np.ndarray,
    vf_preds: np.ndarray,
    terminateds: np.ndarray,
    truncateds: np.ndarray,
    valid: np.ndarray,
    last_values: np.ndarray,
    gamma: float,
    lambda_: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Generalised advantage estimation, GAE(lambda), on ``[T, N]`` arrays.

    Termination does not bootstrap; truncation bootstraps from the value of
    the final observation and starts a new chain. ``lambda_=1`` gives
    Monte-Carlo advantages, ``lambda_=0`` one-step TD errors.

    Args:
        last_values: ``[N]`` values of the observations after the last row.

    Returns:
        ``(advantages, value_targets)``, both ``[T, N]`` float32; zero on invalid rows.
    """
    steps = rewards.shape[0]
    advantages = np.zeros_like(rewards, dtype=np.float32)
    next_values = last_values.astype(np.float32)
    running = np.zeros_like(next_values)
    not_terminated = 1.0 - terminateds.astype(np.float32)
    continues = 1.0 - (terminateds | truncateds).astype(np.float32)
    for t in range(steps - 1, -1, -1):
        delta = rewards[t] + gamma * next_values * not_terminated[t] - vf_preds[t]
        running = delta + (gamma * lambda_) * continues[t] * running
        running *= valid[t]
        advantages[t] = running
        next_values = vf_preds[t]
    return advantages, (advantages + vf_preds).astype(np.float32) * valid


def add_gae(fragment: SampleBatch, last_values: np.ndarray, gamma: float, lambda_: float) -> SampleBatch:
    """The fragment with ``advantages`` and ``value_targets`` columns from its ``vf_preds``."""
    advantages, targets = compute_gae(
        fragment[SampleBatch.REWARDS],
        fragment[SampleBatch.VF_PREDS],
        fragment[SampleBatch.TERMINATEDS],
        fragment[SampleBatch.TRUNCATEDS],
        fragment["valid"],
        last_values,
        gamma,
        lambda_,
    )
    return SampleBatch({**fragment, SampleBatch.ADVANTAGES: advantages, SampleBatch.VALUE_TARGETS: targets})
