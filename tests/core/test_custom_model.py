"""``model={"custom_model": Net}`` with a plain ``torch.nn.Module``, as the README and RLlib users expect.

A plain module's ``forward(obs)`` gives the action-distribution inputs; an
actor-critic policy gets a separate value network beside it, DQN puts its Q
head on it (as RLlib does), behaviour cloning needs no value network, and SAC
builds its actor and each critic on one (``policy_model_config``,
``q_model_config``, as RLlib's old stack does). The constructor
takes RLlib's arguments (``name`` and ``custom_model_config`` as keywords) or
corral's four; a module shaped like RLlib's ModelV2 that does not subclass corral's
``TorchModelV2`` is refused with a message saying so (tests/core/test_model_v2.py has ModelV2 itself).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from corral import ConfigError
from corral.core import Model, SampleBatch
from corral.plugins.dqn import DQNConfig
from corral.plugins.marwil import BCConfig
from corral.plugins.ppo import PPOConfig
from corral.plugins.sac import SACConfig
from tests.conftest import SMALL_PPO

BUILT: list[dict[str, Any]] = []
"""what each Net was built with, newest last"""


class Net(nn.Module):
    """A plain module with RLlib's constructor signature, as RLlib's docs write custom models."""

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, num_outputs: int, model_config: dict, name: str, **kw: Any):
        super().__init__()
        hidden = kw.get("hidden", 32)
        BUILT.append(
            {"obs_space": obs_space, "num_outputs": num_outputs, "name": name, "kwargs": kw, "model_config": model_config}
        )
        self.layers = nn.Sequential(nn.Linear(int(np.prod(obs_space.shape)), hidden), nn.Tanh(), nn.Linear(hidden, num_outputs))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.layers(obs)


class CorralSignatureNet(nn.Module):
    """corral's four constructor arguments."""

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, num_outputs: int, model_config: dict) -> None:
        super().__init__()
        self.linear = nn.Linear(int(np.prod(obs_space.shape)), num_outputs)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.linear(obs)


class WholeQModel(Model):
    """A corral Model: DQN takes its outputs as the Q-values."""

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, num_outputs: int, model_config: dict) -> None:
        super().__init__()
        self.q = nn.Linear(int(np.prod(obs_space.shape)), num_outputs)

    def _forward(self, obs: torch.Tensor) -> dict[str, torch.Tensor]:
        return {SampleBatch.ACTION_DIST_INPUTS: self.q(obs)}


class ModelV2Like(nn.Module):
    """RLlib's ModelV2 shape: forward(input_dict, state, seq_lens) and value_function()."""

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, num_outputs: int, model_config: dict, name: str):
        super().__init__()
        self.linear = nn.Linear(int(np.prod(obs_space.shape)), num_outputs)

    def forward(self, input_dict: dict, state: list, seq_lens: Any) -> tuple[torch.Tensor, list]:
        return self.linear(input_dict["obs"]), state

    def value_function(self) -> torch.Tensor:
        return torch.zeros(1)


def ppo(model: dict[str, Any]) -> PPOConfig:
    return PPOConfig().environment("CartPole-v1").training(model=model, **SMALL_PPO).debugging(seed=0)


def test_a_plain_module_is_the_policy_of_an_actor_critic_with_a_value_network_beside_it() -> None:
    algo = ppo({"custom_model": Net, "custom_model_config": {"hidden": 16}}).build()
    try:
        built = BUILT[-1]
        assert built["num_outputs"] == 2 and built["kwargs"] == {"hidden": 16} and built["model_config"]["custom_model_config"]
        policy = algo.get_policy()
        (module,) = [m for m in policy.model.modules() if isinstance(m, Net)]
        obs = torch.randn(5, 4)
        with torch.no_grad():
            out = policy.model.forward_inference(obs)
            assert torch.equal(out[SampleBatch.ACTION_DIST_INPUTS], module(obs)), "its output is the distribution inputs"
        assert out[SampleBatch.VF_PREDS].shape == (5,)
        before = [p.detach().clone() for p in module.parameters()]
        algo.train()
        assert any(not torch.equal(b, p) for b, p in zip(before, module.parameters(), strict=True)), "the module learns"
    finally:
        algo.stop()


def test_corral_s_four_constructor_arguments_are_taken_too() -> None:
    algo = ppo({"custom_model": CorralSignatureNet}).build()
    try:
        assert any(isinstance(m, CorralSignatureNet) for m in algo.get_policy().model.modules())
        assert algo.train()["training_iteration"] == 1
    finally:
        algo.stop()


