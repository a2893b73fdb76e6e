"""Experiment folders are unique even when runs start together."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from corral.core.persistence.loggers import new_experiment_dir


def test_runs_started_in_the_same_second_get_their_own_folders(tmp_path) -> None:
    with ThreadPoolExecutor(8) as pool:
        paths = list(pool.map(lambda _: new_experiment_dir(str(tmp_path), "PPO", "CartPole-v1"), range(16)))
    assert len(set(paths)) == 16
    assert all(p.is_dir() and p.parent == tmp_path and p.name.startswith("PPO_CartPole-v1_") for p in paths)


def test_numpy_scalars_reach_every_result_file_as_numbers(tmp_path) -> None:
    """A callback that adds ``np.float32(...)`` to the result sees it in progress.csv and result.json, as a number."""
    import csv
    import json

    import numpy as np

    from corral.core.persistence.loggers import ResultWriter

    writer = ResultWriter(tmp_path, {}, tensorboard=False)
    writer.write({"training_iteration": 1, "custom": {"f32": np.float32(0.5), "i64": np.int64(7), "flag": np.bool_(True)}})
    row = next(csv.DictReader((tmp_path / "progress.csv").open()))
    assert (row["custom/f32"], row["custom/i64"], row["custom/flag"]) == ("0.5", "7", "True")
    assert json.loads((tmp_path / "result.json").read_text())["custom"] == {"f32": 0.5, "i64": 7, "flag": True}
