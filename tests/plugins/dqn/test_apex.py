"""Ape-X DQN in one process, and the parts it brings: per-runner epsilons, priorities computed where rows are sampled."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

import corral
from corral import ConfigError, SampleBatch
from corral.core.learning.exploration import PerWorkerEpsilonGreedy, per_worker_epsilon
from corral.core.learning.policy import build_policy
from corral.core.learning.replay.replay_buffers import PrioritizedReplayBuffer, ReplayBuffer
from corral.plugins.dqn import ApexDQN, ApexDQNConfig, DQNConfig, DQNPolicy
from corral.plugins.dqn.apex import metrics_runner_ids

LOCAL = {
    "num_env_runners": 0,
    "num_replay_buffer_shards": 2,
    "replay_buffer_config": {"capacity": 2000},
    "train_batch_size": 32,
    "learning_starts": 200,
    "training_intensity": 4.0,
    "target_network_update_freq": 256,
    "min_time_s_per_iteration": 0,
    "min_sample_timesteps_per_iteration": 300,
    "model": {"fcnet_hiddens": [32]},
    "hiddens": [32],
    "seed": 0,
}


def local(**overrides) -> ApexDQNConfig:
    return ApexDQNConfig().environment("CartPole-v1").update_from_dict({**LOCAL, **overrides})


def test_ape_x_is_rllib_s_apex_with_its_defaults() -> None:
    assert corral.get_algorithm("APEX") is ApexDQN
    config = corral.get_config("APEX")
    assert isinstance(config, ApexDQNConfig)
    assert (config.num_env_runners, config.num_replay_buffer_shards, config.max_weight_sync_delay) == (32, 4, 400)
    assert (config.train_batch_size, config.n_step, config.learning_starts, config.target_network_update_freq) == (
        512, 3, 50_000, 500_000,
    )  # fmt: skip
    assert config.exploration_config == {"type": "PerWorkerEpsilonGreedy"}
    assert config.replay_buffer_config["worker_side_prioritization"] is True
    assert config.replay_buffer_config["capacity"] == 2_000_000 and config.rollout_fragment_length == 50


def test_rllib_s_optimizer_dict_carries_the_shard_settings() -> None:
    config = ApexDQNConfig().update_from_dict(
        {
            "optimizer": {"num_replay_buffer_shards": 2, "max_weight_sync_delay": 100},
            "max_requests_in_flight_per_replay_worker": float("inf"),
        }
    )
    assert (config.num_replay_buffer_shards, config.max_weight_sync_delay) == (2, 100)
    assert config.optimizer == ApexDQNConfig().optimizer  # the torch optimizer's arguments are untouched
    assert config.max_requests_in_flight_per_replay_worker is None
    with pytest.raises(ConfigError, match=r"no argument 'num_replay_buffer_shards'"):
        DQNConfig().update_from_dict({"optimizer": {"num_replay_buffer_shards": 2}})  # DQN has no shards


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"num_learners": 2}, r"num_learners=2: Ape-X learns in one learner thread"),
        ({"num_replay_buffer_shards": 8, "replay_buffer_config": {"capacity": 4}}, r"capacity 4 cannot be split into 8 shards"),
        ({"replay_buffer_config": {"type": "ReplayBuffer"}}, r"uniform replay \('ReplayBuffer'\) has none of"),
    ],
)
def test_bad_settings_are_refused_before_anything_starts(overrides, message) -> None:
    with pytest.raises(ConfigError, match=message):
        local(**overrides).validate()


def test_each_remote_runner_explores_with_its_own_constant_epsilon_and_the_learner_acts_greedily() -> None:
    assert per_worker_epsilon(1, 4) == pytest.approx(0.4)
    assert per_worker_epsilon(4, 4) == pytest.approx(0.4**8)
    assert per_worker_epsilon(1, 1) == pytest.approx(0.4)
    config = local(num_env_runners=3)
    space, actions = gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2)
    epsilons = [
        build_policy(DQNPolicy, space, actions, config, "policy", "default_policy", "sampling", index).exploration.get_info(0)
        for index in range(4)
    ]
    assert [info["cur_epsilon"] for info in epsilons] == pytest.approx([0.0, 0.4, 0.4**4.5, 0.4**8])
    alone = build_policy(DQNPolicy, space, actions, local(), "policy", "default_policy", "sampling", 0)
    assert isinstance(alone.exploration, PerWorkerEpsilonGreedy)
    assert alone.exploration.get_info(0)["cur_epsilon"] == 1.0  # no remote runners: EpsilonGreedy's schedule
    assert alone.exploration.get_info(100_000)["cur_epsilon"] == pytest.approx(0.05)


@pytest.mark.parametrize(("runners", "reported"), [(1, {1}), (2, {2}), (3, {3}), (6, {5, 6}), (32, set(range(23, 33)))])
def test_results_come_from_the_lowest_epsilon_third_of_the_runners(runners, reported) -> None:
    assert metrics_runner_ids(runners) == reported


def test_a_runner_s_priorities_are_the_td_errors_of_its_own_network() -> None:
    config = local(replay_buffer_config={"capacity": 2000, "worker_side_prioritization": True}, n_step=1)
    policy = build_policy(DQNPolicy, gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2), config, "policy", "p", "sampling", 1)
    rng = np.random.default_rng(0)
    steps = 6
    fragment = SampleBatch(  # time-major [T, N]: one sub-environment, its episode terminating at the last step
        {
            SampleBatch.OBS: rng.normal(size=(steps, 1, 4)).astype(np.float32),
            SampleBatch.ACTIONS: rng.integers(0, 2, (steps, 1)),
            SampleBatch.REWARDS: np.ones((steps, 1), np.float32),
            SampleBatch.TERMINATEDS: np.array([False] * (steps - 1) + [True])[:, None],
            SampleBatch.TRUNCATEDS: np.zeros((steps, 1), bool),
        }
    )
    rows = policy.postprocess_trajectory(fragment, rng.normal(size=(1, 4)).astype(np.float32))
    with torch.no_grad():
        q = policy.model(torch.as_tensor(rows[SampleBatch.OBS]))[SampleBatch.ACTION_DIST_INPUTS]
        next_q = policy.model(torch.as_tensor(rows[SampleBatch.NEXT_OBS]))[SampleBatch.ACTION_DIST_INPUTS].numpy()
    taken = q.numpy()[np.arange(len(rows)), rows[SampleBatch.ACTIONS]]
    target = rows[SampleBatch.REWARDS] + rows[SampleBatch.DISCOUNTS] * next_q.max(axis=1)  # double Q, one network
    np.testing.assert_allclose(rows[SampleBatch.PRIORITIES], np.abs(taken - target), rtol=1e-5, atol=1e-6)
    assert rows[SampleBatch.DISCOUNTS][-1] == 0.0  # the terminal row bootstraps nothing


def test_a_prioritized_buffer_starts_rows_at_the_given_priorities_and_uniform_replay_drops_them() -> None:
    rows = {SampleBatch.OBS: np.arange(4, dtype=np.float32)[:, None], SampleBatch.PRIORITIES: np.array([0.0, 0.0, 9.0, 0.0])}
    buffer = PrioritizedReplayBuffer(10, alpha=1.0, epsilon=1e-6, seed=0)
    buffer.add(rows)
    drawn = buffer.sample(1000)[SampleBatch.OBS][:, 0]
    assert np.mean(drawn == 2.0) > 0.99  # all the mass but 3e-6 is on the third row
    state = buffer.get_state()
    assert f"columns/{SampleBatch.PRIORITIES}" not in state  # not a stored column: the rows' priorities
    np.testing.assert_allclose(state["priorities"][:4], np.array([0.0, 0.0, 9.0, 0.0]) + 1e-6)
    uniform = ReplayBuffer(10, seed=0)
    uniform.add(rows)
    assert set(uniform.sample(4).keys()) == {SampleBatch.OBS, SampleBatch.BATCH_INDEXES, SampleBatch.WEIGHTS}
    with pytest.raises(ConfigError, match=r"needs one finite priority >= 0 per row"):
        PrioritizedReplayBuffer(10).add({**rows, SampleBatch.PRIORITIES: np.array([0.0, np.nan, 1.0, 1.0])})


def test_in_one_process_ape_x_samples_stores_in_shards_replays_and_learns(make_algo) -> None:
    algo = make_algo(local())
    before = {k: v.copy() for k, v in algo.get_weights()["default_policy"].items()}
    for _ in range(3):
        result = algo.train()
    sampled = result["num_env_steps_sampled"]
    sizes = algo.shards.each("sizes")
    assert len(sizes) == 2 and sum(s["default_policy"] for s in sizes) == sampled  # every sampled row, in one shard each
    assert all(s["default_policy"] > 0 for s in sizes)
    # training_intensity 4: every 8 sampled steps past learning_starts owe one batch of 32
    assert result["num_env_steps_trained"] == 32 * algo.num_updates
    assert (sampled - 200) // 8 - 1 <= algo.num_updates <= (sampled - 200) // 8 + 1
    after = algo.get_weights()["default_policy"]
    assert any(not np.array_equal(before[k], after[k]) for k in before)
    stats = result["info"]["learner"]["default_policy"]["learner_stats"]
    assert np.isfinite(stats["loss"]) and stats["learner_queue_size"] == 0
    # the learner copy's target network is copied every 256 trained steps: it holds the weights of at most 8 updates ago
    assert algo._last_target_update > result["num_env_steps_trained"] - 256


def test_a_seeded_run_in_one_process_is_repeatable(make_algo) -> None:
    runs = []
    for _ in range(2):
        algo = make_algo(local())
        algo.train()
        runs.append(algo.get_weights()["default_policy"])
    assert all(np.array_equal(runs[0][k], runs[1][k]) for k in runs[0])


def test_a_checkpoint_keeps_the_shards_rows_with_save_replay_buffer(make_algo, tmp_path: Path) -> None:
    algo = make_algo(local(save_replay_buffer=True))
    algo.train()
    sizes = algo.shards.each("sizes")
    algo.save(tmp_path / "ckpt")
    restored = ApexDQN.from_checkpoint(tmp_path / "ckpt")
    try:
        assert restored.shards.each("sizes") == sizes and restored.num_updates == algo.num_updates
        assert restored.train()["training_iteration"] == 2
    finally:
        restored.stop()


def test_each_policy_to_train_replays_its_own_agents_rows_and_the_others_stay(make_algo) -> None:
    config = local().environment("corral.testing.envs:MultiAgentCartPole", env_config={"num_agents": 2})
    config.multi_agent(
        policies=["p0", "p1"], policy_mapping_fn=lambda agent_id, *args, **kwargs: f"p{agent_id}", policies_to_train=["p0"]
    )
    algo = make_algo(config)
    before = algo.get_weights()
    for _ in range(2):
        result = algo.train()
    after = algo.get_weights()
    assert set(result["info"]["learner"]) == {"p0"}
    assert {pid for sizes in algo.shards.each("sizes") for pid in sizes} == {"p0"}  # p1 learns nothing: nothing stored
    assert any(not np.array_equal(before["p0"][k], after["p0"][k]) for k in before["p0"])
    assert all(np.array_equal(before["p1"][k], after["p1"][k]) for k in before["p1"])
