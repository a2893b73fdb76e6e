"""RLlib's catalogs: a default model's parts built by hand, and a catalog class that builds an algorithm's model."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from corral import ConfigError
from corral.core import RLModuleSpec
from corral.plugins.dqn import DQNConfig
from corral.plugins.ppo import PPOConfig
from corral.rllib.algorithms.ppo.ppo_catalog import PPOCatalog
from corral.rllib.core.models.base import ACTOR, CRITIC, ENCODER_OUT
from corral.rllib.core.models.catalog import Catalog
from tests.conftest import SMALL_PPO

CARTPOLE_OBS = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)


def test_a_catalog_builds_the_encoder_and_the_distribution_of_the_spaces() -> None:
    catalog = Catalog(CARTPOLE_OBS, gym.spaces.Box(-1.0, 1.0, (2,)), model_config_dict={"fcnet_hiddens": [16, 8]})
    assert catalog.latent_dims == (8,)
    features = catalog.build_encoder(framework="torch")({"obs": torch.zeros(3, 4)})[ENCODER_OUT]
    assert features.shape == (3, 8)
    dist = catalog.get_action_dist_cls(framework="torch").from_logits(torch.zeros(3, 4))  # means and log stds
    assert dist.sample().shape == (3, 2) and dist.logp(torch.zeros(3, 2)).shape == (3,)
    with pytest.raises(ConfigError, match=r"framework='tf2' is not torch"):
        catalog.build_encoder(framework="tf2")


@pytest.mark.parametrize("shared", [True, False])
def test_a_ppo_catalog_builds_actor_and_critic_encoders_and_the_heads(shared: bool) -> None:
    catalog = PPOCatalog(
        CARTPOLE_OBS, gym.spaces.Discrete(2), model_config_dict={"fcnet_hiddens": [8], "vf_share_layers": shared}
    )
    encoder = catalog.build_actor_critic_encoder(framework="torch")
    out = encoder({"obs": torch.ones(5, 4)})[ENCODER_OUT]
    assert (out[ACTOR] is out[CRITIC]) == shared
    assert catalog.build_pi_head(framework="torch")(out[ACTOR]).shape == (5, 2)
    assert catalog.build_vf_head(framework="torch")(out[CRITIC]).shape == (5, 1)


class WidePolicyHead(PPOCatalog):
    """A catalog of the script's own: a hidden layer of 32 before the policy's outputs."""

    def build_pi_head(self, framework: str = "torch") -> nn.Module:
        return nn.Sequential(nn.Linear(self.latent_dims[0], 32), nn.Tanh(), nn.Linear(32, self.action_dist_inputs))


def test_an_algorithm_builds_its_model_from_the_script_s_catalog(make_algo) -> None:
    spec = RLModuleSpec(catalog_class=WidePolicyHead, model_config={"fcnet_hiddens": [16]})
    algo = make_algo(PPOConfig().environment("CartPole-v1").training(**SMALL_PPO).rl_module(rl_module_spec=spec))
    model = algo.get_module()
    assert [layer.out_features for layer in model.pi if isinstance(layer, nn.Linear)] == [32, 2]
    assert model.encoder.actor[0].out_features == 16  # the model options reach the catalog
    assert algo.train()["timesteps_total"] > 0
    with pytest.raises(ConfigError, match=r"actor-critic model \(a PPOCatalog's\); a Q-network is not built from it"):
        make_algo(DQNConfig().environment("CartPole-v1").rl_module(rl_module_spec=RLModuleSpec(catalog_class=PPOCatalog)))
    with pytest.raises(ValueError, match=r"catalog_class=.* with a module_class"):
        RLModuleSpec(module_class=nn.Linear, catalog_class=PPOCatalog)
