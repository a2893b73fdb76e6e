"""The seams integrations plug into: found through the registry, asked through one pluggy manager."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import corral.registry as registry
from corral.core.contracts.config import AlgorithmConfig
from corral.core.contracts.integration_specs import integration
from corral.core.contracts.integrations import integration_hooks


def test_the_installed_integrations_are_listed_by_entry_point() -> None:
    names = {info.name for info in registry.list_integrations()}
    assert {"atari", "old_gym", "rendering", "offline", "estimation"} <= names


def test_an_integration_registered_in_process_answers_its_seam(disable_plugins: Any) -> None:
    config = AlgorithmConfig().environment("MyGame")

    class ClipsMyGame:
        @integration
        def default_clip_rewards(self, config: AlgorithmConfig) -> bool | None:
            return True if config.env == "MyGame" else None

    assert integration_hooks().default_clip_rewards(config=config) is None  # no installed integration knows MyGame
    registry.register_integration("clips-my-game", ClipsMyGame())
    assert integration_hooks().default_clip_rewards(config=config) is True
    assert integration_hooks().default_clip_rewards(config=AlgorithmConfig().environment("CartPole-v1")) is None


def test_a_refresh_forgets_an_integration_registered_in_process(disable_plugins: Any) -> None:
    class Adapts:
        @integration
        def adapted_sub_environment(self, env: object) -> str:
            return "adapted"

    registry.register_integration("adapts", Adapts())
    assert integration_hooks().adapted_sub_environment(env=object(), config=None) == "adapted"
    registry.refresh()
    assert integration_hooks().adapted_sub_environment(env=object(), config=SimpleNamespace(auto_wrap_old_gym_envs=False)) is None
