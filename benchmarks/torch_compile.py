"""Whether ``torch_compile_learner`` and ``torch_compile_worker`` pay on a CPU: PPO's update and sampling, eager and compiled.

PPO on CartPole-v1 with its defaults (a 4,000-step batch, minibatches of 512,
10 epochs), one torch thread, for PPO's default 64x64 network and a 512x512
one. For each:

- update: the fastest of several updates on one sampled batch (the policy's
  state put back before each), eager and with ``torch_compile_learner``
  (inductor); the first compiled update, which compiles, is timed on its own;
- sampling: env steps per second of the local env runner, eager and with
  ``torch_compile_worker`` (inductor), after a warm-up call that compiles.

    python benchmarks/torch_compile.py   # writes benchmarks/results/torch_compile.json
"""

from __future__ import annotations

import os
import time
from typing import Any

from update_timing import timed_updates, write_result

UPDATES = 6
"""updates per setting after the first; the fastest is kept"""
SAMPLE_CALLS = 5
"""sample calls of 4,000 steps per setting after the warm-up; the fastest is kept"""
NETWORKS = {"small": [64, 64], "large": [512, 512]}


def _config(hidden: list[int], **framework: Any) -> Any:
    from corral.plugins.ppo import PPOConfig

    config = PPOConfig().environment("CartPole-v1").training(model={"fcnet_hiddens": hidden}).debugging(seed=0)
    return config.reporting(log_to_tensorboard=False).framework(**framework)


def update_seconds(hidden: list[int], compiled: bool) -> dict[str, float]:
    """The first update's seconds and the fastest of the next :data:`UPDATES`."""
    times = [seconds for seconds, _ in timed_updates(_config(hidden, torch_compile_learner=compiled), UPDATES + 1)]
    return {"first": round(times[0], 3), "fastest": round(min(times[1:]), 4)}


def sampling_steps_per_second(hidden: list[int], compiled: bool) -> float:
    """The local runner's env steps per second, the fastest of :data:`SAMPLE_CALLS` calls after a warm-up."""
    algo = _config(hidden, torch_compile_worker=compiled).build()
    try:
        algo.sample(4000)  # compiles, for each batch shape acting meets
        best = 0.0
        for _ in range(SAMPLE_CALLS):
            start = time.perf_counter()
            steps = algo.sample(4000).env_steps
            best = max(best, steps / (time.perf_counter() - start))
        return round(best, 1)
    finally:
        algo.stop()


def main() -> None:
    """Time every setting and write the raw figures and ratios."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    load = os.getloadavg()[0]
    cases: dict[str, Any] = {}
    for name, hidden in NETWORKS.items():
        eager, compiled = update_seconds(hidden, False), update_seconds(hidden, True)
        sampling = {"eager": sampling_steps_per_second(hidden, False), "compiled": sampling_steps_per_second(hidden, True)}
        cases[name] = {
            "fcnet_hiddens": hidden,
            "update_seconds": {"eager": eager, "compiled": compiled},
            "compiled_update_over_eager": round(compiled["fastest"] / eager["fastest"], 2),
            "first_compiled_update_over_eager": round(compiled["first"] / eager["fastest"], 1),
            "sampling_steps_per_second": sampling,
            "compiled_sampling_over_eager": round(sampling["compiled"] / sampling["eager"], 2),
        }
        print(name, cases[name], flush=True)
    write_result("torch_compile", load, torch=torch.__version__, cases=cases)


if __name__ == "__main__":
    main()
