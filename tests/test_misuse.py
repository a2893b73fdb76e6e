"""Misuse caught at the door: each gives one clear error before anything runs (the run issue's list)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import corral
from corral import CorralError, ObservationError

from .conftest import SMALL_PPO


@pytest.fixture
def algo(make_algo, ppo_config):
    return make_algo(ppo_config)


@pytest.mark.parametrize(
    ("observation", "said"),
    [
        (np.zeros(3, np.float32), r"the observation has shape \(3,\), but the observation space .* has shape \(4,\)"),
        (np.zeros((1, 4), np.float32), r"has shape \(1, 4\).*without a batch axis"),
        ("left", r"has shape \(\)"),
    ],
)
def test_compute_single_action_refuses_an_observation_that_does_not_fit(algo, observation, said) -> None:
    with pytest.raises(ObservationError, match=said):
        algo.compute_single_action(observation)


def test_compute_actions_names_the_row_of_the_batch_that_does_not_fit(algo) -> None:
    batch = np.zeros((3, 4), np.float32)
    assert algo.compute_actions(batch).shape == (3,)
    batch[2, 0] = 9.0  # outside CartPole's bounds: the caller's to judge, as an env may return it
    assert algo.compute_actions(batch).shape == (3,)
    with pytest.raises(ObservationError, match=r"observation 0 of the batch has shape \(5,\)"):
        algo.compute_actions(np.zeros((2, 5), np.float32))


def test_a_dict_observation_missing_a_part_is_refused(make_algo, ppo_config) -> None:
    algo = make_algo(ppo_config.environment("tests.toy_envs:DictObsEnv"))
    good = algo.get_policy().observation_space.sample()
    assert algo.compute_single_action(good) is not None
    part = next(iter(good))
    with pytest.raises(ObservationError, match=rf"has no {part!r} part"):
        algo.compute_single_action({k: v for k, v in good.items() if k != part})


def test_a_stopped_algorithm_refuses_to_train_or_evaluate(algo) -> None:
    algo.train()
    algo.stop()
    for call in (algo.train, algo.evaluate):
        with pytest.raises(CorralError, match=r"on a stopped PPO.*Algorithm.from_checkpoint"):
            call()


def test_an_env_in_config_that_differs_from_env_is_an_error(run_cli, results_dir) -> None:
    config = json.dumps({**SMALL_PPO, "env": "Pendulum-v1"})
    proc = run_cli("train", "--algo", "PPO", "--env", "CartPole-v1", "--config", config, "--stop", '{"training_iteration": 1}')
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "corral: error: --config sets env 'Pendulum-v1' and the run's env is 'CartPole-v1': name the env once"
    )
    assert not results_dir.exists() or not any(results_dir.iterdir())


def test_new_plugin_refuses_the_name_of_an_installed_algorithm(run_cli, tmp_path) -> None:
    proc = run_cli("new-plugin", "ppo", "--dir", str(tmp_path))
    assert proc.returncode == 2
    assert "an installed algorithm is named 'PPO' (from corral)" in proc.stderr and "'Myppo'" in proc.stderr
    assert not list(tmp_path.iterdir())


def test_a_tuned_example_runs_by_its_bare_name_and_list_examples_shows_its_promise(run_cli, results_dir) -> None:
    listed = json.loads(run_cli("list", "--examples", "--json").stdout)
    ppo = next(row for row in listed if row["name"] == "ppo_cartpole")
    assert ppo == {
        "name": "ppo_cartpole",
        "algorithm": "PPO",
        "env": "CartPole-v1",
        "reward": {"episode_reward_mean": 475},
        "budget": {"timesteps_total": 100000},
    }
    assert {row["name"] for row in listed} == {path.stem for path in corral_examples()}
    proc = run_cli("train", "-f", "ppo_cartpole", "--stop", '{"training_iteration": 1}')
    assert proc.returncode == 0, proc.stderr
    assert any(path.name.startswith("PPO_CartPole-v1_") for path in results_dir.iterdir())
    unknown = run_cli("train", "-f", "ppo_cartpol")
    assert unknown.returncode == 2 and "Did you mean 'ppo_cartpole'" in unknown.stderr


def corral_examples() -> list:
    from pathlib import Path

    return sorted((Path(corral.__file__).parent / "tuned_examples").glob("*.yaml"))
