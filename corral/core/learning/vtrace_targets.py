"""V-trace (Espeholt et al., 2018): value targets and policy-gradient advantages for off-policy fragments.

An actor that samples with weights a few updates old produced its fragment
with a behaviour policy mu that is no longer the learner's pi. V-trace
corrects for that with truncated importance weights: ``rho_t = min(rho_bar,
pi/mu)`` scales each TD error, ``c_t = min(c_bar, pi/mu)`` how far the
correction carries back in time. With pi = mu (and both bars >= 1) the targets
are the n-step returns over the fragment.

Inputs are time-major ``[T, N]`` tensors with corral's reset-row convention
(see :mod:`corral.core.learning.postprocessing`): the row after an episode's end is
invalid and carries the value of the episode's final observation, so a
truncated episode bootstraps from it and a terminated one does not.
"""

from __future__ import annotations

import numpy as np
import torch

from corral.core.learning.nonfinite import saturate


def vtrace(
    behaviour_logp: torch.Tensor,
    target_logp: torch.Tensor,
    rewards: torch.Tensor,
    values: torch.Tensor,
    last_values: torch.Tensor,
    terminateds: torch.Tensor,
    truncateds: torch.Tensor,
    valid: torch.Tensor,
    gamma: float,
    rho_bar: float = 1.0,
    c_bar: float = 1.0,
    pg_rho_bar: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """V-trace targets ``vs`` and policy-gradient advantages, both ``[T, N]`` and zero on invalid rows.

    Args:
        behaviour_logp: log mu(a_t | x_t), recorded by the actor.
        target_logp: log pi(a_t | x_t) under the learner's current weights.
        rewards: r_t.
        values: V(x_t) under the learner's current weights (on a reset row, the final observation's value).
        last_values: ``[N]`` values of the observations after the last row.
        terminateds, truncateds: whether row t ended its episode, and how.
        valid: 0 on reset rows, whose action was never taken.
        gamma: the discount.
        rho_bar: clips the weight of each TD error (the fixed point's bias).
        c_bar: clips how far a correction carries back (the variance).
        pg_rho_bar: clips the weight of the policy-gradient advantage.

    Returns:
        ``(vs, pg_advantages)``: targets for the value function, and
        ``rho^pg_t (r_t + gamma v_{t+1} - V(x_t))`` for the policy gradient. No gradient flows through them.
    """
    with torch.no_grad():
        valid = valid.to(values.dtype)
        ratios = torch.exp(target_logp - behaviour_logp) * valid
        rhos = torch.clamp(ratios, max=saturate(rho_bar))
        cs = torch.clamp(ratios, max=saturate(c_bar))
        not_terminated = 1.0 - terminateds.to(values.dtype)
        continues = 1.0 - (terminateds | truncateds).to(values.dtype)
        next_values = torch.cat([values[1:], last_values.unsqueeze(0)])
        deltas = rhos * (rewards + gamma * not_terminated * next_values - values)
        scanned = _discounted_scan((deltas * valid).cpu().numpy(), (gamma * cs * continues * valid).cpu().numpy())
        corrections = torch.from_numpy(scanned).to(values.device)  # vs_t - V(x_t)
        vs = values + corrections
        # v_{t+1}: the next row's target inside the episode; past its end, the final observation's value.
        next_corrections = torch.cat([corrections[1:], torch.zeros_like(last_values).unsqueeze(0)])
        next_vs = next_values + continues * next_corrections
        pg_rhos = torch.clamp(ratios, max=saturate(pg_rho_bar))
        pg_advantages = pg_rhos * (rewards + gamma * not_terminated * next_vs - values) * valid
        return vs * valid, pg_advantages


def _discounted_scan(terms: np.ndarray, factors: np.ndarray) -> np.ndarray:
    """``out[t] = terms[t] + factors[t] * out[t + 1]`` backwards over time, with ``out[T] = 0``.

    In numpy: for the small ``[T, N]`` arrays of a train batch, a loop of
    numpy steps costs a tenth of the same loop of torch ops.
    """
    out = np.empty_like(terms)
    carry = np.zeros_like(terms[0])
    for t in range(terms.shape[0] - 1, -1, -1):
        carry = terms[t] + factors[t] * carry
        out[t] = carry
    return out
