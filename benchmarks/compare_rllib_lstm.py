"""LSTM PPO on StatelessCartPole: corral against RLlib, and corral's feed-forward PPO, in one run, as ratios.

StatelessCartPole (``corral.testing.envs``) is CartPole-v1 without the
velocities (observation ``[x, theta]``): a policy needs memory to balance it.
Three runs, each in a fresh Python process, one after another:

- ``corral_lstm``: corral's PPO with ``model={"use_lstm": True, ...}``, trained
  until the training mean episode return first reaches 150, or the step or
  time cap is spent (then it records "not reached");
- ``rllib_lstm``: RLlib's PPO (its default, new API stack) with its LSTM
  (``DefaultModelConfig(use_lstm=True, ...)``), the same way;
- ``corral_feed_forward``: corral's PPO without memory, for the whole step cap:
  what the recurrent path costs against it, and that it stays below 150.

Measured per run: env steps per second over the time spent inside
``train()``; the training seconds and env steps until the mean return (over
the last 100 episodes, both libraries' default) first reaches 150; the best
mean return; the time to import and build. The ratios are corral's LSTM
steps/s over RLlib's, RLlib's seconds to 150 over corral's, and corral's LSTM
steps/s over its feed-forward's.

Both libraries get the same env class, the same network (a 64-unit tanh layer,
an LSTM of 64 cells over it, linear policy and value heads on its output, the
value sharing every layer), sequences of at most 20 steps, the same PPO
settings (:data:`PPO_SETTINGS`, corral's PPO defaults), sampling in the
training process (no remote env runners, no remote learner), one torch
thread (:data:`TORCH_THREADS`) and seed 0. Everything else is each library's
default. RLlib writes its log folder under ``~/ray_results`` whatever it is
told, so every child runs with a throwaway ``HOME``.

    . .venv/bin/activate
    python benchmarks/compare_rllib_lstm.py          # writes benchmarks/results/ppo_lstm_stateless_cartpole.json
    python benchmarks/compare_rllib_lstm.py --smoke  # 2 iterations each, written under the temporary folder
    python benchmarks/compare_rllib_lstm.py --vf-loss-coeff 1e-4 \
        --output benchmarks/results/ppo_lstm_stateless_cartpole_vf_1e-4.json  # RLlib's LSTM example's value weight
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUTPUT = HERE / "results" / "ppo_lstm_stateless_cartpole.json"
SMOKE_OUTPUT = Path(tempfile.gettempdir()) / "ppo_lstm_stateless_cartpole_smoke.json"
CASES = ("corral_lstm", "rllib_lstm", "corral_feed_forward")

TARGET = 150.0
"""the training mean episode return (last 100 episodes) a run must first reach"""
STEP_CAP = 600_000
"""env steps after which an LSTM run records "not reached"; the feed-forward run's whole budget"""
SECONDS_CAP = 900.0
"""seconds inside ``train()`` after which a run stops, whatever it reached"""
SMOKE_ITERATIONS = 2
"""``train()`` calls per run with ``--smoke``"""
CHILD_TIMEOUT_S = 1800
"""a child's whole life (imports, build, training up to the caps, stop) before it is killed"""
SEED = 0
TORCH_THREADS = 1
"""torch intra-op threads in every run (OMP_NUM_THREADS and MKL_NUM_THREADS too)"""
SMOOTHING_EPISODES = 100
"""episodes the mean return is taken over: both libraries' default, set explicitly"""

PPO_SETTINGS: dict[str, Any] = {
    "num_envs_per_env_runner": 8,
    "train_batch_size": 4000,
    "minibatch_size": 512,
    "num_epochs": 10,
    "lr": 2e-3,
    "gamma": 0.99,
    "lambda_": 0.95,
    "clip_param": 0.3,
    "kl_coeff": 0.2,
    "kl_target": 0.01,
    "vf_loss_coeff": 0.25,
    "entropy_coeff": 0.0,
}
"""corral's PPO defaults (those its slow StatelessCartPole test learns with), given to both libraries; neither
clips gradients, and RLlib's value-loss clamp (vf_clip_param, 10 by default) is off, as corral's is by default
(both weigh the mean squared value error by vf_loss_coeff)"""

NETWORK: dict[str, Any] = {
    "fcnet_hiddens": [64],
    "fcnet_activation": "tanh",
    "lstm_cell_size": 64,
    "max_seq_len": 20,
    "vf_share_layers": True,
}
"""the network of every run (the feed-forward one without the LSTM); the LSTM's value head shares all layers"""


