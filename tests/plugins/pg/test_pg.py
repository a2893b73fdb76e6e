"""PG's own behaviour: RLlib's name and defaults, returns as advantages, its single update, its spaces."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import corral
from corral.core import SampleBatch
from corral.plugins.pg import PG, PGConfig

from ...toy_envs import DictObsEnv, ImageEnv

TINY = {"num_envs_per_env_runner": 4, "train_batch_size": 40, "seed": 0}


def tiny(env, **overrides) -> PGConfig:
    return PGConfig().environment(env).update_from_dict({**TINY, **overrides})


def test_pg_is_found_by_rllib_s_name_with_rllib_s_defaults() -> None:
    (info,) = [p for p in corral.list_algorithms() if p.name == "PG"]
    assert info.dist == "corral" and info.value == "corral.plugins.pg:PG"
    assert corral.get_algorithm("pg") is PG
    config = corral.get_config("PG")
    assert isinstance(config, PGConfig) and (config.lr, config.train_batch_size) == (4e-4, 200)


def test_the_model_has_no_value_head(make_algo) -> None:
    model = make_algo(tiny("CartPole-v1")).get_policy().model
    assert model.vf_head is None and model.vf_encoder is None


def test_advantages_are_discounted_returns_within_the_fragment_never_bootstrapped(make_algo) -> None:
    policy = make_algo(tiny("CartPole-v1", gamma=0.5)).get_policy()
    # [T=4, N=2]: env 0's episode terminates at t=1 and a new one runs to the fragment's end;
    # env 1's episode is truncated at t=2 (a reset row follows); nothing bootstraps either
    rewards = np.array([[1, 1], [2, 1], [4, 1], [8, 0]], np.float32)
    terminated = np.array([[0, 0], [1, 0], [0, 0], [0, 0]], bool)
    truncated = np.array([[0, 0], [0, 0], [0, 1], [0, 0]], bool)
    valid = np.array([[1, 1], [1, 1], [1, 1], [1, 0]], bool)
    fragment = SampleBatch(
        {
            SampleBatch.OBS: np.zeros((4, 2, 4), np.float32),
            SampleBatch.ACTIONS: np.zeros((4, 2), np.int64),
            SampleBatch.REWARDS: rewards,
            SampleBatch.TERMINATEDS: terminated,
            SampleBatch.TRUNCATEDS: truncated,
            SampleBatch.VALID: valid,
        }
    )
    rows = policy.postprocess_trajectory(fragment, np.ones((2, 4), np.float32))
    # time-major valid rows: (t0,e0) (t0,e1) (t1,e0) (t1,e1) (t2,e0) (t2,e1) (t3,e0)
    expected = [1 + 0.5 * 2, 1 + 0.5 * 1 + 0.25 * 1, 2, 1 + 0.5 * 1, 4 + 0.5 * 8, 1, 8]
    np.testing.assert_allclose(rows[SampleBatch.ADVANTAGES], expected)


def test_one_update_per_batch_on_rllib_s_loss(make_algo) -> None:
    algo = make_algo(tiny("CartPole-v1"))
    policy = algo.get_policy()
    before = {k: v.copy() for k, v in algo.get_weights()["default_policy"].items()}
    result = algo.train()
    assert 0 < result["num_env_steps_sampled"] <= 40 + 4
    stats = result["info"]["learner"]["default_policy"]["learner_stats"]
    assert set(stats) >= {"policy_loss", "total_loss", "grad_gnorm", "cur_lr"} and "vf_loss" not in stats
    assert stats["policy_loss"] == stats["total_loss"] and stats["cur_lr"] == pytest.approx(4e-4)
    after = algo.get_weights()["default_policy"]
    assert any(not np.array_equal(before[k], after[k]) for k in before)

    batch = {
        SampleBatch.OBS: torch.randn(6, 4),
        SampleBatch.ACTIONS: torch.tensor([0, 1, 1, 0, 1, 0]),
        SampleBatch.ADVANTAGES: torch.tensor([1.0, -2.0, 0.5, 3.0, 0.0, 1.5]),
    }
    fwd_out = policy.model(batch[SampleBatch.OBS])
    loss, terms = policy.compute_loss(batch, fwd_out)
    logp = torch.log_softmax(fwd_out[SampleBatch.ACTION_DIST_INPUTS], -1).gather(1, batch[SampleBatch.ACTIONS][:, None])[:, 0]
    torch.testing.assert_close(loss, -(logp * batch[SampleBatch.ADVANTAGES]).mean())
    assert terms["policy_loss"] is loss


@pytest.mark.parametrize(
    "env, model",
    [(ImageEnv, {}), (DictObsEnv, {}), ("Pendulum-v1", {}), ("CartPole-v1", {"use_lstm": True, "max_seq_len": 8})],
    ids=["image+multidiscrete", "dict+box", "pendulum", "lstm"],
)
def test_pg_trains_and_acts_on_each_supported_space_and_with_memory(make_algo, env, model) -> None:
    algo = make_algo(tiny(env, model=model))
    result = algo.train()
    assert np.isfinite(result["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"])
    space = algo.env_runner_group.local_env_runner.base_env.single_observation_space
    policy = algo.get_policy()
    state = policy.get_initial_state()
    action = algo.compute_single_action(space.sample(), state or None, explore=False)
    action = action[0] if state else action
    assert policy.action_space.contains(np.asarray(action, dtype=policy.action_space.dtype))


def test_each_policy_of_a_multi_agent_run_learns_on_its_own_agent_s_returns(make_algo) -> None:
    config = tiny("corral.testing.envs:MultiAgentCartPole", env_config={"num_agents": 2}).multi_agent(
        policies=["p0", "p1"], policy_mapping_fn=lambda agent_id, episode, **kwargs: f"p{agent_id}"
    )
    result = make_algo(config).train()
    assert set(result["info"]["learner"]) == {"p0", "p1"}
    assert all(np.isfinite(info["learner_stats"]["policy_loss"]) for info in result["info"]["learner"].values())
