"""Every tuned example reaches the reward its ``stop`` block promises, within its budget.

The files are read the way ``corral train -f`` reads them; the run is seeded
and bounded by the file's ``timesteps_total``. A multi-agent example on
N-agent CartPole promises its total to be shared: every policy's
``policy_reward_mean`` must reach 1/N of it (450 each for two agents).
"""

from __future__ import annotations

import fnmatch
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import corral
from corral.cli.experiments import experiments_from_file
from corral.core.results import result_value

EXAMPLES = sorted((Path(corral.__file__).parent / "tuned_examples").glob("*.yaml"))


def test_tuned_examples_are_packaged() -> None:
    names = {p.name for p in EXAMPLES}
    assert {
        "ppo_cartpole.yaml",
        "ppo_pendulum.yaml",
        "a2c_cartpole.yaml",
        "pg_cartpole.yaml",
        "a3c_cartpole.yaml",
        "es_cartpole.yaml",
        "ars_cartpole.yaml",
        "ddpg_pendulum.yaml",
        "td3_pendulum.yaml",
        "dqn_cartpole.yaml",
        "apex_cartpole.yaml",
        "sac_pendulum.yaml",
        "sac_discrete_cartpole.yaml",
        "bc_cartpole.yaml",
        "marwil_cartpole.yaml",
        "cql_pendulum.yaml",
    } <= names


def test_the_data_the_tuned_examples_read_is_package_data() -> None:
    package = Path(corral.__file__).parent
    # pyproject's [tool.setuptools.package-data] line for corral (a TOML list of strings reads as JSON; no tomllib on 3.10)
    pyproject = (package.parent / "pyproject.toml").read_text().split("[tool.setuptools.package-data]")[1]
    shipped = json.loads(pyproject.split("corral = ", 1)[1].split("\n", 1)[0])
    read = {Path(path) for example in EXAMPLES for path in _input_paths(example)}
    assert read, "the offline tuned examples name their data"
    for path in read:
        relative = path.relative_to(package).as_posix()
        assert path.is_file() and any(fnmatch.fnmatch(relative, pattern) for pattern in shipped), relative


def _input_paths(example: Path) -> list[str]:
    (experiment,) = experiments_from_file(str(example))
    given = experiment["config"].get("input", [])
    return [given] if isinstance(given, str) else list(given)


def test_an_offline_tuned_example_trains_from_any_working_folder(tmp_path: Path, results_dir: Path) -> None:
    small = {"min_sample_timesteps_per_iteration": 500, "evaluation_duration": 1}
    command = ["train", "-f", "bc_cartpole", "--stop", '{"training_iteration": 1}', "--config", json.dumps(small)]
    done = subprocess.run(
        [sys.executable, "-m", "corral.cli", *command],
        capture_output=True,
        text=True,
        cwd=tmp_path,  # its data ships beside the example, not in the working folder
        env={**os.environ, "CORRAL_RESULTS_DIR": str(results_dir)},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "iter    1" in done.stdout


@pytest.mark.parametrize("name", ["marwil_cartpole", "cql_pendulum"])
def test_the_other_offline_tuned_examples_find_their_data_from_any_working_folder(
    name: str, tmp_path: Path, make_algo: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (experiment,) = experiments_from_file(name)
    config = corral.get_config(experiment["run"]).environment(experiment["env"]).update_from_dict(experiment["config"])
    make_algo(config)  # every input file is found and checked at build


def test_a_relative_input_in_an_experiment_file_means_the_working_folder_where_it_names_something(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    experiment = tmp_path / "experiment"
    experiment.mkdir()
    (experiment / "rows.parquet").write_bytes(b"")
    yaml = "bc:\n  run: BC\n  env: CartPole-v1\n  config:\n    input: [rows.parquet, other.parquet]\n"
    (experiment / "bc.yaml").write_text(yaml)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    (beside,) = experiments_from_file(str(experiment / "bc.yaml"))
    assert beside["config"]["input"] == [str(experiment / "rows.parquet"), "other.parquet"]  # found beside; found nowhere
    (work / "rows.parquet").write_bytes(b"")
    (here,) = experiments_from_file(str(experiment / "bc.yaml"))
    assert here["config"]["input"] == ["rows.parquet", "other.parquet"]


def _is_a_defaults_case(example: Path) -> bool:
    """Whether a case of ``tests/compat/test_defaults_learn.py`` trains exactly what ``example`` asks."""
    from tests.compat.test_defaults_learn import CASES

    (experiment,) = experiments_from_file(str(example))
    (key,) = set(experiment["stop"]) - {"timesteps_total"}
    config = corral.get_config(experiment["run"]).environment(experiment["env"])
    plain = config.to_dict()
    if key != "episode_reward_mean" or config.update_from_dict(experiment["config"]).to_dict() != plain:
        return False
    wanted = (experiment["run"], experiment["env"], experiment["stop"][key], experiment["stop"]["timesteps_total"])
    return (*wanted, config.metrics_num_episodes_for_smoothing) in CASES


TRAINED_BY_THE_DEFAULTS_TEST = [example for example in EXAMPLES if _is_a_defaults_case(example)]
"""examples that write out an algorithm's plain defaults: the defaults test trains each to this very promise"""


def test_an_example_of_plain_defaults_is_held_to_its_promise_by_the_defaults_test() -> None:
    # dqn_cartpole.yaml is DQN's defaults written out, with the defaults test's env, reward, budget and
    # window (episode_reward_mean is the mean of the last 100 episodes): one seeded run serves both
    assert [example.stem for example in TRAINED_BY_THE_DEFAULTS_TEST] == ["dqn_cartpole"]


@pytest.mark.slow
@pytest.mark.parametrize("path", [p for p in EXAMPLES if p not in TRAINED_BY_THE_DEFAULTS_TEST], ids=lambda p: p.stem)
def test_tuned_example_reaches_its_promise(path: Path) -> None:
    (experiment,) = experiments_from_file(str(path))
    budget = experiment["stop"]["timesteps_total"]
    # offline examples promise an evaluation return (their training rows come from files, not episodes)
    (key,) = set(experiment["stop"]) - {"timesteps_total"}
    promise = experiment["stop"][key]
    config = corral.get_config(experiment["run"]).environment(experiment["env"])
    config.update_from_dict({**experiment["config"], "seed": 0})
    # a multi-agent example promises its share of the total to every policy (450 each of 900 on 2-agent CartPole)
    per_policy = promise / config.env_config["num_agents"] if "num_agents" in config.env_config else None
    algo = config.build()
    best = float("-inf")
    kept: dict[str, float] = {}
    while algo.counters["num_env_steps_sampled"] < budget:
        result = algo.train()
        best = max(best, result_value(result, key))
        kept = result["policy_reward_mean"]
        if result_value(result, key) >= promise and (per_policy is None or min(kept.values()) >= per_policy):
            break
    algo.stop()
    last = result_value(result, key)
    assert last >= promise, f"{path.name}: {key} {last:.1f} at the end (best {best:.1f}) < {promise} within {budget} env steps"
    if per_policy is not None:
        assert set(kept) == set(algo.policies) and min(kept.values()) >= per_policy, (
            f"{path.name}: policy_reward_mean {kept} after {result['timesteps_total']} env steps; each must reach {per_policy}"
        )
    # the last iteration may start just under the budget: allow one iteration's samples past it
    assert result["timesteps_total"] <= budget + result["num_env_steps_sampled_this_iter"]
