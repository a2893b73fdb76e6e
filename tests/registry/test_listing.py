"""Listing plugins reads metadata only: nothing is imported until looked up."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import corral.registry as registry
from corral.registry.descriptions import static_description

from .conftest import REPO_ROOT, ours


def test_listing_describes_entry_points_without_importing_them(plugins, tmp_path):
    marker = tmp_path / "imported"
    plugins.add_dist(
        "fakeplugin",
        "1.2.3",
        entry_points={"corral.algorithms": {"Zeta": "fake_list_pkg:Zeta", "Alpha": "fake_list_pkg:Alpha"}},
        modules={"fake_list_pkg": f"open({str(marker)!r}, 'w').close()\nclass Alpha: pass\nclass Zeta: pass\n"},
    )

    infos = ours(registry.list_algorithms(), "fakeplugin")

    assert not marker.exists()
    assert "fake_list_pkg" not in sys.modules
    group, dist, version = "corral.algorithms", "fakeplugin", "1.2.3"
    assert infos == [
        registry.PluginInfo("Alpha", group, dist, version, "fake_list_pkg:Alpha", "not loaded"),
        registry.PluginInfo("Zeta", group, dist, version, "fake_list_pkg:Zeta", "not loaded"),
    ]


def test_status_becomes_ok_after_lookup(plugins):
    plugins.add_algorithm_dist("fakeplugin", "1.2.3", "fake_ok_pkg", "Loaded", "Untouched")

    registry.get_algorithm("Loaded")

    status = {i.name: i.status for i in ours(registry.list_algorithms(), "fakeplugin")}
    assert status == {"Loaded": "ok", "Untouched": "not loaded"}


def test_same_distribution_seen_twice_is_one_plugin_not_a_conflict(plugins, tmp_path, monkeypatch):
    plugins.add_algorithm_dist("fakeplugin", "1.2.3", "fake_twice_pkg", "Twice")
    second = tmp_path / "second"
    plugins.add_dist(
        "fakeplugin",
        "1.2.3",
        entry_points={"corral.algorithms": {"Twice": "fake_twice_pkg:Twice"}},
        root=second,
    )
    monkeypatch.syspath_prepend(str(second))
    registry.refresh()

    infos = ours(registry.list_algorithms(), "fakeplugin")

    assert [(i.name, i.status) for i in infos] == [("Twice", "not loaded")]
    assert registry.get_algorithm("twice").__name__ == "Twice"


def test_discovery_is_cached_until_refresh(plugins):
    assert not ours(registry.list_algorithms(), "lateplugin")
    plugins.add_algorithm_dist("lateplugin", "0.1", "fake_late_pkg", "Late")

    assert not ours(registry.list_algorithms(), "lateplugin")
    registry.refresh()
    assert [i.name for i in ours(registry.list_algorithms(), "lateplugin")] == ["Late"]


def test_import_and_listing_load_no_heavy_library_in_a_fresh_process(plugins):
    # A realistic plugin imports torch at its top: listing must not run that.
    plugins.add_dist(
        "heavyplugin",
        "2.0",
        entry_points={
            "corral.algorithms": {"Heavy": "fake_heavy_pkg:Heavy"},
            "corral.explorations": {"HeavyNoise": "fake_heavy_pkg:Noise"},
            "corral.hooks": {"heavy_logger": "fake_heavy_pkg"},
        },
        modules={"fake_heavy_pkg": "import torch, gymnasium\nclass Heavy: pass\nclass Noise: pass\n"},
    )
    code = textwrap.dedent(
        """
        import json, sys
        import corral.registry as r
        names = [i.name for i in r.list_algorithms() + r.list_explorations() + r.list_hook_plugins()]
        heavy = sorted({"torch", "gymnasium", "ray", "fake_heavy_pkg"} & set(sys.modules))
        print(json.dumps({"names": names, "heavy": heavy}))
        """
    )
    env = dict(os.environ)
    env.pop(registry.DISABLE_ENV_VAR, None)
    paths = [str(plugins.root), str(REPO_ROOT), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)

    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)

    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert {"Heavy", "HeavyNoise", "heavy_logger"} <= set(result["names"])
    assert result["heavy"] == []


def test_a_description_is_read_from_the_source_without_importing_it_re_exports_followed(plugins, tmp_path):
    marker = tmp_path / "imported"
    touch = f"open({str(marker)!r}, 'w').close()\n"
    plugins.add_dist(
        "describedplugin",
        entry_points={"corral.algorithms": {"Beta": "fake_described:Beta", "Bare": "fake_described.algo:Bare"}},
        modules={
            "fake_described": '"""The package."""\n' + touch + "from .algo import Algo as Beta\n",
            "fake_described.algo": touch
            + 'class Algo:\n    """Beta does the thing.\n\n    More words."""\n\n\nclass Bare:\n    pass\n',
        },
    )
    assert static_description("fake_described:Beta") == "Beta does the thing."  # re-exported under another name
    assert static_description("fake_described") == "The package."  # a module's entry point (hook plugins)
    assert static_description("fake_described.algo:Bare") is None  # no docstring
    assert static_description("fake_described:Missing") is None
    assert static_description("no_such_package.mod:X") is None
    assert not marker.exists() and "fake_described" not in sys.modules
