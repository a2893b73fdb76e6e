"""IMPALA's and APPO's learner thread in one process: updates overlap sampling, one batch ahead, the same for a seed."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import torch

from corral import make_multi_agent
from corral.core import LearnerThread
from corral.errors import LearnerError
from corral.plugins.appo import APPOConfig
from corral.plugins.impala import IMPALAConfig

SMALL = {"train_batch_size": 64, "rollout_fragment_length": 16, "num_envs_per_env_runner": 4, "seed": 0}


def tiny(config_class=IMPALAConfig, **overrides):
    return config_class().environment("CartPole-v1").update_from_dict({**SMALL, **overrides})


def test_each_iteration_reports_its_own_update_while_the_next_batch_is_already_learned_on(make_algo) -> None:
    algo = make_algo(tiny())
    for iteration in (1, 2):
        result = algo.train()
        assert algo.num_updates >= iteration  # this iteration's update ended; the next batch's may be running
        assert result["num_env_steps_trained"] < result["num_env_steps_sampled"]  # one batch ahead
    learner = result["info"]["learner"]["default_policy"]["learner_stats"]
    assert learner["policy_lag_max"] == 1  # sampled while the update before it ran
    assert np.isfinite(learner["total_loss"]) and learner["learner_queue_size"] <= 1
    algo.get_policy()  # waits for the update of the batch sampled ahead
    assert algo.num_updates == 3 and algo.counters["num_env_steps_trained"] == algo.counters["num_env_steps_sampled"]


def test_a_seed_gives_the_same_run_with_the_thread(make_algo) -> None:
    runs = []
    for _ in range(2):
        # the schedule is read at the timestep each batch was handed over at, however far sampling got meanwhile
        algo = make_algo(tiny(lr_schedule=[[0, 1e-3], [400, 1e-5]]))
        learner = [algo.train()["info"]["learner"]["default_policy"]["learner_stats"] for _ in range(4)]
        runs.append(([(stats["total_loss"], stats["cur_lr"]) for stats in learner], algo.get_weights()["default_policy"]))
    assert runs[0][0] == runs[1][0] and runs[0][0][0][1] > runs[0][0][-1][1]
    assert all(np.array_equal(runs[0][1][k], runs[1][1][k]) for k in runs[0][1])


def test_the_env_runner_acts_with_a_copy_while_the_model_learns(make_algo) -> None:
    algo = make_algo(tiny())
    policy = algo.get_policy()
    acted_with = []
    compute = policy.compute_actions

    def record(*args, **kwargs):
        acted_with.append(policy.acting_model)
        return compute(*args, **kwargs)

    policy.compute_actions = record
    algo.train()
    algo.train()
    assert acted_with and all(model is not policy.model for model in acted_with)
    assert policy.acting_model is policy.model  # outside sampling (compute_single_action), the policy's own model


def test_appo_updates_its_target_network_in_the_thread(make_algo) -> None:
    algo = make_algo(tiny(APPOConfig, target_network_update_freq=1))
    for _ in range(3):
        algo.train()
    policy = algo.get_policy()
    online, target = policy.model.state_dict(), policy.target_model.state_dict()
    assert all(torch.equal(online[k], target[k]) for k in online)  # tau=1 after every update, the last included


def test_learner_thread_false_takes_turns(make_algo) -> None:
    algo = make_algo(tiny(learner_thread=False))
    result = algo.train()
    assert algo.learner_thread is None and result["num_env_steps_sampled"] == result["num_env_steps_trained"] == 64


def test_policies_beyond_the_policy_map_capacity_learn_without_the_thread(make_algo, caplog) -> None:
    config = tiny(log_level="INFO").environment(make_multi_agent("CartPole-v1"), env_config={"num_agents": 2})
    config = config.multi_agent(
        policies={"p0", "p1"}, policy_mapping_fn=lambda agent_id, *args, **kwargs: f"p{agent_id}", policy_map_capacity=1
    )
    with caplog.at_level("INFO", logger="corral"):
        algo = make_algo(config)
    assert algo.learner_thread is None and "do not fit policy_map_capacity=1" in caplog.text
    assert algo.train()["num_env_steps_trained"] > 0


def test_a_stuck_update_fails_after_learner_queue_timeout_naming_it() -> None:
    release = threading.Event()
    thread: LearnerThread[int, int] = LearnerThread(lambda item: release.wait() and item, queue_size=1, timeout_s=0.2)
    thread.put(1)  # taken by the thread, which blocks in it
    time.sleep(0.05)
    thread.put(2)  # waits in the queue
    with pytest.raises(LearnerError, match=r"no train batch for 0.2 s .*learner_queue_timeout"):
        thread.put(3)
    release.set()
    thread.wait_idle()
    assert thread.finished() == [1, 2]
    thread.stop()


def test_an_update_may_read_the_policies_from_inside_the_thread() -> None:
    thread: LearnerThread[int, int] = LearnerThread(lambda item: thread.wait_idle() or item + 1, queue_size=2, timeout_s=5)
    thread.put(1)
    thread.wait_idle()  # would hang if wait_idle from inside the update waited for itself
    assert thread.finished() == [2]
    thread.stop()
