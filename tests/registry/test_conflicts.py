"""Two distributions claiming one name, and plugins the user blocked."""

from __future__ import annotations

import sys

import pytest

import corral.registry as registry
from corral.errors import PluginLoadError

from .conftest import ours


def test_same_name_from_two_distributions_is_a_conflict_naming_both(plugins):
    plugins.add_algorithm_dist("fakeplugin", "1.2.3", "fake_dup_a", "Dup")
    plugins.add_algorithm_dist("other-plugin", "2.0", "fake_dup_b", "DUP")

    infos = ours(registry.list_algorithms(), "fakeplugin", "other-plugin")
    assert [(i.dist, i.status) for i in infos] == [
        ("fakeplugin", "conflict"),
        ("other-plugin", "conflict"),
    ]
    assert all("fakeplugin 1.2.3" in i.error and "other-plugin 2.0" in i.error for i in infos)

    with pytest.raises(PluginLoadError) as caught:
        registry.get_algorithm("dup")

    message = str(caught.value)
    assert "fakeplugin" in message and "other-plugin" in message
    assert 'dist="' in message
    assert "fake_dup_a" not in sys.modules and "fake_dup_b" not in sys.modules


def test_dist_chooses_one_of_the_conflicting_plugins(plugins):
    plugins.add_algorithm_dist("fakeplugin", "1.2.3", "fake_pick_a", "Pick")
    plugins.add_algorithm_dist("other-plugin", "2.0", "fake_pick_b", "Pick")

    chosen = registry.get_algorithm("pick", dist="Other_Plugin")  # any spelling of the name

    assert chosen.__module__ == "fake_pick_b"
    assert registry.get_algorithm("Pick", dist="fakeplugin").__module__ == "fake_pick_a"


def test_overriding_corrals_builtin_needs_an_explicit_dist(plugins):
    plugins.add_algorithm_dist("corral", "0.1.0", "fake_builtin_pkg", "Builtin")
    plugins.add_algorithm_dist("corral-fastbuiltin", "0.2.0", "fake_fast_pkg", "Builtin")

    with pytest.raises(PluginLoadError) as caught:
        registry.get_algorithm("Builtin")

    assert "corral 0.1.0" in str(caught.value) and "corral-fastbuiltin 0.2.0" in str(caught.value)
    assert 'dist="corral-fastbuiltin"' in str(caught.value)
    assert registry.get_algorithm("Builtin", dist="corral-fastbuiltin").__module__ == "fake_fast_pkg"
    assert registry.get_algorithm("Builtin", dist="corral").__module__ == "fake_builtin_pkg"


def test_disabled_plugins_are_blocked_and_never_imported(plugins, monkeypatch):
    plugins.add_dist(
        "fakeplugin",
        "1.2.3",
        entry_points={"corral.algorithms": {"Crashy": "fake_block_pkg:Crashy", "Other": "fake_block_pkg:Other"}},
        modules={"fake_block_pkg": "raise SystemError('must never be imported')\n"},
    )
    plugins.add_algorithm_dist("keptplugin", "1.0", "fake_kept_pkg", "Kept")
    monkeypatch.setenv(registry.DISABLE_ENV_VAR, " crashy ,OTHER,, ")
    registry.refresh()

    status = {i.name: i.status for i in ours(registry.list_algorithms(), "fakeplugin", "keptplugin")}
    assert status == {"Crashy": "blocked", "Other": "blocked", "Kept": "not loaded"}
    with pytest.raises(PluginLoadError, match="blocked by CORRAL_DISABLE_PLUGINS"):
        registry.get_algorithm("Crashy")
    with pytest.raises(PluginLoadError, match="blocked by CORRAL_DISABLE_PLUGINS"):
        registry.get_algorithm("crashy", dist="fakeplugin")
    assert registry.get_algorithm("Kept").__name__ == "Kept"
    assert "fake_block_pkg" not in sys.modules


def test_blocking_a_conflicting_name_blocks_every_provider(plugins, monkeypatch):
    plugins.add_algorithm_dist("fakeplugin", "1.2.3", "fake_bc_a", "Clash")
    plugins.add_algorithm_dist("otherplugin", "2.0", "fake_bc_b", "Clash")
    monkeypatch.setenv(registry.DISABLE_ENV_VAR, "clash")
    registry.refresh()

    assert {i.status for i in ours(registry.list_algorithms(), "fakeplugin", "otherplugin")} == {"blocked"}
    with pytest.raises(PluginLoadError, match="blocked"):
        registry.get_algorithm("Clash")


def test_disable_variable_is_read_when_the_registry_is_rebuilt(plugins, monkeypatch):
    plugins.add_algorithm_dist("fakeplugin", "1.2.3", "fake_reread_pkg", "Later")
    assert ours(registry.list_algorithms(), "fakeplugin")[0].status == "not loaded"

    monkeypatch.setenv(registry.DISABLE_ENV_VAR, "later")
    assert ours(registry.list_algorithms(), "fakeplugin")[0].status == "not loaded"  # cached
    registry.refresh()
    assert ours(registry.list_algorithms(), "fakeplugin")[0].status == "blocked"
