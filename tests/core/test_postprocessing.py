"""compute_gae on [T, N] fragments, with gymnasium's next-step autoreset ("reset rows").

Convention (see corral.core.learning.postprocessing): after a row where an episode ends,
the next row of that column is a reset row: invalid, reward 0, and its value
estimate is the value of the episode's final observation.
"""

from __future__ import annotations

import numpy as np
import pytest

from corral.core.common.sample_batch import SampleBatch
from corral.core.learning.postprocessing import add_gae, compute_gae

GAMMA, LAM = 0.9, 0.8


def _col(*values):
    return np.array(values, dtype=np.float32)


def two_columns():
    """Column 0: one long unfinished episode. Column 1: terminate, reset, truncate, reset.

    rows:            0     1     2      3     4
    col 1 reward     1     1     0      2     0
    col 1 value     0.5   0.6   7.0    0.3   2.0
    col 1 flags      -    term  reset  trunc reset
    """
    rewards = np.stack([_col(1, 2, 3, 4, 5), _col(1, 1, 0, 2, 0)], axis=1)
    values = np.stack([_col(0.5, 0.4, 0.3, 0.2, 0.1), _col(0.5, 0.6, 7.0, 0.3, 2.0)], axis=1)
    terminateds = np.zeros((5, 2), dtype=bool)
    truncateds = np.zeros((5, 2), dtype=bool)
    terminateds[1, 1] = True
    truncateds[3, 1] = True
    valid = np.ones((5, 2), dtype=bool)
    valid[2, 1] = valid[4, 1] = False
    last_values = _col(1.0, 9.0)
    return rewards, values, terminateds, truncateds, valid, last_values


def test_hand_computed_gae():
    rewards, values, terms, truncs, valid, last = two_columns()
    adv, targets = compute_gae(rewards, values, terms, truncs, valid, last, GAMMA, LAM)

    # column 1, by hand:
    #   t=3 truncated: delta = 2 + 0.9 * 2.0 (value on the reset row) - 0.3 = 3.5; chain starts here
    #   t=1 terminated: delta = 1 - 0.6 = 0.4 (no bootstrap from the reset row's 7.0)
    #   t=0: delta = 1 + 0.9 * 0.6 - 0.5 = 1.04; adv = 1.04 + 0.72 * 0.4 = 1.328
    np.testing.assert_allclose(adv[:, 1], [1.328, 0.4, 0.0, 3.5, 0.0], rtol=1e-6)
    np.testing.assert_allclose(targets[:, 1], [1.828, 1.0, 0.0, 3.8, 0.0], rtol=1e-6)

    # column 0, by hand (deltas, then the backward recursion with gamma * lambda = 0.72):
    deltas = [1 + 0.9 * 0.4 - 0.5, 2 + 0.9 * 0.3 - 0.4, 3 + 0.9 * 0.2 - 0.3, 4 + 0.9 * 0.1 - 0.2, 5 + 0.9 * 1.0 - 0.1]
    expected = [0.0] * 5
    running = 0.0
    for t in reversed(range(5)):
        running = deltas[t] + 0.72 * running
        expected[t] = running
    np.testing.assert_allclose(adv[:, 0], expected, rtol=1e-5)
    np.testing.assert_allclose(targets[:, 0], np.array(expected) + values[:, 0], rtol=1e-5)
    assert adv.dtype == np.float32 and targets.dtype == np.float32
    assert adv.shape == targets.shape == (5, 2)


def test_termination_does_not_bootstrap():
    rewards, values, terms, truncs, valid, last = two_columns()
    adv_a, _ = compute_gae(rewards, values, terms, truncs, valid, last, GAMMA, LAM)
    values_b = values.copy()
    values_b[2, 1] = -100.0  # the reset row after the termination
    adv_b, _ = compute_gae(rewards, values_b, terms, truncs, valid, last, GAMMA, LAM)
    np.testing.assert_array_equal(adv_a, adv_b)


def test_truncation_bootstraps_from_the_reset_row_value():
    rewards, values, terms, truncs, valid, last = two_columns()
    adv_a, _ = compute_gae(rewards, values, terms, truncs, valid, last, GAMMA, LAM)
    values_b = values.copy()
    values_b[4, 1] += 1.0  # the reset row after the truncation
    adv_b, _ = compute_gae(rewards, values_b, terms, truncs, valid, last, GAMMA, LAM)
    assert adv_b[3, 1] - adv_a[3, 1] == pytest.approx(GAMMA * 1.0)
    # the truncation cuts the chain: earlier rows (before the termination) are unaffected
    np.testing.assert_array_equal(adv_a[:2, 1], adv_b[:2, 1])


def test_truncation_does_not_leak_the_next_episode():
    rewards, values, terms, truncs, valid, last = two_columns()
    # make column 1 truncate at row 1 instead of terminating
    terms[1, 1], truncs[1, 1] = False, True
    adv, _ = compute_gae(rewards, values, terms, truncs, valid, last, GAMMA, LAM)
    assert adv[1, 1] == pytest.approx(1 + GAMMA * 7.0 - 0.6)
    assert adv[0, 1] == pytest.approx((1 + GAMMA * 0.6 - 0.5) + GAMMA * LAM * adv[1, 1])


