"""SAC's update against its arithmetic floor: the wall time of one update over the time of its matrix products alone.

SAC's defaults are RLlib's (256x256 networks, batch 256, one update per env
step), so its speed is bounded by the matrix products of each update. This
script measures how close an update comes to that bound:

- *update*: ``policy.learn_on_batch`` on a replayed batch of 256 rows (the critics',
  the actor's and the temperature's losses, one backward pass, one fused Adam step);
- *matrix products*: every matrix product that one update runs (recorded with torch's
  profiler: their ops and shapes, forward and backward), replayed alone on tensors of the
  same shapes, in the same order, on as many threads.

Both are timed in the same process, alternating, as medians over ``--repeats`` rounds of
``--updates`` calls. The ratio update / matrix products is what corral's own code adds
(autograd bookkeeping, element-wise ops, the optimizer, Python).

    python benchmarks/sac_update_floor.py                   # Pendulum-v1, default threads
    python benchmarks/sac_update_floor.py --threads 1

Writes benchmarks/results/sac_update_floor.json. Measure on a quiet machine (the load
average is recorded with the results).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile

import corral
from corral.core import SampleBatch

HERE = Path(__file__).resolve().parent
MATMULS = {"aten::mm": torch.mm, "aten::addmm": torch.addmm, "aten::bmm": torch.bmm, "aten::baddbmm": torch.baddbmm}


def replay_batch(policy: corral.Policy, rows: int, seed: int = 0) -> SampleBatch:
    """A replayed batch as SAC's update reads it: observations, actions and rewards drawn from the spaces."""
    rng = np.random.default_rng(seed)
    obs_dim = int(np.prod(policy.observation_space.shape))
    low, high = policy.action_space.low, policy.action_space.high
    return SampleBatch(
        {
            SampleBatch.OBS: rng.normal(size=(rows, obs_dim)).astype(np.float32),
            SampleBatch.NEXT_OBS: rng.normal(size=(rows, obs_dim)).astype(np.float32),
            SampleBatch.ACTIONS: rng.uniform(low, high, size=(rows, *policy.action_space.shape)).astype(np.float32),
            SampleBatch.REWARDS: rng.normal(size=rows).astype(np.float32),
            SampleBatch.DISCOUNTS: np.full(rows, 0.99, np.float32),
            SampleBatch.WEIGHTS: np.ones(rows, np.float32),
        }
    )


def recorded_matmuls(update: Callable[[], object]) -> list[tuple[str, list[list[int]]]]:
    """The matrix products one call of ``update`` runs (backward ones too): each op's name and input shapes."""
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        update()
    return [(e.name, [list(s) for s in e.input_shapes if s]) for e in prof.events() if e.name in MATMULS]


def matmul_replay(ops: list[tuple[str, list[list[int]]]]) -> Callable[[], None]:
    """A function that runs the recorded matrix products, and nothing else, on preallocated inputs."""
    calls = [(MATMULS[name], [torch.randn(shape) for shape in shapes]) for name, shapes in ops]

    def run() -> None:
        for op, inputs in calls:
            op(*inputs)

    return run


def median_ms(fn: Callable[[], object], calls: int) -> float:
    """Milliseconds per call of ``fn``, over ``calls`` calls."""
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e3


def main() -> None:
    """Measure, print and write the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="Pendulum-v1")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: what SAC's default decides)")
    parser.add_argument("--updates", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", default=str(HERE / "results" / "sac_update_floor.json"))
    args = parser.parse_args()

    load = os.getloadavg()[0]
    config = corral.get_config("SAC").environment(args.env).debugging(seed=0).reporting(log_to_tensorboard=False)
    algo = config.build()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    policy = algo.get_policy()
    batch = replay_batch(policy, config.train_batch_size)

    def update() -> object:
        return policy.learn_on_batch(batch)

    for _ in range(50):
        update()  # warm caches and the allocator
    ops = recorded_matmuls(update)
    floor = matmul_replay(ops)
    for _ in range(50):
        floor()
    rounds = [(median_ms(update, args.updates), median_ms(floor, args.updates)) for _ in range(args.repeats)]
    update_ms = statistics.median(u for u, _ in rounds)
    floor_ms = statistics.median(f for _, f in rounds)
    result = {
        "env": args.env,
        "threads": torch.get_num_threads(),
        "batch": config.train_batch_size,
        "hiddens": config.model.fcnet_hiddens,
        "matmuls_per_update": len(ops),
        "update_ms": round(update_ms, 3),
        "matmul_ms": round(floor_ms, 3),
        "ratio": round(update_ms / floor_ms, 3),
        "rounds_ms": [[round(u, 3), round(f, 3)] for u, f in rounds],
        "load_average_at_start": load,
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d"),
    }
    algo.stop()
    print(json.dumps(result, indent=1))
    out = Path(args.out)
    runs = json.loads(out.read_text()) if out.exists() else []
    out.write_text(json.dumps([*runs, result], indent=1) + "\n")


if __name__ == "__main__":
    main()
