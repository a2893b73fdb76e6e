"""Ape-X DQN on remote env runners (Ray on two CPUs): replay shards as actors, the learner thread, reports, failures."""

from __future__ import annotations

import os
from typing import ClassVar

import numpy as np
import pytest
import ray

from corral import DefaultCallbacks
from corral.plugins.dqn import ApexDQNConfig

REMOTE = {
    "num_env_runners": 2,
    "num_replay_buffer_shards": 2,
    "replay_buffer_config": {"capacity": 4000},
    "rollout_fragment_length": 20,
    "train_batch_size": 32,
    "learning_starts": 200,
    "training_intensity": 4.0,
    "target_network_update_freq": 256,
    "max_weight_sync_delay": 50,
    "min_time_s_per_iteration": 0,
    "min_sample_timesteps_per_iteration": 600,
    "model": {"fcnet_hiddens": [32]},
    "hiddens": [32],
    "seed": 0,
}

pytestmark = pytest.mark.usefixtures("ray_on_two_cpus")


class RunnerOfEachEpisode(DefaultCallbacks):
    """Reports which runner each finished episode ran on, and its epsilon."""

    def on_episode_end(self, *, episode, env_runner, env_index, **kwargs):
        episode.custom_metrics["runner"] = env_runner.worker_index
        episode.custom_metrics["epsilon"] = env_runner.policies["default_policy"].exploration.get_info(0)["cur_epsilon"]


def remote(**overrides) -> ApexDQNConfig:
    return ApexDQNConfig().environment("CartPole-v1").update_from_dict({**REMOTE, **overrides})


def test_runners_feed_the_shard_actors_and_the_learner_thread_learns_on_their_replays(make_algo) -> None:
    algo = make_algo(remote().callbacks(RunnerOfEachEpisode))
    initial = {k: v.copy() for k, v in algo.get_weights()["default_policy"].items()}
    for _ in range(3):
        result = algo.train()
    assert algo.learner_thread is not None and algo.num_updates > 0
    assert all(isinstance(shard, ray.actor.ActorHandle) for shard in algo.shards.shards)
    sizes = [s["default_policy"] for s in algo.shards.each("sizes")]
    assert all(size > 0 for size in sizes) and sum(sizes) <= result["num_env_steps_sampled"]
    algo.settle_learning()  # the thread learns on between and after train() calls: let it finish what it was handed
    assert algo.counters["num_env_steps_trained"] == 32 * algo.num_updates > 0
    # only runner 2, the lower epsilon (0.4**8), is reported; runner 1 explores with 0.4
    assert result["custom_metrics"]["runner_min"] == result["custom_metrics"]["runner_max"] == 2
    assert result["custom_metrics"]["epsilon_mean"] == pytest.approx(0.4**8)
    # the runners act with the learner's newer weights, sent every 50 steps each
    (runner_weights, _) = algo.env_runner_group.foreach_env_runner(
        lambda runner: runner.policies["default_policy"].get_weights(), local_env_runner=False
    )
    assert any(not np.array_equal(runner_weights[k], initial[k]) for k in initial)


class Recreated(DefaultCallbacks):
    calls: ClassVar[list[list[int]]] = []

    def on_env_runners_recreated(self, *, env_runner_indices, **kwargs):
        Recreated.calls.append(env_runner_indices)


def test_a_runner_killed_mid_run_is_recreated_and_ape_x_goes_on_with_two_runners_and_two_shards(make_algo) -> None:
    Recreated.calls = []
    algo = make_algo(remote(recreate_failed_env_runners=True).callbacks(Recreated))
    algo.train()
    group = algo.env_runner_group
    before = group.foreach_env_runner(lambda r: os.getpid(), local_env_runner=False)
    group.foreach_env_runner(lambda r: os._exit(1), local_env_runner=False, remote_worker_ids=[1])
    updates, sampled = algo.num_updates, algo.counters["num_env_steps_sampled"]
    for _ in range(3):
        result = algo.train()
    assert result["num_healthy_env_runners"] == 2 and result["num_env_runner_restarts"] == 1
    assert Recreated.calls == [[1]]
    after = group.foreach_env_runner(lambda r: os.getpid(), local_env_runner=False)
    assert after[0] != before[0] and after[1] == before[1]
    assert algo.num_updates > updates and result["num_env_steps_sampled"] > sampled
    assert len(algo.shards.each("sizes")) == 2
