"""CQL: registration, the conservative penalty, the behaviour-cloning start, resume, and discrete actions."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import corral
from corral import ConfigError
from corral.plugins.sac import CQL, SACPolicy

DATA = Path(corral.__file__).parent / "tuned_examples" / "data"
EXPERT, RANDOM, PENDULUM = (DATA / f"{name}.parquet" for name in ("cartpole_expert", "cartpole_random", "pendulum_sac"))


def pendulum(algo: str = "CQL", **training: Any) -> Any:
    return (
        corral.get_config(algo)
        .environment("Pendulum-v1")
        .offline_data(input_=str(PENDULUM), actions_in_input_normalized=True, postprocess_inputs=True)
        .training(train_batch_size=64, training_intensity=64, learning_starts=64, model={"fcnet_hiddens": [32, 32]}, **training)
        .update_from_dict({"min_sample_timesteps_per_iteration": 300})
        .debugging(seed=0)
    )


def test_cql_is_found_through_corral_s_own_entry_point() -> None:
    assert corral.get_algorithm("CQL") is CQL
    assert corral.get_config("CQL").postprocess_inputs and corral.get_config("CQL").min_q_weight == 5.0


def test_the_discrete_penalty_is_the_soft_maximum_of_q_less_the_data_s_q(make_algo: Callable[..., Any]) -> None:
    algo = make_algo(corral.get_config("CQL").environment("CartPole-v1").training(temperature=2.0, min_q_weight=3.0))
    policy = algo.get_policy()
    q_all = torch.tensor([[[1.0, 3.0], [0.0, -1.0]], [[2.0, 2.0], [5.0, 0.0]]])  # [critics, rows, actions]
    q_taken = torch.tensor([[3.0, 0.0], [2.0, 0.0]])
    penalty = policy.critic_regularizer(torch.zeros(2, 4), torch.zeros(2, 4), None, q_taken, q_all)
    soft_max = 2.0 * np.log(np.exp(q_all.numpy() / 2.0).sum(-1))  # [critics, rows]
    expected = (soft_max - q_taken.numpy()).mean(axis=1).sum()
    assert float(penalty) == pytest.approx(3.0 * expected, rel=1e-6)


def test_the_penalty_keeps_q_below_sac_s_on_the_same_data(make_algo: Callable[..., Any]) -> None:
    cql = make_algo(pendulum(bc_iters=0)).train()["info"]["learner"]["default_policy"]["learner_stats"]
    sac = make_algo(pendulum("SAC")).train()["info"]["learner"]["default_policy"]["learner_stats"]
    assert "critic_regularizer" in cql and "critic_regularizer" not in sac
    assert cql["mean_q"] < sac["mean_q"]


def test_the_actor_clones_the_data_for_bc_iters_updates_then_maximises_q(make_algo: Callable[..., Any]) -> None:
    algo = make_algo(pendulum(bc_iters=5))
    policy = algo.get_policy()
    obs = torch.zeros(8, 3)
    actions = torch.full((8, 1), 0.5)
    alpha = torch.tensor(0.2)
    with torch.no_grad():
        state = policy.torch_rng.get_state()
        cloning, _ = policy.actor_loss(obs, None, alpha, None, actions)
        policy.torch_rng.set_state(state)
        policy.num_updates = 5
        maximising, _ = policy.actor_loss(obs, None, alpha, None, actions)
        policy.torch_rng.set_state(state)
        sac_s, _ = SACPolicy.actor_loss(policy, obs, None, alpha, None, actions)
    assert float(maximising) == float(sac_s) and float(cloning) != float(sac_s)
    policy.num_updates = 0
    algo.train()
    assert policy.num_updates == algo.counters["num_env_steps_sampled"] == 320  # one update per row read, 64 at a time


def test_a_restored_cql_goes_on_exactly(tmp_path: Path, make_algo: Callable[..., Any]) -> None:
    config = pendulum(bc_iters=400).checkpointing(save_replay_buffer=True)
    algo = make_algo(config)
    algo.train()
    path = algo.save(tmp_path / "ckpt")
    restored = make_algo(config)
    restored.restore(path)
    assert restored.get_policy().num_updates == algo.get_policy().num_updates == 320
    assert restored.train()["info"]["learner"] == algo.train()["info"]["learner"]


def test_cql_needs_postprocessing_for_n_step_transitions_only() -> None:
    with pytest.raises(ConfigError, match=r"n_step=3 .*postprocess_inputs=True"):
        pendulum(n_step=3).offline_data(postprocess_inputs=False).validate()
    pendulum().offline_data(postprocess_inputs=False).validate()  # one-step transitions are a file's rows as they are


@pytest.mark.slow
def test_discrete_cql_learns_cartpole_from_mixed_expert_and_random_data(make_algo: Callable[..., Any]) -> None:
    config = (
        corral.get_config("CQL")
        .environment("CartPole-v1")
        .offline_data(input_=[str(EXPERT), str(RANDOM)])
        .training(
            train_batch_size=128,
            training_intensity=128,
            learning_starts=128,
            bc_iters=0,
            target_entropy_scale=0.3,
            actor_lr=1e-3,
            critic_lr=1e-3,
            alpha_lr=1e-3,
            model={"fcnet_hiddens": [64, 64]},
        )
        .evaluation(evaluation_interval=1, evaluation_duration=5, evaluation_config={"explore": False})
        .update_from_dict({"min_sample_timesteps_per_iteration": 1000})
        .debugging(seed=0)
    )
    result = make_algo(config).train()
    # measured: 500 after these 1,000 updates; Q stays near the discounted return (about 7 after 1,000)
    assert result["evaluation"]["episode_reward_mean"] >= 475
    assert 0 < result["info"]["learner"]["default_policy"]["learner_stats"]["mean_q"] < 100


def test_without_training_intensity_each_train_batch_read_is_trained_on_once(make_algo: Callable[..., Any]) -> None:
    """RLlib's native ratio for rows read from files: one update per train batch read (sampled env steps: per step)."""
    config = (
        corral.get_config("CQL")
        .environment("CartPole-v1")
        .offline_data(input_=str(EXPERT))
        .training(train_batch_size=32, learning_starts=0, model={"fcnet_hiddens": [16]})
        .update_from_dict({"min_sample_timesteps_per_iteration": 320})
        .debugging(seed=0)
    )
    result = make_algo(config).train()
    assert result["num_env_steps_sampled"] >= 320
    assert result["num_env_steps_trained"] == result["num_env_steps_sampled"], "ten batches read, ten updates of 32 rows"
