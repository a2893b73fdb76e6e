"""LSTM PPO on StatelessCartPole, corral against RLlib, in one run: env steps per second and seconds to a mean return of 150.

StatelessCartPole is CartPole-v1 without the velocities: a policy needs memory
to balance it. Each run is a fresh Python process training from scratch, one
process and no remote env runners, until the training mean episode return
first reaches 150 or the step cap is spent:

- ``corral_lstm``: corral's PPO with ``model={"use_lstm": True, ...}``;
- ``rllib_lstm``: RLlib's PPO (its default, new API stack) with its LSTM
  (``DefaultModelConfig(use_lstm=True, ...)``);
- ``corral_feed_forward``: corral's PPO without memory, for what the recurrent
  path costs and to show the task needs memory.

Both libraries get the same network (a 64-unit tanh layer, an LSTM of 64 cells
over it, linear policy and value heads on the LSTM's output, the value
sharing the layers), sequences of 20 steps and the same PPO settings
(:data:`SETTINGS`); the env class is corral's ``StatelessCartPole`` for both.

    python benchmarks/compare_rllib_lstm.py            # writes results/ppo_lstm_stateless_cartpole.json
    python benchmarks/compare_rllib_lstm.py --smoke    # two iterations each, written to a temporary file
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUTPUT = HERE / "results" / "ppo_lstm_stateless_cartpole.json"
TARGET = 150.0
STEP_CAP = 600_000
SECONDS_CAP = 900.0
FEED_FORWARD_STEPS = 300_000
"""the feed-forward run's budget: the LSTM's is met well within it"""
SEED = 0

SETTINGS: dict[str, Any] = {
    "num_envs_per_env_runner": 1,
    "train_batch_size": 4000,
    "minibatch_size": 512,
    "num_epochs": 10,
    "lr": 2e-3,
    "lambda_": 0.95,
    "gamma": 0.99,
    "clip_param": 0.3,
    "kl_coeff": 0.2,
    "vf_loss_coeff": 1.0,
    "entropy_coeff": 0.0,
}
"""corral's PPO defaults, given to both libraries (RLlib's value clipping set off, as corral has none)"""

NETWORK = {"fcnet_hiddens": [64], "fcnet_activation": "tanh", "lstm_cell_size": 64, "max_seq_len": 20}


# --------------------------------------------------------------------------- #
# one run, in a child process
# --------------------------------------------------------------------------- #
def corral_algo(memory: bool) -> Any:
    """corral's PPO on StatelessCartPole with :data:`SETTINGS`, with or without the LSTM."""
    from corral.plugins.ppo import PPOConfig
    from corral.testing.envs import StatelessCartPole

    s = SETTINGS
    model = {**NETWORK, "use_lstm": memory, "vf_share_layers": True}
    return (
        PPOConfig()
        .environment(StatelessCartPole)
        .env_runners(num_envs_per_env_runner=s["num_envs_per_env_runner"])
        .training(**{k: v for k, v in s.items() if k != "num_envs_per_env_runner"}, model=model)
        .reporting(log_to_tensorboard=False)
        .debugging(seed=SEED)
        .build()
    )


def rllib_algo() -> Any:
    """RLlib's PPO with its LSTM, the same network and :data:`SETTINGS`."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    from corral.testing.envs import StatelessCartPole

    s = SETTINGS
    return (
        PPOConfig()
        .environment(StatelessCartPole)
        .env_runners(num_env_runners=0, num_envs_per_env_runner=s["num_envs_per_env_runner"])
        .training(
            train_batch_size_per_learner=s["train_batch_size"],
            minibatch_size=s["minibatch_size"],
            num_epochs=s["num_epochs"],
            lr=s["lr"],
            lambda_=s["lambda_"],
            gamma=s["gamma"],
            clip_param=s["clip_param"],
            kl_coeff=s["kl_coeff"],
            vf_loss_coeff=s["vf_loss_coeff"],
            entropy_coeff=s["entropy_coeff"],
            vf_clip_param=float("inf"),
            grad_clip=None,
        )
        .rl_module(model_config=DefaultModelConfig(use_lstm=True, vf_share_layers=True, **NETWORK))
        .debugging(seed=SEED)
        .build_algo()
    )


def progress(result: dict[str, Any], library: str) -> tuple[int, float]:
    """(env steps sampled so far, mean training episode return) from a result, in either library's keys."""
    if library == "rllib":
        runners = result["env_runners"]
        steps = result.get("num_env_steps_sampled_lifetime", runners.get("num_env_steps_sampled_lifetime", 0))
        return int(steps), float(runners.get("episode_return_mean", float("nan")))
    return int(result["num_env_steps_sampled"]), float(result["episode_reward_mean"])


