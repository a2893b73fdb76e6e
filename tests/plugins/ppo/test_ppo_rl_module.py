"""RLlib's PPOTorchRLModule, and a Ray 2.9 module built on it: one RLModuleConfig, the env's Dict, masked logits."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

import corral
from corral import ConfigError
from corral.core.common.sample_batch import SampleBatch
from corral.core.networks.rl_module import RLModuleConfig
from corral.plugins.ppo.rl_module import PPOTorchRLModule
from corral.testing.example_envs.random_envs import RandomEnv


class MaskedRandomEnv(RandomEnv):
    """RLlib's ActionMaskEnv: a RandomEnv whose subclass sets a Dict space, raising on an action its mask forbids."""

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__(config)
        self.observation_space = gym.spaces.Dict(
            {"action_mask": gym.spaces.Box(0.0, 1.0, (self.action_space.n,)), "observations": self.observation_space}
        )

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        obs, info = super().reset(seed=seed, options=options)
        return self._masked(obs), info

    def step(self, action: int) -> tuple[Any, Any, bool, bool, dict]:
        if not self.valid[action]:
            raise ValueError(f"invalid action {action}")
        obs, reward, terminated, truncated, info = super().step(action)
        return self._masked(obs), reward, terminated, truncated, info

    def _masked(self, obs: dict[str, Any]) -> dict[str, Any]:
        self.valid = np.round(obs["action_mask"])
        self.valid[0] = 1.0  # one action always legal
        return {**obs, "action_mask": self.valid}


class Ray29MaskingModule(PPOTorchRLModule):
    """RLlib 2.9's action_masking_rlm, written as its example is: the config's Dict narrowed, the logits masked."""

    seen_space: gym.Space[Any] | None = None

    def __init__(self, config: RLModuleConfig) -> None:
        Ray29MaskingModule.seen_space = config.observation_space
        config.observation_space = config.observation_space["observations"]
        super().__init__(config)

    def _forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self._masked(super()._forward_inference, batch)

    def _forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self._masked(super()._forward_exploration, batch)

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self._masked(super()._forward_train, batch)

    @staticmethod
    def _masked(forward: Any, batch: dict[str, Any]) -> dict[str, Any]:
        mask = batch[SampleBatch.OBS]["action_mask"]
        batch[SampleBatch.OBS] = batch[SampleBatch.OBS]["observations"]
        out = forward(batch)
        out[SampleBatch.ACTION_DIST_INPUTS] = out[SampleBatch.ACTION_DIST_INPUTS] + torch.clamp(torch.log(mask), min=-3.4e38)
        return out


def test_a_ray_2_9_module_gets_the_env_s_dict_and_nested_observations_and_never_acts_illegally(make_algo) -> None:
    env_config = {"action_space": gym.spaces.Discrete(20), "observation_space": gym.spaces.Box(-1.0, 1.0, (5,))}
    config = (
        corral.get_config("PPO")
        .environment(MaskedRandomEnv, env_config=env_config)
        .rl_module(rl_module_spec=corral.core.SingleAgentRLModuleSpec(module_class=Ray29MaskingModule))
        .training(train_batch_size=200, minibatch_size=100, num_epochs=2)
        .debugging(seed=0)
    )
    algo = make_algo(config)
    assert isinstance(Ray29MaskingModule.seen_space, gym.spaces.Dict), "RLlib 2.9 gave the env's own space"
    for _ in range(2):
        result = algo.train()  # an illegal action raises in the env
    assert result["num_env_steps_sampled"] >= 400 and np.isfinite(result["episode_reward_mean"])


def test_the_module_builds_rllib_s_default_networks_from_model_config() -> None:
    space, actions = gym.spaces.Box(-1.0, 1.0, (3,)), gym.spaces.Discrete(4)
    module = PPOTorchRLModule(observation_space=space, action_space=actions, model_config={"fcnet_hiddens": [8]})
    out = module.forward_train({SampleBatch.OBS: torch.zeros(5, 3)})
    assert out[SampleBatch.ACTION_DIST_INPUTS].shape == (5, 4) and out[SampleBatch.VF_PREDS].shape == (5,)
    assert set(module.forward_inference({SampleBatch.OBS: torch.zeros(2, 3)})) == {SampleBatch.ACTION_DIST_INPUTS}
    assert module.critic_encoder is not module.actor_encoder
    shared = PPOTorchRLModule(observation_space=space, action_space=actions, model_config={"vf_share_layers": True})
    assert shared.critic_encoder is shared.actor_encoder
    with pytest.raises(ConfigError, match=r"feed-forward networks; for a recurrent PPO"):
        PPOTorchRLModule(observation_space=space, action_space=actions, model_config={"use_lstm": True})


def test_a_random_env_subclass_s_own_space_is_what_it_draws_from() -> None:
    env = MaskedRandomEnv({"action_space": gym.spaces.Discrete(3)})
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains({**obs, "action_mask": obs["action_mask"].astype(np.float32)})
