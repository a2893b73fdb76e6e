"""REINFORCE passes corral's conformance kit and learns CartPole."""

from __future__ import annotations

import pytest
from corral_reinforce import REINFORCE, REINFORCEConfig

import corral

QUICK = {"train_batch_size": 128, "num_envs_per_env_runner": 2}


def test_registered_under_its_name_by_this_distribution() -> None:
    info = next(i for i in corral.list_algorithms() if i.name == "REINFORCE")
    assert info.dist == "corral-reinforce"
    assert corral.get_algorithm("reinforce") is REINFORCE
    assert isinstance(corral.get_config("REINFORCE"), REINFORCEConfig)


def test_passes_the_conformance_kit(corral_conformance) -> None:
    corral_conformance("REINFORCE", QUICK)


def test_one_update_per_train_batch() -> None:
    algo = corral.get_config("REINFORCE").environment("CartPole-v1").update_from_dict({**QUICK, "seed": 0}).build()
    try:
        for _ in range(2):
            result = algo.train()
        optimizer = algo.get_policy().optimizer
        assert {int(state["step"]) for state in optimizer.state.values()} == {2}  # one Adam step per iteration
        assert 0 < result["num_env_steps_trained"] <= result["num_env_steps_sampled"]
        learner = result["info"]["learner"]["default_policy"]["learner_stats"]
        assert {"policy_loss", "vf_loss", "entropy", "cur_lr"} <= learner.keys()
    finally:
        algo.stop()


@pytest.mark.slow
def test_learns_cartpole_to_400_within_200k_steps() -> None:
    config = corral.get_config("REINFORCE").environment("CartPole-v1").update_from_dict({"seed": 0, "log_to_tensorboard": False})
    algo = config.build()
    try:
        best = float("-inf")
        while algo.counters["num_env_steps_sampled"] < 200_000:
            best = max(best, algo.train()["episode_reward_mean"])
            if best >= 400:
                break
        assert best >= 400, f"REINFORCE reached {best:.1f} on CartPole-v1 within 200k steps"
    finally:
        algo.stop()
