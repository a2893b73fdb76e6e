"""Experiment folders are unique even when runs start together."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from corral.core.persistence.loggers import new_experiment_dir


def test_runs_started_in_the_same_second_get_their_own_folders(tmp_path) -> None:
    with ThreadPoolExecutor(8) as pool:
        paths = list(pool.map(lambda _: new_experiment_dir(str(tmp_path), "PPO", "CartPole-v1"), range(16)))
    assert len(set(paths)) == 16
    assert all(p.is_dir() and p.parent == tmp_path and p.name.startswith("PPO_CartPole-v1_") for p in paths)
