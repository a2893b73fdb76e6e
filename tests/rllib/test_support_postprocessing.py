"""RLlib's batch helpers written in corral: advantages over one trajectory, joining batches, one policy's batch of many.

The expected numbers are worked out by hand (values chosen so that every step is exact in binary floating point).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from corral.core.common.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch
from corral.core.learning.postprocessing import compute_gae
from corral.rllib.support.batches import concat_samples, convert_ma_batch_to_sample_batch
from corral.rllib.support.postprocessing import Postprocessing, compute_advantages, discount_cumsum

REWARDS = [1.0, 0.0, 2.0]
VALUES = [0.5, 1.0, 1.5]


def trajectory() -> SampleBatch:
    return SampleBatch({"rewards": np.array(REWARDS, np.float32), "vf_preds": np.array(VALUES, np.float32)})


def test_postprocessing_names_rllib_s_columns() -> None:
    assert Postprocessing.ADVANTAGES == "advantages" and Postprocessing.VALUE_TARGETS == "value_targets"


def test_discount_cumsum_sums_each_step_s_discounted_future_in_float64() -> None:
    out = discount_cumsum(np.array([0.0, 1.0, 2.0, 3.0], np.float32), 0.5)
    # y[3] = 3; y[2] = 2 + 0.5 * 3; y[1] = 1 + 0.5 * 3.5; y[0] = 0 + 0.5 * 2.75
    np.testing.assert_array_equal(out, [1.375, 2.75, 3.5, 3.0])
    assert out.dtype == np.float64
    np.testing.assert_array_equal(discount_cumsum([[1.0, 2.0], [3.0, 4.0]], 0.5), [[2.5, 4.0], [3.0, 4.0]])  # along axis 0
    assert discount_cumsum(np.zeros(0), 0.9).shape == (0,)
    with pytest.raises(ValueError, match=r"the scalar 3\.0"):
        discount_cumsum(3.0, 0.9)
    with pytest.raises(TypeError, match="gamma must be a real number"):
        discount_cumsum([1.0], "0.9")  # type: ignore[arg-type]


def test_gae_advantages_and_value_targets() -> None:
    rollout = trajectory()
    out = compute_advantages(rollout, last_r=2.0, gamma=0.5, lambda_=0.5)
    # TD errors: 1 + 0.5*1 - 0.5 = 1; 0 + 0.5*1.5 - 1 = -0.25; 2 + 0.5*2 - 1.5 = 1.5; summed back at gamma*lambda = 0.25
    np.testing.assert_array_equal(out["advantages"], [1.03125, 0.125, 1.5])
    np.testing.assert_array_equal(out["value_targets"], [1.53125, 1.125, 3.0])  # advantages + vf_preds
    assert out is rollout  # changed in place and returned, as RLlib's
    assert out["advantages"].dtype == out["value_targets"].dtype == np.float32


def test_without_gae_the_advantages_are_the_returns_minus_the_values() -> None:
    out = compute_advantages(trajectory(), last_r=2.0, gamma=0.5, use_gae=False)
    # returns bootstrapped from last_r: 2 + 0.5*2 = 3; 0 + 0.5*3 = 1.5; 1 + 0.5*1.5 = 1.75
    np.testing.assert_array_equal(out["value_targets"], [1.75, 1.5, 3.0])
    np.testing.assert_array_equal(out["advantages"], [1.25, 0.5, 1.5])
    # GAE with lambda 1 is the same estimate
    np.testing.assert_array_equal(compute_advantages(trajectory(), 2.0, 0.5, 1.0)["advantages"], [1.25, 0.5, 1.5])


def test_without_a_critic_the_advantages_are_the_returns_and_the_targets_zero() -> None:
    rollout = SampleBatch({"rewards": np.array(REWARDS, np.float32)})  # no vf_preds needed
    out = compute_advantages(rollout, last_r=2.0, gamma=0.5, use_gae=False, use_critic=False)
    np.testing.assert_array_equal(out["advantages"], [1.75, 1.5, 3.0])
    np.testing.assert_array_equal(out["value_targets"], [0.0, 0.0, 0.0])
    assert out["value_targets"].dtype == np.float32


def test_rewards_and_values_given_replace_the_columns_and_last_r_may_be_a_tensor() -> None:
    rollout = SampleBatch({"rewards": np.zeros(3, np.float32)})
    out = compute_advantages(rollout, torch.tensor(2.0), 0.5, 0.5, rewards=np.array(REWARDS), vf_preds=torch.tensor(VALUES))
    np.testing.assert_array_equal(out["advantages"], [1.03125, 0.125, 1.5])


def test_the_estimate_agrees_with_corral_s_own_gae_to_float32_precision() -> None:
    rng = np.random.default_rng(0)
    rewards, values = rng.normal(size=50).astype(np.float32), rng.normal(size=50).astype(np.float32)
    out = compute_advantages(SampleBatch({"rewards": rewards, "vf_preds": values}), 0.3, 0.99, 0.95)
    no = np.zeros((50, 1), bool)
    advantages, targets = compute_gae(rewards[:, None], values[:, None], no, no, ~no, np.array([0.3]), 0.99, 0.95)
    np.testing.assert_allclose(out["advantages"], advantages[:, 0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["value_targets"], targets[:, 0], rtol=1e-5, atol=1e-5)


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="use_gae=True needs the critic"):
        compute_advantages(trajectory(), 0.0, use_critic=False)
    with pytest.raises(ValueError, match="no 'vf_preds' column; pass vf_preds="):
        compute_advantages(SampleBatch({"rewards": np.ones(3)}), 0.0)
    with pytest.raises(ValueError, match="3 rewards but 2 vf_preds"):
        compute_advantages(trajectory(), 0.0, vf_preds=np.ones(2))
    with pytest.raises(ValueError, match=r"one value per step \(1-D\), got shape \(3, 1\)"):
        compute_advantages(trajectory(), 0.0, rewards=np.ones((3, 1)))
    with pytest.raises(ValueError, match="last_r is the value after the last step, one number"):
        compute_advantages(trajectory(), np.zeros(2))
    with pytest.raises(TypeError, match=r"call it on each policy's batch in \.policy_batches"):
        compute_advantages(trajectory().as_multi_agent(), 0.0)  # type: ignore[arg-type]


def test_concat_samples_joins_rows_in_order_with_the_first_batch_s_columns() -> None:
    first = SampleBatch({"obs": np.array([[1.0], [2.0]]), "infos": [{"a": 1}, {"a": 2}], "nested": {"x": np.array([1, 2])}})
    empty = SampleBatch({"something": np.zeros(0)})
    second = SampleBatch({"obs": np.array([[3.0]]), "infos": [{"a": 3}], "nested": {"x": np.array([3])}, "extra": np.ones(1)})
    out = concat_samples([first, empty, second])
    assert isinstance(out, SampleBatch) and list(out) == ["obs", "infos", "nested"]  # the extra column is not the first's
    np.testing.assert_array_equal(out["obs"], [[1.0], [2.0], [3.0]])
    assert out["infos"] == [{"a": 1}, {"a": 2}, {"a": 3}]
    np.testing.assert_array_equal(out["nested"]["x"], [1, 2, 3])
    tensors = concat_samples([SampleBatch({"t": torch.ones(2)}), SampleBatch({"t": torch.zeros(1)})])
    assert isinstance(tensors, SampleBatch) and torch.equal(tensors["t"], torch.tensor([1.0, 1.0, 0.0]))
    assert concat_samples([]) == SampleBatch() == concat_samples([empty])


def test_concat_samples_with_a_multi_agent_batch_gives_one_and_a_sample_batch_is_the_default_policy_s() -> None:
    default = SampleBatch({"obs": np.array([1.0, 2.0])})
    parts = {DEFAULT_POLICY_ID: SampleBatch({"obs": np.array([3.0])}), "p1": SampleBatch({"obs": np.zeros(4)})}
    multi = MultiAgentBatch(parts, 3)
    out = concat_samples([default, multi, SampleBatch()])
    assert isinstance(out, MultiAgentBatch)
    np.testing.assert_array_equal(out.policy_batches[DEFAULT_POLICY_ID]["obs"], [1.0, 2.0, 3.0])
    assert out.policy_batches["p1"].count == 4
    assert out.env_steps == 2 + 3 and out.agent_steps == 2 + 5


def test_concat_samples_refuses_what_it_cannot_join() -> None:
    with pytest.raises(ValueError, match=r"non-empty batch 2 lacks the columns \['b'\] that the first one has"):
        concat_samples([SampleBatch({"a": np.ones(1), "b": np.ones(1)}), SampleBatch({"a": np.ones(1)})])
    with pytest.raises(ValueError, match=r"column 'a' cannot be joined, its shapes are \[\(1, 2\), \(1, 3\)\]"):
        concat_samples([SampleBatch({"a": np.ones((1, 2))}), SampleBatch({"a": np.ones((1, 3))})])
    with pytest.raises(ValueError, match=r"item 2 is a dict \(wrap a dict of columns in SampleBatch"):
        concat_samples([SampleBatch({"a": np.ones(1)}), {"a": np.ones(1)}])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="takes a list of batches, got SampleBatch"):
        concat_samples(SampleBatch({"a": np.ones(1)}))  # type: ignore[arg-type]


def test_convert_ma_batch_to_sample_batch_gives_the_one_policy_s_batch() -> None:
    batch = SampleBatch({"obs": np.ones(2)})
    assert convert_ma_batch_to_sample_batch(batch) is batch
    assert convert_ma_batch_to_sample_batch(batch.as_multi_agent()) is batch
    assert convert_ma_batch_to_sample_batch(MultiAgentBatch({"p1": batch}, 2)) is batch
    with pytest.raises(ValueError, match=r"the rows of 2 policies \('p1', 'p2'\); take one policy's rows"):
        convert_ma_batch_to_sample_batch(MultiAgentBatch({"p1": batch, "p2": batch}, 2))
    with pytest.raises(TypeError, match="takes a SampleBatch or a MultiAgentBatch, got list"):
        convert_ma_batch_to_sample_batch([batch])  # type: ignore[arg-type]
