"""What one PPO gradient step costs in one process, by minibatch rows: the compute side of a Learner's step.

With K Learner actors, each computes its 1/K of every minibatch's rows, then
all-reduces the gradients. ``benchmarks/scaling.md`` projects 32 Learners from
this and the all-reduce times of ``learners.py``. PPO on CartPole-v1, one
torch thread, PPO's default 64x64 network and a 512x512 one; each minibatch
size's update is repeated on one batch (the state put back before each) and
the fastest, per gradient step, is kept.

    python benchmarks/learner_step_cost.py   # writes benchmarks/results/learner_step_cost.json
"""

from __future__ import annotations

import os

from update_timing import timed_updates, write_result

ROWS = (16, 64, 128, 512)
"""minibatch rows: PPO's default 512 split over 32, 8 and 4 Learners, and whole"""
NETWORKS = {"small": [64, 64], "large": [512, 512]}
REPEATS = 5


def step_milliseconds(hidden: list[int], rows: int) -> float:
    """The fastest of :data:`REPEATS` updates with minibatches of ``rows``, per gradient step, in ms."""
    from corral.plugins.ppo import PPOConfig

    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .training(model={"fcnet_hiddens": hidden}, train_batch_size=max(512, rows * 8), minibatch_size=rows, num_epochs=2)
        .reporting(log_to_tensorboard=False)
        .debugging(seed=0)
    )
    return round(min(seconds / stats["num_sgd_updates"] for seconds, stats in timed_updates(config, REPEATS)) * 1000, 3)


def main() -> None:
    """Time every network and minibatch size; write the raw figures."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    load = os.getloadavg()[0]
    cases = {name: {str(rows): step_milliseconds(hidden, rows) for rows in ROWS} for name, hidden in NETWORKS.items()}
    print(cases, flush=True)
    write_result("learner_step_cost", load, milliseconds_per_gradient_step_by_rows=cases)


if __name__ == "__main__":
    main()
