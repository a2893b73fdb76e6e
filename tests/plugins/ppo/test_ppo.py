"""PPO's own behaviour: its config, its update, and the spaces it supports."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import corral
from corral import ConfigError, SampleBatch
from corral.plugins.ppo import PPO, PPOConfig

from ...toy_envs import DictObsEnv, ImageEnv

TINY = {"train_batch_size": 256, "minibatch_size": 64, "num_epochs": 2, "num_envs_per_env_runner": 4, "seed": 0}


def tiny(env, **overrides) -> PPOConfig:
    return PPOConfig().environment(env).update_from_dict({**TINY, **overrides})


def test_ppo_is_found_through_corrals_own_entry_point() -> None:
    (info,) = [p for p in corral.list_algorithms() if p.name == "PPO"]
    assert info.dist == "corral"
    assert info.value == "corral.plugins.ppo:PPO"
    assert corral.get_algorithm("ppo") is PPO


def test_learner_stats_cover_the_loss_terms() -> None:
    algo = tiny("CartPole-v1").build()
    stats = algo.train()["info"]["learner"]["default_policy"]["learner_stats"]
    for key in (
        "total_loss",
        "policy_loss",
        "vf_loss",
        "kl",
        "entropy",
        "grad_gnorm",
        "cur_kl_coeff",
        "cur_lr",
        "vf_explained_var",
    ):
        assert np.isfinite(stats[key]), key
    # 2 epochs over ~256 rows in minibatches of 64
    assert stats["num_sgd_updates"] == 2 * int(np.ceil(algo.counters["num_env_steps_trained"] / 64))
    assert 0 < stats["entropy"] <= np.log(2) + 1e-6


def test_kl_coefficient_adapts_towards_the_target() -> None:
    # A tiny target makes every update's KL "too large": the coefficient must grow by 1.5x.
    algo = tiny("CartPole-v1", kl_coeff=0.2, kl_target=1e-9, lr=1e-2).build()
    stats = algo.train()["info"]["learner"]["default_policy"]["learner_stats"]
    assert stats["cur_kl_coeff"] == pytest.approx(0.3)
    # A huge target: KL is "too small", the coefficient halves.
    algo = tiny("CartPole-v1", kl_coeff=0.2, kl_target=10.0).build()
    assert algo.train()["info"]["learner"]["default_policy"]["learner_stats"]["cur_kl_coeff"] == pytest.approx(0.1)
    # kl_coeff=0 disables the penalty and its adaptation.
    algo = tiny("CartPole-v1", kl_coeff=0.0).build()
    assert algo.train()["info"]["learner"]["default_policy"]["learner_stats"]["cur_kl_coeff"] == 0.0


def test_learning_rate_schedule_is_applied_by_env_steps() -> None:
    algo = tiny("CartPole-v1", lr_schedule=[[0, 1e-3], [10_000, 1e-4]]).build()
    first = algo.train()["info"]["learner"]["default_policy"]["learner_stats"]["cur_lr"]
    assert first == pytest.approx(1e-3 + (1e-4 - 1e-3) * algo.get_policy().global_timestep / 10_000, rel=0.05)
    second = algo.train()["info"]["learner"]["default_policy"]["learner_stats"]["cur_lr"]
    assert second < first


@pytest.mark.parametrize("vf_clip_param", [None, 2.0])
def test_the_value_loss_is_rllib_s_mean_squared_error_each_row_clamped_at_vf_clip_param(vf_clip_param) -> None:
    algo = tiny("CartPole-v1", vf_clip_param=vf_clip_param).build()
    values, targets = torch.tensor([0.0, 1.0, 5.0]), torch.tensor([1.0, 1.0, 1.0])  # squared errors 1, 0 and 16
    loss = algo.get_policy()._vf_loss(values, {SampleBatch.VALUE_TARGETS: targets})
    assert loss.item() == pytest.approx((1 + 0 + 16) / 3 if vf_clip_param is None else (1 + 0 + 2) / 3)
    algo.stop()


def test_minibatch_larger_than_batch_is_refused() -> None:
    with pytest.raises(ConfigError, match="minibatch_size=512 is larger than train_batch_size=256"):
        tiny("CartPole-v1", minibatch_size=512).build()


@pytest.mark.parametrize(
    "env", [ImageEnv, DictObsEnv, "Pendulum-v1", "CartPole-v1"], ids=["image+multidiscrete", "dict+box", "pendulum", "cartpole"]
)
def test_ppo_trains_and_acts_on_each_supported_space(env) -> None:
    algo = tiny(env).build()
    result = algo.train()
    assert result["num_env_steps_trained"] > 0
    assert np.isfinite(result["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"])
    space = algo.env_runner_group.local_env_runner.base_env.single_observation_space
    action = algo.compute_single_action(space.sample(), explore=False)
    assert algo.get_policy().action_space.contains(np.asarray(action, dtype=algo.get_policy().action_space.dtype))


def test_image_observations_use_a_cnn() -> None:
    algo = tiny(ImageEnv).build()
    modules = [type(m).__name__ for m in algo.get_policy().model.modules()]
    assert "Conv2d" in modules
