"""``corral evaluate`` (alias ``rollout``): run a checkpoint's policy, show it, record it as video or as offline data."""

from __future__ import annotations

import argparse
from typing import Any

from corral.cli.experiments import checkpoint_of
from corral.errors import ConfigError


def add_parser(sub: Any) -> None:
    """The ``evaluate`` command's flags."""
    evaluate = sub.add_parser("evaluate", help="run a checkpoint's policy without exploration (alias: rollout)")
    evaluate.add_argument("checkpoint", help="a checkpoint folder, or an experiment folder (its latest checkpoint)")
    evaluate.add_argument(
        "--algo", "--run", dest="algo", help="the checkpoint's algorithm (RLlib's flag): checked, the checkpoint names it"
    )
    evaluate.add_argument("--env", help="another environment with the same spaces")
    duration = evaluate.add_mutually_exclusive_group()
    duration.add_argument("--episodes", type=int, default=None, help="episodes to run (default 10)")
    duration.add_argument("--steps", type=int, default=None, help="env steps to run")
    evaluate.add_argument(
        "--render", action="store_true", help="show the episodes in a window (the render_env option; the render extra)"
    )
    evaluate.add_argument(
        "--video", metavar="DIR", help="record each episode as an MP4 file in DIR (the record_env option; the render extra)"
    )
    evaluate.add_argument("--video-format", choices=("mp4", "gif"), default="mp4", help="--video's file format")
    evaluate.add_argument("--explore", action="store_true", help="sample actions instead of taking the greedy one")
    evaluate.add_argument(
        "--out", help="write the episodes into this folder as offline data (the output option's files), for input_= to read"
    )
    evaluate.add_argument(
        "--trust-code",
        action="store_true",
        help="import what the checkpoint names even if it is not registered (env classes, callbacks, "
        "models): only for checkpoints you trust",
    )
    evaluate.set_defaults(handler=_evaluate)


RECORD_CHUNK = 200
"""env steps per sample call while ``evaluate --out`` records (each call's steps are written together)"""


def _evaluate(args: argparse.Namespace) -> int:
    from corral.core.persistence.checkpoints import read_meta

    for name, value in (("--episodes", args.episodes), ("--steps", args.steps)):
        if value is not None and value < 1:
            raise ConfigError(f"{name} must be at least 1, got {value}")
    args.checkpoint = checkpoint_of(args.checkpoint)
    meta = read_meta(args.checkpoint)  # a wrong path fails here, before torch is imported
    if args.algo is not None and str(args.algo).lower() != str(meta["algorithm"]).lower():
        raise ConfigError(
            f"--run {args.algo} does not match the checkpoint, which holds a {meta['algorithm']}; "
            f"drop --run (the checkpoint names its algorithm) or pass --run {meta['algorithm']}"
        )
    from corral.core.training.algorithm import Algorithm

    if args.video and args.out:
        raise ConfigError("--video records evaluation episodes and --out writes sampled ones: run evaluate once for each")
    unit = "timesteps" if args.steps else "episodes"
    duration = args.steps or args.episodes or 10
    eval_overrides: dict[str, Any] = {
        "explore": bool(args.explore),
        "render_env": args.render,
        "record_env": args.video or False,
        "record_env_format": args.video_format,
    }
    shown = args.render or args.video
    overrides = {
        "evaluation_duration": duration,
        "evaluation_duration_unit": unit,
        "evaluation_config": eval_overrides,
        "evaluation_num_envs": 1 if shown else None,  # the one sub-environment shown runs every episode
        "num_envs_per_env_runner": 1,
        "log_to_tensorboard": False,
    }
    if args.out:  # the sampler writes what it steps; it acts as evaluation would
        overrides.update(eval_overrides, output=args.out, num_env_runners=0)
    env, served = _served(args.checkpoint, args.env)
    overrides.update(served)
    algo = Algorithm.from_checkpoint(args.checkpoint, env=env, config_overrides=overrides, trust_code=args.trust_code)
    try:
        metrics = _record(algo, duration, unit) if args.out else algo.evaluate()
    finally:
        algo.stop()  # closes the output files, each complete
    print(
        f"{metrics['episodes_this_iter']} episodes: reward mean {metrics['episode_reward_mean']:.2f} "
        f"(min {metrics['episode_reward_min']:.2f}, max {metrics['episode_reward_max']:.2f}), "
        f"length mean {metrics['episode_len_mean']:.1f}"
    )
    if args.out:
        print(f"Wrote them to {args.out} (offline data: offline_data(input_={args.out!r}) reads it)")
    if args.video:
        print(f"Recorded them in {args.video} (evaluation-episode-N.{args.video_format})")
    return 0


def _served(checkpoint: str, env: Any) -> tuple[Any, dict[str, Any]]:
    """The env to evaluate in, and ``input_="sampler"`` where the run's input was a function (its episodes were served).

    A served run steps no env: it evaluates in its ``evaluation_config``'s. Its ``input_``
    (``lambda ioctx: PolicyServerInput(...)``, written by value) is never unpickled: evaluation steps an env.

    Args:
        checkpoint: the checkpoint folder.
        env: ``--env``, if given.

    Raises:
        ConfigError: no ``--env`` and the run stepped no env and named none to evaluate in.
    """
    from corral.core.common.by_value import TABLE_KEY
    from corral.core.persistence.checkpoints import read_config

    config = read_config(checkpoint)
    if env is None and config.get("env") is None:
        env = (config.get("evaluation_config") or {}).get("env")
        if env is None:
            raise ConfigError(
                "the checkpoint's run stepped no env (its episodes were served, or read from files): give --env with the "
                "env to evaluate in, e.g. --env CartPole-v1"
            )
    return env, {"input_": "sampler"} if config.get("input_") in config.get(TABLE_KEY, {}) else {}


def _record(algo: Any, duration: int, unit: str) -> dict[str, Any]:
    """Step the checkpoint's policy until ``duration`` episodes end (or timesteps pass), writing every step.

    The last episode, if it is still running then, is written as far as it got.
    """
    from corral.core.sampling.metrics import summarize_episodes

    runner = algo.env_runner_group.local_env_runner
    episodes: list[Any] = []
    steps = 0
    while len(episodes) < duration if unit == "episodes" else steps < duration:
        chunk = RECORD_CHUNK if unit == "episodes" else min(RECORD_CHUNK, duration - steps)
        steps += runner.sample(num_steps=chunk).env_steps
        episodes += runner.get_metrics()
    finished = episodes[:duration] if unit == "episodes" else episodes
    return {**summarize_episodes(finished), "episodes_this_iter": len(finished)}
