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
    stats = result["info"]["learner"]["default_policy"]
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
    assert np.isfinite(result["info"]["learner"]["default_policy"]["total_loss"])
    space = algo.env_runner_group.local_env_runner.env.single_observation_space
    policy = algo.get_policy()
    action = algo.compute_single_action(space.sample(), explore=False)
    assert policy.action_space.contains(np.asarray(action, dtype=policy.action_space.dtype))
