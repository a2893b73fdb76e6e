"""In-process registration, for tests and notebooks."""

from __future__ import annotations

import pytest

import corral.registry as registry
from corral.errors import PluginLoadError, UnknownAlgorithmError

from .conftest import ours


class FakeAlgorithm:
    """Just enough of an Algorithm for the registry."""

    @classmethod
    def get_default_config(cls) -> dict:
        return {"lr": 0.1}


def test_registered_algorithm_is_found_case_insensitively_and_listed(plugins):
    registry.register_algorithm("MyAlgo", FakeAlgorithm)

    assert registry.get_algorithm("myalgo") is FakeAlgorithm
    assert registry.get_config("MYALGO") == {"lr": 0.1}
    [info] = ours(registry.list_algorithms(), registry.IN_PROCESS)
    assert (info.name, info.status, info.error) == ("MyAlgo", "ok", None)
    assert info.value.endswith(":FakeAlgorithm")


def test_registration_takes_precedence_over_an_installed_plugin(plugins):
    plugins.add_algorithm_dist("fakeplugin", "1.2.3", "fake_shadow_pkg", "Shadowed")
    plugins.add_algorithm_dist("otherplugin", "2.0", "fake_shadow_b", "Shadowed")

    registry.register_algorithm("shadowed", FakeAlgorithm)

    assert registry.get_algorithm("Shadowed") is FakeAlgorithm  # no conflict error
    assert registry.get_algorithm("Shadowed", dist=registry.IN_PROCESS) is FakeAlgorithm
    assert registry.get_algorithm("Shadowed", dist="fakeplugin").__module__ == "fake_shadow_pkg"


def test_registering_again_replaces(plugins):
    class Second(FakeAlgorithm):
        pass

    registry.register_algorithm("Again", FakeAlgorithm)
    registry.register_algorithm("AGAIN", Second)

    assert registry.get_algorithm("again") is Second
    assert len(ours(registry.list_algorithms(), registry.IN_PROCESS)) == 1


def test_refresh_forgets_registrations(plugins):
    registry.register_algorithm("Temporary", FakeAlgorithm)
    registry.refresh()

    with pytest.raises(UnknownAlgorithmError):
        registry.get_algorithm("Temporary")


@pytest.mark.parametrize(
    ("name", "cls", "error", "match"),
    [
        ("", FakeAlgorithm, ValueError, "must not be empty"),
        ("   ", FakeAlgorithm, ValueError, "must not be empty"),
        (42, FakeAlgorithm, TypeError, "must be a string"),
        ("Inst", FakeAlgorithm(), TypeError, "expected a class"),
        ("Func", lambda: None, TypeError, "expected a class"),
        ("Plain", type("Plain", (), {}), PluginLoadError, "must subclass corral's Algorithm"),
    ],
)
def test_register_algorithm_validates_its_input(plugins, name, cls, error, match):
    with pytest.raises(error, match=match):
        registry.register_algorithm(name, cls)
    assert not ours(registry.list_algorithms(), registry.IN_PROCESS)


def test_register_exploration_needs_a_class_but_no_algorithm_api(plugins):
    class Noise:
        pass

    registry.register_exploration("MyNoise", Noise)

    assert registry.get_exploration("mynoise") is Noise
    with pytest.raises(TypeError, match="expected a class"):
        registry.register_exploration("Bad", Noise())
