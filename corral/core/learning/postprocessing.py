"""Return and advantage estimation over time-major sample fragments.

Fragments are ``[T, N]`` arrays (time, sub-environment) as env runners record
them. Sub-environments reset one step *after* an episode ends (gymnasium's
next-step autoreset), so the row after a done is a "reset row": its action was
ignored, it is marked invalid, and its value estimate is the value of the
episode's final observation — exactly what a truncated episode bootstraps from.
"""

from __future__ import annotations

import numpy as np

from corral.core.common.sample_batch import SampleBatch
from corral.errors import ConfigError


def episode_ends(fragment: SampleBatch, no_done_at_end: bool) -> SampleBatch:
    """The fragment as a policy learns from it: with ``no_done_at_end=False``, every truncated step also terminates.

    RLlib's ``no_done_at_end=False`` (its default before gymnasium's
    ``truncated`` flag) took every episode end as terminal, a time limit's
    too: nothing is bootstrapped after it, in GAE, n-step and V-trace targets
    alike, since each reads ``terminateds``. ``True`` is gymnasium's meaning
    (a truncated episode bootstraps from the value of its final observation);
    the ``truncateds`` column stays as the env set it either way.

    Args:
        fragment: a time-major ``[T, N]`` fragment with ``terminateds`` and ``truncateds`` columns.
        no_done_at_end: the config's option.

    Returns:
        ``fragment`` itself, or a new batch whose ``terminateds`` are ``terminateds | truncateds``.
    """
    if no_done_at_end or not fragment[SampleBatch.TRUNCATEDS].any():
        return fragment
    ended = fragment[SampleBatch.TERMINATEDS] | fragment[SampleBatch.TRUNCATEDS]
    return SampleBatch({**fragment, SampleBatch.TERMINATEDS: ended})


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
    """The fragment with ``advantages`` and ``value_targets`` columns from its ``vf_preds``.

    Args:
        fragment: a time-major ``[T, N]`` fragment with ``rewards``, ``vf_preds``,
            ``terminateds``, ``truncateds`` and ``valid`` columns.
        last_values: ``[N]`` value estimates of the observations after the last row.
        gamma: the discount factor.
        lambda_: GAE's lambda: 1 gives Monte-Carlo advantages, 0 one-step TD errors.

    Returns:
        A new batch: ``fragment``'s columns plus ``advantages`` and ``value_targets``
        (``[T, N]`` float32, zero on invalid rows); ``fragment`` is not changed.
    """
    advantages, targets = compute_gae(
        fragment[SampleBatch.REWARDS],
        fragment[SampleBatch.VF_PREDS],
        fragment[SampleBatch.TERMINATEDS],
        fragment[SampleBatch.TRUNCATEDS],
        fragment[SampleBatch.VALID],
        last_values,
        gamma,
        lambda_,
    )
    return SampleBatch({**fragment, SampleBatch.ADVANTAGES: advantages, SampleBatch.VALUE_TARGETS: targets})


def add_discounted_returns(fragment: SampleBatch, gamma: float) -> SampleBatch:
    """The fragment with each row's discounted return to the end of its episode or of the fragment as ``advantages``.

    What a policy gradient without a baseline learns from (PG's, A3C's without
    a critic); an episode cut at the fragment's end is not bootstrapped.

    Args:
        fragment: a time-major ``[T, N]`` fragment with ``rewards``, ``terminateds``, ``truncateds`` and ``valid``.
        gamma: the discount factor.

    Returns:
        A new batch: ``fragment``'s columns plus ``advantages``.
    """
    rewards = fragment[SampleBatch.REWARDS]
    no_values = np.zeros_like(rewards, dtype=np.float32)
    # GAE with lambda 1 over zero values is the discounted return; no value bootstraps a cut episode
    returns, _ = compute_gae(
        rewards,
        no_values,
        fragment[SampleBatch.TERMINATEDS],
        fragment[SampleBatch.TRUNCATEDS],
        fragment[SampleBatch.VALID],
        no_values[0],
        gamma,
        1.0,
    )
    return SampleBatch({**fragment, SampleBatch.ADVANTAGES: returns})