def test_invalid_rows_have_zero_advantage_and_target():
    rewards, values, terms, truncs, valid, last = two_columns()
    rewards[2, 1] = 50.0  # garbage on reset rows must not matter
    adv, targets = compute_gae(rewards, values, terms, truncs, valid, last, GAMMA, LAM)
    assert np.all(adv[~valid] == 0.0)
    assert np.all(targets[~valid] == 0.0)
    np.testing.assert_allclose(adv[:2, 1], [1.328, 0.4], rtol=1e-6)


def _discounted_returns(rewards, gamma, bootstrap):
    out, running = [], bootstrap
    for r in reversed(rewards):
        running = r + gamma * running
        out.append(running)
    return out[::-1]


def test_lambda_one_gives_monte_carlo_returns_minus_values():
    rewards, values, terms, truncs, valid, last = two_columns()
    adv, targets = compute_gae(rewards, values, terms, truncs, valid, last, GAMMA, 1.0)
    # column 0 bootstraps from last_values at the end
    mc0 = _discounted_returns([1, 2, 3, 4, 5], GAMMA, 1.0)
    np.testing.assert_allclose(adv[:, 0], np.array(mc0) - values[:, 0], rtol=1e-5)
    np.testing.assert_allclose(targets[:, 0], mc0, rtol=1e-5)
    # column 1: the terminated episode (rows 0-1) and the truncated one (row 3, bootstrapping 2.0)
    np.testing.assert_allclose(adv[:2, 1], np.array(_discounted_returns([1, 1], GAMMA, 0.0)) - values[:2, 1], rtol=1e-5)
    assert adv[3, 1] == pytest.approx(2 + GAMMA * 2.0 - 0.3)


def test_lambda_zero_gives_td_errors():
    rewards, values, terms, truncs, valid, last = two_columns()
    adv, _ = compute_gae(rewards, values, terms, truncs, valid, last, GAMMA, 0.0)
    next_values = np.concatenate([values[1:], last[None]], axis=0)
    td = rewards + GAMMA * next_values * (~terms) - values
    np.testing.assert_allclose(adv[valid], td[valid], rtol=1e-5)
    assert adv[1, 1] == pytest.approx(1 - 0.6)  # terminated: no bootstrap


def test_last_row_bootstraps_from_last_values():
    rewards, values, terms, truncs, valid, last = two_columns()
    adv_a, _ = compute_gae(rewards, values, terms, truncs, valid, last, GAMMA, LAM)
    adv_b, _ = compute_gae(rewards, values, terms, truncs, valid, last + np.float32(1.0), GAMMA, LAM)
    diff = adv_b[:, 0] - adv_a[:, 0]
    np.testing.assert_allclose(diff, [GAMMA * (GAMMA * LAM) ** (4 - t) for t in range(5)], rtol=1e-4)
    # column 1 ends in a reset row: its last value is irrelevant
    np.testing.assert_array_equal(adv_a[:, 1], adv_b[:, 1])


def test_episode_ending_on_the_last_row():
    rewards = np.array([[1.0], [1.0]], dtype=np.float32)
    values = np.array([[0.5], [0.5]], dtype=np.float32)
    valid = np.ones((2, 1), dtype=bool)
    last = np.array([3.0], dtype=np.float32)  # the final observation's value
    truncs = np.array([[False], [True]])
    terms = np.zeros((2, 1), dtype=bool)
    adv, _ = compute_gae(rewards, values, terms, truncs, valid, last, GAMMA, LAM)
    assert adv[1, 0] == pytest.approx(1 + GAMMA * 3.0 - 0.5)
    adv, _ = compute_gae(rewards, values, truncs, terms, valid, last, GAMMA, LAM)  # now terminated
    assert adv[1, 0] == pytest.approx(1 - 0.5)
    assert adv[0, 0] == pytest.approx((1 + GAMMA * 0.5 - 0.5) + GAMMA * LAM * 0.5)


def test_add_gae_adds_columns():
    rewards, values, terms, truncs, valid, last = two_columns()
    fragment = SampleBatch(
        {
            SampleBatch.REWARDS: rewards,
            SampleBatch.VF_PREDS: values,
            SampleBatch.TERMINATEDS: terms,
            SampleBatch.TRUNCATEDS: truncs,
            "valid": valid,
        }
    )
    out = add_gae(fragment, last, GAMMA, LAM)
    expected, targets = compute_gae(rewards, values, terms, truncs, valid, last, GAMMA, LAM)
    np.testing.assert_array_equal(out[SampleBatch.ADVANTAGES], expected)
    np.testing.assert_array_equal(out[SampleBatch.VALUE_TARGETS], targets)
    assert SampleBatch.ADVANTAGES not in fragment
