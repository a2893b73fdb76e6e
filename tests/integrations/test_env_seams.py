"""The environment seams: Atari, old gym and rendering plug in there, and so can anyone's integration."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import corral
import corral.registry as registry
from corral.core.contracts.config import AlgorithmConfig
from corral.core.contracts.integration_specs import integration
from corral.errors import ConfigError


def ppo(**environment: Any) -> AlgorithmConfig:
    return (
        corral.get_config("PPO")
        .environment("CartPole-v1", **environment)
        .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=20)
        .training(train_batch_size=40, minibatch_size=20, num_epochs=1)
        .debugging(seed=0)
    )


def test_an_integration_makes_the_sub_environments_of_an_id_it_claims(disable_plugins: Any, make_algo: Any) -> None:
    made: list[dict[str, Any]] = []

    class ShortCartPole:
        @integration
        def sub_environment_maker(self, env_id: str) -> Callable[[dict[str, Any]], gym.Env] | None:
            def make(kwargs: dict[str, Any]) -> gym.Env:
                made.append(kwargs)
                return gym.make("CartPole-v1", max_episode_steps=5, **kwargs)

            return make if env_id == "CartPole-v1" else None

    registry.register_integration("short-cartpole", ShortCartPole())
    result = make_algo(ppo()).train()
    assert len(made) == 2  # each sub-environment, made through the seam (no native vector env)
    assert result["episode_len_mean"] <= 5


def test_an_integration_s_default_clips_the_rewards_where_clip_rewards_is_none(disable_plugins: Any, make_algo: Any) -> None:
    class ClipsPendulum:  # as Atari's integration clips ale-py games' rewards, RLlib's default
        @integration
        def default_clip_rewards(self, config: AlgorithmConfig) -> bool | None:
            return True if config.env == "Pendulum-v1" else None

    registry.register_integration("clips-pendulum", ClipsPendulum())
    for clip_rewards, clipped in ((None, True), (False, False)):
        config = ppo(clip_rewards=clip_rewards).environment("Pendulum-v1")
        rewards = make_algo(config).sample().policy_batches["default_policy"]["rewards"]
        assert (set(np.unique(rewards)) <= {-1.0, 0.0}) is clipped


def test_is_atari_without_the_atari_integration_is_refused_before_any_env_is_made(disable_plugins: Any, make_algo: Any) -> None:
    disable_plugins("atari")
    with pytest.raises(ConfigError, match=r"is_atari=True wraps ale-py games.*atari integration did not load"):
        make_algo(ppo(is_atari=True))


def test_render_env_without_the_rendering_integration_is_refused(disable_plugins: Any, make_algo: Any) -> None:
    disable_plugins("rendering")
    with pytest.raises(ConfigError, match="rendering integration, which did not load"):
        make_algo(ppo(render_env=True))
