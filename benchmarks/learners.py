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

SAC makes an update per env step instead, on a replayed minibatch: its
training iterations are timed per update, in process and on two Learners,
with the Learners keeping the state between an iteration's updates (what
``train()`` does) and with the state sent out and back at every update (what
it did before, and still does for one update an iteration).

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
SAC_NETWORKS = {"tuned": [64, 64], "defaults": [256, 256]}
"""corral's tuned example's networks (sac_pendulum.yaml), and SAC's default ones"""
SAC_ITERATIONS = 3
"""SAC iterations of 200 updates timed per setting, after one to start; the fastest is kept"""


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
            from corral.core.learning.learners.learner_actor import LearnerActor
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


def sac_update_seconds(hidden: list[int], learners: int, keeping_state: bool = True) -> float:
    """Seconds per SAC update on Pendulum-v1 (one per env step, minibatches of 256), the fastest iteration's.

    Args:
        hidden: the networks' layers.
        learners: how many Learner actors.
        keeping_state: whether the Learners keep the state between an iteration's updates, else it travels both
            ways at every update.
    """
    import contextlib

    from corral.plugins.sac import SACConfig

    config = (
        SACConfig()
        .environment("Pendulum-v1")
        .training(learning_starts=256, training_intensity=256, model={"fcnet_hiddens": hidden})
        .reporting(min_sample_timesteps_per_iteration=200, log_to_tensorboard=False)
        .learners(num_learners=learners)
        .debugging(seed=0)
    )
    algo = config.build()
    if not keeping_state:
        algo.learners_keeping_state = contextlib.nullcontext  # type: ignore[method-assign]
    try:
        algo.train()  # fills the buffer past learning_starts
        seconds = []
        for _ in range(SAC_ITERATIONS):
            before, start = algo.counters["num_env_steps_trained"], time.perf_counter()
            trained = algo.train()["num_env_steps_trained"] - before
            seconds.append((time.perf_counter() - start) / (trained / 256))
        return min(seconds)
    finally:
        algo.stop()


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
    for name, hidden in SAC_NETWORKS.items():
        ms = {
            "in_process": sac_update_seconds(hidden, 0) * 1000,
            "two_learners_keeping_state": sac_update_seconds(hidden, 2) * 1000,
            "two_learners_state_every_update": sac_update_seconds(hidden, 2, keeping_state=False) * 1000,
        }
        cases[f"sac_{name}"] = {
            "fcnet_hiddens": hidden,
            "ms_per_update": {key: round(value, 2) for key, value in ms.items()},
            "keeping_state_speedup": round(ms["two_learners_state_every_update"] / ms["two_learners_keeping_state"], 2),
            "two_learners_over_in_process": round(ms["two_learners_keeping_state"] / ms["in_process"], 2),
        }
        print(f"sac_{name}", cases[f"sac_{name}"], flush=True)
    write_result("learners", load, cases=cases)


if __name__ == "__main__":
    main()
