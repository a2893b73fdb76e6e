"""corral against Stable-Baselines3, algorithm by algorithm, in one run, as ratios.

Each library trains in its own fresh Python process per seed, so the time to
the threshold includes importing the library. Measured per run:

- seconds from process start until the mean return over the last ``window``
  episodes first reaches the case's threshold, and the env steps taken by then;
- training throughput: env steps per second over that whole training run;
- sampling throughput: env steps per second of acting alone (each library's own
  rollout path with its current policy, no learning).

corral runs its tuned example (``corral/tuned_examples/<case>.yaml``), or with
``--defaults`` its plain defaults (``get_config(ALGO).environment(ENV)``, seeded);
Stable-Baselines3 runs its defaults (e.g. ``PPO("MlpPolicy", "CartPole-v1")``).
Both report the mean return over their last ``window`` episodes.

    pip install -e ".[bench]"
    python benchmarks/compare_sb3.py ppo_cartpole --seeds 0 1 2
    python benchmarks/compare_sb3.py ppo_cartpole --defaults --seeds 0 1 2
    python benchmarks/compare_sb3.py all

Writes benchmarks/results/<case>.json (``<case>_defaults.json`` with
``--defaults``; learning curves thinned to at most 1,000 points per run) and
the matching .png; both are committed with the tables built from them.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Case:
    """One comparison: corral's tuned example against an SB3 algorithm's defaults."""

    sb3_algo: str
    env: str
    threshold: float
    window: int
    max_steps: int


CASES = {
    "ppo_cartpole": Case("PPO", "CartPole-v1", 475.0, 100, 200_000),
    "a2c_cartpole": Case("A2C", "CartPole-v1", 475.0, 100, 500_000),
    "dqn_cartpole": Case("DQN", "CartPole-v1", 475.0, 100, 100_000),
    "sac_pendulum": Case("SAC", "Pendulum-v1", -200.0, 10, 20_000),
    "td3_pendulum": Case("TD3", "Pendulum-v1", -200.0, 10, 20_000),
    "ddpg_pendulum": Case("DDPG", "Pendulum-v1", -200.0, 10, 20_000),
}


def run_corral(case_name: str, seed: int, start: float, defaults: bool = False) -> dict:
    """Train corral's tuned example (or its plain defaults) until the case's threshold; return the measurements."""
    import os
    import tempfile

    import yaml

    os.environ.setdefault("CORRAL_RESULTS_DIR", tempfile.mkdtemp(prefix="corral-bench-"))
    from corral import get_config

    case = CASES[case_name]
    if defaults:
        config = get_config(case.sb3_algo).environment(case.env).debugging(seed=seed)
    else:
        spec = next(iter(yaml.safe_load((HERE.parent / f"corral/tuned_examples/{case_name}.yaml").read_text()).values()))
        overrides = {"seed": seed, "log_to_tensorboard": False, "metrics_num_episodes_for_smoothing": case.window}
        config = get_config(spec["run"]).environment(spec["env"]).update_from_dict({**spec["config"], **overrides})
    algo = config.build()
    curve, reached = [], None
    train_start = time.perf_counter()
    while algo.counters["num_env_steps_sampled"] < case.max_steps:
        result = algo.train()
        elapsed = time.perf_counter() - start
        recent = result["hist_stats"]["episode_reward"][-case.window :]  # as SB3's: the last `window` episodes, or fewer
        mean = statistics.fmean(recent) if recent else float("nan")
        curve.append((result["timesteps_total"], mean, elapsed))
        if mean >= case.threshold:
            reached = (elapsed, result["timesteps_total"])
            break
    train_seconds = time.perf_counter() - train_start
    steps = algo.counters["num_env_steps_sampled"]
    runner = algo.env_runner_group.local_env_runner
    sample_start, sampled = time.perf_counter(), 0
    while time.perf_counter() - sample_start < 3.0:
        sampled += runner.sample().env_steps
    sampling = sampled / (time.perf_counter() - sample_start)
    return {"reached": reached, "curve": curve, "train_throughput": steps / train_seconds, "sampling_throughput": sampling}


def run_sb3(case_name: str, seed: int, start: float) -> dict:
    """Train the Stable-Baselines3 algorithm with its defaults until the threshold; return the measurements."""
    import numpy as np
    import stable_baselines3
    from stable_baselines3.common.callbacks import BaseCallback

    case = CASES[case_name]

    curve: list = []
    state: dict = {"reached": None}

    class StopAtThreshold(BaseCallback):
        def _on_rollout_end(self) -> None:
            recent = list(self.model.ep_info_buffer)[-case.window :]
            mean = float(np.mean([e["r"] for e in recent])) if recent else float("nan")
            curve.append((self.num_timesteps, mean, time.perf_counter() - start))
            if recent and mean >= case.threshold and state["reached"] is None:
                state["reached"] = (time.perf_counter() - start, self.num_timesteps)

        def _on_step(self) -> bool:
            return state["reached"] is None

    model = getattr(stable_baselines3, case.sb3_algo)("MlpPolicy", case.env, seed=seed, verbose=0)
    train_start = time.perf_counter()
    model.learn(total_timesteps=case.max_steps, callback=StopAtThreshold())
    train_seconds = time.perf_counter() - train_start
    env = model.get_env()
    obs = env.reset()
    sample_start, sampled = time.perf_counter(), 0
    while time.perf_counter() - sample_start < 3.0:
        action, _ = model.predict(obs)
        obs, _, _, _ = env.step(action)
        sampled += env.num_envs
    return {
        "reached": state["reached"],
        "curve": curve,
        "train_throughput": model.num_timesteps / train_seconds,
        "sampling_throughput": sampled / (time.perf_counter() - sample_start),
    }


def child(case_name: str, library: str, seed: int, defaults: bool) -> None:
    """Run one measurement in this (fresh) process and print it as JSON."""
    start = time.perf_counter()  # before the library is imported
    result = run_corral(case_name, seed, start, defaults) if library == "corral" else run_sb3(case_name, seed, start)
    print("RESULT " + json.dumps(result))


def measure(case_name: str, library: str, seed: int, defaults: bool) -> dict:
    """Run :func:`child` in a fresh interpreter."""
    proc = subprocess.run(
        [sys.executable, __file__, case_name, "--child", library, "--seed", str(seed), *(["--defaults"] if defaults else [])],
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{library} seed {seed} failed:\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT ") :])


def thinned(curve: list, points: int = 1000) -> list:
    """Every k-th point of a learning curve, and its last: enough to redraw it, and the committed JSON stays small."""
    step = max(1, math.ceil(len(curve) / points))
    return curve[::step] + ([curve[-1]] if (len(curve) - 1) % step else [])


def median(values: list[float]) -> float:
    """The median, NaN when nothing was measured."""
    return statistics.median(values) if values else float("nan")


def report(case_name: str, runs: dict[str, list[dict]], out_dir: Path, defaults: bool = False) -> str:
    """A markdown table of medians and ratios; also writes the JSON and the plot."""
    case = CASES[case_name]
    rows = {}
    for library, results in runs.items():
        reached = [r["reached"] for r in results if r["reached"]]
        rows[library] = {
            "seconds": median([r[0] for r in reached]),
            "steps": median([r[1] for r in reached]),
            "reached": f"{len(reached)}/{len(results)}",
            "best": median([max((r for _, r, _ in run["curve"] if not math.isnan(r)), default=math.nan) for run in results]),
            "train_sps": median([r["train_throughput"] for r in results]),
            "sample_sps": median([r["sampling_throughput"] for r in results]),
        }
    c, s = rows["corral"], rows["sb3"]
    goal = f"{case.threshold:g}"
    lines = [
        f"| library | reached {goal} | seconds to {goal} (import included) | env steps to {goal} "
        "| training steps/s | sampling steps/s |",
        "|---|---|---|---|---|---|",
    ]

    def cell(value: float, fmt: str) -> str:
        return "not reached" if math.isnan(value) else format(value, fmt)

    def ratio(num: float, den: float) -> str:
        return "n/a" if math.isnan(num) or math.isnan(den) else f"{num / den:.2f}x"

    which = "defaults" if defaults else "tuned example"
    for name, row in ((f"corral {case.sb3_algo} ({which})", c), (f"Stable-Baselines3 {case.sb3_algo} (defaults)", s)):
        lines.append(
            f"| {name} | {row['reached']} (best {row['best']:.0f}) | {cell(row['seconds'], '.1f')} | "
            f"{cell(row['steps'], ',.0f')} | {row['train_sps']:,.0f} | {row['sample_sps']:,.0f} |"
        )
    speedup = "SB3 did not reach it" if math.isnan(s["seconds"]) else f"**{s['seconds'] / c['seconds']:.1f}x faster**"
    lines.append(
        f"| **ratio SB3 / corral** | | {speedup} | {ratio(s['steps'], c['steps'])} | "
        f"{c['train_sps'] / s['train_sps']:.1f}x | {c['sample_sps'] / s['sample_sps']:.1f}x |"
    )
    table = "\n".join(lines)
    out_dir.mkdir(parents=True, exist_ok=True)
    kept = {library: [{**r, "curve": thinned(r["curve"])} for r in results] for library, results in runs.items()}
    stem = f"{case_name}_defaults" if defaults else case_name
    (out_dir / f"{stem}.json").write_text(json.dumps({"runs": kept, "summary": rows}, separators=(",", ":")))
    plot(case_name, runs, out_dir / f"{stem}.png")
    return table


def plot(case_name: str, runs: dict[str, list[dict]], path: Path) -> None:
    """Learning curves against wall-clock time and against env steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    case = CASES[case_name]
    fig, (by_time, by_steps) = plt.subplots(1, 2, figsize=(11, 4))
    colors = {"corral": "tab:green", "sb3": "tab:blue"}
    labels = {"corral": f"corral {case.sb3_algo}", "sb3": f"Stable-Baselines3 {case.sb3_algo}"}
    for library, results in runs.items():
        for i, result in enumerate(results):
            steps, reward, seconds = zip(*result["curve"], strict=True) if result["curve"] else ((), (), ())
            label = labels[library] if i == 0 else None
            by_time.plot(seconds, reward, color=colors[library], alpha=0.8, label=label)
            by_steps.plot(steps, reward, color=colors[library], alpha=0.8, label=label)
    for ax, xlabel in ((by_time, "seconds since process start (import included)"), (by_steps, "env steps")):
        ax.axhline(case.threshold, color="grey", linestyle="--", linewidth=1)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(f"mean return, last {case.window} episodes")
        ax.legend()
    fig.suptitle(f"{case.sb3_algo} on {case.env}, one line per seed")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    """The command line: a case (or ``all``), its seeds, or a child run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case", choices=[*CASES, "all"], help="which comparison to run")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--child", choices=["corral", "sb3"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--defaults", action="store_true", help="corral's plain defaults instead of its tuned example")
    args = parser.parse_args()
    if args.child:
        child(args.case, args.child, args.seed, args.defaults)
        return
    for case_name in CASES if args.case == "all" else [args.case]:
        runs: dict[str, list[dict]] = {"corral": [], "sb3": []}
        for seed in args.seeds:
            for library in runs:
                result = measure(case_name, library, seed, args.defaults)
                runs[library].append(result)
                print(
                    f"{case_name} {library:6s} seed {seed}: reached={result['reached']} "
                    f"train {result['train_throughput']:,.0f} steps/s, sampling {result['sampling_throughput']:,.0f} steps/s",
                    flush=True,
                )
        print(f"\n### {case_name}\n\n{report(case_name, runs, args.out, args.defaults)}\n", flush=True)


if __name__ == "__main__":
    main()
