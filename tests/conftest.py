"""Shared fixtures: a private results folder per test, a tiny PPO config, the CLI in a subprocess."""

from __future__ import annotations

import builtins
import gc
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import gpu_mark
from tests.gpu_mark import pytest_runtest_call  # noqa: F401  (the gpu mark's hook)

# A budget small enough that one train() call takes a fraction of a second.
SMALL_PPO = {"train_batch_size": 256, "minibatch_size": 64, "num_epochs": 1}


def best_return_within(algo: Any, steps: int, goal: float) -> tuple[float, int]:
    """Train until the mean return reaches ``goal`` or ``steps`` env steps are sampled (a learning test's loop).

    Returns:
        The best mean return seen, and the env steps sampled.
    """
    sampled, best = 0, float("-inf")  # Pendulum's returns are negative
    while sampled < steps and best < goal:
        result = algo.train()
        sampled, best = result["num_env_steps_sampled"], max(best, result["episode_reward_mean"])
    return best, sampled


USER_RESULTS = Path("~/corral_results").expanduser()
"""where corral writes when nothing says otherwise; the suite must leave it as it found it"""


REPOSITORY = Path(__file__).resolve().parent.parent
NOT_SOURCE = {".git", ".venv", ".venv-ci", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis", "build"}
"""folders of the repository that tools (not tests) write into"""


def _repository_files() -> dict[str, int]:
    """Every source file of the repository and its modification time: a test must neither add nor change one."""
    files = {}
    for folder, subfolders, names in os.walk(REPOSITORY):
        subfolders[:] = [d for d in subfolders if d not in NOT_SOURCE and not d.endswith(".egg-info")]
        for name in names:
            path = os.path.join(folder, name)
            files[os.path.relpath(path, REPOSITORY)] = os.stat(path).st_mtime_ns
    return files


def _policy_map_folders() -> set[str]:
    """The folders policy maps keep their policies on disk in (each process removes its own)."""
    return {path.name for path in Path(tempfile.gettempdir()).glob("corral-policy-map-*")}


def _user_results() -> tuple[set[str], int]:
    """The entries of ~/corral_results and the folder's modification time (a write then a delete changes it)."""
    if not USER_RESULTS.is_dir():
        return set(), 0
    return set(os.listdir(USER_RESULTS)), USER_RESULTS.stat().st_mtime_ns


@pytest.hookimpl(trylast=True)  # after pytest's tmp_path plugin is configured
def pytest_configure(config: pytest.Config) -> None:
    """Keep the session's writes in its tmp folder, from collection on.

    ``HOME`` points at a folder of the session's for the whole run, so nothing
    that writes under ``~`` (Tune's ``~/ray_results``, matplotlib's cache,
    corral's default results folder) reaches the real home. Hypothesis keeps
    caches in ./.hypothesis by default. ``CORRAL_RESULTS_DIR`` is set for the
    whole session here, before any Ray worker or subprocess starts, so that they
    inherit it; the ``results_dir`` fixture narrows it to each test's own folder
    in this process.
    """
    from hypothesis.configuration import set_hypothesis_home_dir

    tmp = config._tmp_path_factory  # type: ignore[attr-defined]
    set_hypothesis_home_dir(tmp.mktemp("hypothesis"))
    os.environ["HOME"] = str(tmp.mktemp("home"))
    os.environ["CORRAL_RESULTS_DIR"] = str(tmp.mktemp("session_corral_results"))
    # Each process that starts Ray starts its own instance: with two test workers (pytest -n 2), or a CLI run
    # beside a module's Ray, ray.init() would otherwise join the other's cluster and die when it shuts down.
    os.environ["RAY_ADDRESS"] = "local"
    if hasattr(config, "workerinput"):
        return  # a pytest-xdist worker: the controller checks what the whole run left behind
    config.stash[_BEFORE] = _user_results()
    config.stash[_REPOSITORY_BEFORE] = _repository_files()
    config.stash[_MAP_FOLDERS_BEFORE] = _policy_map_folders()


_BEFORE = pytest.StashKey[tuple[set[str], int]]()
_MAP_FOLDERS_BEFORE = pytest.StashKey[set[str]]()
_REPOSITORY_BEFORE = pytest.StashKey[dict[str, int]]()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Fail the run if the real ~/corral_results changed while it ran (an entry added, or written and removed),
    if a file of the repository was added or changed (a test wrote into the working folder), or if a policy map
    left its folder of policies on disk behind (a remote runner killed before it cleaned up)."""
    if _BEFORE not in session.config.stash:
        return  # a pytest-xdist worker
    names, mtime = session.config.stash[_BEFORE]
    now_names, now_mtime = _user_results()
    if now_names != names or now_mtime != mtime:
        changed = sorted(now_names ^ names) or "an entry written and removed"
        print(f"\nthe tests wrote into {USER_RESULTS}, outside their tmp folders: {changed}", file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    before, now = session.config.stash[_REPOSITORY_BEFORE], _repository_files()
    touched = sorted(path for path, mtime in now.items() if before.get(path) != mtime)
    if touched:
        print(f"\nthe tests wrote into the repository, outside their tmp folders: {touched[:20]}", file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    gc.collect()  # a policy map removes its folder when it is collected
    left = sorted(_policy_map_folders() - session.config.stash[_MAP_FOLDERS_BEFORE])
    if left:
        print(f"\npolicy maps left folders in {tempfile.gettempdir()}: {left}", file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


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


RAY_FIXTURES = {"ray_on_two_cpus", "local_ray"}
"""fixtures that start a Ray instance for a module"""


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's hook reads the xdist_group marks into the test ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The gpu mark's checks, one xdist group for the tests that start Ray, and the long tests first.

    With ``pytest -n 2 --dist loadgroup`` (the README's command) the Ray tests run one after
    another on one worker, beside the rest: two Ray instances on two cores would starve
    each other's actors. The groups go out first (xdist sends the biggest first); among the
    tests that are no group's, the slow ones (runs to a reward, minutes each) come before the
    rest, so that the short ones fill in around them instead of one long run ending the suite alone.
    """
    gpu_mark.pytest_collection_modifyitems(config, items)
    for item in items:
        if RAY_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.xdist_group("ray"))
    items.sort(key=lambda item: 0 if item.get_closest_marker("slow") and not item.get_closest_marker("xdist_group") else 1)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Fail a ``--dist loadgroup`` worker whose grouped tests lost their group.

    pytest-xdist groups a test by the ``@group`` it appends to the test's node id; with
    pytest 9.2 that append no longer reaches the node id (xdist 3.8), and a mark added
    after xdist's hook never reaches it either. Then the Ray tests start two Ray
    instances on two cores and a docs section runs its blocks on both workers, twice.
    The test extras keep pytest below 9.2 for that.
    """
    config = session.config
    if not getattr(config.option, "loadgroup", False):  # set in the workers of a --dist loadgroup run
        return
    # xdist's own rule: a group is an "@" after the parameters' "]" (a parameter's id may hold an "@")
    lost = [
        item.nodeid
        for item in session.items
        if item.get_closest_marker("xdist_group") and not item.nodeid.rfind("@") > item.nodeid.rfind("]")
    ]
    if lost:
        message = (
            f"pytest-xdist did not group {len(lost)} tests marked xdist_group (e.g. {lost[0]}): "
            "this pytest and pytest-xdist do not work together; install the versions the test extras name"
        )
        print(message, file=sys.__stderr__, flush=True)  # xdist reports a worker's error without its message
        raise pytest.UsageError(message)


@pytest.fixture(scope="module", autouse=True)
def no_ray_left_running(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail the module that leaves a Ray instance running in this process: the next module's ``ray.init`` would fail.

    corral starts Ray itself for remote env runners and, as RLlib does, leaves it up; a test module that builds
    such an algorithm uses :func:`ray_on_two_cpus` (or shuts Ray down itself).
    """
    yield
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()
        pytest.fail(f"{request.module.__name__} left Ray running; use the ray_on_two_cpus fixture", pytrace=False)


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
def disable_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    """A fresh plugin registry for the test; ``disable_plugins("offline")`` blocks plugins by name as a user's
    ``CORRAL_DISABLE_PLUGINS`` does. What the test registers in-process is dropped after it."""
    import corral.registry as registry

    def disable(names: str) -> None:
        monkeypatch.setenv(registry.DISABLE_ENV_VAR, names)
        registry.refresh()

    registry.refresh()
    yield disable
    monkeypatch.delenv(registry.DISABLE_ENV_VAR, raising=False)
    registry.refresh()


@pytest.fixture
def hide_package(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    """``hide_package("onnx")``: from then on in the test, importing it fails as if it were not installed."""
    real_import = builtins.__import__
    hidden: set[str] = set()

    def import_unless_hidden(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.split(".")[0] in hidden:
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", import_unless_hidden)
    return hidden.add


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
