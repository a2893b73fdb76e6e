"""V-trace against hand-computed values, and against GAE(1) when the data is on-policy."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from corral.core.learning.postprocessing import compute_gae
from corral.core.learning.vtrace_targets import vtrace


def column(*values, dtype=torch.float32):
    return torch.tensor(values, dtype=dtype).unsqueeze(1)  # [T, 1]


def test_clipped_importance_weights_match_a_hand_computation() -> None:
    # ratios pi/mu = 2, 0.5, 1 -> rho = c = 1, 0.5, 1 with both bars at 1
    behaviour = column(0.0, 0.0, 0.0)
    target = torch.log(column(2.0, 0.5, 1.0))
    flags = column(0, 0, 0, dtype=torch.bool)
    vs, pg = vtrace(behaviour, target, column(1.0, 1.0, 1.0), column(1.0, 2.0, 3.0), torch.tensor([4.0]),
                    flags, flags, column(1, 1, 1), gamma=0.9)  # fmt: skip
    # deltas: 1.8, 0.5 * 1.7 = 0.85, 1.6; corrections from the end: 1.6, 0.85 + 0.9 * 0.5 * 1.6, 1.8 + 0.9 * 1.57
    torch.testing.assert_close(vs.squeeze(1), torch.tensor([4.213, 3.57, 4.6]))
    # rho_pg * (r + gamma * v_{t+1} - V): 1 * (1 + 0.9 * 3.57 - 1), 0.5 * (1 + 0.9 * 4.6 - 2), 1 * (1 + 0.9 * 4 - 3)
    torch.testing.assert_close(pg.squeeze(1), torch.tensor([3.213, 1.57, 1.6]))


@pytest.mark.parametrize("ended_by, expected_first", [("truncated", 1.0 + 0.9 * 5.0), ("terminated", 1.0)])
def test_truncation_bootstraps_from_the_reset_row_and_termination_does_not(ended_by, expected_first) -> None:
    # row 0 ends the episode; row 1 is the reset row carrying V(final obs) = 5; row 2 starts a new episode
    zero = column(0.0, 0.0, 0.0)
    ended = column(1, 0, 0, dtype=torch.bool)
    other = column(0, 0, 0, dtype=torch.bool)
    terminateds, truncateds = (ended, other) if ended_by == "terminated" else (other, ended)
    vs, pg = vtrace(zero, zero, column(1.0, 0.0, 1.0), column(1.0, 5.0, 2.0), torch.tensor([3.0]),
                    terminateds, truncateds, column(1, 0, 1), gamma=0.9)  # fmt: skip
    torch.testing.assert_close(vs.squeeze(1), torch.tensor([expected_first, 0.0, 1.0 + 0.9 * 3.0]))
    assert pg[1, 0] == 0.0  # nothing is learned from the reset row


def test_on_policy_vtrace_equals_n_step_returns() -> None:
    rng = np.random.default_rng(0)
    steps, envs = 20, 4
    rewards = rng.normal(size=(steps, envs)).astype(np.float32)
    values = rng.normal(size=(steps, envs)).astype(np.float32)
    last = rng.normal(size=envs).astype(np.float32)
    terminateds = rng.random((steps, envs)) < 0.1
    truncateds = (rng.random((steps, envs)) < 0.1) & ~terminateds
    done_before = np.vstack([np.zeros((1, envs), bool), (terminateds | truncateds)[:-1]])
    valid = (~done_before).astype(np.float32)  # the row after every end is a reset row
    advantages, targets = compute_gae(rewards, values, terminateds, truncateds, valid, last, 0.97, 1.0)
    logp = torch.from_numpy(rng.normal(size=(steps, envs)).astype(np.float32))
    vs, pg = vtrace(
        logp, logp, *(torch.from_numpy(a) for a in (rewards, values, last, terminateds, truncateds, valid)), gamma=0.97
    )
    torch.testing.assert_close(vs, torch.from_numpy(targets), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(pg, torch.from_numpy(advantages), rtol=1e-5, atol=1e-5)


def test_no_gradient_flows_through_the_targets() -> None:
    values = column(1.0, 2.0).requires_grad_()
    flags = column(0, 0, dtype=torch.bool)
    vs, pg = vtrace(
        column(0.0, 0.0), column(0.0, 0.0), column(1.0, 1.0), values, torch.tensor([0.0]), flags, flags, column(1, 1), 0.9
    )
    assert not vs.requires_grad and not pg.requires_grad
