"""A2C's own behaviour: registration, its single update, its optimizers and spaces."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import corral
from corral.core import FusedAdam
from corral.plugins.a2c import A2C, A2CConfig

from ...toy_envs import DictObsEnv, ImageEnv

TINY = {"num_envs_per_env_runner": 4, "train_batch_size": 20, "min_sample_timesteps_per_iteration": 0, "seed": 0}


def tiny(env, **overrides) -> A2CConfig:
    return A2CConfig().environment(env).update_from_dict({**TINY, **overrides})


def test_a2c_is_found_through_corrals_own_entry_point() -> None:
    (info,) = [p for p in corral.list_algorithms() if p.name == "A2C"]
    assert info.dist == "corral" and info.value == "corral.plugins.a2c:A2C"
    assert corral.get_algorithm("a2c") is A2C


def test_one_update_per_fragment_of_every_sub_environment() -> None:
    algo = tiny("CartPole-v1").build()
    before = {k: v.copy() for k, v in algo.get_weights()["default_policy"].items()}
    result = algo.train()
    # 4 envs x 5 steps, less the reset rows of episodes that ended in the fragment
    assert 0 < result["num_env_steps_sampled"] <= 20
    stats = result["info"]["learner"]["default_policy"]["learner_stats"]
    for key in ("total_loss", "policy_loss", "vf_loss", "entropy", "grad_gnorm", "cur_lr"):
        assert np.isfinite(stats[key]), key
    after = algo.get_weights()["default_policy"]
    assert any(not np.array_equal(before[k], after[k]) for k in before)


def test_iterations_group_updates_up_to_the_minimum_sample_count() -> None:
    algo = tiny("CartPole-v1", min_sample_timesteps_per_iteration=200).build()
    assert algo.train()["num_env_steps_sampled"] >= 200


@pytest.mark.parametrize("name, cls", [("rmsprop", torch.optim.RMSprop), ("adam", FusedAdam)])
def test_optimizer_choice(name, cls) -> None:
    assert isinstance(tiny("CartPole-v1", optimizer=name).build().get_policy().optimizer, cls)


def test_unknown_optimizer_is_refused() -> None:
    with pytest.raises(corral.ConfigError, match="optimizer type 'lion' is not one of adam"):
        tiny("CartPole-v1", optimizer="lion")


def test_rmsprop_by_name_keeps_the_papers_arguments() -> None:
    optimizer = tiny("CartPole-v1", optimizer="rmsprop").build().get_policy().optimizer
    assert optimizer.defaults["alpha"] == 0.99 and optimizer.defaults["eps"] == 1e-5


@pytest.mark.parametrize("env", [ImageEnv, DictObsEnv, "Pendulum-v1"], ids=["image+multidiscrete", "dict+box", "pendulum"])
def test_a2c_trains_and_acts_on_each_supported_space(env) -> None:
    algo = tiny(env).build()
    result = algo.train()
    assert np.isfinite(result["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"])
    space = algo.env_runner_group.local_env_runner.base_env.single_observation_space
    policy = algo.get_policy()
    action = algo.compute_single_action(space.sample(), explore=False)
    assert policy.action_space.contains(np.asarray(action, dtype=policy.action_space.dtype))


def _learned_weights(config, batch):
    algo = config.build()
    try:
        algo.get_policy().learn_on_batch(batch)
        return algo.get_policy().get_weights()
    finally:
        algo.stop()


@pytest.mark.parametrize("model", [{}, {"use_lstm": True, "max_seq_len": 4}], ids=["feed-forward", "lstm"])
def test_microbatches_without_clipping_make_the_update_of_the_whole_batch(model) -> None:
    # Adam's first step is lr * sign-like: RMSprop's scales each gradient, so a wrong weighting shows
    config = tiny("CartPole-v1", train_batch_size=40, model=model, grad_clip=None)
    algo = config.build()
    batch = algo.sample(40).policy_batches["default_policy"]
    algo.stop()
    whole = _learned_weights(config, batch)
    micro = _learned_weights(config.copy(copy_frozen=False).training(microbatch_size=12), batch)
    for key, value in whole.items():
        np.testing.assert_allclose(micro[key], value, rtol=1e-4, atol=1e-6)


def test_each_microbatch_s_gradient_is_clipped_on_its_own() -> None:
    config = tiny("CartPole-v1", train_batch_size=40, grad_clip=1e-4, microbatch_size=10)
    algo = config.build()
    policy = algo.get_policy()
    batch = algo.sample(40).policy_batches["default_policy"]
    applied = []
    apply = policy.apply_gradients
    # the microbatches' losses pass through it too (compute_gradients); the one list of gradients is the update
    policy.apply_gradients = lambda given, *args: (isinstance(given, list) and applied.append(given)) or apply(given, *args)
    stats = policy.learn_on_batch(batch)
    algo.stop()
    (gradients,) = applied
    norm = np.sqrt(sum(float((g.astype(np.float64) ** 2).sum()) for g in gradients if g is not None))
    # the mean of microbatch gradients each clipped to 1e-4 is at most 1e-4 long (equal only if all point alike)
    assert stats["num_microbatches"] == -(-batch.count // 10) and stats["grad_gnorm"] > 1e-4
    assert 0 < norm <= 1e-4 * (1 + 1e-4)