# --------------------------------------------------------------------------- #
# one run, in a child process
# --------------------------------------------------------------------------- #
def corral_algo(memory: bool) -> Any:
    """Build corral's PPO on StatelessCartPole with :data:`PPO_SETTINGS` and :data:`NETWORK`.

    Args:
        memory: whether the model has the LSTM (``use_lstm``).

    Returns:
        The built corral ``PPO`` algorithm.
    """
    from corral.plugins.ppo import PPOConfig
    from corral.testing.envs import StatelessCartPole

    training = {k: v for k, v in PPO_SETTINGS.items() if k != "num_envs_per_env_runner"}
    return (
        PPOConfig()
        .environment(StatelessCartPole)
        .env_runners(num_env_runners=0, num_envs_per_env_runner=PPO_SETTINGS["num_envs_per_env_runner"])
        .training(**training, grad_clip=None, vf_clip_param=None, model={**NETWORK, "use_lstm": memory})
        .resources(num_torch_threads=TORCH_THREADS)
        .reporting(metrics_num_episodes_for_smoothing=SMOOTHING_EPISODES, log_to_tensorboard=False)
        .debugging(seed=SEED)
        .build()
    )


def rllib_algo() -> Any:
    """Build RLlib's PPO (new API stack) with its LSTM on corral's StatelessCartPole, with the same settings.

    Returns:
        The built RLlib ``PPO`` algorithm: a local env runner and a local learner, in this process.
    """
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    from corral.testing.envs import StatelessCartPole

    s = PPO_SETTINGS
    return (
        PPOConfig()
        .environment(StatelessCartPole)
        .env_runners(num_env_runners=0, num_envs_per_env_runner=s["num_envs_per_env_runner"])
        .learners(num_learners=0)
        .training(
            train_batch_size_per_learner=s["train_batch_size"],
            minibatch_size=s["minibatch_size"],
            num_epochs=s["num_epochs"],
            lr=s["lr"],
            gamma=s["gamma"],
            lambda_=s["lambda_"],
            clip_param=s["clip_param"],
            use_kl_loss=True,
            kl_coeff=s["kl_coeff"],
            kl_target=s["kl_target"],
            vf_loss_coeff=s["vf_loss_coeff"],
            entropy_coeff=s["entropy_coeff"],
            vf_clip_param=float("inf"),
            grad_clip=None,
        )
        .rl_module(model_config=DefaultModelConfig(use_lstm=True, **NETWORK))
        .reporting(metrics_num_episodes_for_smoothing=SMOOTHING_EPISODES)
        .debugging(seed=SEED)
        .build_algo()
    )


def progress(result: dict[str, Any], library: str) -> tuple[int, float]:
    """Read the env steps sampled so far and the training mean episode return from one ``train()`` result.

    Args:
        result: what ``train()`` returned.
        library: ``"corral"`` or ``"rllib"`` (whose new stack reports under ``env_runners``).

    Returns:
        ``(env steps sampled in all, mean return over the last 100 episodes)``; the return is NaN
        before the first episode ends.
    """
    if library == "rllib":
        runners = result["env_runners"]
        steps = result.get("num_env_steps_sampled_lifetime", runners.get("num_env_steps_sampled_lifetime", 0))
        return int(steps), float(runners.get("episode_return_mean", math.nan))
    return int(result["num_env_steps_sampled"]), float(result["episode_reward_mean"])


def learner_stats(result: dict[str, Any], library: str) -> dict[str, float]:
    """The numeric learner statistics of the default policy in one ``train()`` result, for the record.

    Args:
        result: what ``train()`` returned.
        library: ``"corral"`` or ``"rllib"``.

    Returns:
        Each numeric statistic by name (losses, KL coefficient, update counts), rounded.
    """
    if library == "rllib":
        stats = result.get("learners", {}).get("default_policy", {})
    else:
        stats = result.get("info", {}).get("learner", {}).get("default_policy", {})
    return {k: round(float(v), 6) for k, v in stats.items() if isinstance(v, int | float) and math.isfinite(float(v))}


def json_number(value: float) -> float | None:
    """A float for JSON: NaN and infinities (no episode finished yet) become None.

    Args:
        value: the number.

    Returns:
        The number rounded to 3 decimals, or None.
    """
    return round(value, 3) if math.isfinite(value) else None


