"""IMPALA on remote runners (Ray on two CPUs): asynchronous sampling, the learner queue, broadcasts, lag, failures."""

from __future__ import annotations

import os
import time

import pytest
import ray

from corral.core import AsyncSampler
from corral.plugins.impala import IMPALAConfig

SMALL = {"train_batch_size": 64, "rollout_fragment_length": 16, "num_envs_per_env_runner": 2, "seed": 0}


pytestmark = pytest.mark.usefixtures("ray_on_two_cpus")


def remote(**overrides):
    return IMPALAConfig().environment("CartPole-v1").update_from_dict({**SMALL, "num_env_runners": 2, **overrides})


def slow_learner(algo, seconds: float) -> None:
    """Make every update take ``seconds`` longer, so that the runners outpace the learner."""
    policy = algo.get_policy()
    learn = policy.learn_on_batch

    def learn_slowly(batch):
        time.sleep(seconds)
        return learn(batch)

    policy.learn_on_batch = learn_slowly


def test_runners_keep_their_calls_in_flight_while_the_learner_learns(make_algo) -> None:
    algo = make_algo(remote(max_requests_in_flight_per_env_runner=3))
    result = algo.train()
    learner = result["info"]["learner"]["default_policy"]["learner_stats"]
    assert learner["requests_in_flight"] == 6  # every slot of both runners refilled before learning
    assert {"policy_lag_mean", "policy_lag_max", "learner_queue_size"} <= learner.keys()
    assert result["num_healthy_env_runners"] == 2 and result["num_env_steps_trained"] >= 64


def test_a_slow_learner_fills_the_bounded_queue_and_learns_on_older_samples(make_algo) -> None:
    algo = make_algo(remote(learner_queue_size=4, max_requests_in_flight_per_env_runner=3))
    slow_learner(algo, 0.3)
    queue_sizes = []
    for _ in range(6):
        learner = algo.train()["info"]["learner"]["default_policy"]["learner_stats"]
        queue_sizes.append(learner["learner_queue_size"])
        assert learner["requests_in_flight"] <= 6
    assert max(queue_sizes) >= 1 and all(size <= 4 for size in queue_sizes)  # batches waited, never more than 4
    algo.settle_learning()  # the queued batches' updates end; the next result reports the newest
    assert algo.train()["info"]["learner"]["default_policy"]["learner_stats"]["policy_lag_max"] >= 1  # sampled with older weights


def test_weights_go_out_every_broadcast_interval_updates_with_their_version(make_algo, monkeypatch) -> None:
    # updates in turn: with the learner thread, how many copies went out by the 7th step depends on timing
    algo = make_algo(remote(broadcast_interval=3, learner_thread=False))
    sampler = algo.sampler
    puts, versions = [], []
    real_put, real_next = sampler._ray.put, sampler.next_batch
    monkeypatch.setattr(sampler._ray, "put", lambda value: puts.append(value) or real_put(value))

    def next_batch(min_env_steps):
        batch, sampled_with = real_next(min_env_steps)
        versions.extend(sampled_with)
        return batch, sampled_with

    monkeypatch.setattr(sampler, "next_batch", next_batch)
    for _ in range(7):
        algo.train()
    assert algo.num_updates == 7 and len(puts) == 2  # after updates 3 and 6
    assert sampler.weights_version == 6
    assert set(versions) <= {0, 3, 6} and 0 in versions


def test_a_runner_killed_mid_flight_is_recreated_and_sampling_goes_on(make_algo) -> None:
    algo = make_algo(remote(recreate_failed_env_runners=True))
    algo.train()
    group = algo.env_runner_group
    before = group.foreach_env_runner(lambda r: os.getpid(), local_env_runner=False)
    group.foreach_env_runner(lambda r: os._exit(1), local_env_runner=False, remote_worker_ids=[1])
    for _ in range(3):
        result = algo.train()
    assert result["num_healthy_env_runners"] == 2 and result["num_env_runner_restarts"] == 1
    after = group.foreach_env_runner(lambda r: os.getpid(), local_env_runner=False)
    assert after[0] != before[0] and after[1] == before[1]
    assert result["info"]["learner"]["default_policy"]["learner_stats"]["requests_in_flight"] == 4


def test_with_ignore_failures_sampling_goes_on_with_one_runner(make_algo) -> None:
    algo = make_algo(remote(ignore_env_runner_failures=True))
    first = algo.train()
    algo.env_runner_group.foreach_env_runner(lambda r: os._exit(1), local_env_runner=False, remote_worker_ids=[2])
    for _ in range(3):
        result = algo.train()
    assert result["num_healthy_env_runners"] == 1
    assert result["num_env_steps_trained"] > first["num_env_steps_trained"]
    assert result["info"]["learner"]["default_policy"]["learner_stats"]["requests_in_flight"] == 2


def test_a_restored_checkpoint_sends_its_weights_and_version_to_the_runners(make_algo, tmp_path) -> None:
    trained = make_algo(remote())
    for _ in range(3):
        trained.train()
    path = trained.save(tmp_path / "ckpt")
    expected = trained.get_policy().get_weights()
    trained.stop()  # frees its runners' CPUs for the new ones
    fresh = make_algo(remote(seed=1))
    fresh.restore(path)
    assert fresh.num_updates == trained.num_updates and fresh.sampler.weights_version == fresh.num_updates
    sent = ray.get(fresh.sampler._weights)["default_policy"]["weights"]
    assert all((sent[k] == expected[k]).all() for k in expected)
    assert fresh.train()["training_iteration"] == 4


def test_without_remote_runners_and_learner_thread_impala_takes_turns_and_the_sampler_refuses(make_algo) -> None:
    algo = make_algo(remote(num_env_runners=0, learner_thread=False))
    assert algo.sampler is None and algo.learner_thread is None
    assert algo.train()["info"]["learner"]["default_policy"]["learner_stats"]["policy_lag_max"] == 0
    assert algo.num_updates == 1
    with pytest.raises(ValueError, match="needs remote env runners"):
        AsyncSampler(algo.env_runner_group, 2, 16)


def test_observation_statistics_reach_the_learner_with_the_batches(make_algo) -> None:
    algo = make_algo(remote(observation_filter="MeanStdFilter"))
    for _ in range(3):
        result = algo.train()
    count = algo.get_policy().observation_filter.count
    assert count >= result["num_env_steps_trained"] and count % 32 == 0  # whole calls of 2 envs x 16 steps
