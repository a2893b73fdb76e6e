"""A policy's gradients computed in one place and applied in another (RLlib's ``compute_gradients`` / ``apply_gradients``).

A3C's env runners compute them on their own samples and the learner applies them: the step must be the one
``learn_on_batch`` makes, the computing copy must not move, and what cannot be one gradient is refused.
"""

from __future__ import annotations

import numpy as np
import pytest

from corral import get_config
from corral.errors import ConfigError, TrainingError


def one_batch(algo):
    """A train batch of the default policy's rows, sampled by the algorithm's own runner."""
    return algo.env_runner_group.local_env_runner.sample().policy_batches["default_policy"]


def weights(policy) -> dict[str, np.ndarray]:
    return {k: v.copy() for k, v in policy.get_weights().items()}


def test_applied_gradients_make_the_step_learn_on_batch_makes_and_the_computing_copy_stays(make_algo) -> None:
    config = get_config("A2C").environment("CartPole-v1").update_from_dict({"num_envs_per_env_runner": 2, "seed": 0})
    computing, applying, learning = (make_algo(config).get_policy() for _ in range(3))
    start = weights(learning)
    for policy in (computing, applying):
        policy.set_weights(start)
    batch = one_batch(make_algo(config))

    gradients, stats = computing.compute_gradients(batch)
    assert {"policy_loss", "vf_loss", "grad_gnorm"} <= set(stats)
    assert all(np.array_equal(weights(computing)[k], start[k]) for k in start)  # computing changes nothing
    applying.apply_gradients(gradients)
    learning.learn_on_batch(batch)
    for key, value in weights(learning).items():
        np.testing.assert_allclose(weights(applying)[key], value, rtol=1e-6, atol=1e-7)
        assert not np.array_equal(value, start[key]) or key.endswith("log_std")


def test_gradients_are_clipped_where_they_are_computed(make_algo) -> None:
    config = get_config("A2C").environment("CartPole-v1").update_from_dict({"num_envs_per_env_runner": 2, "grad_clip": 1e-3})
    policy = make_algo(config).get_policy()
    gradients, stats = policy.compute_gradients(one_batch(make_algo(config)))
    norm = np.sqrt(sum(float((g.astype(np.float64) ** 2).sum()) for g in gradients if g is not None))
    assert stats["grad_gnorm"] > 1e-3 and norm == pytest.approx(1e-3, rel=1e-3)


def test_gradients_of_the_wrong_count_or_shape_are_refused_before_any_step(make_algo) -> None:
    config = get_config("A2C").environment("CartPole-v1").update_from_dict({"num_envs_per_env_runner": 2})
    policy = make_algo(config).get_policy()
    gradients, _ = policy.compute_gradients(one_batch(make_algo(config)))
    start = weights(policy)
    with pytest.raises(ValueError, match=rf"^{len(gradients) - 1} gradients for a policy whose optimizer has {len(gradients)}"):
        policy.apply_gradients(gradients[:-1])
    wrong = [np.zeros((3, 3), np.float32), *gradients[1:]]
    with pytest.raises(ValueError, match=r"^a gradient of shape \(3, 3\) for a parameter of shape"):
        policy.apply_gradients(wrong)
    assert all(np.array_equal(weights(policy)[k], start[k]) for k in start)


def test_non_finite_gradients_are_stopped_by_the_update_guard(make_algo) -> None:
    config = get_config("A2C").environment("CartPole-v1").update_from_dict({"num_envs_per_env_runner": 2})
    policy = make_algo(config).get_policy()
    gradients, _ = policy.compute_gradients(one_batch(make_algo(config)))
    gradients[0] = np.full_like(gradients[0], np.nan)
    start = weights(policy)
    with pytest.raises(TrainingError, match=r"^the gradient of the model is NaN; the update was not applied"):
        policy.apply_gradients(gradients)
    assert all(np.array_equal(weights(policy)[k], start[k]) for k in start)


def test_a_policy_that_takes_several_steps_per_batch_has_no_one_gradient_to_give(make_algo) -> None:
    config = (
        get_config("PPO")
        .environment("CartPole-v1")
        .update_from_dict({"num_envs_per_env_runner": 2, "train_batch_size": 64, "minibatch_size": 32, "num_epochs": 1})
    )
    policy = make_algo(config).get_policy()
    with pytest.raises(ConfigError, match=r"^PPOPolicy takes more than one gradient step per batch"):
        policy.compute_gradients(one_batch(make_algo(config)))
