"""IMPALA: sequences kept whole for V-trace, one gradient step per batch, registered like any plugin."""

from __future__ import annotations

import numpy as np

import corral
from corral.core import SampleBatch
from corral.plugins.impala import IMPALA, IMPALAConfig

SMALL = {"train_batch_size": 64, "rollout_fragment_length": 16, "num_envs_per_env_runner": 4, "seed": 0}


def tiny(**overrides):
    return IMPALAConfig().environment("CartPole-v1").update_from_dict({**SMALL, **overrides})


def test_registered_under_its_name() -> None:
    assert corral.get_algorithm("impala") is IMPALA
    assert isinstance(corral.get_config("IMPALA"), IMPALAConfig)


def test_a_batch_row_is_one_sub_environments_whole_sequence() -> None:
    algo = tiny().build()
    batch = algo.env_runner_group.local_env_runner.sample().policy_batches["default_policy"]
    assert batch["obs"].shape == (4, 16, 4) and batch["rewards"].shape == (4, 16)
    assert batch[SampleBatch.BOOTSTRAP_OBS].shape == (4, 4)
    assert batch["valid"].dtype == bool or set(np.unique(batch["valid"])) <= {0, 1}
    algo.stop()


def test_one_gradient_step_per_train_batch() -> None:
    algo = tiny().build()
    for _ in range(3):
        result = algo.train()
    steps = {int(state["step"]) for state in algo.get_policy().optimizer.state.values()}
    assert steps == {algo.num_updates} and algo.counters["num_env_steps_trained"] == algo.counters["num_env_steps_sampled"]
    learner = result["info"]["learner"]["default_policy"]["learner_stats"]
    assert {"policy_loss", "vf_loss", "entropy", "grad_gnorm", "cur_lr"} <= learner.keys()
    assert np.isfinite(learner["total_loss"])
    algo.stop()
