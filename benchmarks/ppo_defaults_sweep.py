"""How PPO's default minibatch size and learning rate were chosen: env steps and seconds to a goal, per setting.

Each setting trains ``corral.get_config("PPO").environment(ENV).debugging(seed=s)``
with only the listed options changed, in a fresh process per run (so no run
warms another's caches), one run at a time. CartPole-v1 runs until the
100-episode mean reaches 475 (or 200k env steps); Acrobot-v1 and Pendulum-v1
run a fixed budget and report the mean return along the way, to check that a
setting fast on CartPole does not learn worse elsewhere.

    python benchmarks/ppo_defaults_sweep.py            # both parts
    python benchmarks/ppo_defaults_sweep.py --part cartpole --seeds 0 1 2

Writes benchmarks/results/ppo_defaults_sweep.json; benchmarks/README.md's
table of PPO defaults is built from it. Measure on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

BEFORE = {"minibatch_size": 128, "lr": 3e-4}
SETTINGS = [
    BEFORE,
    {"minibatch_size": 256, "lr": 3e-4},
    {"minibatch_size": 256, "lr": 1e-3},
    {"minibatch_size": 512, "lr": 1e-3},
    {"minibatch_size": 512, "lr": 2e-3},
    {"minibatch_size": 512, "lr": 2e-3, "clip_param": 0.2, "grad_clip": 0.5, "kl_coeff": 0.0},
]
ELSEWHERE = [("Acrobot-v1", 200_000), ("Pendulum-v1", 400_000)]

_RUN = """
import json, sys, time
import corral
env, goal, budget, seed, options = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), json.loads(sys.argv[5])
algo = corral.get_config("PPO").environment(env).training(**options).debugging(seed=seed).build()
start, curve = time.perf_counter(), []
while True:
    result = algo.train()
    curve.append([result["timesteps_total"], result["episode_reward_mean"], time.perf_counter() - start])
    if result["episode_reward_mean"] >= goal or result["timesteps_total"] >= budget:
        break
print(json.dumps(curve))
"""


def run(env: str, goal: float, budget: int, seed: int, options: dict) -> list[list[float]]:
    """One training run in a fresh process: its curve of [env steps, mean return, seconds since build]."""
    with tempfile.TemporaryDirectory() as results:
        done = subprocess.run(
            [sys.executable, "-c", _RUN, env, str(goal), str(budget), str(seed), json.dumps(options)],
            capture_output=True,
            text=True,
            check=True,
            env={"CORRAL_RESULTS_DIR": results, "PATH": "/usr/bin:/bin"},
        )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    """Run the parts asked for and merge them into the results file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["cartpole", "elsewhere", "both"], default="both")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args()
    out = HERE / "results" / "ppo_defaults_sweep.json"
    results = json.loads(out.read_text()) if out.exists() else {}
    if args.part in ("cartpole", "both"):
        rows = []
        for options in SETTINGS:
            for seed in args.seeds:
                steps, reward, seconds = run("CartPole-v1", 475.0, 200_000, seed, options)[-1]
                rows.append({"options": options, "seed": seed, "steps": steps, "reached": reward >= 475, "seconds": seconds})
                print(json.dumps(rows[-1]), flush=True)
        results["cartpole"] = rows
    if args.part in ("elsewhere", "both"):
        rows = []
        for env, budget in ELSEWHERE:
            for options in (BEFORE, SETTINGS[4]):
                curve = run(env, float("inf"), budget, args.seeds[0], options)
                rows.append({"env": env, "options": options, "seed": args.seeds[0], "curve": curve})
                print(env, options, "final", round(curve[-1][1], 1), flush=True)
        results["elsewhere"] = rows
    out.write_text(json.dumps(results, indent=1) + "\n")
    print("wrote", out)


if __name__ == "__main__":
    main()
