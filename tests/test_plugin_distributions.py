"""Plugins as users install them: the example distribution, the scaffold's output, broken neighbours.

Each distribution is installed with pip into a temporary folder (``--target``)
and used from a subprocess with that folder on ``PYTHONPATH``, so nothing is
installed into the environment running the tests.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from corral.scaffold import new_plugin

from .registry.conftest import PluginEnv

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "plugins" / "corral-reinforce"


def pip_install(source: Path, target: Path) -> None:
    """Build and install a distribution into ``target`` (not into this environment)."""
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(source)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr


def run(site: Path, *args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` with ``site`` on the path, as a user with the plugin installed would run it."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    env.pop("COLUMNS", None)
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)


def listed(site: Path, *flags: str) -> dict[str, list[dict]]:
    proc = run(site, "-m", "corral.cli", "list", "--json", *flags)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    by_name: dict[str, list[dict]] = {}
    for entry in data["algorithms"]:
        by_name.setdefault(entry["name"], []).append(entry)
    return by_name


@pytest.fixture(scope="module")
def reinforce_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("reinforce-site")
    pip_install(EXAMPLE, site)
    return site


def test_example_plugin_is_listed_trained_checkpointed_and_restored(reinforce_site: Path, tmp_path: Path) -> None:
    (entry,) = listed(reinforce_site)["REINFORCE"]
    assert (entry["dist"], entry["version"], entry["value"]) == ("corral-reinforce", "0.1.0", "corral_reinforce:REINFORCE")
    (checked,) = listed(reinforce_site, "--check")["REINFORCE"]
    assert checked["status"] == "ok"

    proc = run(
        reinforce_site, "-m", "corral.cli", "train", "--algo", "REINFORCE", "--env", "CartPole-v1",
        "--stop", '{"training_iteration": 2}', "--config", '{"train_batch_size": 256}',
        "--checkpoint-at-end", "--seed", "0", "--storage-path", str(tmp_path),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    checkpoint = re.search(r"^last checkpoint: (\S+)$", proc.stdout, re.MULTILINE).group(1)

    restore = (
        "import sys; from corral import Algorithm; a = Algorithm.from_checkpoint(sys.argv[1]); "
        "print(type(a).__module__, a.iteration)"
    )
    proc = run(reinforce_site, "-c", restore, checkpoint)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["corral_reinforce.algorithm", "2"]
    proc = run(reinforce_site, "-m", "corral.cli", "evaluate", checkpoint, "--episodes", "2")
    assert proc.returncode == 0, proc.stderr


def test_example_plugin_passes_its_own_tests(reinforce_site: Path) -> None:
    proc = run(reinforce_site, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow", "tests", cwd=EXAMPLE)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 passed" in proc.stdout


def test_example_plugin_imports_only_the_public_api() -> None:
    for source in (EXAMPLE / "src").rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "corral":
                assert node.module in ("corral", "corral.core"), f"{source.name} imports from {node.module}"
                private = [a.name for a in node.names if a.name.startswith("_")]
                assert not private, f"{source.name} imports private names {private}"
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith("corral.") for a in node.names), f"{source.name}: {ast.unparse(node)}"


def test_scaffold_output_installs_and_passes_its_own_tests(tmp_path: Path) -> None:
    project = new_plugin("ScaffoldPG", tmp_path / "src")
    site = tmp_path / "site"
    pip_install(project, site)
    proc = run(site, "-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 passed" in proc.stdout
    (entry,) = listed(site, "--check")["ScaffoldPG"]
    assert (entry["dist"], entry["status"]) == ("corral-scaffoldpg", "ok")


def test_broken_and_duplicate_plugins_are_marked_and_the_rest_keep_working(tmp_path: Path) -> None:
    site = tmp_path / "site"
    plugins = PluginEnv(site)
    plugins.add_dist(
        "corral-broken",
        entry_points={"corral.algorithms": {"Broken": "corral_broken:Broken"}},
        modules={"corral_broken": "raise RuntimeError('broken on purpose')"},
    )
    plugins.add_algorithm_dist("corral-fast-a2c", "0.3", "corral_fast_a2c", "A2C")

    algorithms = listed(site, "--check")
    assert [e["status"] for e in algorithms["Broken"]] == ["broken"]
    assert algorithms["Broken"][0]["error"] == "RuntimeError: broken on purpose"
    assert sorted(e["dist"] for e in algorithms["A2C"]) == ["corral", "corral-fast-a2c"]
    assert {e["status"] for e in algorithms["A2C"]} == {"conflict"}
    assert algorithms["PPO"][0]["status"] == "ok"

    table = run(site, "-m", "corral.cli", "list", "--check")
    assert table.returncode == 0, table.stderr
    assert "broken: RuntimeError: broken on purpose" in table.stdout

    small = '{"train_batch_size": 256, "minibatch_size": 64}'
    train = ("-m", "corral.cli", "train", "--env", "CartPole-v1", "--stop", '{"training_iteration": 1}',
             "--config", small, "--storage-path", str(tmp_path / "results"))  # fmt: skip
    assert run(site, *train, "--algo", "PPO").returncode == 0
    broken = run(site, *train, "--algo", "Broken")
    assert broken.returncode == 2
    assert "corral-broken" in broken.stderr and "RuntimeError: broken on purpose" in broken.stderr
    conflict = run(site, *train, "--algo", "A2C")
    assert conflict.returncode == 2 and "corral-fast-a2c" in conflict.stderr and 'dist="corral-fast-a2c"' in conflict.stderr
