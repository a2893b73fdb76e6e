"""torch's thread count on a quiet and on a busy machine: env steps per second of PPO, SAC, DQN and MARWIL.

Each algorithm trains with its plain defaults (``get_config(ALGO).environment(ENV)``,
MARWIL on the recorded CartPole rows in corral/tuned_examples/data) for a fixed number of
iterations, in a fresh process per run, with ``num_torch_threads`` set to 1, None
(torch's own count: one per core) and "auto" (corral's choice, see
``corral.core.threads``), under two conditions:

- quiet: nothing else runs;
- busy: two CPU-bound processes (``while True: pass``) run beside it for the whole run,
  as Ray runners, Tune trials or a CI job would on a 2-core machine.

A run reports env steps sampled (MARWIL: rows read) per second over its measured iterations,
after one warm-up iteration. Each cell is the median of ``--repeats`` runs; the runs of one
repeat go round every setting before the next repeat starts, so a drift of the machine
shows in every cell alike.

    python benchmarks/threads_under_load.py                    # all four, both conditions
    python benchmarks/threads_under_load.py --algos SAC --repeats 3

Writes benchmarks/results/threads_under_load.json; benchmarks/README.md's table of
thread defaults is built from it. Start it on a quiet machine (the load average at the
start is recorded): the busy condition makes its own load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = ROOT / "corral" / "tuned_examples" / "data"

CASES: dict[str, dict[str, object]] = {
    "PPO": {"env": "CartPole-v1", "iterations": 4, "options": {}},
    # SAC's update is 50-100x a PPO step's cost: fewer steps keep a run on busy cores with torch's own
    # threads (35x slower than one thread, measured) within minutes
    "SAC": {
        "env": "Pendulum-v1",
        "iterations": 2,
        "options": {"learning_starts": 200, "min_sample_timesteps_per_iteration": 250},
    },
    "DQN": {"env": "CartPole-v1", "iterations": 4, "options": {"min_sample_timesteps_per_iteration": 2000}},
    "MARWIL": {
        "env": "CartPole-v1",
        "iterations": 4,
        "options": {
            "input_": [str(DATA / "cartpole_expert.parquet"), str(DATA / "cartpole_random.parquet")],
            "min_sample_timesteps_per_iteration": 20000,
        },
    },
}
"""each algorithm's env, measured iterations and the options that size an iteration (everything else: defaults)"""

SETTINGS: list[int | str | None] = [1, None, "auto"]

_RUN = """
import json, sys, time
import torch
import corral
algo, env, iterations = sys.argv[1], sys.argv[2], int(sys.argv[3])
options, threads = json.loads(sys.argv[4]), json.loads(sys.argv[5])
config = corral.get_config(algo).environment(env).update_from_dict(options).debugging(seed=0)
config = config.resources(num_torch_threads=threads).reporting(log_to_tensorboard=False)
trainer = config.build()
trainer.train()  # warm-up
before, start = trainer.counters["num_env_steps_sampled"], time.perf_counter()
for _ in range(iterations):
    trainer.train()
steps = trainer.counters["num_env_steps_sampled"] - before
print(json.dumps({"steps": steps, "seconds": time.perf_counter() - start, "threads_at_end": torch.get_num_threads()}))
trainer.stop()
"""

_SPIN = "while True: pass"


def run(algo: str, threads: int | str | None) -> dict[str, float]:
    """One run in a fresh process: env steps sampled (rows read) per second over the measured iterations."""
    case = CASES[algo]
    with tempfile.TemporaryDirectory() as results:
        done = subprocess.run(
            [sys.executable, "-c", _RUN, algo, str(case["env"]), str(case["iterations"]), json.dumps(case["options"]),
             json.dumps(threads)],
            capture_output=True,
            text=True,
            env={**os.environ, "CORRAL_RESULTS_DIR": results},
            check=False,
        )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"{algo} threads={threads} failed:\n{done.stderr[-3000:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return {"steps_per_s": out["steps"] / out["seconds"], "threads_at_end": out["threads_at_end"]}


class Load:
    """Two CPU-bound processes beside the measured one, for as long as the ``with`` block lasts."""

    def __enter__(self) -> Load:
        self.spinners = [subprocess.Popen([sys.executable, "-c", _SPIN]) for _ in range(2)]
        time.sleep(2)  # let the load average and /proc/stat see them
        return self

    def __exit__(self, *exc: object) -> None:
        for spinner in self.spinners:
            spinner.kill()
            spinner.wait()


def main() -> None:
    """Run every algorithm, setting and condition; print and write the medians."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algos", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", default=str(HERE / "results" / "threads_under_load.json"))
    args = parser.parse_args()

    load = os.getloadavg()[0]
    runs: dict[str, list[dict[str, float]]] = {}
    for _ in range(args.repeats):
        for condition in ("quiet", "busy"):
            for algo in args.algos:
                for threads in SETTINGS:
                    key = f"{algo}|{condition}|{threads}"
                    if condition == "busy":
                        with Load():
                            measured = run(algo, threads)
                    else:
                        measured = run(algo, threads)
                    runs.setdefault(key, []).append(measured)
                    print(key, round(measured["steps_per_s"]), "steps/s", flush=True)
    table = []
    for algo in args.algos:
        for condition in ("quiet", "busy"):
            cells = {str(t): statistics.median(r["steps_per_s"] for r in runs[f"{algo}|{condition}|{t}"]) for t in SETTINGS}
            one = cells["1"]
            table.append(
                {
                    "algo": algo,
                    "condition": condition,
                    **{f"steps_per_s[{t}]": round(v) for t, v in cells.items()},
                    **{f"vs_one_thread[{t}]": round(v / one, 2) for t, v in cells.items()},
                }
            )
    for row in table:
        print(row)
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "load_average_at_start": load,
        "table": table,
        "runs": runs,
    }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