def train_case(case: str, smoke: bool) -> dict[str, Any]:
    """Build one case and train it until the target (LSTM runs), the step cap or the time cap.

    Args:
        case: one of :data:`CASES`.
        smoke: stop after :data:`SMOKE_ITERATIONS` iterations.

    Returns:
        The run's numbers: its curve of ``[env steps, training seconds, mean return]`` per
        iteration, env steps per second inside ``train()``, the seconds and env steps to the
        target (None if not reached), the best mean return, why it stopped, the build time,
        the torch thread count at the end and the last iteration's learner statistics.
    """
    import torch

    torch.set_num_threads(TORCH_THREADS)
    library = "rllib" if case.startswith("rllib") else "corral"
    load_before = os.getloadavg()
    build_start = time.perf_counter()
    algo = rllib_algo() if library == "rllib" else corral_algo(memory=case == "corral_lstm")
    build_s = time.perf_counter() - build_start
    curve: list[list[float | None]] = []
    train_s, steps, best, reached = 0.0, 0, -math.inf, None
    while True:
        start = time.perf_counter()
        result = algo.train()
        train_s += time.perf_counter() - start
        steps, mean_return = progress(result, library)
        curve.append([steps, round(train_s, 3), json_number(mean_return)])
        best = max(best, mean_return) if math.isfinite(mean_return) else best
        if reached is None and mean_return >= TARGET:
            reached = (steps, train_s)
            if case != "corral_feed_forward":
                stop = "target"
                break
        if smoke and len(curve) >= SMOKE_ITERATIONS:
            stop = "smoke"
            break
        if steps >= STEP_CAP or train_s >= SECONDS_CAP:
            stop = "step cap" if steps >= STEP_CAP else "time cap"
            break
    stats = learner_stats(result, library)
    threads = torch.get_num_threads()
    algo.stop()
    return {
        "outcome": "reached" if reached else "not reached",
        "stopped_by": stop,
        "env_steps": steps,
        "train_seconds": round(train_s, 3),
        "env_steps_per_second": round(steps / train_s, 1),
        "seconds_to_target": None if reached is None else round(reached[1], 3),
        "env_steps_to_target": None if reached is None else reached[0],
        "best_mean_return": json_number(best),
        "iterations": len(curve),
        "build_seconds": round(build_s, 3),
        "torch_threads_at_end": threads,
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "last_learner_stats": stats,
        "curve": curve,
    }


def child(case: str, out: Path, smoke: bool) -> None:
    """The child process's work: train one case and write its numbers as JSON.

    Args:
        case: one of :data:`CASES`.
        out: the file to write.
        smoke: stop after :data:`SMOKE_ITERATIONS` iterations.
    """
    out.write_text(json.dumps(train_case(case, smoke)))


