"""RLlib's own tuned-example files, as published, run by ``corral train -f`` unchanged and reach their stop reward.

The files in ``tests/data/rllib_tuned`` carry the keys and values of a version
of RLlib's ``rllib/tuned_examples`` (``framework: tf``, Ray 1.x names such as
``Q_model``, ``horizon``, ``timesteps_per_iteration``, ``num_sgd_iter``, Ray 2.x's
experimental flags such as ``_enable_rl_module_api``); each experiment must stop
because its reward was reached, within its own timestep budget. The runs are
seeded with ``--seed 0`` where the file sets none. Every file also builds as it
is, quickly, beside the slow runs. The files in ``tests/data/rllib_tuned_grid``
search with Tune's ``grid_search``: they load as a Tuner's param_space, and each
trial's config trains.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

import corral
from corral.cli.experiments import experiments_from_file
from corral.core.results import corral_result_key

DATA = Path(__file__).parent.parent / "data"
FILES = sorted((DATA / "rllib_tuned").glob("*.yaml"))
GRID_FILES = sorted((DATA / "rllib_tuned_grid").glob("*.yaml"))


@pytest.fixture(scope="module")
def ray_for_the_files() -> Iterator[str]:
    """A local Ray with three CPUs, the most a file asks for, which every test here (and the CLI it runs) joins.

    RLlib's ``cartpole-impala-learner-api.yaml`` asks for two remote env runners and one Learner actor, a CPU
    each, as it does of RLlib: on a 2-core machine the third is a logical CPU, time-shared.

    Returns:
        The cluster's address, for ``RAY_ADDRESS``.
    """
    import ray

    ray.init(num_cpus=3, include_dashboard=False, configure_logging=False)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


@pytest.mark.usefixtures("ray_for_the_files")  # some files ask for remote env runners (num_workers: 2)
@pytest.mark.parametrize("path", FILES, ids=[path.stem for path in FILES])
def test_an_rllib_tuned_example_builds_unchanged(path: Path) -> None:
    (experiment,) = experiments_from_file(str(path))
    config = corral.get_config(experiment["run"]).environment(experiment["env"])
    config.update_from_dict(experiment["config"])
    algo = config.build()
    algo.stop()
    assert set(algo.policies) == {"default_policy"}


# cartpole-sac-ray2.0 is cartpole-sac-ray2.10 in Ray 2.0's spelling (stop key, framework: tf, no_done_at_end):
# the build test reads it; one run of the same algorithm, env and settings to the reward is enough.
RUN_FILES = [path for path in FILES if path.stem != "cartpole-sac-ray2.0"]


@pytest.mark.slow
@pytest.mark.parametrize("path", RUN_FILES, ids=[path.stem for path in RUN_FILES])
def test_an_rllib_tuned_example_runs_unchanged_and_reaches_its_stop_reward(
    run_cli: Any, tmp_path: Path, path: Path, ray_for_the_files: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAY_ADDRESS", ray_for_the_files)  # the CLI joins it
    ((name, experiment),) = yaml.safe_load(path.read_text()).items()
    stop = {corral_result_key(key): value for key, value in experiment["stop"].items()}  # RLlib 2.x's keys too
    seed = [] if "seed" in experiment["config"] else ["--seed", "0"]
    proc = run_cli("train", "-f", str(path), "--storage-path", str(tmp_path), *seed, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (result_file,) = tmp_path.glob("*/result.json")
    last = json.loads(result_file.read_text().splitlines()[-1])
    (reward,) = set(stop) - {"timesteps_total"}  # episode_reward_mean, or RLlib 2.10's env_runners/episode_return_mean
    reached = last[corral_result_key(reward)]
    assert reached >= stop[reward], f"{name}: {reached}"
    assert last["timesteps_total"] <= stop["timesteps_total"] + last["num_env_steps_sampled_this_iter"]


@pytest.mark.usefixtures("ray_for_the_files")
@pytest.mark.parametrize("path", GRID_FILES, ids=[path.stem for path in GRID_FILES])
def test_an_rllib_tuned_example_with_tune_grids_loads_and_each_trial_trains(path: Path) -> None:
    ((_, experiment),) = yaml.safe_load(path.read_text()).items()
    config = corral.get_config(experiment["run"]).environment(experiment["env"]).update_from_dict(experiment["config"])
    # RLlib's experimental flags train the same with every value, so only the seeds make trials
    assert set(config.search_space) == {"seed"}
    trial = config.copy().update_from_dict({"seed": config.search_space["seed"]["grid_search"][0]})
    algo = trial.build()
    try:
        assert algo.train()["training_iteration"] == 1
    finally:
        algo.stop()
