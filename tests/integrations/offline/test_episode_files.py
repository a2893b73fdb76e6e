"""RLlib's new-stack offline options: episodes as Parquet rows, rows per file, updates per iteration on input files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

import corral
from corral import ConfigError
from corral.integrations.offline.input_files import read_experiences

from .test_experience_output import ppo


def record(folder: Path, iterations: int = 2, **offline: Any) -> list[Path]:
    algo = ppo(folder, **offline).build()
    for _ in range(iterations):
        algo.train()
    algo.stop()
    # in the order written: by the time in the name, then the file's number
    return sorted(folder.glob("output-*.parquet"), key=lambda f: (f.name.split("_worker")[0], int(f.stem.rsplit("_", 1)[1])))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Path]]:
    """The same seeded run recorded as step rows, and as episode rows of at most 4 episodes a file."""
    root = tmp_path_factory.mktemp("recorded")
    return {
        "steps": record(root / "steps"),
        "episodes": record(root / "episodes", output_write_episodes=True, output_max_rows_per_file=4),
    }


def test_an_episode_row_holds_its_steps_and_reads_back_as_the_step_rows(recorded: dict[str, list[Path]]) -> None:
    (steps_file,) = recorded["steps"]
    steps = read_experiences(steps_file, "parquet")["default_policy"]
    tables = [pq.read_table(f) for f in recorded["episodes"]]
    for table in tables:
        for eps_ids, t in zip(table.column("eps_id").to_pylist(), table.column("t").to_pylist(), strict=True):
            assert len(set(eps_ids)) == 1 and t == list(range(t[0], t[0] + len(t)))  # one episode, its steps in order
    # an episode is a row, or a row per sample call it ran through (RLlib writes what each call returns, too)
    assert sum(len(ids) for t in tables for ids in t.column("eps_id").to_pylist()) == len(steps["obs"])
    assert len(np.unique(steps["eps_id"])) <= sum(t.num_rows for t in tables) < len(steps["obs"]) / 5
    # the same seeded run: the episode files read back as the step file's rows, episode by episode
    episodes = [read_experiences(f, "parquet")["default_policy"] for f in recorded["episodes"]]
    order = np.argsort(np.concatenate([e["eps_id"] for e in episodes]), kind="stable")
    by_episode = np.argsort(steps["eps_id"], kind="stable")
    for name in ("obs", "new_obs", "actions", "rewards", "terminateds", "truncateds", "action_logp", "t"):
        read = np.concatenate([e[name] for e in episodes])[order]
        np.testing.assert_array_equal(read, steps[name][by_episode], err_msg=name)


def test_a_file_holds_at_most_output_max_rows_per_file_rows(recorded: dict[str, list[Path]], tmp_path: Path) -> None:
    counts = [pq.read_metadata(f).num_rows for f in recorded["episodes"]]
    assert len(counts) >= 3 and max(counts) == 4 and all(n == 4 for n in counts[:-1])
    step_counts = [pq.read_metadata(f).num_rows for f in record(tmp_path / "steps", 1, output_max_rows_per_file=150)]
    assert step_counts == [150, 150, 100]  # 400 steps of one sample call, split across files


def bc(files: list[Path] | Path, **offline: Any) -> Any:
    return (
        corral.get_config("BC")
        .environment("CartPole-v1")
        .training(train_batch_size=100)
        .offline_data(input_=[str(f) for f in files] if isinstance(files, list) else str(files), **offline)
        .debugging(seed=0)
    )


def test_bc_learns_from_episode_files_and_each_layout_is_read_only_as_what_it_is(
    recorded: dict[str, list[Path]], make_algo: Any
) -> None:
    one = make_algo(bc(recorded["episodes"], input_read_episodes=True)).train()["num_env_steps_trained"]
    algo = make_algo(bc(recorded["episodes"], input_read_episodes=True, dataset_num_iters_per_learner=3))
    assert 100 <= one < 200 and algo.train()["num_env_steps_trained"] == 3 * one  # three updates in the iteration
    with pytest.raises(ConfigError, match=r"holds one row per episode .*read it with offline_data\(input_read_episodes=True\)"):
        bc(recorded["episodes"]).build()
    with pytest.raises(ConfigError, match=r"input_read_episodes=True reads files of episodes .* holds one row per step"):
        bc(recorded["steps"], input_read_episodes=True).build()


def test_offline_options_that_the_run_cannot_honour_are_refused(tmp_path: Path) -> None:
    json_output = {"output_config": {"format": "json"}}
    with pytest.raises(ConfigError, match=r"output_write_episodes shapes Parquet files, but output_config asks for JSON"):
        ppo(tmp_path, output_write_episodes=True, **json_output).validate()
    with pytest.raises(ConfigError, match=r"output_max_rows_per_file shapes Parquet files"):
        ppo(tmp_path, output_max_rows_per_file=10, **json_output).validate()
    with pytest.raises(ConfigError, match=r"dataset_num_iters_per_learner counts updates on input files.*'sampler'"):
        corral.get_config("BC").environment("CartPole-v1").offline_data(dataset_num_iters_per_learner=2).validate()
    with pytest.raises(ConfigError, match=r"map_batches_kwargs has no key 'fn'; corral's read tasks take 'concurrency'"):
        bc(tmp_path, map_batches_kwargs={"fn": len})
    with pytest.raises(ConfigError, match=r"iter_batches_kwargs has no key 'batch_size'"):
        bc(tmp_path, iter_batches_kwargs={"batch_size": 10})
    in_process = {"input_config": {"use_ray_data": False}}
    with pytest.raises(ConfigError, match=r"map_batches_kwargs tunes reading through Ray Data, but .*use_ray_data=False"):
        bc(tmp_path, map_batches_kwargs={"concurrency": 2}, **in_process).validate()
    with pytest.raises(ConfigError, match=r"iter_batches_kwargs prefetch_batches tunes reading through Ray Data"):
        bc(tmp_path, iter_batches_kwargs={"prefetch_batches": 2}, **in_process).validate()
    # a shuffle buffer is also this process's reading's: RLlib's name for it is taken without Ray Data
    bc(tmp_path, iter_batches_kwargs={"local_shuffle_buffer_size": 100}, **in_process).validate()
    with pytest.raises(ConfigError, match=r"local_shuffle_buffer_size=100 and shuffle_buffer_size=50 name two sizes"):
        bc(tmp_path, iter_batches_kwargs={"local_shuffle_buffer_size": 100}, shuffle_buffer_size=50).validate()


def test_evaluation_writes_its_episodes_as_rllib_s_evaluation_runners_do_without_moving_training(
    tmp_path: Path, make_algo: Any
) -> None:
    config = (
        ppo(tmp_path / "out", output_write_episodes=True)
        .env_runners(observation_filter="MeanStdFilter")
        .evaluation(evaluation_duration=3, evaluation_duration_unit="episodes")
    )
    algo = make_algo(config)
    algo.train()
    policy = algo.get_policy()
    timestep, statistics = policy.global_timestep, policy.observation_filter.get_state()
    algo.evaluate()
    algo.stop()
    # the evaluation's recorded steps are not training's: the timestep and the filter stay
    assert policy.global_timestep == timestep
    np.testing.assert_array_equal(policy.observation_filter.get_state()["mean"], statistics["mean"])
    assert policy.observation_filter.get_state()["count"] == statistics["count"]
    (file,) = (tmp_path / "out").glob("output-*_evaluation-worker-0_*.parquet")
    episodes = pq.read_table(file)
    ended = [
        terminated[-1] or truncated[-1]
        for terminated, truncated in zip(
            episodes.column("terminateds").to_pylist(), episodes.column("truncateds").to_pylist(), strict=True
        )
    ]
    assert sum(ended) >= 3
    # evaluation_config={"output": None} keeps an evaluation's episodes out of the files
    quiet = make_algo(config.copy(copy_frozen=False).evaluation(evaluation_config={"output": None}))
    quiet.evaluate()
    quiet.stop()
    assert len(list((tmp_path / "out").glob("output-*_evaluation-*"))) == 1
