"""corral against RLlib: behaviour cloning from a Parquet file of 1M CartPole rows, in one run, as ratios.

The file is what ``offline_data(output=...)`` writes: 1,003,281 rows sampled
by an untrained PPO policy with 16 envs (obs, actions, rewards, new_obs, ...;
obs and new_obs in zstd). Each library reads it with its own reader and
trains BC on it, in its own fresh Python process, with the same settings:
batches of 2,000 rows, Adam with lr 1e-3, a 256x256 tanh MLP, 10 updates
per iteration, no shuffling, no evaluation. RLlib runs its default (new) API
stack: Ray Data reads the file and its OfflinePreLearner turns rows into
training batches. corral reads it in-process with pyarrow, and again through
Ray Data (``input_config={"use_ray_data": True}``).

Reported, each from the first ``train()`` call (building is not counted):

- seconds for one pass over the file (500 updates), reading included;
- rows per second over the pass, and over its second half (reading warmed up).

    pip install -e ".[bench]"
    python benchmarks/compare_rllib_offline.py

Writes benchmarks/results/rllib_offline.json; the data goes to a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from compare_rllib import run_in_fresh_process  # this folder is on sys.path when a script here runs

HERE = Path(__file__).resolve().parent
ROWS = 1_000_000
BATCH = 2000
UPDATES_PER_ITERATION = 10
LR = 1e-3
HIDDENS = [256, 256]


def record(folder: Path) -> Path:
    """Write the dataset with corral's output: at least :data:`ROWS` rows of an untrained PPO policy, one file."""
    import corral

    config = (
        corral.get_config("PPO")
        .environment("CartPole-v1")
        .env_runners(num_envs_per_env_runner=16)
        .training(train_batch_size=16384)
        .offline_data(output=str(folder), output_max_file_size=2**40)
        .debugging(seed=0)
    )
    algo = config.build()
    rows = 0
    while rows < ROWS:
        rows += algo.sample().env_steps
    algo.stop()
    (path,) = folder.glob("*.parquet")
    return path


def one_pass(train: Any, rows_trained: Any, total: int) -> dict[str, Any]:
    """Call ``train()`` until ``total`` rows were trained on; seconds for all and for the second half."""
    seconds, half_seconds, half_rows = 0.0, None, None
    while rows_trained() < total:
        start = time.perf_counter()
        train()
        seconds += time.perf_counter() - start
        if half_seconds is None and rows_trained() >= total // 2:
            half_seconds, half_rows = seconds, rows_trained()
    rows = rows_trained()
    assert half_seconds is not None and half_rows is not None
    return {
        "rows": rows,
        "seconds": seconds,
        "rows_per_s": rows / seconds,
        "second_half_rows_per_s": (rows - half_rows) / (seconds - half_seconds),
    }


def run_corral(path: str, ray_data: bool) -> dict[str, Any]:
    """corral's BC reading the file in-process (pyarrow) or through Ray Data."""
    import corral

    if ray_data:
        import ray

        ray.init(num_cpus=4, include_dashboard=False, configure_logging=False)
    config = (
        corral.get_config("BC")
        .environment("CartPole-v1")
        .offline_data(input_=path, input_config={"use_ray_data": ray_data})
        .training(train_batch_size=BATCH, lr=LR, model={"fcnet_hiddens": HIDDENS, "fcnet_activation": "tanh"})
        .update_from_dict({"min_sample_timesteps_per_iteration": BATCH * UPDATES_PER_ITERATION})
        .reporting(log_to_tensorboard=False)
        .debugging(seed=0)
    )
    algo = config.build()
    out = one_pass(algo.train, lambda: algo.counters["num_env_steps_trained"], ROWS)
    algo.stop()
    return out


def run_rllib(path: str) -> dict[str, Any]:
    """RLlib's BC (new API stack) on the same file."""
    import gymnasium as gym
    import ray
    from ray.rllib.algorithms.bc import BCConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    ray.init(num_cpus=4, include_dashboard=False, configure_logging=False)
    env = gym.make("CartPole-v1")
    config = (
        BCConfig()
        .environment(observation_space=env.observation_space, action_space=env.action_space)
        .offline_data(input_=[path], dataset_num_iters_per_learner=UPDATES_PER_ITERATION)
        .training(train_batch_size_per_learner=BATCH, lr=LR)
        .rl_module(model_config=DefaultModelConfig(fcnet_hiddens=HIDDENS, fcnet_activation="tanh"))
        .debugging(seed=0)
    )
    algo = config.build_algo()
    trained = [0]

    def train() -> None:
        result = algo.train()
        trained[0] = int(result["learners"]["__all_modules__"]["num_env_steps_trained_lifetime"])

    out = one_pass(train, lambda: trained[0], ROWS)
    algo.stop()
    ray.shutdown()
    return out


def table(results: dict[str, Any]) -> str:
    """The markdown table in benchmarks/README.md: medians over repeats, and ratios against RLlib."""

    def median(key: str, metric: str) -> float:
        return statistics.median(r[metric] for r in results[key])

    rows = [
        "| reader | seconds for 1M rows | rows/s | rows/s, second half | vs RLlib (seconds) | vs RLlib (second half) |",
        "|---|---|---|---|---|---|",
    ]
    theirs_seconds, theirs_rate = median("rllib", "seconds"), median("rllib", "second_half_rows_per_s")
    for key, label in (("corral", "corral, pyarrow"), ("corral_ray_data", "corral, Ray Data"), ("rllib", "RLlib, Ray Data")):
        seconds, rate, half = median(key, "seconds"), median(key, "rows_per_s"), median(key, "second_half_rows_per_s")
        ratios = f"**{theirs_seconds / seconds:.1f}x** | **{half / theirs_rate:.1f}x**"
        rows.append(f"| {label} | {seconds:.1f} | {rate:,.0f} | {half:,.0f} | {ratios} |")
    return "\n".join(rows)


def main() -> None:
    """Record the file, then each reader in a fresh process ``--repeats`` times; writes the JSON and prints the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=1)
    args, rest = parser.parse_known_args()
    if rest[:1] == ["_child"]:
        os.environ.setdefault("CORRAL_RESULTS_DIR", tempfile.mkdtemp(prefix="corral-bench-"))
        library, path = rest[1], rest[2]
        outcome = run_rllib(path) if library == "rllib" else run_corral(path, ray_data=library == "corral_ray_data")
        print("RESULT " + json.dumps(outcome), flush=True)
        return
    results: dict[str, Any] = {"load_average_at_start": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory(prefix="corral-offline-bench-") as folder:
        os.environ.setdefault("CORRAL_RESULTS_DIR", str(Path(folder) / "results"))
        path = record(Path(folder) / "data")
        import pyarrow.parquet as pq

        results["dataset"] = {"rows": pq.ParquetFile(path).metadata.num_rows, "bytes": path.stat().st_size}
        for _ in range(args.repeats):
            for library in ("corral", "corral_ray_data", "rllib"):
                outcome = run_in_fresh_process([__file__, "_child", library, str(path)], timeout=3600)
                print(library, outcome, flush=True)
                results.setdefault(library, []).append(outcome)
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "rllib_offline.json").write_text(json.dumps(results, indent=1))
    print(table(results))


if __name__ == "__main__":
    main()
