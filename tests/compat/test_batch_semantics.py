"""RLlib's batch semantics: a train batch holds at least ``train_batch_size`` steps, and whole episodes on request.

Reset rows (the step after an episode ends, whose action the env ignores) are
no steps: a batch short of them is topped up by a call that samples only what
is missing. An explicit ``rollout_fragment_length`` too short for the batch
means more sample calls per batch, said once at INFO.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import pytest

import corral
from corral import Callbacks
from corral.core.common.sample_batch import SampleBatch
from corral.core.training.off_policy import OffPolicyAlgorithm

BATCH, ENVS, FRAGMENT = 50, 3, 7
"""odd sizes: 3 sub-environments of 7 steps never add up to the batch of 50"""

# DD-PPO and A3C have no train batch (RLlib's train_batch_size=-1): each update is one runner's sample call,
# which tests/plugins/ddppo and tests/plugins/a3c hold to its size; ES and ARS learn from whole episodes' returns
ALGORITHMS = sorted(info.name for info in corral.list_algorithms() if info.name not in ("DDPPO", "A3C", "ES", "ARS"))


class BatchRecorder(Callbacks):
    """Records every train batch each policy learns on (the class attribute is the test's view)."""

    batches: ClassVar[list[SampleBatch]] = []

    def on_learn_on_batch(self, *, policy: Any, train_batch: SampleBatch, result: dict[str, Any], **kwargs: Any) -> None:
        BatchRecorder.batches.append(train_batch)


def steps_in(batch: SampleBatch) -> int:
    """Env steps a train batch holds: its valid rows (sequence learners keep the mask), its sequences' steps, or its rows."""
    if SampleBatch.VALID in batch:
        return int(np.sum(batch[SampleBatch.VALID]))
    return int(np.sum(batch[SampleBatch.SEQ_LENS])) if SampleBatch.SEQ_LENS in batch else batch.count


def small_config(name: str, **overrides: Any) -> Any:
    discrete = issubclass(gym.spaces.Discrete, corral.get_algorithm(name).supported_action_spaces)
    config = corral.get_config(name).update_from_dict(
        {
            "env": "CartPole-v1" if discrete else "Pendulum-v1",  # DDPG and TD3 act in a Box
            "num_envs_per_env_runner": ENVS,
            "rollout_fragment_length": FRAGMENT,
            "train_batch_size": BATCH,
            "min_sample_timesteps_per_iteration": 0,
            "min_time_s_per_iteration": 0,  # Ape-X's default is RLlib's 30 s
            "num_env_runners": 0,  # in this process (Ape-X's default is RLlib's 32 remote runners)
            "seed": 0,
            "log_to_tensorboard": False,
            **overrides,
        }
    )
    if "minibatch_size" in config:
        config.minibatch_size = 25
    if "learning_starts" in config:
        config.update_from_dict({"learning_starts": 0, "training_intensity": None})
    return config.callbacks(BatchRecorder)


@pytest.fixture(autouse=True)
def _fresh_recorder() -> None:
    BatchRecorder.batches = []


@pytest.mark.parametrize("name", ALGORITHMS)
def test_every_train_batch_of_20_iterations_holds_at_least_train_batch_size_env_steps(name, make_algo) -> None:
    algo = make_algo(small_config(name))
    for _ in range(20):
        algo.train()
    algo.settle_learning()  # a learner thread's last update (IMPALA's, APPO's) ends
    sizes = [steps_in(batch) for batch in BatchRecorder.batches]
    if isinstance(algo, OffPolicyAlgorithm):  # a replayed minibatch: exactly the batch size, or sequences holding it
        recurrent = algo.get_policy().is_recurrent
        assert sizes and all(size >= BATCH if recurrent else size == BATCH for size in sizes), sizes
        return
    assert len(sizes) >= 20
    # a batch stops within the last call: one step per sub-environment, or one fragment for sequence learners
    over = FRAGMENT * ENVS if algo.sample_whole_fragments else ENVS
    assert all(BATCH <= size < BATCH + over for size in sizes), sizes
    assert algo.counters["num_env_steps_trained"] == sum(sizes)  # the counters count steps, as the batches do


def test_auto_fragment_length_divides_the_batch_exactly() -> None:
    config = small_config("PPO", rollout_fragment_length="auto", train_batch_size=48, num_envs_per_env_runner=4)
    assert config.get_rollout_fragment_length() == 12
    assert small_config("PPO", rollout_fragment_length="auto").get_rollout_fragment_length() == 17  # ceil(50 / 3)


def test_an_explicit_fragment_too_short_for_the_batch_means_more_calls_said_once_at_info(make_algo, caplog) -> None:
    algo = make_algo(small_config("PPO", rollout_fragment_length=4))
    with caplog.at_level(logging.INFO, logger="corral"):
        for _ in range(3):
            algo.train()
    said = [r.getMessage() for r in caplog.records if "rollout_fragment_length=4" in r.getMessage()]
    assert said == [
        "rollout_fragment_length=4 on 3 sub-environments samples 12 steps per call; each train batch of 50 steps joins 5 calls"
    ]
    assert all(steps_in(batch) >= BATCH for batch in BatchRecorder.batches)


def test_reset_rows_are_not_counted(make_algo) -> None:
    """CartPole's short early episodes leave reset rows in every fragment; the batch still holds 50 steps."""
    algo = make_algo(small_config("A2C", rollout_fragment_length="auto"))
    algo.train()
    assert all(steps_in(batch) >= BATCH for batch in BatchRecorder.batches)
    assert algo.counters["num_env_steps_sampled"] >= BATCH * len(BatchRecorder.batches)


def whole_episodes(batch: SampleBatch) -> bool:
    """Whether the batch from CountingEnv holds as many first steps as last ones (of its valid rows)."""
    valid = batch[SampleBatch.VALID] if SampleBatch.VALID in batch else np.ones(batch.count, dtype=bool)
    firsts = int(np.sum((batch[SampleBatch.OBS][..., 0] == 0.0) & valid))
    return firsts == int(np.sum(batch[SampleBatch.TERMINATEDS] & valid))


@pytest.mark.parametrize("name", ["PPO", "A2C", "DQN"])
def test_complete_episodes_batches_hold_whole_episodes_only(name, make_algo) -> None:
    one_step = {"n_step": 1} if name == "DQN" else {}  # a flat row's flags are its own step's
    algo = make_algo(small_config(name, env="corral.testing.envs:CountingEnv", batch_mode="complete_episodes", **one_step))
    samples = [algo.sample() for _ in range(10)]
    assert all(whole_episodes(s.policy_batches["default_policy"]) for s in samples)
    for _ in range(5):
        algo.train()
    if name != "DQN":
        assert all(whole_episodes(batch) and steps_in(batch) >= BATCH for batch in BatchRecorder.batches)


def test_truncated_fragments_cut_episodes_so_the_check_above_can_fail(make_algo) -> None:
    algo = make_algo(small_config("PPO", env="corral.testing.envs:CountingEnv"))
    assert not all(whole_episodes(algo.sample().policy_batches["default_policy"]) for _ in range(10))


MULTI_AGENT_COUNTING = {"env": "corral.testing.envs:MultiAgentCountingEnv", "env_config": {"num_agents": 2}}
"""two agents whose episodes end at different steps, each leaving when its own ends"""


@pytest.mark.parametrize("name", ["PPO", "DQN"])
@pytest.mark.parametrize("count_steps_by", ["env_steps", "agent_steps"])
def test_complete_episodes_keep_every_agents_episode_whole(name, count_steps_by, make_algo) -> None:
    one_step = {"n_step": 1} if name == "DQN" else {}
    config = small_config(name, batch_mode="complete_episodes", count_steps_by=count_steps_by, **MULTI_AGENT_COUNTING, **one_step)
    algo = make_algo(config)
    samples = [algo.sample() for _ in range(10)]
    assert all(whole_episodes(s.policy_batches["default_policy"]) for s in samples)
    for _ in range(3):
        algo.train()
    if name == "PPO":
        assert BatchRecorder.batches and all(whole_episodes(batch) for batch in BatchRecorder.batches)
        counted = "num_agent_steps_trained" if count_steps_by == "agent_steps" else "num_env_steps_trained"
        assert algo.counters[counted] >= 3 * BATCH


def test_multi_agent_truncated_fragments_cut_episodes_so_the_check_above_can_fail(make_algo) -> None:
    algo = make_algo(small_config("PPO", **MULTI_AGENT_COUNTING))
    assert not all(whole_episodes(algo.sample().policy_batches["default_policy"]) for _ in range(10))
