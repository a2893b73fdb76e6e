"""Input through Ray Data: the same rows as reading in this process, streamed in blocks, resumed exactly."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import corral
from corral import ConfigError
from corral.integrations.offline.ray_data_input import RAY_DATA_BLOCK_ROWS

pytestmark = pytest.mark.usefixtures("ray_on_two_cpus")

DATA = Path(corral.__file__).parent / "tuned_examples" / "data"
FILES = [str(DATA / "cartpole_expert.parquet"), str(DATA / "cartpole_random.parquet")]


def bc(**input_config: Any) -> Any:
    return (
        corral.get_config("BC")
        .environment("CartPole-v1")
        .training(train_batch_size=1000)
        .offline_data(input_=FILES, input_config=input_config)
        .debugging(seed=0)
    )


def rows(algo: Any, calls: int) -> np.ndarray:
    return np.concatenate([algo.sample().policy_batches["default_policy"]["obs"] for _ in range(calls)])


def test_ray_data_reads_the_rows_this_process_reads_over_epochs(make_algo: Callable[..., Any]) -> None:
    through_ray = make_algo(bc(use_ray_data=True))
    in_process = make_algo(bc(use_ray_data=False))
    assert through_ray.experience_input.sources[0][2].ray_data
    # 20,527 rows: the second epoch (files in a new order) starts within these 45,000
    np.testing.assert_array_equal(rows(through_ray, 45), rows(in_process, 45))
    reader = through_ray.experience_input.sources[0][2]
    assert reader.epoch == 2
    # streamed: the buffer holds at most a block beyond what one call takes
    assert reader._pending_rows() < RAY_DATA_BLOCK_ROWS + 1000


def test_ray_data_is_the_default_with_remote_env_runners(make_algo: Callable[..., Any]) -> None:
    algo = make_algo(bc().env_runners(num_env_runners=1))
    assert algo.experience_input.sources[0][2].ray_data


def test_a_run_reading_through_ray_data_resumes_exactly(tmp_path: Path, make_algo: Callable[..., Any]) -> None:
    config = bc(use_ray_data=True).offline_data(shuffle_buffer_size=3000)
    algo = make_algo(config)
    rows(algo, 12)
    path = algo.save(tmp_path / "ckpt")
    expected = rows(algo, 15)
    restored = make_algo(config)
    restored.restore(path)
    np.testing.assert_array_equal(rows(restored, 15), expected)


def test_ray_data_reads_parquet_only(tmp_path: Path) -> None:
    algo = (
        corral.get_config("PPO")
        .environment("CartPole-v1")
        .offline_data(output=str(tmp_path / "json"), output_config={"format": "json"})
        .build()
    )
    algo.sample()
    algo.stop()
    with pytest.raises(ConfigError, match="use_ray_data=True reads Parquet files, but the input holds JSON lines"):
        bc(use_ray_data=True).offline_data(input_=str(tmp_path / "json")).build()


def test_rllib_s_map_batches_and_iter_batches_kwargs_read_through_ray_data(make_algo: Callable[..., Any]) -> None:
    """RLlib's new stack tunes its Ray Data reading with these; corral reads through Ray Data with them, same rows."""
    tuned = make_algo(
        bc().offline_data(
            map_batches_kwargs={"concurrency": 1, "num_cpus": 1},
            iter_batches_kwargs={"prefetch_batches": 1, "local_shuffle_buffer_size": None},
        )
    )
    reader = tuned.experience_input.sources[0][2]
    assert reader.ray_data and reader.ray_data_options == {
        "map_batches_kwargs": {"concurrency": 1, "num_cpus": 1},
        "prefetch_batches": 1,
    }
    np.testing.assert_array_equal(rows(tuned, 3), rows(make_algo(bc(use_ray_data=False)), 3))
