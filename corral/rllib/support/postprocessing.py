"""RLlib's ``evaluation.postprocessing`` helpers: returns and advantages over one trajectory.

RLlib's scripts and custom policies call :func:`compute_advantages` on a
single trajectory (a flat :class:`SampleBatch` of one episode or of the part
of one a fragment holds) with the value of what comes after its last step.
corral's own estimator, :func:`corral.core.learning.postprocessing.compute_gae`,
works on time-major ``[T, N]`` fragments in their own precision (float32
fragments stay float32, the bootstrap value is rounded to float32, and value
targets add the rounded advantages); RLlib sums in float64 and rounds once.
The numbers here follow RLlib's arithmetic step for step, so a script gets the
same values to the last bit as it did on RLlib; they agree with corral's
estimator to float32 precision.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from corral.core.common.sample_batch import MultiAgentBatch, SampleBatch
from corral.rllib.support.numeric import convert_to_numpy


class Postprocessing:
    """The names of the columns :func:`compute_advantages` adds, as RLlib's losses read them."""

    ADVANTAGES = SampleBatch.ADVANTAGES
    VALUE_TARGETS = SampleBatch.VALUE_TARGETS


def _real(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r} ({type(value).__name__})")
    return float(value)


def discount_cumsum(x: Any, gamma: float) -> np.ndarray:
    """Each step's discounted sum of ``x`` from that step to the end: ``y[t] = x[t] + gamma * y[t + 1]``.

    The building block of returns and of GAE (with ``gamma * lambda`` as the
    discount). Computed in float64 whatever ``x``'s dtype, as RLlib's
    (``scipy.signal.lfilter``) does, with the same operations in the same order.

    Args:
        x: the values by step along the first axis (a list or an array; further axes are summed independently).
        gamma: the discount per step.

    Returns:
        A new float64 array of ``x``'s shape.

    Raises:
        TypeError: ``gamma`` is not a real number.
        ValueError: ``x`` is a scalar, or does not convert to a numeric array.
    """
    discount = _real(gamma, "gamma")
    try:
        out = np.array(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"discount_cumsum needs numbers by step (a list or an array), got {x!r}: {exc}") from None
    if out.ndim == 0:
        raise ValueError(f"discount_cumsum needs numbers by step along the first axis, got the scalar {x!r}")
    for t in range(len(out) - 2, -1, -1):
        out[t] = out[t] + discount * out[t + 1]
    return out


def _column(rollout: SampleBatch, given: Any, key: str, argument: str) -> np.ndarray:
    value = rollout.get(key) if given is None else given
    if value is None:
        raise ValueError(
            f"compute_advantages needs {argument}: the rollout has no {key!r} column; pass {argument}=... or add the column"
        )
    array = np.asarray(convert_to_numpy(value, reduce_type=False))
    if array.ndim != 1:
        raise ValueError(
            f"compute_advantages works on one trajectory: {argument} must be one value per step (1-D), got shape {array.shape}"
        )
    return array


def compute_advantages(
    rollout: SampleBatch,
    last_r: Any,
    gamma: float = 0.9,
    lambda_: float = 1.0,
    use_gae: bool = True,
    use_critic: bool = True,
    rewards: Any = None,
    vf_preds: Any = None,
) -> SampleBatch:
    """Add ``advantages`` and ``value_targets`` to one trajectory, as RLlib's policies learn from them.

    The four cases are RLlib's:

    - ``use_gae`` (needs the critic): GAE(lambda) advantages over the TD errors
      ``r[t] + gamma * V[t + 1] - V[t]`` (``V[T] = last_r``); value targets are
      advantages plus ``vf_preds``.
    - ``use_gae=False`` with the critic: the discounted return (bootstrapped
      from ``last_r``) minus ``vf_preds``; value targets are the returns.
    - no critic: the discounted return itself; value targets are zeros.

    Args:
        rollout: a flat batch of one trajectory with a ``rewards`` column (and
            ``vf_preds`` with the critic); it gains the columns (RLlib changes it in place too).
        last_r: the value of the observation after the last step (0.0 for a terminated
            episode); a number, a 0-d array or a 0-d torch tensor.
        gamma: the discount factor.
        lambda_: GAE's lambda (1.0: Monte-Carlo advantages, 0.0: one-step TD errors).
        use_gae: use generalized advantage estimation (needs ``use_critic``).
        use_critic: use ``vf_preds`` as the baseline; False uses none.
        rewards: the rewards to use instead of the rollout's ``rewards`` column.
        vf_preds: the value estimates to use instead of the rollout's ``vf_preds`` column.

    Returns:
        ``rollout`` itself, with float32 ``advantages`` and ``value_targets`` columns.

    Raises:
        TypeError: ``rollout`` is not a SampleBatch (a MultiAgentBatch holds one per policy:
            call this on each policy's), or ``gamma``/``lambda_`` are not numbers.
        ValueError: GAE without the critic; a missing ``rewards`` or ``vf_preds`` column;
            columns that are not one value per step, or differ in length.
    """
    if isinstance(rollout, MultiAgentBatch) or not isinstance(rollout, dict):
        raise TypeError(
            f"compute_advantages takes one trajectory as a SampleBatch, got {type(rollout).__name__}"
            + (" (call it on each policy's batch in .policy_batches)" if isinstance(rollout, MultiAgentBatch) else "")
        )
    gamma = _real(gamma, "gamma")
    lambda_ = _real(lambda_, "lambda_")
    if use_gae and not use_critic:
        raise ValueError("compute_advantages: use_gae=True needs the critic's values; set use_critic=True or use_gae=False")
    last_r = convert_to_numpy(last_r)
    if np.ndim(last_r) != 0 or np.asarray(last_r).dtype.kind not in "biuf":
        raise ValueError(f"compute_advantages: last_r is the value after the last step, one number; got {last_r!r}")
    reward_values = _column(rollout, rewards, SampleBatch.REWARDS, "rewards")
    values = _column(rollout, vf_preds, SampleBatch.VF_PREDS, "vf_preds") if use_critic else None
    if values is not None and len(values) != len(reward_values):
        raise ValueError(f"compute_advantages: {len(reward_values)} rewards but {len(values)} vf_preds; give one per step each")

    if use_gae:
        assert values is not None
        with_last = np.concatenate([values, np.array([last_r])])
        deltas = reward_values + gamma * with_last[1:] - with_last[:-1]
        advantages = discount_cumsum(deltas, gamma * lambda_)
        rollout[Postprocessing.VALUE_TARGETS] = (advantages + values).astype(np.float32)
    else:
        returns = discount_cumsum(np.concatenate([reward_values, np.array([last_r])]), gamma)[:-1].astype(np.float32)
        if values is not None:
            advantages = returns - values
            rollout[Postprocessing.VALUE_TARGETS] = returns
        else:
            advantages = returns
            rollout[Postprocessing.VALUE_TARGETS] = np.zeros_like(returns)
    rollout[Postprocessing.ADVANTAGES] = advantages.astype(np.float32)
    return rollout
