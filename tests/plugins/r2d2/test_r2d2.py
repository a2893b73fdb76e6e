"""R2D2: RLlib's recurrent DQN, replaying sequences with burn-in and value rescaling."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import corral
from corral import ConfigError
from corral.core import SampleBatch
from corral.core.learning.recurrent.sequences import chop_into_sequences
from corral.plugins.dqn import DQNConfig
from corral.plugins.r2d2 import R2D2Config
from corral.plugins.r2d2.policy import h_function, h_inverse
from corral.testing.envs import StatelessCartPole

SMALL_MODEL = {"use_lstm": True, "lstm_cell_size": 16, "max_seq_len": 5, "fcnet_hiddens": [16]}


def small(**training: Any) -> R2D2Config:
    replay = {"type": "PrioritizedReplayBuffer", "capacity": 1000, "storage_unit": "sequences", "replay_burn_in": 2}
    options = {"model": SMALL_MODEL, "learning_starts": 100, "train_batch_size": 40, "replay_buffer_config": replay}
    config = R2D2Config().environment(StatelessCartPole).training(**{**options, **training})
    return config.reporting(min_sample_timesteps_per_iteration=200).debugging(seed=0)


def test_sequences_with_a_burn_in_start_that_many_steps_earlier_within_their_episode() -> None:
    # one sub-environment: an episode of 7 steps, a reset row, then an episode of 3
    valid = np.array([1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1], dtype=bool)[:, None]
    fragment = SampleBatch(
        {
            SampleBatch.VALID: valid,
            SampleBatch.OBS: np.arange(11, dtype=np.float32).reshape(11, 1, 1),
            "state_in_0": np.arange(11, dtype=np.float32).reshape(11, 1, 1) * 10,
        }
    )
    sequences = chop_into_sequences(fragment, max_seq_len=3, burn_in=2)
    assert sequences[SampleBatch.OBS][:, :, 0].tolist() == [
        [0, 1, 2, 0, 0],  # the episode's first steps: nothing before them to burn in
        [1, 2, 3, 4, 5],  # steps 3-5 to learn from, after 1-2
        [4, 5, 6, 0, 0],  # step 6, after 4-5
        [8, 9, 10, 0, 0],  # the next episode starts over
    ]
    assert sequences[SampleBatch.BURN_IN].tolist() == [0, 2, 2, 0]
    assert sequences[SampleBatch.SEQ_LENS].tolist() == [3, 5, 3, 3]
    assert sequences["state_in_0"][:, 0].tolist() == [0, 10, 40, 80], "the state where the burn-in starts"
    without = chop_into_sequences(fragment, max_seq_len=3)
    assert SampleBatch.BURN_IN not in without and without[SampleBatch.OBS].shape == (4, 3, 1)


def test_the_h_function_and_its_inverse_undo_each_other() -> None:
    x = torch.linspace(-500, 500, 1001, dtype=torch.float64)
    torch.testing.assert_close(h_inverse(h_function(x, 1e-3), 1e-3), x)
    assert h_function(torch.tensor(99.0), 1e-3) < 10, "large values are squashed towards their square root"


def test_r2d2_replays_sequences_learns_and_gives_each_sequence_a_priority() -> None:
    algo = small().build()
    try:
        policy = algo.get_policy()
        assert policy.is_recurrent and policy.replay_row_steps == 7
        before = {k: v.copy() for k, v in policy.get_weights().items()}
        result = algo.train()
        learner = result["info"]["learner"]["default_policy"]["learner_stats"]
        assert np.isfinite(learner["loss"]) and learner["mean_td_error"] > 0
        buffer = algo.replay_buffers["default_policy"]
        stored = buffer.sample(4)
        assert stored[SampleBatch.OBS].shape[1:] == (7, 2) and stored[SampleBatch.BURN_IN].max() <= 2
        after = policy.get_weights()
        assert any(not np.allclose(before[k], after[k]) for k in before if k.startswith("lstm."))
        action, state, _ = algo.compute_single_action(np.zeros(2, np.float32), policy.get_initial_state(), explore=False)
        assert action in (0, 1) and [s.shape for s in state] == [(16,), (16,)]
    finally:
        algo.stop()


def test_a_burn_in_step_and_a_sequence_s_last_step_are_not_learned_unless_its_episode_ended_there() -> None:
    algo = small(zero_init_states=False).build()
    try:
        policy = algo.get_policy()
        batch = SampleBatch(
            {
                SampleBatch.OBS: np.zeros((1, 7, 2), np.float32),
                SampleBatch.ACTIONS: np.zeros((1, 7), np.int64),
                SampleBatch.REWARDS: np.zeros((1, 7), np.float32),
                SampleBatch.TERMINATEDS: np.zeros((1, 7), bool),
                SampleBatch.WEIGHTS: np.ones(1, np.float32),
                SampleBatch.SEQ_LENS: np.array([3], np.int32),
                SampleBatch.BURN_IN: np.array([2], np.int32),
                "state_in_0": np.zeros((1, 16), np.float32),
                "state_in_1": np.zeros((1, 16), np.float32),
            }
        )
        # two burn-in steps, then one step without a successor: nothing to learn from
        assert policy.learn_on_batch(batch)["loss"] == 0.0
        batch[SampleBatch.TERMINATEDS][0, 2] = True  # ... unless its episode ended there: target r = 0
        batch[SampleBatch.REWARDS][0, 2] = 5.0
        assert policy.learn_on_batch(batch)["loss"] > 0
    finally:
        algo.stop()


def test_what_r2d2_cannot_do_is_refused_and_dqn_refuses_sequence_replay() -> None:
    with pytest.raises(ConfigError, match=r"R2D2 learns a recurrent Q-network: set model.use_lstm=True"):
        R2D2Config().environment("CartPole-v1").training(model={"use_lstm": False}).validate()
    with pytest.raises(ConfigError, match="n_step=3: R2D2 learns one-step targets"):
        R2D2Config().environment("CartPole-v1").training(n_step=3).validate()
    with pytest.raises(ConfigError, match=r"asks for replayed sequences .* but DQNConfig replays single steps"):
        DQNConfig().environment("CartPole-v1").training(replay_buffer_config={"capacity": 100, "replay_burn_in": 4}).validate()
    assert isinstance(corral.get_config("R2D2"), R2D2Config)


def test_rllib_s_replay_buffer_config_for_r2d2_is_taken_and_its_zero_init_states_must_agree() -> None:
    from corral.rllib.utils.replay_buffers.replay_buffer import StorageUnit

    buffer = {  # RLlib's replay_buffer_api example
        "type": "MultiAgentPrioritizedReplayBuffer",
        "prioritized_replay_alpha": 0.5,
        "storage_unit": StorageUnit.SEQUENCES,
        "replay_burn_in": 20,
        "zero_init_states": True,
    }
    config = R2D2Config().environment("CartPole-v1").training(replay_buffer_config=buffer)
    config.validate()
    assert config.replay_burn_in == 20
    with pytest.raises(ConfigError, match=r"zero_init_states=False differs from zero_init_states=True"):
        config.copy().training(replay_buffer_config={**buffer, "zero_init_states": False}).validate()


def test_a_checkpoint_restores_the_replayed_sequences_and_the_recurrent_policy(tmp_path) -> None:
    algo = small().checkpointing(save_replay_buffer=True).build()
    obs = np.zeros(2, np.float32)
    try:
        algo.train()
        checkpoint = algo.save(str(tmp_path / "ckpt"))
        stored = len(algo.replay_buffers["default_policy"])
        action, state, _ = algo.compute_single_action(obs, algo.get_policy().get_initial_state(), explore=False)
    finally:
        algo.stop()
    restored = corral.Algorithm.from_checkpoint(checkpoint)
    try:
        assert len(restored.replay_buffers["default_policy"]) == stored > 0
        again, state_again, _ = restored.compute_single_action(obs, restored.get_policy().get_initial_state(), explore=False)
        assert again == action and all(np.array_equal(a, b) for a, b in zip(state, state_again, strict=True))
        assert restored.train()["num_env_steps_trained"] > 0
    finally:
        restored.stop()


def test_a_replay_capacity_of_sequences_that_cannot_fit_in_memory_is_refused_before_any_work() -> None:
    replay = {"type": "ReplayBuffer", "capacity": 10**9, "storage_unit": "sequences"}
    # a row: 5 steps of 2 float32 observations, an int64 action and 32 bytes of rewards and flags; no next observations
    with pytest.raises(ConfigError, match=r"the replay buffer \(1,000,000,000 rows of 240 bytes\)"):
        small(replay_buffer_config=replay).build()


def test_r2d2_trains_an_attention_model_as_its_memory_too() -> None:
    attention = {"use_attention": True, "attention_dim": 16, "attention_memory_inference": 8, "attention_memory_training": 8}
    algo = small(model={**SMALL_MODEL, "use_lstm": False, **attention}).build()
    try:
        policy = algo.get_policy()
        before = {k: v.copy() for k, v in policy.get_weights().items() if k.startswith("units.")}
        assert np.isfinite(algo.train()["info"]["learner"]["default_policy"]["learner_stats"]["loss"])
        after = policy.get_weights()
        assert any(not np.allclose(before[k], after[k]) for k in before), "the transformer learns"
    finally:
        algo.stop()
