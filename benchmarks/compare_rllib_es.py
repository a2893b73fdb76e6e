"""corral against RLlib: env steps per second of ES and ARS on CartPole-v1 with two remote env runners, as ratios.

The settings are those of RLlib's own tuned examples for CartPole (``cartpole-es.yaml``: 50 episodes per
batch; ``cartpole-ars.yaml``: 50 rollouts of which 25 are used, ``eval_prob`` 0.5), with a noise table of
25M numbers, two remote env runners, and the same 64x64 tanh network in both libraries. After one warm-up
iteration, env steps per second are counted over whole ``train()`` iterations for ``--seconds``. RLlib's ES
and ARS moved out of RLlib (to ``rllib_contrib``, not on the package index) in Ray 2.8, so RLlib runs as
released in Ray 2.7.2, in a virtual environment of its own (``--rllib-python``)::

    python -m venv /tmp/rl27
    /tmp/rl27/bin/pip install torch "ray[rllib]==2.7.2" "numpy<2" "gymnasium==0.28.1" "pandas<2.3"
    python benchmarks/compare_rllib_es.py --rllib-python /tmp/rl27/bin/python

Writes benchmarks/results/rllib_es.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MODEL = {"fcnet_hiddens": [64, 64], "fcnet_activation": "tanh"}
SETTINGS = {
    "ES": {"episodes_per_batch": 50, "noise_size": 25_000_000},
    "ARS": {"num_rollouts": 50, "rollouts_used": 25, "eval_prob": 0.5, "noise_stdev": 0.02, "sgd_stepsize": 0.01,
            "noise_size": 25_000_000},
}  # fmt: skip


def build(library: str, algorithm: str) -> Any:
    """The library's algorithm on CartPole-v1 with two remote runners and :data:`SETTINGS`."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False)
    settings = {**SETTINGS[algorithm], "model": MODEL, "seed": 0}
    if library == "corral":
        import corral

        config = corral.get_config(algorithm).environment("CartPole-v1").update_from_dict(settings)
        return config.env_runners(num_env_runners=2).reporting(log_to_tensorboard=False).build()
    from ray.tune.registry import get_trainable_cls

    config = get_trainable_cls(algorithm).get_default_config().environment("CartPole-v1").framework("torch")
    return config.update_from_dict(settings).rollouts(num_rollout_workers=2).build()


def measure(library: str, algorithm: str, seconds: float) -> dict[str, Any]:
    """Env steps per second over whole iterations, after one warm-up iteration."""
    algo = build(library, algorithm)
    try:
        before = int(algo.train()["timesteps_total"])
        start = time.perf_counter()
        steps = 0
        while time.perf_counter() - start < seconds:
            steps = int(algo.train()["timesteps_total"]) - before
        elapsed = time.perf_counter() - start
    finally:
        algo.stop()
    return {"library": library, "algorithm": algorithm, "steps": steps, "seconds": elapsed, "steps_per_s": steps / elapsed}


def main() -> None:
    """Run each library and algorithm in a fresh process, write the results, print the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rllib-python", help="a Python with ray[rllib]==2.7.2 installed")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--one", nargs=2, metavar=("LIBRARY", "ALGORITHM"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one[0], args.one[1], args.seconds)))
        return
    runs = []
    for algorithm in SETTINGS:
        for library, python in (("corral", sys.executable), ("rllib", args.rllib_python)):
            if python is None:
                continue
            command = [python, __file__, "--one", library, algorithm, "--seconds", str(args.seconds)]
            output = subprocess.run(command, check=True, capture_output=True, text=True, cwd=HERE.parent).stdout
            runs.append(json.loads(output.strip().splitlines()[-1]))
            print(runs[-1], flush=True)
    (HERE / "results" / "rllib_es.json").write_text(json.dumps({"seconds": args.seconds, "runs": runs}, indent=1) + "\n")
    for algorithm in SETTINGS:
        rate = {run["library"]: run["steps_per_s"] for run in runs if run["algorithm"] == algorithm}
        if len(rate) == 2:
            print(f"{algorithm}: corral {rate['corral']:,.0f} env steps/s, RLlib {rate['rllib']:,.0f}: "
                  f"{rate['corral'] / rate['rllib']:.1f}x")  # fmt: skip


if __name__ == "__main__":
    main()
