"""The offline integration answers the core's offline seams; without it, offline data asked for is a ConfigError."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import gymnasium as gym
import pytest

import corral
import corral.registry as registry
from corral import ConfigError
from corral.core.contracts.integration_specs import integration
from corral.core.contracts.integrations import integration_hooks
from corral.core.sampling.offline_output import experience_output_for
from corral.core.training.offline_input import experience_input_for

DATA = Path(corral.__file__).parent / "tuned_examples" / "data"
MOVED = (
    "experience_reader",
    "experience_input",
    "experience_output",
    "input_files",
    "input_check",
    "input_columns",
    "ray_data_input",
)


@pytest.fixture
def without_offline(disable_plugins: Callable[[str], None]) -> None:
    """The user's kill switch for the offline integration: as if it were not installed."""
    disable_plugins("offline")


@pytest.mark.parametrize("name", MOVED)
def test_the_old_path_gives_the_same_module_and_classes(name: str) -> None:
    new = importlib.import_module(f"corral.integrations.offline.{name}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        old = importlib.import_module(f"corral.core.persistence.{name}")
    assert old is new
    for attribute, value in vars(new).items():
        if isinstance(value, type) and value.__module__ == new.__name__:
            assert getattr(old, attribute) is value


def test_the_integration_answers_both_seams_after_its_modules_load(disable_plugins: Any) -> None:
    """A submodule named as a seam, once imported, must not take the place of the seam's implementation."""
    for name in MOVED:
        importlib.import_module(f"corral.integrations.offline.{name}")
    assert any(info.name == "offline" for info, _ in registry.get_integrations())
    hooks = integration_hooks()
    assert hooks.experience_input.get_hookimpls()
    assert hooks.experience_output.get_hookimpls()


def test_importing_the_integration_imports_no_heavy_library() -> None:
    code = (
        "import sys, corral.integrations.offline; "
        "print(sorted(m for m in ('pyarrow', 'ray', 'corral.integrations.offline.experience_input') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"


def test_the_sampler_alone_and_no_output_ask_no_integration(without_offline: None) -> None:
    config = SimpleNamespace(input_="sampler", output=None)
    assert experience_input_for(config, {}) is None
    assert experience_output_for(config, 0) is None


@pytest.mark.parametrize(
    "offline, option",
    [
        ({"input_": str(DATA / "cartpole_expert.parquet")}, "input_"),
        ({"input_": {"sampler": 0.5, str(DATA / "cartpole_expert.parquet"): 0.5}}, "input_"),
        ({"output": "OUTPUT"}, "output"),
    ],
)
def test_offline_data_without_its_integration_is_refused_before_any_env_is_made(
    without_offline: None, tmp_path: Path, offline: dict[str, Any], option: str
) -> None:
    made: list[int] = []

    def creator(env_config: Any) -> gym.Env:
        made.append(1)
        return gym.make("CartPole-v1")

    corral.register_env("offline-seams-cartpole", creator)
    offline = {k: str(tmp_path / "out") if v == "OUTPUT" else v for k, v in offline.items()}
    config = corral.get_config("BC").environment("offline-seams-cartpole").offline_data(**offline)
    with pytest.raises(ConfigError, match=rf"offline_data\({option}=\.\.\.\) needs corral's offline integration"):
        config.build()
    assert made == []
    assert not (tmp_path / "out").exists()


def test_an_integration_that_does_not_answer_is_refused_by_name(without_offline: None, tmp_path: Path) -> None:
    class Declines:
        @integration(specname="experience_input")
        def no_input(self, config: Any) -> None:
            return None

        @integration(specname="experience_output")
        def no_output(self, config: Any) -> None:
            return None

    registry.register_integration("declines", Declines())
    with pytest.raises(ConfigError, match=r"offline_data\(input_=\.\.\.\).*'experience_input'"):
        experience_input_for(SimpleNamespace(input_=str(DATA / "cartpole_expert.parquet")), {})
    with pytest.raises(ConfigError, match=r"offline_data\(output=\.\.\.\).*'experience_output'"):
        experience_output_for(SimpleNamespace(output=str(tmp_path)), 1)
