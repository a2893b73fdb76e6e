"""compute_nstep on [T, N] fragments with gymnasium's next-step autoreset ("reset rows").

Convention (see corral.core.learning.postprocessing): after a row where an episode ends,
the next row of that column is an invalid reset row whose obs is the episode's
final observation.
"""

from __future__ import annotations

import numpy as np
import pytest

from corral.core.common.sample_batch import SampleBatch
from corral.core.learning.postprocessing import compute_nstep
from corral.errors import ConfigError

GAMMA = 0.5
F0, F1 = [90.0, 0.0], [91.0, 1.0]  # final observations, stored on the reset rows
B0, B1 = [70.0, 0.0], [71.0, 1.0]  # bootstrap observations after the last row


def fragment() -> tuple[SampleBatch, np.ndarray]:
    """T=6, N=2.

    row:      0      1      2       3      4      5
    env 0:  r=1    r=2    r=3 term  reset  r=4    r=5      (window past the end)
    env 1:  reset  r=1    r=2 trunc reset  r=3    r=4 term
    obs[t, i] = [t, i] except on reset rows (final obs F0 / F1, or a stale one on row 0).
    """
    obs = np.array([[[t, i] for i in range(2)] for t in range(6)], dtype=np.float32)
    obs[3, 0], obs[3, 1], obs[0, 1] = F0, F1, [-1.0, -1.0]
    rewards = np.array([[1, 0], [2, 1], [3, 2], [0, 0], [4, 3], [5, 4]], dtype=np.float32)
    terminateds = np.zeros((6, 2), dtype=bool)
    truncateds = np.zeros((6, 2), dtype=bool)
    terminateds[2, 0] = terminateds[5, 1] = True
    truncateds[2, 1] = True
    valid = np.ones((6, 2), dtype=bool)
    valid[3, 0] = valid[0, 1] = valid[3, 1] = False
    batch = SampleBatch(
        obs=obs,
        actions=np.arange(12, dtype=np.int64).reshape(6, 2),
        rewards=rewards,
        terminateds=terminateds,
        truncateds=truncateds,
        valid=valid,
        action_logp=np.array([[10 * t + i for i in range(2)] for t in range(6)], dtype=np.float32),
    )
    return batch, np.array([B0, B1], dtype=np.float32)


# valid rows in time-major order, as (t, env)
ROWS = [(0, 0), (1, 0), (1, 1), (2, 0), (2, 1), (4, 0), (4, 1), (5, 0), (5, 1)]


def _obs(t: int, i: int) -> list[float]:
    return [float(t), float(i)]


def test_three_step_by_hand():
    batch, boot = fragment()
    out = compute_nstep(batch, boot, n_step=3, gamma=GAMMA)
    expected = {  # (t, env): (return, new_obs, terminated, truncated, discount)
        (0, 0): (1 + 0.5 * 2 + 0.25 * 3, F0, True, False, 0.0),  # terminates inside the window
        (1, 0): (2 + 0.5 * 3, F0, True, False, 0.0),
        (2, 0): (3, F0, True, False, 0.0),
        (4, 0): (4 + 0.5 * 5, B0, False, False, 0.25),  # runs past the fragment's end
        (5, 0): (5, B0, False, False, 0.5),
        (1, 1): (1 + 0.5 * 2, F1, False, True, 0.25),  # truncated: bootstrap from the final obs
        (2, 1): (2, F1, False, True, 0.5),
        (4, 1): (3 + 0.5 * 4, B1, True, False, 0.0),
        (5, 1): (4, B1, True, False, 0.0),
    }
    assert out.count == len(ROWS)
    assert set(out) == {"obs", "actions", "rewards", "terminateds", "truncateds", "action_logp", "new_obs", "discounts"}
    for row, (t, i) in enumerate(ROWS):
        ret, new_obs, term, trunc, disc = expected[(t, i)]
        assert out["rewards"][row] == pytest.approx(ret), (t, i)
        np.testing.assert_array_equal(out["new_obs"][row], new_obs)
        assert out["terminateds"][row] == term and out["truncateds"][row] == trunc, (t, i)
        assert out["discounts"][row] == pytest.approx(disc), (t, i)
        np.testing.assert_array_equal(out["obs"][row], _obs(t, i))
        assert out["actions"][row] == 2 * t + i
        assert out["action_logp"][row] == 10 * t + i  # extra columns carried through
    assert out["rewards"].dtype == np.float32 and out["discounts"].dtype == np.float32
    assert out["new_obs"].dtype == np.float32


def test_one_step_is_ordinary_transitions():
    batch, boot = fragment()
    out = compute_nstep(batch, boot, n_step=1, gamma=GAMMA)
    expected_new_obs = {
        (0, 0): _obs(1, 0),
        (1, 0): _obs(2, 0),
        (2, 0): F0,
        (4, 0): _obs(5, 0),
        (5, 0): B0,
        (1, 1): _obs(2, 1),
        (2, 1): F1,
        (4, 1): _obs(5, 1),
        (5, 1): B1,
    }
    flat_valid = batch["valid"].reshape(-1)
    np.testing.assert_array_equal(out["rewards"], batch["rewards"].reshape(-1)[flat_valid])
    np.testing.assert_array_equal(out["terminateds"], batch["terminateds"].reshape(-1)[flat_valid])
    np.testing.assert_array_equal(out["truncateds"], batch["truncateds"].reshape(-1)[flat_valid])
    np.testing.assert_allclose(out["discounts"], np.where(out["terminateds"], 0.0, GAMMA))
    np.testing.assert_array_equal(out["new_obs"], [expected_new_obs[r] for r in ROWS])


