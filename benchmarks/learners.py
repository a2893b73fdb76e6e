"""What Learner actors cost and give: seconds per PPO update with 0, 1 and 2 Learners, for a small and a large network.

PPO on CartPole-v1 with its defaults (a 4,000-step batch, minibatches of 512,
10 epochs: 80 gradient steps per update), one torch thread per process. Each
setting learns on the same sampled batch several times (the policy's state is
put back before each update, so every update does the same work) and keeps the
fastest, so a busy moment does not count against one setting.

- 0 Learners: the update in this process, as without ``learners()``;
- 1 Learner: the same update on one actor: what moving it costs (the policy's
  state out and back, the batch through Ray's object store);
- 2 Learners: each computes its half of every minibatch's loss, and the two
  all-reduce their gradients (gloo) at every gradient step.

The all-reduce alone is timed too: the gradients of each network, averaged
between two processes as the Learners do it, many times over.

    python benchmarks/learners.py   # writes benchmarks/results/learners.json

On a machine with two cores, the two Learners and this process share them:
read the 2-Learner figures as what data parallelism costs there, not what it
gives on a machine with a core (or a GPU) per Learner.
"""

from __future__ import annotations

import itertools
import os
import time
from typing import Any

from update_timing import timed_updates, write_result

UPDATES = 12
"""updates per setting; the fastest is kept"""
NETWORKS = {"small": [64, 64], "large": [512, 512]}
"""the network of each case: PPO's default, and one whose gradient steps cost more than moving them"""
REDUCES = 200
"""all-reduces timed per network"""


def update_seconds(hidden: list[int], learners: int) -> float:
    """The fastest of :data:`UPDATES` PPO updates on one batch with ``learners`` Learners."""
    from corral.plugins.ppo import PPOConfig

    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .training(model={"fcnet_hiddens": hidden})
        .learners(num_learners=learners)
        .reporting(log_to_tensorboard=False)
        .debugging(seed=0)
    )
    return min(seconds for seconds, _ in timed_updates(config, UPDATES))


def all_reduce_seconds(hidden: list[int]) -> float:
    """Seconds per gradient average between two Ray actors with gloo, for PPO's network of ``hidden`` layers."""
    from corral.core.learning.learners.learner_group import ensure_ray

    ray = ensure_ray()

    @ray.remote(num_cpus=1)
    class Reducer:
        def __init__(self, rank: int) -> None:
            from corral.core.learning.learners.learner_group import LearnerActor
            from corral.plugins.ppo import PPOConfig

            self.rank = rank
            self.actor = LearnerActor(PPOConfig(), rank, 2)  # for its address and join, as a LearnerGroup starts it

        def address(self) -> tuple[str, int]:
            return self.actor.address()

        def join(self, host: str, port: int) -> None:
            self.actor.join(host, port)

        def run(self, hidden: list[int], times: int) -> float:
            import torch

            from corral.core.learning.learners.gradient_sync import GradientSync

            sizes = [4, *hidden]
            params = [torch.nn.Parameter(torch.randn(b, a)) for a, b in itertools.pairwise(sizes)]
            for p in params:
                p.grad = torch.randn_like(p)
            sync = GradientSync(self.rank, 2, torch.device("cpu"))
            sync.average_gradients(params, 1.0)
            start = time.perf_counter()
            for _ in range(times):
                sync.average_gradients(params, 1.0)
            return (time.perf_counter() - start) / times

    reducers = [Reducer.remote(rank) for rank in range(2)]  # type: ignore[attr-defined]
    host, port = ray.get(reducers[0].address.remote())
    ray.get([r.join.remote(host, port) for r in reducers])
    seconds = ray.get([r.run.remote(hidden, REDUCES) for r in reducers])
    for r in reducers:
        ray.kill(r)
    return float(max(seconds))


def main() -> None:
    """Time every setting and write the raw figures and ratios."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    load = os.getloadavg()[0]
    cases: dict[str, Any] = {}
    for name, hidden in NETWORKS.items():
        seconds = {learners: update_seconds(hidden, learners) for learners in (0, 1, 2)}
        reduce = all_reduce_seconds(hidden)
        cases[name] = {
            "fcnet_hiddens": hidden,
            "update_seconds": {str(k): round(v, 4) for k, v in seconds.items()},
            "all_reduce_ms": round(reduce * 1000, 3),
            "all_reduces_per_update": 80,
            "one_learner_over_in_process": round(seconds[1] / seconds[0], 2),
            "two_learners_over_in_process": round(seconds[2] / seconds[0], 2),
        }
        print(name, cases[name], flush=True)
    write_result("learners", load, cases=cases)


if __name__ == "__main__":
    main()
