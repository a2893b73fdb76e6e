"""RLlib's ``DefaultModelConfig`` and the new stack's model options it carries (heads, LayerNorm, log-std clamp).

Written as RLlib 2.40's docs write it:
``config.rl_module(model_config=DefaultModelConfig(fcnet_hiddens=[64, 64]))``.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from corral import ConfigError
from corral.core import ModelConfig, RLModuleSpec
from corral.core.contracts.config import AlgorithmConfig
from corral.core.networks.default_models import ActorCriticModel
from corral.core.networks.recurrent import LSTMModel
from corral.errors import UnknownAlgorithmError
from corral.plugins.dqn import DQNConfig
from corral.plugins.pg import PG
from corral.plugins.ppo import PPOConfig
from corral.rllib.core.rl_module.default_model_config import DefaultModelConfig
from tests.conftest import SMALL_PPO, best_return_within

BOX = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)


def test_a_default_model_config_sets_every_option_it_names_with_rllibs_new_stack_defaults() -> None:
    config = PPOConfig().rl_module(model_config=DefaultModelConfig(fcnet_hiddens=[64, 64], fcnet_activation="silu"))
    model = config.model
    assert model.fcnet_hiddens == [64, 64]
    assert model.fcnet_activation == "swish"  # RLlib's other name for it
    # RLlib's new-stack defaults, not the old model dict's
    assert model.vf_share_layers is True
    assert model.free_log_std is False
    assert model.log_std_clip_param == 20.0
    assert model.head_fcnet_hiddens == [] and model.head_fcnet_activation == "relu"


def test_an_infinite_clip_is_no_clamp_and_a_linear_activation_may_be_none() -> None:
    options = DefaultModelConfig(log_std_clip_param=float("inf"), head_fcnet_activation=None).model_options()
    assert options["log_std_clip_param"] is None
    assert options["head_fcnet_activation"] == "linear"


def test_a_set_initializer_is_refused_naming_it_and_what_to_do_instead() -> None:
    with pytest.raises(ConfigError, match=r"fcnet_kernel_initializer=.*custom model"):
        PPOConfig().rl_module(model_config=DefaultModelConfig(fcnet_kernel_initializer="xavier_uniform_"))


def test_an_rl_module_spec_takes_one_and_refuses_another_type() -> None:
    spec = RLModuleSpec(model_config=DefaultModelConfig(head_fcnet_hiddens=[16]))
    assert spec.model_options()["head_fcnet_hiddens"] == [16]
    with pytest.raises(ValueError, match=r"dict of model options or a DefaultModelConfig, not list"):
        RLModuleSpec(model_config=[("fcnet_hiddens", [8])])


def test_each_head_gets_its_own_hidden_layers_and_the_encoder_its_layernorms() -> None:
    config = ModelConfig(fcnet_hiddens=[8], fcnet_use_layernorm=True, head_fcnet_hiddens=[5, 4], head_fcnet_activation="tanh")
    model = ActorCriticModel(gym.spaces.Box(-1.0, 1.0, (6,)), 2, config)
    assert [type(layer) for layer in model.encoder][:2] == [nn.Linear, nn.LayerNorm]  # then the activation
    for head, outputs in ((model.pi_head, 2), (model.vf_head, 1)):
        assert isinstance(head, nn.Sequential)
        assert [layer.out_features for layer in head if isinstance(layer, nn.Linear)] == [5, 4, outputs]
    assert model.pi_head is not model.vf_head
    out = model(torch.zeros(7, 6))
    assert out["action_dist_inputs"].shape == (7, 2) and out["vf_preds"].shape == (7,)


@pytest.mark.parametrize("free_log_std", [False, True])
def test_the_log_std_is_clamped_and_the_mean_is_not(free_log_std: bool) -> None:
    config = ModelConfig(fcnet_hiddens=[4], free_log_std=free_log_std, log_std_clip_param=2.0)
    model = ActorCriticModel(gym.spaces.Box(-1.0, 1.0, (2,)), 2 * BOX.shape[0], config, gaussian=True)
    with torch.no_grad():
        if model.log_std is not None:
            model.log_std.fill_(-7.0)
        else:
            model.pi_head.bias[BOX.shape[0] :] = -7.0
        model.pi_head.bias[: BOX.shape[0]] = -7.0
    mean, log_std = torch.chunk(model(torch.zeros(5, 2))["action_dist_inputs"], 2, dim=-1)
    assert torch.allclose(log_std, torch.full_like(log_std, -2.0))
    assert (mean < -6.0).all()


def test_without_a_clamp_the_log_std_is_the_network_output() -> None:
    model = ActorCriticModel(
        gym.spaces.Box(-1.0, 1.0, (2,)), 6, ModelConfig(fcnet_hiddens=[4], free_log_std=False), gaussian=True
    )
    with torch.no_grad():
        model.pi_head.bias.fill_(-30.0)
    assert (model(torch.zeros(1, 2))["action_dist_inputs"] < -29.0).all()


def test_a_memory_model_takes_head_layers_too() -> None:
    config = ModelConfig(fcnet_hiddens=[8], use_lstm=True, lstm_cell_size=6, head_fcnet_hiddens=[5], free_log_std=False)
    model = LSTMModel(gym.spaces.Box(-1.0, 1.0, (3,)), BOX, 6, config)
    h, c = model.get_initial_state()
    assert h.shape == (6,) and c.shape == (6,)
    assert [layer.out_features for layer in model.pi_head if isinstance(layer, nn.Linear)] == [5, 6]


def test_a_q_network_refuses_head_layers_naming_its_own_option() -> None:
    config = DQNConfig().environment("CartPole-v1").rl_module(model_config={"head_fcnet_hiddens": [32]})
    with pytest.raises(ConfigError, match=r"head_fcnet_hiddens=\[32\].*`hiddens` option"):
        config.build()


def test_an_algorithm_config_names_its_algorithm_by_its_registered_name() -> None:
    config = AlgorithmConfig(algo_class="PG").environment("CartPole-v1").training(train_batch_size=64)
    algo = config.build()
    try:
        assert isinstance(algo, PG)
        assert algo.train()["timesteps_total"] >= 64
    finally:
        algo.stop()
    with pytest.raises(UnknownAlgorithmError, match=r"'PGX'.*Did you mean 'PG'"):
        AlgorithmConfig(algo_class="PGX")


def test_ppo_learns_cartpole_with_rllibs_default_model_config_and_head_layers() -> None:
    algo = (
        PPOConfig()
        .environment("CartPole-v1")
        .rl_module(model_config=DefaultModelConfig(fcnet_hiddens=[64], head_fcnet_hiddens=[32], fcnet_use_layernorm=True))
        .training(**SMALL_PPO)
        .debugging(seed=3)
        .build()
    )
    try:
        best, _ = best_return_within(algo, 40_000, 150.0)
    finally:
        algo.stop()
    assert best >= 150.0
