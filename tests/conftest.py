"""Shared fixtures: a private results folder per test, a tiny PPO config, the CLI in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# A budget small enough that one train() call takes a fraction of a second.
SMALL_PPO = {"train_batch_size": 256, "minibatch_size": 64, "num_epochs": 1}


@pytest.hookimpl(trylast=True)  # after pytest's tmp_path plugin is configured
def pytest_configure(config: pytest.Config) -> None:
    """Hypothesis keeps caches in ./.hypothesis by default (from collection on): keep them in the session's tmp folder."""
    from hypothesis.configuration import set_hypothesis_home_dir

    set_hypothesis_home_dir(config._tmp_path_factory.mktemp("hypothesis"))  # type: ignore[attr-defined]


@pytest.fixture(autouse=True)
def results_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point ``CORRAL_RESULTS_DIR`` at this test's tmp folder so nothing lands in ~/corral_results."""
    path = tmp_path / "corral_results"
    monkeypatch.setenv("CORRAL_RESULTS_DIR", str(path))
    return path


def small_ppo_config(env: str = "CartPole-v1", seed: int | None = 0, **training: Any) -> Any:
    """A PPOConfig with a tiny budget: 256-step batches, 64-row minibatches, one epoch, 4 envs."""
    from corral.plugins.ppo import PPOConfig

    return (
        PPOConfig()
        .environment(env)
        .env_runners(num_envs_per_env_runner=4)
        .training(**{**SMALL_PPO, **training})
        .debugging(seed=seed)
    )


@pytest.fixture(scope="module")
def ray_on_two_cpus() -> Iterator[None]:
    """A local Ray instance with two CPUs for one test module; corral joins it instead of starting its own.

    A module opts in with ``pytestmark = pytest.mark.usefixtures("ray_on_two_cpus")``.
    """
    import ray

    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False)
    yield
    ray.shutdown()


@pytest.fixture
def ppo_config() -> Any:
    """A fresh small PPO config on CartPole-v1, seed 0."""
    return small_ppo_config()


@pytest.fixture
def make_algo() -> Iterator[Callable[..., Any]]:
    """Build algorithms from configs (or config kwargs) and stop them all at teardown."""
    built: list[Any] = []

    def make(config: Any = None, **kwargs: Any) -> Any:
        algo = (config if config is not None else small_ppo_config(**kwargs)).build()
        built.append(algo)
        return algo

    yield make
    for algo in built:
        algo.stop()


@pytest.fixture
def restored_algos() -> Iterator[list[Any]]:
    """Algorithms a test restores from checkpoints (append them): stopped at teardown."""
    algos: list[Any] = []
    yield algos
    for algo in algos:
        algo.stop()


@pytest.fixture
def run_cli(results_dir: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run ``python -m corral.cli ARGS`` in a subprocess with this test's results folder."""

    def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "CORRAL_RESULTS_DIR": str(results_dir)}
        env.pop("COLUMNS", None)  # the output a pipe gets, as in `corral list | grep`
        return subprocess.run(
            [sys.executable, "-m", "corral.cli", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
        )

    return run