@pytest.mark.parametrize(("hiddens", "width"), [([128], 128), ([], 2)])
def test_dqn_puts_its_q_head_on_a_plain_module_as_rllib_does(hiddens: list[int], width: int) -> None:
    # RLlib: the model gives ([256] + fcnet_hiddens)[-1] features to a Q head with hidden layers, else one per action
    config = DQNConfig().environment("CartPole-v1").training(model={"custom_model": Net}, hiddens=hiddens, train_batch_size=32)
    algo = config.reporting(min_sample_timesteps_per_iteration=64).debugging(seed=0).build()
    try:
        assert BUILT[-1]["num_outputs"] == width
        model = algo.get_policy().model
        assert isinstance(model.encoder, Net)
        assert model(torch.zeros(3, 4))[SampleBatch.ACTION_DIST_INPUTS].shape == (3, 2)
        assert algo.train()["training_iteration"] == 1
    finally:
        algo.stop()


def test_dqn_takes_a_whole_model_as_its_q_network() -> None:
    algo = DQNConfig().environment("CartPole-v1").training(model={"custom_model": WholeQModel}).build()
    try:
        assert isinstance(algo.get_policy().model, WholeQModel)
    finally:
        algo.stop()


def test_behaviour_cloning_gives_a_plain_module_no_value_network() -> None:
    config = BCConfig().environment("CartPole-v1").training(model={"custom_model": Net})
    algo = config.offline_data(input_="sampler").build()
    try:
        model = algo.get_policy().model
        assert SampleBatch.VF_PREDS not in model.forward_inference(torch.zeros(2, 4))
        assert not any(isinstance(m, nn.Linear) and m.out_features == 1 for m in model.modules())
    finally:
        algo.stop()


def test_sac_builds_its_actor_and_each_critic_on_a_plain_module() -> None:
    config = (
        SACConfig()
        .environment("Pendulum-v1")
        .training(policy_model_config={"custom_model": Net}, q_model_config={"custom_model": Net}, learning_starts=32)
    )
    algo = config.debugging(seed=0).build()
    try:
        model = algo.get_policy().model
        actor_built, *critics_built = BUILT[-3:]
        assert actor_built["num_outputs"] == 2, "a mean and a log standard deviation for the one action"
        assert [c["num_outputs"] for c in critics_built] == [1, 1], "twin critics, one Q-value each"
        assert [c["obs_space"].shape for c in critics_built] == [(4,), (4,)], "observations and the action, concatenated"
        assert isinstance(model.actor, Net) and all(isinstance(c, Net) for c in model.critics.members)
        assert algo.train()["timesteps_total"] >= 32
    finally:
        algo.stop()


def test_a_model_v2_shape_without_corral_s_torch_model_v2_is_refused_with_what_to_write_instead() -> None:
    with pytest.raises(ConfigError, match=r"looks like RLlib's ModelV2 .* does not subclass corral's TorchModelV2"):
        ppo({"custom_model": ModelV2Like}).build()


def test_a_plain_module_cannot_share_layers_it_does_not_expose() -> None:
    with pytest.raises(ConfigError, match=r"vf_share_layers=True .* set vf_share_layers=False"):
        ppo({"custom_model": Net, "vf_share_layers": True}).build()


class SizedNet(nn.Module):
    def __init__(self, size: int) -> None:
        super().__init__()


def test_a_constructor_that_takes_neither_form_is_named_with_both() -> None:
    with pytest.raises(ConfigError, match=r"SizedNet\(size\) takes neither RLlib's arguments .* nor corral's"):
        ppo({"custom_model": SizedNet}).build()
    with pytest.raises(ConfigError, match=r"Linear, built with RLlib's arguments .* raised TypeError"):
        ppo({"custom_model": "torch.nn:Linear"}).build()


@pytest.mark.slow
def test_ppo_learns_cartpole_with_a_plain_module() -> None:
    algo = ppo({"custom_model": Net, "custom_model_config": {"hidden": 64}}).training(train_batch_size=4000).build()
    try:
        result = {}
        while not result or result["timesteps_total"] < 30_000:
            result = algo.train()
        assert result["episode_reward_mean"] >= 100
    finally:
        algo.stop()


@pytest.mark.slow
def test_dqn_learns_cartpole_with_a_plain_module_under_its_q_head() -> None:
    algo = DQNConfig().environment("CartPole-v1").training(model={"custom_model": Net}).debugging(seed=0).build()
    try:
        result = {}
        while not result or result["timesteps_total"] < 8_000:
            result = algo.train()
        assert result["episode_reward_mean"] >= 40
    finally:
        algo.stop()
