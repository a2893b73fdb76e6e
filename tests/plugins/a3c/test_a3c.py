"""A3C's own behaviour: RLlib's name and defaults, its rules, the summed loss, its advantages, the update in one process.

Its asynchronous runs on remote env runners (gradients computed by the runners, a runner killed) are in
tests/core/test_remote_env_runners.py, with the Ray the tests there share.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import corral
from corral.core import SampleBatch
from corral.errors import ConfigError
from corral.plugins.a3c import A3C, A3CConfig

TINY = {"num_env_runners": 0, "num_envs_per_env_runner": 2, "min_time_s_per_iteration": 0, "seed": 0}


def tiny(env: str = "CartPole-v1", **overrides) -> A3CConfig:
    return A3CConfig().environment(env).update_from_dict({**TINY, **overrides})


def test_a3c_is_found_by_rllib_s_name_with_rllib_s_defaults() -> None:
    assert corral.get_algorithm("a3c") is A3C
    config = corral.get_config("A3C")
    assert isinstance(config, A3CConfig)
    loss = (config.lr, config.grad_clip, config.lambda_, config.vf_loss_coeff, config.entropy_coeff)
    assert loss == (1e-4, 40.0, 1.0, 0.5, 0.01)
    assert (config.num_env_runners, config.rollout_fragment_length, config.min_time_s_per_iteration) == (2, 10, 5)
    assert config.use_critic and config.use_gae and not config.normalize_advantages
    assert config.train_batch_size == -1


@pytest.mark.parametrize(
    "overrides, named",
    [
        ({"train_batch_size": 200}, "train_batch_size=200"),
        ({"rollout_fragment_length": "auto"}, "rollout_fragment_length='auto'"),
        ({"num_learners": 1}, "num_learners > 0"),
    ],
)
def test_what_learning_on_the_runners_rules_out_is_refused_with_the_reason(overrides, named) -> None:
    with pytest.raises(ConfigError, match=rf"^{named}"):
        tiny(**overrides).build()


def test_the_loss_terms_are_sums_over_the_rows(make_algo) -> None:
    policy = make_algo(tiny()).get_policy()
    rows = 6
    batch = {
        SampleBatch.OBS: torch.randn(rows, 4),
        SampleBatch.ACTIONS: torch.tensor([0, 1, 1, 0, 1, 0]),
        SampleBatch.ADVANTAGES: torch.tensor([1.0, -2.0, 0.5, 3.0, 0.0, 1.5]),
        SampleBatch.VALUE_TARGETS: torch.tensor([1.0, 2.0, 0.0, -1.0, 0.5, 2.5]),
    }
    fwd_out = policy.model.forward_train(batch[SampleBatch.OBS])
    total, terms = policy.compute_loss(batch, fwd_out)
    logits = fwd_out[SampleBatch.ACTION_DIST_INPUTS]
    logp_all = torch.log_softmax(logits, -1)
    logp = logp_all.gather(1, batch[SampleBatch.ACTIONS][:, None])[:, 0]
    policy_loss = -(logp * batch[SampleBatch.ADVANTAGES]).sum()
    vf_loss = 0.5 * (fwd_out[SampleBatch.VF_PREDS] - batch[SampleBatch.VALUE_TARGETS]).pow(2).sum()
    entropy = -(logp_all.exp() * logp_all).sum()
    torch.testing.assert_close(terms["policy_loss"], policy_loss)
    torch.testing.assert_close(terms["vf_loss"], vf_loss)
    torch.testing.assert_close(terms["entropy"], entropy)
    torch.testing.assert_close(total, policy_loss + 0.5 * vf_loss - 0.01 * entropy)


def fragment() -> SampleBatch:
    """``[T=3, N=1]``: one episode that runs past the fragment's end (bootstrapped from the last value by a critic)."""
    return SampleBatch(
        {
            SampleBatch.OBS: np.zeros((3, 1, 4), np.float32),
            SampleBatch.ACTIONS: np.zeros((3, 1), np.int64),
            SampleBatch.REWARDS: np.ones((3, 1), np.float32),
            SampleBatch.VF_PREDS: np.full((3, 1), 2.0, np.float32),
            SampleBatch.TERMINATEDS: np.zeros((3, 1), bool),
            SampleBatch.TRUNCATEDS: np.zeros((3, 1), bool),
            SampleBatch.VALID: np.ones((3, 1), bool),
        }
    )


def test_without_gae_the_advantage_is_the_n_step_return_less_the_value_whatever_lambda(make_algo) -> None:
    policy = make_algo(tiny(use_gae=False, lambda_=0.0, gamma=0.5)).get_policy()
    policy.compute_values = lambda obs, **kwargs: np.array([4.0], np.float32)  # the value after the fragment
    rows = policy.postprocess_trajectory(fragment(), np.zeros((1, 4), np.float32))
    returns = [1 + 0.5 + 0.25 + 0.125 * 4, 1 + 0.5 + 0.25 * 4, 1 + 0.5 * 4]
    np.testing.assert_allclose(rows[SampleBatch.VALUE_TARGETS], returns)
    np.testing.assert_allclose(rows[SampleBatch.ADVANTAGES], np.array(returns) - 2.0)


def test_without_a_critic_the_advantage_is_the_discounted_return_and_there_is_no_value_loss(make_algo) -> None:
    algo = make_algo(tiny(use_critic=False, gamma=0.5))
    policy = algo.get_policy()
    rows = policy.postprocess_trajectory(fragment(), np.zeros((1, 4), np.float32))
    np.testing.assert_allclose(rows[SampleBatch.ADVANTAGES], [1.75, 1.5, 1.0])  # nothing bootstraps
    stats = algo.train()["info"]["learner"]["default_policy"]["learner_stats"]
    assert stats["vf_loss"] == 0.0 and np.isfinite(stats["policy_loss"])


def test_without_remote_runners_each_step_updates_once_on_one_sample_call(make_algo) -> None:
    algo = make_algo(tiny(min_sample_timesteps_per_iteration=1))
    before = {k: v.copy() for k, v in algo.get_weights()["default_policy"].items()}
    result = algo.train()
    assert result["num_env_steps_sampled"] == result["num_env_steps_trained"] == 2 * 10
    stats = result["info"]["learner"]["default_policy"]["learner_stats"]
    assert stats["cur_lr"] == pytest.approx(1e-4) and np.isfinite(stats["total_loss"])
    after = algo.get_weights()["default_policy"]
    assert any(not np.array_equal(before[k], after[k]) for k in before)
