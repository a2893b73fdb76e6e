"""Explorations and hook plugins follow the same rules as algorithms."""

from __future__ import annotations

import logging
import sys

import pytest

import corral.registry as registry
from corral.errors import PluginLoadError, UnknownAlgorithmError, UnknownPluginError

from .conftest import ours


def test_explorations_are_listed_and_loaded_by_name(plugins):
    plugins.add_dist(
        "noiseplugin",
        "3.1",
        entry_points={"corral.explorations": {"PinkNoise": "fake_noise_pkg:PinkNoise"}},
        modules={"fake_noise_pkg": "class PinkNoise:\n    pass\n"},
    )

    [info] = ours(registry.list_explorations(), "noiseplugin")
    assert (info.name, info.group, info.status) == ("PinkNoise", "corral.explorations", "not loaded")
    assert registry.get_exploration("pinknoise").__name__ == "PinkNoise"
    # Explorations are not algorithms: each group only sees its own entry points.
    assert not ours(registry.list_algorithms(), "noiseplugin")


def test_unknown_exploration_is_an_unknown_plugin_not_an_unknown_algorithm(plugins):
    plugins.add_dist(
        "noiseplugin",
        "3.1",
        entry_points={"corral.explorations": {"PinkNoise": "fake_noise2_pkg:PinkNoise"}},
        modules={"fake_noise2_pkg": "class PinkNoise:\n    pass\n"},
    )

    with pytest.raises(UnknownPluginError) as caught:
        registry.get_exploration("PinkNoize")

    assert not isinstance(caught.value, UnknownAlgorithmError)
    assert "Unknown exploration 'PinkNoize'" in str(caught.value)
    assert "Did you mean 'PinkNoise'?" in str(caught.value)


def test_exploration_entry_point_must_be_a_class(plugins):
    plugins.add_dist(
        "noiseplugin",
        "3.1",
        entry_points={"corral.explorations": {"Func": "fake_noise3_pkg:make"}},
        modules={"fake_noise3_pkg": "def make():\n    pass\n"},
    )

    with pytest.raises(PluginLoadError, match="expected a class, got function"):
        registry.get_exploration("Func")


def test_hook_plugins_load_with_failures_isolated(plugins, caplog, monkeypatch):
    plugins.add_dist(
        "hookplugin",
        "0.9",
        entry_points={
            "corral.hooks": {
                "logger": "fake_hook_pkg",
                "broken_logger": "fake_hook_broken",
                "blocked_logger": "fake_hook_blocked",
            }
        },
        modules={
            "fake_hook_pkg": "def on_train_result(result):\n    pass\n",
            "fake_hook_broken": "raise ImportError('no module named wandb')\n",
            "fake_hook_blocked": "raise SystemError('must never be imported')\n",
        },
    )
    plugins.add_dist("otherhooks", "1.0", entry_points={"corral.hooks": {"LOGGER": "fake_hook_pkg"}})
    plugins.add_dist("morehooks", "1.0", entry_points={"corral.hooks": {"metrics": "fake_hook_pkg"}})
    monkeypatch.setenv(registry.DISABLE_ENV_VAR, "blocked_logger")
    registry.refresh()

    with caplog.at_level(logging.WARNING, logger="corral.registry"):
        loaded = registry.get_hook_plugins()  # never raises

    loaded = [
        (info.name, info.status, plugin.__name__) for info, plugin in loaded if info.dist != "corral"
    ]  # corral's own loggers load too
    assert loaded == [("metrics", "ok", "fake_hook_pkg")]
    status = {(i.dist, i.name): (i.status, i.error) for i in registry.list_hook_plugins()}
    assert status[("hookplugin", "broken_logger")] == ("broken", "ImportError: no module named wandb")
    assert status[("hookplugin", "blocked_logger")] == ("blocked", None)
    assert status[("hookplugin", "logger")][0] == "conflict"
    assert status[("otherhooks", "LOGGER")][0] == "conflict"
    assert "no module named wandb" in caplog.text
    assert "fake_hook_blocked" not in sys.modules


def test_unknown_group_is_rejected(plugins):
    with pytest.raises(ValueError, match="Unknown plugin group"):
        registry.registry_for("corral.nothing")
