"""Plugins written for another corral are reported as incompatible; in-process registrations shadow installed ones."""

from __future__ import annotations

import pytest

import corral.registry as registry
from corral.errors import PluginLoadError
from corral.plugin_api import PLUGIN_API_VERSION, api_problem
from corral.registry.discovery import corral_requirement_problem

from .conftest import ours


def test_a_corral_requirement_that_excludes_this_corral_is_incompatible_without_importing(plugins):
    plugins.add_dist(
        "corral-future",
        "2.0",
        entry_points={"corral.algorithms": {"Future": "corral_future:Future"}},
        modules={"corral_future": "raise RuntimeError('must not be imported')"},
        requires=("corral>=99",),
    )
    (info,) = ours(registry.list_algorithms(), "corral-future")
    assert info.status == "incompatible"
    assert "requires corral>=99" in info.error and "is installed" in info.error
    with pytest.raises(PluginLoadError, match=r"corral-future 2.0.*incompatible.*requires corral>=99"):
        registry.get_algorithm("Future")


@pytest.mark.parametrize(
    "requires, problem",
    [
        (["corral>=0.1"], None),
        (["numpy", "corral<0.1"], "requires corral<0.1"),
        (['corral>=99; extra == "dev"'], None),  # only for an extra
        (["not a requirement ###"], None),
    ],
)
def test_requirement_lines_are_read_as_pip_would(requires, problem):
    found = corral_requirement_problem(requires, "0.1.0")
    assert (found is None) if problem is None else (problem in found)


def test_a_plugin_class_written_for_another_plugin_api_is_incompatible(plugins):
    source = (
        f"class Next:\n    corral_api = {PLUGIN_API_VERSION + 1}\n\n"
        "    @classmethod\n    def get_default_config(cls):\n        return {}\n"
    )
    plugins.add_dist(
        "corral-next", "1.0", entry_points={"corral.algorithms": {"Next": "corral_next:Next"}}, modules={"corral_next": source}
    )
    with pytest.raises(PluginLoadError, match=rf"corral plugin API {PLUGIN_API_VERSION + 1}.*upgrade corral"):
        registry.get_algorithm("Next")
    (info,) = ours(registry.list_algorithms(), "corral-next")
    assert info.status == "incompatible"


def test_api_problem_accepts_the_current_api_and_plugins_that_do_not_say():
    class Current:
        corral_api = PLUGIN_API_VERSION

    class Silent:
        pass

    class Ancient:
        corral_api = 0

    assert api_problem(Current) is None and api_problem(Silent) is None
    assert "install a release of the plugin written for it" in api_problem(Ancient)


def test_check_imports_each_plugin_and_reports_ok_or_broken(plugins):
    plugins.add_algorithm_dist("corral-good", "1.0", "corral_good", "Good")
    plugins.add_dist(
        "corral-bad",
        "1.0",
        entry_points={"corral.algorithms": {"Bad": "corral_bad:Bad"}},
        modules={"corral_bad": "raise ImportError('needs libfoo\\nmore detail')"},
    )
    before = {i.name: i.status for i in ours(registry.list_algorithms(), "corral-good", "corral-bad")}
    assert before == {"Good": "not loaded", "Bad": "not loaded"}
    after = {i.name: i for i in ours(registry.list_algorithms(check=True), "corral-good", "corral-bad")}
    assert after["Good"].status == "ok"
    assert after["Bad"].status == "broken" and after["Bad"].error == "ImportError: needs libfoo"


def test_an_in_process_registration_shadows_the_installed_plugin(plugins):
    plugins.add_algorithm_dist("corral-orig", "1.0", "corral_orig", "Orig")

    class Replacement:
        @classmethod
        def get_default_config(cls):
            return {}

    registry.register_algorithm("Orig", Replacement)
    infos = {i.dist: i for i in registry.list_algorithms() if i.name == "Orig"}
    assert infos["corral-orig"].status == "shadowed"
    assert "Replacement" in infos["corral-orig"].error
    assert infos[registry.IN_PROCESS].status == "ok"
    assert registry.get_algorithm("Orig") is Replacement


def test_registering_a_class_written_for_another_api_is_refused(plugins):
    class Next:
        corral_api = PLUGIN_API_VERSION + 1

        @classmethod
        def get_default_config(cls):
            return {}

    with pytest.raises(PluginLoadError, match="upgrade corral"):
        registry.register_algorithm("Next", Next)