# --------------------------------------------------------------------------- #
# the benchmark, in the parent process
# --------------------------------------------------------------------------- #
def in_fresh_process(case: str, smoke: bool) -> dict[str, Any]:
    """Run one case in a new Python process with a throwaway ``HOME`` and one torch thread.

    Args:
        case: one of :data:`CASES`.
        smoke: stop after :data:`SMOKE_ITERATIONS` iterations.

    Returns:
        The child's numbers, or ``{"error": ...}`` if it failed or ran out of time (its output went to the console).
    """
    with tempfile.TemporaryDirectory(prefix="corral-bench-lstm-") as folder:
        out = Path(folder) / "result.json"
        env = {
            **os.environ,
            "HOME": folder,  # RLlib's ~/ray_results
            "CORRAL_RESULTS_DIR": os.environ.get("CORRAL_RESULTS_DIR", str(Path(folder) / "corral_results")),
            "OMP_NUM_THREADS": str(TORCH_THREADS),
            "MKL_NUM_THREADS": str(TORCH_THREADS),
        }
        command = [sys.executable, __file__, "--child", case, str(out), *(["--smoke"] if smoke else [])]
        command += ["--vf-loss-coeff", str(PPO_SETTINGS["vf_loss_coeff"])]
        try:
            proc = subprocess.run(command, env=env, timeout=CHILD_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            return {"error": f"killed after {CHILD_TIMEOUT_S} s"}
        if proc.returncode != 0 or not out.exists():
            return {"error": f"exit status {proc.returncode}; its traceback is in the output above"}
        result: dict[str, Any] = json.loads(out.read_text())
        return result


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """``numerator / denominator`` rounded, or None where either is missing or zero.

    Args:
        numerator: the top number.
        denominator: the bottom number.

    Returns:
        The ratio, or None.
    """
    return round(numerator / denominator, 3) if numerator and denominator else None


def ratios(runs: dict[str, dict[str, Any]]) -> dict[str, float | None]:
    """The three ratios the benchmark reports.

    Args:
        runs: each case's numbers, by case name.

    Returns:
        corral's LSTM env steps/s over RLlib's; RLlib's seconds (and env steps) to the target over
        corral's (None unless both reached it); corral's LSTM env steps/s over its feed-forward's.
    """
    lstm, rllib, feed_forward = runs["corral_lstm"], runs["rllib_lstm"], runs["corral_feed_forward"]
    return {
        "env_steps_per_second_corral_lstm_over_rllib_lstm": ratio(
            lstm.get("env_steps_per_second"), rllib.get("env_steps_per_second")
        ),
        "seconds_to_target_rllib_lstm_over_corral_lstm": ratio(rllib.get("seconds_to_target"), lstm.get("seconds_to_target")),
        "env_steps_to_target_rllib_lstm_over_corral_lstm": ratio(
            rllib.get("env_steps_to_target"), lstm.get("env_steps_to_target")
        ),
        "env_steps_per_second_corral_lstm_over_corral_feed_forward": ratio(
            lstm.get("env_steps_per_second"), feed_forward.get("env_steps_per_second")
        ),
    }


def versions() -> dict[str, str]:
    """The versions of Python and of the libraries measured, read without importing them.

    Returns:
        Each version by name.
    """
    found = {"python": platform.python_version()}
    for name in ("corral", "ray", "torch", "gymnasium", "numpy"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def benchmark(smoke: bool, output: Path) -> dict[str, Any]:
    """Run the three cases one after another and write their numbers, the ratios and the machine's state.

    Args:
        smoke: stop each run after :data:`SMOKE_ITERATIONS` iterations.
        output: the JSON file to write.

    Returns:
        The report that was written.
    """
    date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    load_before = os.getloadavg()
    if load_before[0] > 0.5 * (os.cpu_count() or 1):
        print(f"warning: load average {load_before[0]:.2f} on {os.cpu_count()} CPUs: the timings will be noisy", file=sys.stderr)
    runs = {case: in_fresh_process(case, smoke) for case in CASES}
    report = {
        "date": date,
        "smoke": smoke,
        "target_mean_return": TARGET,
        "step_cap": STEP_CAP,
        "seconds_cap": SECONDS_CAP,
        "seed": SEED,
        "torch_threads": TORCH_THREADS,
        "smoothing_episodes": SMOOTHING_EPISODES,
        "ppo_settings": PPO_SETTINGS,
        "network": NETWORK,
        "cpu_count": os.cpu_count(),
        "machine": platform.platform(),
        "load_average_start": load_before,
        "load_average_end": os.getloadavg(),
        "versions": versions(),
        "ratios": ratios(runs),
        "runs": runs,
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=1))
    return report


def main() -> None:
    """The command line: the benchmark (``--smoke`` for a short check), or one child run."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help=f"{SMOKE_ITERATIONS} iterations per run, to check it works")
    parser.add_argument("--output", type=Path, help=f"the JSON to write (default {OUTPUT}; {SMOKE_OUTPUT} with --smoke)")
    parser.add_argument("--child", nargs=2, metavar=("CASE", "OUT"), help=argparse.SUPPRESS)
    parser.add_argument(
        "--vf-loss-coeff",
        type=float,
        default=PPO_SETTINGS["vf_loss_coeff"],
        help="the value loss's weight for every run (RLlib's LSTM example uses 1e-4; default: corral's PPO default)",
    )
    args = parser.parse_args()
    PPO_SETTINGS["vf_loss_coeff"] = args.vf_loss_coeff
    if args.child:
        case, out = args.child
        child(case, Path(out), args.smoke)
        return
    output = args.output or (SMOKE_OUTPUT if args.smoke else OUTPUT)
    report = benchmark(args.smoke, output)
    brief = ("curve", "last_learner_stats")
    summary = {case: {k: v for k, v in run.items() if k not in brief} for case, run in report["runs"].items()}
    print(json.dumps({"ratios": report["ratios"], "runs": summary}, indent=1))
    print(f"written to {output}")


if __name__ == "__main__":
    main()
