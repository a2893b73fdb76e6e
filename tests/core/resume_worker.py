"""Run in a fresh process by test_exact_resume: restore a checkpoint, train, write what came out.

Usage: python resume_worker.py CHECKPOINT ITERATIONS OUTPUT.json
"""

from __future__ import annotations

import json
import sys

from corral import Algorithm

TIME_KEYS = ("time_this_iter_s", "time_total_s", "timestamp", "num_env_steps_sampled_throughput_per_sec", "perf")


def deterministic(result: dict) -> dict:
    """A result without the wall-clock keys and the machine's CPU and memory use."""
    return {k: v for k, v in result.items() if k not in TIME_KEYS}


def main() -> None:
    checkpoint, iterations, output = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    algo = Algorithm.from_checkpoint(checkpoint)
    results = [deterministic(algo.train()) for _ in range(iterations)]
    weights = {pid: {k: v.tolist() for k, v in w.items()} for pid, w in algo.get_weights().items()}
    algo.stop()
    with open(output, "w", encoding="utf-8") as f:
        json.dump({"results": results, "weights": weights}, f, default=str)


if __name__ == "__main__":
    main()
