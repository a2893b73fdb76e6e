"""Action masking: a Dict observation's legal-action flags are obeyed by every algorithm, exploring or not."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

import corral
from corral import ConfigError
from corral.core.networks.action_masking import MASKED_LOGIT, ActionMaskedModel
from tests.toy_envs import MaskedChoiceEnv

STEPS = 10_000

ALGORITHMS = [
    ("PPO", {"train_batch_size": 200, "minibatch_size": 100, "num_epochs": 1}, {}),
    ("PPO", {"train_batch_size": 200, "minibatch_size": 100, "num_epochs": 1}, {"random_timesteps": 10**9}),  # uniform
    ("A2C", {"train_batch_size": 200}, {}),
    ("IMPALA", {"train_batch_size": 200}, {}),
    ("DQN", {"learning_starts": 40, "train_batch_size": 32}, {}),  # epsilon starts at 1: uniform over legal actions
    ("SAC", {"learning_starts": 40, "train_batch_size": 32}, {}),
]


def masked_config(name: str, training: dict[str, Any], exploration: dict[str, Any], explore: bool = True) -> Any:
    config = (
        corral.get_config(name)
        .environment(MaskedChoiceEnv)
        .training(**training)
        .env_runners(num_envs_per_env_runner=8)
        .exploration(explore=explore)
        .debugging(seed=0)
    )
    if exploration:
        config = config.exploration(exploration_config={**config.exploration_config, **exploration})
    return config


@pytest.mark.parametrize("explore", [True, False], ids=["explore", "greedy"])
@pytest.mark.parametrize(
    ("name", "training", "exploration"), ALGORITHMS, ids=["PPO", "PPO-random", "A2C", "IMPALA", "DQN", "SAC"]
)
def test_masked_actions_are_never_taken(name: str, training: dict[str, Any], exploration: dict[str, Any], explore: bool) -> None:
    algo = masked_config(name, training, exploration, explore).build()
    try:
        algo.train()  # the learner's masked forward passes (and DQN's and SAC's target networks) run too
        runner = algo.env_runner_group.local_env_runner
        sampled = 0
        while sampled < STEPS:  # MaskedChoiceEnv raises on a masked action
            sampled += runner.sample().env_steps
        assert sampled >= STEPS
    finally:
        algo.stop()


def test_without_the_mask_key_the_same_policy_takes_masked_actions() -> None:
    """The control: the env does catch masked actions, so the test above can fail."""
    algo = (
        masked_config("PPO", {"train_batch_size": 200, "minibatch_size": 100, "num_epochs": 1}, {})
        .environment(action_mask_key=None)
        .build()
    )
    try:
        with pytest.raises(corral.EnvRunnerError, match="masked action"):
            for _ in range(10):
                algo.env_runner_group.local_env_runner.sample()
    finally:
        algo.stop()


def test_the_model_sees_the_observation_only_and_masked_logits_are_set_low() -> None:
    algo = masked_config("PPO", {"train_batch_size": 200, "minibatch_size": 100, "num_epochs": 1}, {}).build()
    try:
        policy = algo.get_policy()
        assert policy.model_observation_space == gym.spaces.Box(0, 1, (6,), np.float32)
        assert isinstance(policy.model, ActionMaskedModel)
        assert policy.model.model.encoder[0].in_features == 6  # the catalog's MLP reads 6 inputs, not 12
        mask = np.array([[0, 1, 0, 0, 1, 0]], np.int8)
        obs = policy.preprocess({"observation": np.eye(6, dtype=np.float32)[[2]], "action_mask": mask})
        logits = policy.model.forward_inference(torch.from_numpy(obs))["action_dist_inputs"][0]
        assert torch.all(logits[[0, 2, 3, 5]] == MASKED_LOGIT)
        assert torch.all(logits[[1, 4]] > MASKED_LOGIT)
        for _ in range(50):
            action = algo.compute_single_action({"observation": np.eye(6, dtype=np.float32)[2], "action_mask": mask[0]})
            assert action in (1, 4)
    finally:
        algo.stop()


def test_a_row_without_legal_actions_counts_all_legal() -> None:
    """The observation after a game ends may flag nothing legal; no row may be all masked logits."""
    algo = masked_config("DQN", {"learning_starts": 40, "train_batch_size": 32}, {}).build()
    try:
        policy = algo.get_policy()
        obs = policy.preprocess({"observation": np.zeros((1, 6), np.float32), "action_mask": np.zeros((1, 6), np.int8)})
        q = policy.model.forward_inference(torch.from_numpy(obs))["action_dist_inputs"]
        assert torch.all(q > MASKED_LOGIT)
    finally:
        algo.stop()


def test_the_observation_filter_leaves_the_mask_alone() -> None:
    config = masked_config("PPO", {"train_batch_size": 200, "minibatch_size": 100, "num_epochs": 1}, {})
    algo = config.env_runners(observation_filter="MeanStdFilter").build()
    try:
        policy = algo.get_policy()
        rng = np.random.default_rng(0)
        raw = {"observation": rng.normal(5.0, 2.0, (64, 6)).astype(np.float32), "action_mask": np.ones((64, 6), np.int8)}
        obs = policy.preprocess(raw, update_filter=True)
        assert np.all(obs[:, 6:] == 1.0)  # the flags as they came
        assert abs(float(obs[:, :6].mean())) < 0.5  # the observation part is normalised
    finally:
        algo.stop()


def test_a_mask_key_renamed_in_the_config_is_read() -> None:
    config = masked_config("PPO", {"train_batch_size": 200, "minibatch_size": 100, "num_epochs": 1}, {})
    algo = config.environment(env_config={"mask_key": "legal"}, action_mask_key="legal").build()
    try:
        for _ in range(10):
            algo.env_runner_group.local_env_runner.sample()
        assert algo.get_policy().model_observation_space.shape == (6,)
    finally:
        algo.stop()


class BoxActionsWithMask(gym.Env):
    observation_space = gym.spaces.Dict(
        {"observation": gym.spaces.Box(0, 1, (3,), np.float32), "action_mask": gym.spaces.Box(0, 1, (2,), np.int8)}
    )
    action_space = gym.spaces.Box(-1, 1, (2,), np.float32)

    def __init__(self, config=None):
        super().__init__()

    def reset(self, *, seed=None, options=None):
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, False, False, {}


class ShortMask(BoxActionsWithMask):
    action_space = gym.spaces.Discrete(3)


@pytest.mark.parametrize(
    ("env", "message"),
    [(BoxActionsWithMask, "needs Discrete actions"), (ShortMask, "of 3 flags")],
    ids=["box-actions", "wrong-length"],
)
def test_a_mask_that_cannot_apply_is_refused_at_build(env: type, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        corral.get_config("PPO").environment(env).build()


def test_a_board_smaller_than_the_default_filters_gets_an_mlp() -> None:
    """Tic-tac-toe's (3, 3, 2) board is an 'image' the default small-grid filters (two 3x3 layers) cannot read."""
    from corral.core import ModelConfig, build_encoder

    board = gym.spaces.Box(0, 1, (3, 3, 2), np.int8)
    encoder, features = build_encoder(board, ModelConfig(fcnet_hiddens=[32]))
    assert features == 32
    assert encoder(torch.ones((4, 3, 3, 2), dtype=torch.int8)).shape == (4, 32)
    with pytest.raises(ConfigError, match="do not fit images"):  # filters the user chose are used as given
        build_encoder(board, ModelConfig(conv_filters=[[16, 3, 1], [32, 3, 1]]))