def compute_nstep(fragment: SampleBatch, bootstrap_obs: np.ndarray, n_step: int, gamma: float) -> SampleBatch:
    """n-step transitions from a time-major ``[T, N]`` fragment, as a flat batch of its valid rows.

    Off-policy learners (DQN, SAC) replay single transitions, so the fragment's
    time structure must be folded into each row before it goes into a replay
    buffer. Row ``(t, i)`` becomes ``obs[t] -> new_obs`` with ``rewards`` the
    discounted sum of up to ``n_step`` rewards ``r[t] + gamma r[t+1] + ...``,
    stopping after the step where the episode ends. ``new_obs`` is the
    observation ``n_step`` rows later, or, if the episode ended first, the
    episode's final observation (by the reset-row convention, the obs stored on
    the following invalid row), or ``bootstrap_obs[i]`` when the window runs
    past the fragment's last row. ``discounts`` (float32) is ``gamma**k`` for
    the ``k`` rewards summed, and 0.0 if the episode terminated within the
    window, so a learner's target is ``rewards + discounts * Q(new_obs)``
    whatever happened. ``terminateds`` / ``truncateds`` say whether the episode
    terminated / was truncated within the window. Every other column (e.g.
    ``action_logp``) is carried through for the valid rows; ``valid`` is
    dropped. Rows come out in the order of :meth:`Policy.flatten_fragment`
    (time-major). ``n_step=1`` gives ordinary one-step transitions.

    Args:
        fragment: ``[T, N, ...]`` columns ``obs``, ``actions``, ``rewards``,
            ``terminateds``, ``truncateds`` and ``valid`` (all rows valid if absent).
        bootstrap_obs: ``[N, ...]`` observations after the fragment's last row.
        n_step: an int >= 1.
        gamma: discount in ``[0, 1]``.
    """
    if isinstance(n_step, bool) or not isinstance(n_step, (int, np.integer)) or n_step < 1:
        raise ConfigError(f"n_step must be an integer >= 1, got {n_step!r}")
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float, np.number)) or not 0.0 <= gamma <= 1.0:
        raise ConfigError(f"gamma must be a number in [0, 1], got {gamma!r}")
    rewards = np.asarray(fragment[SampleBatch.REWARDS])
    if rewards.ndim != 2:
        raise ConfigError(f"compute_nstep needs a time-major [T, N] fragment; rewards have shape {rewards.shape}")
    steps_total, num_envs = rewards.shape
    for key, value in fragment.items():
        if np.shape(value)[:2] != (steps_total, num_envs):
            raise ConfigError(f"fragment column {key!r} has shape {np.shape(value)}, expected ({steps_total}, {num_envs}, ...)")
    obs = fragment[SampleBatch.OBS]
    bootstrap_obs = np.asarray(bootstrap_obs)
    if bootstrap_obs.shape != obs.shape[1:]:
        raise ConfigError(f"bootstrap_obs has shape {bootstrap_obs.shape}, expected {obs.shape[1:]} (one row per sub-env)")
    valid = (
        np.asarray(fragment[SampleBatch.VALID], dtype=bool)
        if SampleBatch.VALID in fragment
        else np.ones_like(rewards, dtype=bool)
    )
    terminateds = np.asarray(fragment[SampleBatch.TERMINATEDS], dtype=bool)
    truncateds = np.asarray(fragment[SampleBatch.TRUNCATEDS], dtype=bool)

    ts, envs = np.nonzero(valid)  # row-major: the order flatten_fragment gives
    returns = np.zeros(ts.size, dtype=np.float64)
    discount = np.ones(ts.size, dtype=np.float64)  # gamma ** (rewards summed so far)
    summed = np.zeros(ts.size, dtype=np.int64)
    alive = np.ones(ts.size, dtype=bool)
    terminated = np.zeros(ts.size, dtype=bool)
    truncated = np.zeros(ts.size, dtype=bool)
    for k in range(int(n_step)):
        t = ts + k
        tc = np.minimum(t, steps_total - 1)
        active = alive & (t < steps_total) & valid[tc, envs]
        returns += np.where(active, discount * rewards[tc, envs], 0.0)
        discount = np.where(active, discount * gamma, discount)
        summed += active
        terminated |= active & terminateds[tc, envs]
        truncated |= active & truncateds[tc, envs]
        alive = active & ~(terminateds[tc, envs] | truncateds[tc, envs])
        if not alive.any():
            break
    next_t = ts + summed
    new_obs = obs[np.minimum(next_t, steps_total - 1), envs]
    past_end = next_t >= steps_total
    new_obs[past_end] = bootstrap_obs[envs[past_end]]

    out = SampleBatch({k: np.asarray(v)[ts, envs] for k, v in fragment.items() if k != SampleBatch.VALID})
    out[SampleBatch.REWARDS] = returns.astype(np.float32)
    out[SampleBatch.NEXT_OBS] = new_obs
    out[SampleBatch.TERMINATEDS] = terminated
    out[SampleBatch.TRUNCATEDS] = truncated
    out[SampleBatch.DISCOUNTS] = np.where(terminated, 0.0, discount).astype(np.float32)
    return out
