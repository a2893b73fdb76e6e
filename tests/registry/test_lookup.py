"""Looking plugins up: case-insensitive, cached, with errors that say what to do."""

from __future__ import annotations

import sys

import pytest

import corral.registry as registry
from corral.errors import PluginLoadError, UnknownAlgorithmError

from .conftest import ours


def test_lookup_ignores_case_and_caches_the_class(plugins):
    plugins.add_algorithm_dist("fakeplugin", "1.2.3", "fake_case_pkg", "FastPPO")

    cls = registry.get_algorithm("fastppo")

    assert cls.__name__ == "FastPPO"
    assert registry.get_algorithm("FASTPPO") is cls
    assert registry.get_algorithm("FastPPO", dist="fakeplugin") is cls


def test_get_config_returns_the_algorithms_default_config(plugins):
    plugins.add_algorithm_dist("fakeplugin", "1.2.3", "fake_cfg_pkg", "Configured")

    assert registry.get_config("configured") == {"algorithm": "Configured"}


def test_unknown_name_lists_installed_algorithms_and_suggests_the_closest(plugins):
    plugins.add_algorithm_dist("fakeplugin", "1.2.3", "fake_unknown_pkg", "Rainbow", "Reinforce")

    with pytest.raises(UnknownAlgorithmError) as caught:
        registry.get_algorithm("Rainbw")

    message = str(caught.value)
    assert "Unknown algorithm 'Rainbw'" in message
    assert "Rainbow" in message and "Reinforce" in message
    assert "Did you mean 'Rainbow'?" in message


def test_broken_plugin_is_isolated_and_reported(plugins, tmp_path):
    attempts = tmp_path / "attempts"
    plugins.add_dist(
        "brokenplugin",
        "0.4.0",
        entry_points={"corral.algorithms": {"Broken": "fake_broken_pkg:Broken"}},
        modules={
            "fake_broken_pkg": f"""
                with open({str(attempts)!r}, "a") as f:
                    f.write("x")
                raise RuntimeError("cannot find libfoo.so\\nsecond line")
            """
        },
    )
    plugins.add_algorithm_dist("fakeplugin", "1.2.3", "fake_fine_pkg", "Fine")

    with pytest.raises(PluginLoadError) as caught:
        registry.get_algorithm("broken")

    message = str(caught.value)
    assert "brokenplugin 0.4.0" in message
    assert "Broken = fake_broken_pkg:Broken" in message
    assert "RuntimeError: cannot find libfoo.so" in message
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert registry.get_algorithm("Fine").__name__ == "Fine"
    [broken] = ours(registry.list_algorithms(), "brokenplugin")
    assert (broken.status, broken.error) == ("broken", "RuntimeError: cannot find libfoo.so")
    # The failure is remembered: a second lookup reports it without importing again.
    with pytest.raises(PluginLoadError, match=r"cannot find libfoo\.so"):
        registry.get_algorithm("Broken")
    assert attempts.read_text() == "x"


def test_failure_is_remembered_for_listing_after_a_failed_lookup(plugins):
    plugins.add_dist(
        "missingattr",
        "1.0",
        entry_points={"corral.algorithms": {"Ghost": "fake_ghost_pkg:Ghost"}},
        modules={"fake_ghost_pkg": "x = 1\n"},
    )

    with pytest.raises(PluginLoadError, match="AttributeError"):
        registry.get_algorithm("Ghost")

    [ghost] = ours(registry.list_algorithms(), "missingattr")
    assert ghost.status == "broken"
    assert ghost.error.startswith("AttributeError")


def test_entry_point_that_is_not_a_class_is_rejected(plugins):
    plugins.add_dist(
        "oddplugin",
        "1.0",
        entry_points={"corral.algorithms": {"Odd": "fake_odd_pkg:odd"}},
        modules={"fake_odd_pkg": "odd = 42\n"},
    )

    with pytest.raises(PluginLoadError) as caught:
        registry.get_algorithm("Odd")

    message = str(caught.value)
    assert "expected a class" in message and "int 42" in message
    assert "oddplugin" in message
    assert ours(registry.list_algorithms(), "oddplugin")[0].status == "broken"


def test_entry_point_class_that_is_not_an_algorithm_is_rejected(plugins):
    plugins.add_dist(
        "notalgo",
        "1.0",
        entry_points={"corral.algorithms": {"Plain": "fake_plain_pkg:Plain"}},
        modules={"fake_plain_pkg": "class Plain:\n    pass\n"},
    )

    with pytest.raises(PluginLoadError, match="must subclass corral's Algorithm"):
        registry.get_algorithm("Plain")


def test_dist_must_provide_the_name(plugins):
    plugins.add_algorithm_dist("fakeplugin", "1.2.3", "fake_dist_pkg", "Chosen")
    plugins.add_algorithm_dist("otherplugin", "2.0", "fake_other_pkg", "Unrelated")

    with pytest.raises(UnknownAlgorithmError) as caught:
        registry.get_algorithm("Chosen", dist="otherplugin")

    assert "'otherplugin' does not provide" in str(caught.value)
    assert "fakeplugin 1.2.3" in str(caught.value)


def test_names_must_be_strings(plugins):
    with pytest.raises(TypeError, match="must be a string"):
        registry.get_algorithm(None)  # type: ignore[arg-type]


def test_listing_is_sorted_case_insensitively(plugins):
    plugins.add_algorithm_dist("fakeplugin", "1.2.3", "fake_sort_pkg", "beta", "Alpha", "Gamma")

    assert [i.name for i in ours(registry.list_algorithms(), "fakeplugin")] == ["Alpha", "beta", "Gamma"]
    assert "fake_sort_pkg" not in sys.modules
