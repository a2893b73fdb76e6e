"""RLlib's custom action distributions: registered by name, sized by ``required_model_output_shape``, acted and learned with."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

import corral
from corral import ConfigError
from corral.core import ModelCatalog, TorchCategorical, TorchDiagGaussian, TorchDistributionWrapper
from corral.plugins.dqn import DQNConfig
from corral.plugins.ppo import PPOConfig
from tests.conftest import SMALL_PPO, best_return_within

BUILT: list[Any] = []
"""the models each LearnedTemperature was built with"""


class LearnedTemperature(TorchDistributionWrapper):
    """A categorical whose temperature is one more model output: RLlib's way of a distribution with its own inputs."""

    def __init__(self, inputs: Any, model: Any = None) -> None:
        super().__init__(inputs, model)
        BUILT.append(model)
        logits, temperature = self.inputs[..., :-1], torch.nn.functional.softplus(self.inputs[..., -1:]) + 0.5
        self.dist = torch.distributions.Categorical(logits=logits / temperature)

    @staticmethod
    def required_model_output_shape(action_space: gym.Space[Any], model_config: dict[str, Any]) -> int:
        return int(action_space.n) + 1

    def deterministic_sample(self) -> torch.Tensor:
        return self.dist.probs.argmax(dim=-1)


class Sharp(TorchCategorical):
    """A tempered categorical, as RLlib's docs subclass one."""

    def __init__(self, inputs: Any, model: Any = None) -> None:
        super().__init__(inputs, model, temperature=0.5)


@pytest.fixture(autouse=True)
def registered() -> None:
    ModelCatalog.register_custom_action_dist("learned_temperature", LearnedTemperature)
    ModelCatalog.register_custom_action_dist("sharp", Sharp)


def ppo(dist: str, env: str = "CartPole-v1") -> PPOConfig:
    return PPOConfig().environment(env).training(**SMALL_PPO, model={"custom_action_dist": dist}).debugging(seed=0)


def test_the_distribution_sizes_the_model_and_is_built_from_its_outputs_and_the_model() -> None:
    algo = ppo("learned_temperature").build()
    try:
        policy = algo.get_policy()
        assert policy.num_outputs == 3, "two logits and a temperature"
        BUILT.clear()
        action, _, extras = algo.compute_single_action(np.zeros(4, np.float32), full_fetch=True)
        assert BUILT and BUILT[-1] is policy.model, "RLlib's (inputs, model)"
        inputs = torch.as_tensor(extras["action_dist_inputs"])[None]
        expected = LearnedTemperature(inputs).logp(torch.tensor([action]))
        assert np.isclose(extras["action_logp"], float(expected)), "the logp the policy records is the distribution's"
        assert algo.train()["info"]["learner"]["default_policy"]["learner_stats"]["entropy"] > 0
    finally:
        algo.stop()


@pytest.mark.slow
def test_ppo_learns_cartpole_with_a_subclass_of_rllib_s_categorical() -> None:
    algo = PPOConfig().environment("CartPole-v1").training(model={"custom_action_dist": "sharp"}).debugging(seed=0).build()
    try:
        best, steps = best_return_within(algo, 100_000, 150)
        assert best >= 150, f"mean return {best:.1f} after {steps} steps"
    finally:
        algo.stop()


def test_rllib_s_diagonal_gaussian_sums_over_the_action_dimensions() -> None:
    inputs = torch.tensor([[0.0, 1.0, 0.0, float(np.log(2.0))]])
    dist = TorchDiagGaussian(inputs)
    expected = torch.distributions.Normal(torch.tensor([0.0, 1.0]), torch.tensor([1.0, 2.0])).log_prob(torch.zeros(2)).sum()
    torch.testing.assert_close(dist.logp(torch.zeros(1, 2)), expected[None])
    assert torch.equal(dist.deterministic_sample(), torch.tensor([[0.0, 1.0]]))
    algo = ppo("corral.core:TorchDiagGaussian", env="Pendulum-v1").build()
    try:
        assert algo.get_policy().num_outputs == 2 and algo.train()["timesteps_total"] >= 256
    finally:
        algo.stop()


def test_a_checkpoint_records_the_name_and_reopens_where_it_is_registered(tmp_path: Path) -> None:
    algo = ppo("sharp").build()
    try:
        algo.train()
        checkpoint = algo.save(str(tmp_path / "ckpt"))
        action = algo.compute_single_action(np.zeros(4, np.float32), explore=False)
    finally:
        algo.stop()
    assert json.loads((Path(checkpoint) / "config.json").read_text())["model"]["custom_action_dist"] == "sharp"
    restored = corral.Algorithm.from_checkpoint(checkpoint)
    try:
        assert restored.compute_single_action(np.zeros(4, np.float32), explore=False) == action
        assert restored.get_policy().dist_class.user_class is Sharp
    finally:
        restored.stop()


def test_what_cannot_take_a_custom_distribution_or_name_one_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"DQNPolicy reads its model's outputs with a distribution of its own"):
        DQNConfig().environment("CartPole-v1").training(model={"custom_action_dist": "sharp"}).build()
    with pytest.raises(ConfigError, match=r"'sharpp' is not a registered name.*register_custom_action_dist"):
        ppo("sharpp").build()
    with pytest.raises(ConfigError, match=r"'sharp' already names a custom action distribution"):
        ModelCatalog.register_custom_model("sharp", torch.nn.Linear)
    with pytest.raises(ConfigError, match=r"needs an action distribution class"):
        ModelCatalog.register_custom_action_dist("not_one", torch.nn.Linear)


def test_a_seeded_run_samples_the_same_actions_from_a_distribution_that_draws_from_torch_s_global_generator() -> None:
    def actions() -> list[int]:
        algo = ppo("sharp").build()
        try:
            return [int(algo.compute_single_action(np.zeros(4, np.float32))) for _ in range(30)]
        finally:
            algo.stop()

    first = actions()
    torch.manual_seed(12345)  # whatever the global generator holds
    assert actions() == first and len(set(first)) == 2


@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")
def test_an_exported_policy_acts_with_the_custom_distribution_s_deterministic_sample(tmp_path: Path) -> None:
    algo = ppo("sharp").build()
    try:
        algo.train()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            path = algo.export_policy_model(tmp_path / "export")
        obs = np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32)
        expected = [int(algo.compute_single_action(row, explore=False)) for row in obs]
        assert torch.jit.load(str(path.parent / "model.pt"))(torch.as_tensor(obs))[0].tolist() == expected
        # torch.export captures the distribution's argmax only while torch's argument checks are off (torch.compile
        # turns them off for the whole process, so it depends on what ran before); either way nothing is silent
        program = path.parent / "model.pt2"
        if program.exists():
            assert torch.export.load(str(program)).module()(torch.as_tensor(obs))[0].tolist() == expected
        else:
            assert any("model.pt2 not written: torch.export cannot capture" in str(w.message) for w in caught)
    finally:
        algo.stop()