def run(case: str, smoke: bool) -> dict[str, Any]:
    """Train one case until the target, the step cap or the time cap; its curve and its rates.

    Args:
        case: ``corral_lstm``, ``corral_feed_forward`` or ``rllib_lstm``.
        smoke: stop after two iterations.

    Returns:
        The iterations' (steps, seconds, mean return), env steps per second over the training
        time, and the seconds and steps at which the target was first reached (None if not).
    """
    import torch

    library = "rllib" if case.startswith("rllib") else "corral"
    if library == "rllib":
        import ray

        ray.init(num_cpus=2, include_dashboard=False, configure_logging=False)
        algo = rllib_algo()
    else:
        algo = corral_algo(memory=case == "corral_lstm")
    curve: list[tuple[int, float, float]] = []
    reached: tuple[int, float] | None = None
    start = time.perf_counter()
    while True:
        result = algo.train()
        steps, mean_return = progress(result, library)
        seconds = time.perf_counter() - start
        curve.append((steps, round(seconds, 3), mean_return))
        if reached is None and mean_return >= TARGET:
            reached = (steps, seconds)
            if case != "corral_feed_forward":
                break
        cap = FEED_FORWARD_STEPS if case == "corral_feed_forward" else STEP_CAP
        if (smoke and len(curve) >= 2) or steps >= cap or seconds >= SECONDS_CAP:
            break
    algo.stop()
    return {
        "curve": curve,
        "env_steps_per_second": curve[-1][0] / curve[-1][1],
        "steps_to_target": None if reached is None else reached[0],
        "seconds_to_target": None if reached is None else round(reached[1], 2),
        "best_mean_return": max(point[2] for point in curve),
        "torch_threads": torch.get_num_threads(),
    }


# --------------------------------------------------------------------------- #
# the benchmark, in the parent process
# --------------------------------------------------------------------------- #
def in_child(case: str, smoke: bool) -> dict[str, Any]:
    """Run one case in a fresh Python process; its result."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "result.json"
        # a throwaway HOME: RLlib writes its log folder under ~/ray_results whatever it is told
        env = {**os.environ, "CORRAL_RESULTS_DIR": str(Path(folder) / "corral_results"), "HOME": folder}
        subprocess.run(
            [sys.executable, __file__, "--child", case, str(out), *(["--smoke"] if smoke else [])], check=True, env=env
        )
        result: dict[str, Any] = json.loads(out.read_text())
        return result


def versions() -> dict[str, str]:
    """The versions of the libraries measured."""
    import ray
    import torch

    import corral

    return {"corral": corral.__version__, "ray": ray.__version__, "torch": torch.__version__, "python": sys.version.split()[0]}


def main() -> None:
    """Run the three cases one after another and write their numbers and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="two iterations each, written to a temporary file")
    parser.add_argument("--child", nargs=2, metavar=("CASE", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        case, out = args.child
        Path(out).write_text(json.dumps(run(case, args.smoke)))
        return
    load_before = os.getloadavg()
    runs = {case: in_child(case, args.smoke) for case in ("corral_lstm", "rllib_lstm", "corral_feed_forward")}
    lstm, rllib, feed_forward = runs["corral_lstm"], runs["rllib_lstm"], runs["corral_feed_forward"]
    ratios = {
        "env_steps_per_second_corral_over_rllib": lstm["env_steps_per_second"] / rllib["env_steps_per_second"],
        "seconds_to_target_rllib_over_corral": (
            rllib["seconds_to_target"] / lstm["seconds_to_target"]
            if lstm["seconds_to_target"] and rllib["seconds_to_target"]
            else None
        ),
        "env_steps_per_second_lstm_over_feed_forward": lstm["env_steps_per_second"] / feed_forward["env_steps_per_second"],
    }
    report = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "target_mean_return": TARGET,
        "step_cap": STEP_CAP,
        "feed_forward_steps": FEED_FORWARD_STEPS,
        "settings": SETTINGS,
        "network": NETWORK,
        "cpus": os.cpu_count(),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "versions": versions(),
        "ratios": ratios,
        "runs": runs,
    }
    target = Path(tempfile.gettempdir()) / "ppo_lstm_smoke.json" if args.smoke else OUTPUT
    target.write_text(json.dumps(report, indent=1))
    print(json.dumps({"ratios": ratios, **{k: {m: v[m] for m in v if m != "curve"} for k, v in runs.items()}}, indent=1))
    print(f"written to {target}")


if __name__ == "__main__":
    main()
