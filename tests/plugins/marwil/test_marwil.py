"""MARWIL and BC: registration, the weighted update, Box actions, resume, and learning from recorded data."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import corral
from corral.plugins.marwil import BC, MARWIL

DATA = Path(corral.__file__).parent / "tuned_examples" / "data"
EXPERT, RANDOM, PENDULUM = (DATA / f"{name}.parquet" for name in ("cartpole_expert", "cartpole_random", "pendulum_sac"))


def test_bc_and_marwil_are_found_through_corral_s_own_entry_points() -> None:
    assert corral.get_algorithm("MARWIL") is MARWIL and corral.get_algorithm("bc") is BC
    assert corral.get_config("BC").beta == 0.0 and corral.get_config("MARWIL").beta == 1.0


def test_marwil_weighs_better_actions_more_and_learns_a_value(make_algo: Callable[..., Any]) -> None:
    config = (
        corral.get_config("MARWIL")
        .environment("CartPole-v1")
        .training(train_batch_size=500, lr=1e-3)
        .offline_data(input_=[str(EXPERT), str(RANDOM)])
        .debugging(seed=0)
    )
    algo = make_algo(config)
    first = algo.train()["info"]["learner"]["default_policy"]["learner_stats"]
    for _ in range(4):
        last = algo.train()["info"]["learner"]["default_policy"]["learner_stats"]
    for key in ("policy_loss", "vf_loss", "total_loss", "grad_gnorm", "moving_average_sqd_adv_norm"):
        assert np.isfinite(last[key]), key
    assert last["vf_loss"] < first["vf_loss"]  # the value function learns the returns
    assert last["moving_average_sqd_adv_norm"] != config.moving_average_sqd_adv_norm_start


def test_bc_s_loss_is_the_negative_log_likelihood_of_the_data_s_actions(make_algo: Callable[..., Any]) -> None:
    algo = make_algo(corral.get_config("BC").environment("CartPole-v1").offline_data(input_=str(EXPERT)).debugging(seed=0))
    policy = algo.get_policy()
    batch = algo.sample().policy_batches["default_policy"]
    with torch.no_grad():
        t = policy.to_tensors(batch, ["obs", "actions"])
        logits = policy.model.forward_train(t["obs"])["action_dist_inputs"]
        expected = -torch.log_softmax(logits, -1).gather(1, t["actions"][:, None]).mean()
    stats = policy.learn_on_batch(batch)
    assert stats["policy_loss"] == pytest.approx(float(expected), rel=1e-5)
    assert "vf_loss" not in stats


def test_marwil_learns_box_actions_from_sac_s_pendulum_data(make_algo: Callable[..., Any]) -> None:
    config = (
        corral.get_config("MARWIL")
        .environment("Pendulum-v1")
        .training(train_batch_size=256, bc_logstd_coeff=0.1)
        .offline_data(input_=str(PENDULUM), actions_in_input_normalized=True)
        .debugging(seed=0)
    )
    stats = make_algo(config).train()["info"]["learner"]["default_policy"]["learner_stats"]
    assert np.isfinite(stats["total_loss"]) and np.isfinite(stats["vf_loss"])


def test_marwil_also_learns_from_the_sampler(make_algo: Callable[..., Any]) -> None:
    config = corral.get_config("MARWIL").environment("CartPole-v1").training(train_batch_size=256).debugging(seed=0)
    result = make_algo(config).train()
    assert result["episodes_this_iter"] > 0 and np.isfinite(
        result["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"]
    )


def test_a_restored_marwil_keeps_its_advantage_scale(tmp_path: Path, make_algo: Callable[..., Any]) -> None:
    config = (
        corral.get_config("MARWIL")
        .environment("CartPole-v1")
        .training(moving_average_sqd_adv_norm_update_rate=0.5)
        .offline_data(input_=str(EXPERT))
        .debugging(seed=0)
    )
    algo = make_algo(config)
    algo.train()
    path = algo.save(tmp_path / "ckpt")
    restored = make_algo(config)
    restored.restore(path)
    assert restored.get_policy().ma_sqd_adv_norm == algo.get_policy().ma_sqd_adv_norm != 100.0
    assert restored.train()["info"] == algo.train()["info"]


@pytest.mark.slow
def test_marwil_beats_bc_on_mixed_expert_and_random_data() -> None:
    def evaluations(name: str) -> list[float]:
        config = (
            corral.get_config(name)
            .environment("CartPole-v1")
            .training(train_batch_size=500, lr=1e-3)
            .offline_data(input_=[str(EXPERT), str(RANDOM)], shuffle_buffer_size=20_000)
            .evaluation(evaluation_interval=1, evaluation_duration=20)
            .update_from_dict({"min_sample_timesteps_per_iteration": 20_000})
            .debugging(seed=0)
        )
        algo = config.build()
        returns = [algo.train()["evaluation"]["episode_reward_mean"] for _ in range(15)]
        algo.stop()
        return returns

    bc, marwil = evaluations("BC"), evaluations("MARWIL")
    # measured: BC's last three 95, 79, 77; MARWIL's 387, 427, 371
    assert np.mean(marwil[-3:]) > np.mean(bc[-3:]) + 150, (bc, marwil)