def test_two_step_window_ending_exactly_at_fragment_end():
    batch, boot = fragment()
    out = compute_nstep(batch, boot, n_step=2, gamma=GAMMA)
    row = ROWS.index((4, 0))  # rows 4 and 5 summed, the obs two rows later is bootstrap_obs
    assert out["rewards"][row] == pytest.approx(4 + 0.5 * 5)
    assert out["discounts"][row] == pytest.approx(0.25)
    np.testing.assert_array_equal(out["new_obs"][row], B0)
    row = ROWS.index((0, 0))
    np.testing.assert_array_equal(out["new_obs"][row], _obs(2, 0))


def test_invalid_rows_dropped_and_valid_column_removed():
    batch, boot = fragment()
    out = compute_nstep(batch, boot, n_step=3, gamma=GAMMA)
    assert "valid" not in out
    assert not np.any(out["obs"][:, 0] == -1.0)  # the stale reset row of env 1
    assert not np.any(np.isin(out["obs"][:, 0], [90.0, 91.0]))  # final obs only appear as new_obs


def _reference(batch: SampleBatch, boot: np.ndarray, n: int, gamma: float) -> dict[str, list]:
    """Row-by-row n-step, the obvious (slow) way."""
    steps, envs = batch["rewards"].shape
    out: dict[str, list] = {"rewards": [], "new_obs": [], "terminateds": [], "truncateds": [], "discounts": []}
    for t in range(steps):
        for i in range(envs):
            if not batch["valid"][t, i]:
                continue
            ret, k, term, trunc = 0.0, 0, False, False
            while k < n and t + k < steps:
                ret += gamma**k * batch["rewards"][t + k, i]
                term, trunc = bool(batch["terminateds"][t + k, i]), bool(batch["truncateds"][t + k, i])
                k += 1
                if term or trunc:
                    break
            out["rewards"].append(ret)
            out["new_obs"].append(batch["obs"][t + k, i] if t + k < steps else boot[i])
            out["terminateds"].append(term)
            out["truncateds"].append(trunc)
            out["discounts"].append(0.0 if term else gamma**k)
    return out


def _random_fragment(rng: np.random.Generator, steps: int, envs: int) -> tuple[SampleBatch, np.ndarray]:
    terminateds = rng.random((steps, envs)) < 0.15
    truncateds = rng.random((steps, envs)) < 0.1
    valid = np.ones((steps, envs), dtype=bool)
    valid[0] = rng.random(envs) < 0.7
    for t in range(1, steps):  # the row after a done is a reset row
        valid[t] = ~((terminateds[t - 1] | truncateds[t - 1]) & valid[t - 1])
    terminateds &= valid
    truncateds &= valid
    rewards = (rng.standard_normal((steps, envs)) * valid).astype(np.float32)
    obs = rng.standard_normal((steps, envs, 3)).astype(np.float32)
    batch = SampleBatch(
        obs=obs,
        actions=rng.integers(0, 4, (steps, envs)),
        rewards=rewards,
        terminateds=terminateds,
        truncateds=truncateds,
        valid=valid,
    )
    return batch, rng.standard_normal((envs, 3)).astype(np.float32)


@pytest.mark.parametrize("n_step", [1, 2, 3, 5, 40])
def test_matches_row_by_row_reference(n_step):
    rng = np.random.default_rng(n_step)
    batch, boot = _random_fragment(rng, steps=30, envs=4)
    out = compute_nstep(batch, boot, n_step=n_step, gamma=0.9)
    ref = _reference(batch, boot, n_step, 0.9)
    np.testing.assert_allclose(out["rewards"], ref["rewards"], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(out["new_obs"], np.array(ref["new_obs"]))
    np.testing.assert_array_equal(out["terminateds"], ref["terminateds"])
    np.testing.assert_array_equal(out["truncateds"], ref["truncateds"])
    np.testing.assert_allclose(out["discounts"], ref["discounts"], rtol=1e-6)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"n_step": 0}, "n_step"), ({"n_step": 2.0}, "n_step"), ({"gamma": 1.5}, "gamma"), ({"gamma": -0.1}, "gamma")],
)
def test_bad_arguments(kwargs, message):
    batch, boot = fragment()
    with pytest.raises(ConfigError, match=message):
        compute_nstep(batch, boot, **{"n_step": 3, "gamma": GAMMA, **kwargs})


def test_bad_bootstrap_shape():
    batch, boot = fragment()
    with pytest.raises(ConfigError, match="bootstrap_obs"):
        compute_nstep(batch, boot[:1], n_step=3, gamma=GAMMA)
