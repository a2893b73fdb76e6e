"""RLlib's helpers for example scripts and their tests: command-line flags, running the experiment, checking it learned.

``add_rllib_example_script_args`` gives a script RLlib's flags (``--stop-iters``,
``--stop-reward``, ``--as-test``, ``--framework``, ``--no-tune``, ...);
``run_rllib_example_script_experiment`` runs the script's config under Tune
(or a plain loop with ``--no-tune``) until one stop criterion holds and, with
``--as-test``, raises unless the reward was reached; ``check_learning_achieved``
is that last check. Result keys may be RLlib 2.x's (``sampler_results/...``,
``env_runners/episode_return_mean``): each is read as corral's key for it.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from corral.core.contracts.config import AlgorithmConfig
from corral.core.results import corral_result_key, finite_number, result_value
from corral.rllib.support.numeric import convert_to_numpy

DEFAULT_METRIC = "episode_reward_mean"


def add_rllib_example_script_args(
    parser: argparse.ArgumentParser | None = None,
    default_reward: float = 100.0,
    default_iters: int = 200,
    default_timesteps: int = 100_000,
) -> argparse.ArgumentParser:
    """Add RLlib's example-script flags to ``parser`` (a new one if None).

    Args:
        parser: the script's parser.
        default_reward: the default of ``--stop-reward``.
        default_iters: the default of ``--stop-iters``.
        default_timesteps: the default of ``--stop-timesteps``.

    Returns:
        The parser.
    """
    parser = parser or argparse.ArgumentParser()
    add = parser.add_argument
    add("--algo", default="PPO", help="the registered algorithm to run")
    add("--env", default=None, help="the env to train in, where the script lets it be chosen")
    add("--framework", choices=("torch", "tf", "tf2"), default="torch", help="corral runs on torch ('tf*' with a warning)")
    add("--enable-new-api-stack", action="store_true", help="RLlib's new API stack switch (corral has one stack)")
    add("--old-api-stack", action="store_true", help="RLlib's old API stack switch (corral has one stack)")
    add("--num-env-runners", type=int, default=2, help="remote env runners")
    add("--num-envs-per-env-runner", type=int, default=None, help="envs each runner steps side by side")
    add("--num-agents", type=int, default=0, help="0: single agent; n: the script's multi-agent version with n agents")
    add("--num-learners", type=int, default=None, help="Learner actors")
    add("--num-gpus-per-learner", type=float, default=None, help="GPUs per Learner actor")
    add("--evaluation-interval", type=int, default=0, help="evaluate every n iterations (0: never)")
    add("--evaluation-num-env-runners", type=int, default=0, help="remote evaluation env runners")
    add("--evaluation-duration", default=10, help="how long each evaluation lasts ('auto' or a number)")
    add("--evaluation-duration-unit", choices=("episodes", "timesteps"), default="episodes")
    add("--evaluation-parallel-to-training", action="store_true", help="evaluate while training")
    add("--output", default=None, help="a folder to write sampled experiences to")
    add("--log-level", choices=("INFO", "DEBUG", "WARN", "ERROR"), default=None)
    add("--no-tune", action="store_true", help="run algo.train() in a loop instead of tune.Tuner")
    add("--num-samples", type=int, default=1, help="Tune trials to run")
    add("--verbose", type=int, default=2, help="Tune's verbosity")
    add("--checkpoint-freq", type=int, default=0, help="checkpoint every n iterations (0: never)")
    add("--checkpoint-at-end", action="store_true", help="checkpoint when the run ends")
    add("--wandb-key", default=None, help="a Weights & Biases API key: results go there too")
    add("--wandb-project", default=None)
    add("--wandb-run-name", default=None)
    add("--stop-reward", type=float, default=default_reward, help="stop at this mean episode reward")
    add("--stop-iters", type=int, default=default_iters, help="stop after this many iterations")
    add("--stop-timesteps", type=int, default=default_timesteps, help="stop after this many sampled env steps")
    add("--as-test", action="store_true", help="fail unless --stop-reward is reached within the other limits")
    add("--num-gpus", type=int, default=0, help="GPUs for the learner")
    add("--num-cpus", type=int, default=0, help="CPUs for ray.init (0: all)")
    add("--local-mode", action="store_true", help="ray.init(local_mode=True)")
    return parser


def _stop_reached(result: Mapping[str, Any], stop: Mapping[str, Any]) -> str | None:
    for key, limit in stop.items():
        value = finite_number(result_value(dict(result), corral_result_key(key)))
        if value is not None and value >= limit:
            return key
    return None


def _extended(base_config: AlgorithmConfig, args: argparse.Namespace) -> AlgorithmConfig:
    """The script's config with what the flags set (only flags the script's parser has)."""
    given = vars(args)
    config = base_config.copy(copy_frozen=False).framework(given.get("framework", "torch"))
    config = config.env_runners(num_env_runners=given.get("num_env_runners", 2))
    if given.get("num_envs_per_env_runner") is not None:
        config = config.env_runners(num_envs_per_env_runner=given["num_envs_per_env_runner"])
    if given.get("num_learners") is not None:
        config = config.learners(num_learners=given["num_learners"])
    if given.get("num_gpus_per_learner") is not None:
        config = config.learners(num_gpus_per_learner=given["num_gpus_per_learner"])
    if given.get("num_gpus"):
        config = config.resources(num_gpus=given["num_gpus"])
    if given.get("evaluation_interval"):
        duration = given.get("evaluation_duration", 10)
        config = config.evaluation(
            evaluation_interval=given["evaluation_interval"],
            evaluation_num_env_runners=given.get("evaluation_num_env_runners", 0),
            evaluation_duration=duration if duration == "auto" else int(duration),
            evaluation_duration_unit=given.get("evaluation_duration_unit", "episodes"),
            evaluation_parallel_to_training=given.get("evaluation_parallel_to_training", False),
        )
    if given.get("output"):
        config = config.offline_data(output=given["output"])
    if given.get("log_level"):
        config = config.debugging(log_level=given["log_level"])
    return config


def run_rllib_example_script_experiment(
    base_config: AlgorithmConfig,
    args: argparse.Namespace,
    *,
    stop: Mapping[str, Any] | None = None,
    success_metric: str | Mapping[str, float] | None = None,
) -> Any:
    """Run the script's experiment as its flags say: under Tune, or in a loop with ``--no-tune``.

    Args:
        base_config: the script's config; the flags extend a copy of it (runners, GPUs, evaluation, ...).
        args: the parsed flags (from :func:`add_rllib_example_script_args`).
        stop: stop criteria (default: ``--stop-iters``, ``--stop-reward``, ``--stop-timesteps``).
        success_metric: the result key ``--as-test`` checks against ``--stop-reward`` (default
            ``episode_reward_mean``); RLlib 2.30's ``{key: value}`` form is read too.

    Returns:
        The last result dict (``--no-tune``) or Tune's ``ResultGrid``.

    Raises:
        ValueError: ``--as-test`` and the reward was not reached.
        corral.tune.TrialsFailedError: a Tune trial raised.
    """
    metric = DEFAULT_METRIC
    min_value = float(getattr(args, "stop_reward", 0.0))
    if isinstance(success_metric, Mapping):
        ((metric, min_value),) = success_metric.items()
    elif success_metric:
        metric = success_metric
    stop = (
        dict(stop)
        if stop
        else {
            "training_iteration": args.stop_iters,
            DEFAULT_METRIC: args.stop_reward,
            "timesteps_total": args.stop_timesteps,
        }
    )
    config = _extended(base_config, args)
    if getattr(args, "no_tune", False):
        algo = config.build()
        try:
            result: dict[str, Any] = {}
            for _ in range(args.stop_iters):
                result = algo.train()
                reached = _stop_reached(result, stop)
                if reached is not None:
                    print(f"stop criterion {reached}={stop[reached]} reached")
                    break
        finally:
            algo.stop()
        if getattr(args, "as_test", False):
            check_learning_achieved([result], min_value, metric=metric)
        return result
    return _tune(config, args, stop, metric, min_value)


def _tune(config: AlgorithmConfig, args: argparse.Namespace, stop: Mapping[str, Any], metric: str, min_value: float) -> Any:
    import ray
    from ray import tune

    from corral.tune import Tuner

    if not ray.is_initialized():
        ray.init(num_cpus=getattr(args, "num_cpus", 0) or None, local_mode=getattr(args, "local_mode", False))
    callbacks: list[Any] = []
    if getattr(args, "wandb_key", None):
        from ray.air.integrations.wandb import WandbLoggerCallback

        project = args.wandb_project or f"{args.algo.lower()}-{str(config.env).lower()}"
        name = {"name": args.wandb_run_name} if args.wandb_run_name else {}
        callbacks.append(WandbLoggerCallback(api_key=args.wandb_key, project=project, upload_checkpoints=True, **name))
    checkpoints = tune.CheckpointConfig(
        checkpoint_frequency=getattr(args, "checkpoint_freq", 0), checkpoint_at_end=getattr(args, "checkpoint_at_end", False)
    )
    results = Tuner(
        config.algo_class,
        param_space=config,
        run_config=tune.RunConfig(
            stop={corral_result_key(k): v for k, v in stop.items()},
            verbose=getattr(args, "verbose", 2),
            callbacks=callbacks,
            checkpoint_config=checkpoints,
        ),
        tune_config=tune.TuneConfig(num_samples=getattr(args, "num_samples", 1)),
    ).fit()
    if getattr(args, "as_test", False):
        check_learning_achieved(results, min_value, metric=metric)
    return results


def _final_results(tune_results: Any) -> list[dict[str, Any]]:
    if isinstance(tune_results, Mapping):
        return [dict(tune_results)]
    if hasattr(tune_results, "get_best_result") or hasattr(tune_results, "num_errors"):  # Tune's ResultGrid
        return [dict(result.metrics or {}) for result in tune_results]
    if hasattr(tune_results, "trials"):  # Tune's older ExperimentAnalysis
        return [dict(trial.last_result or {}) for trial in tune_results.trials]
    return [dict(result) for result in tune_results]


def check_learning_achieved(
    tune_results: Any, min_value: float, evaluation: bool | None = None, metric: str = DEFAULT_METRIC
) -> None:
    """Raise unless some trial's final ``metric`` reached ``min_value`` (the best trial counts, as in RLlib).

    Args:
        tune_results: Tune's ``ResultGrid`` (or ``ExperimentAnalysis``), a result dict, or a list of them.
        min_value: the value to reach.
        evaluation: read the evaluation results' ``metric`` (None: those where a result has them).
        metric: the result key (RLlib 2.x spellings are read as corral's).

    Raises:
        ValueError: no trial reached ``min_value`` (or none reported ``metric``).
    """
    values = []
    for result in _final_results(tune_results):
        key = corral_result_key(metric)
        evaluated = corral_result_key(f"evaluation/{metric}")
        if evaluation or (evaluation is None and result_value(result, evaluated) is not None):
            key = evaluated
        value = finite_number(result_value(result, key))
        if value is not None:
            values.append(value)
    if not values or max(values) < min_value:
        best = f"the best was {max(values)}" if values else "no result reported it"
        raise ValueError(f"`{metric}` of {min_value} not reached! ({best})")
    print(f"`{metric}` of {min_value} reached! ok")


def check(x: Any, y: Any, decimals: int = 5, atol: float | None = None, rtol: float | None = None, false: bool = False) -> None:
    """Assert that ``x`` and ``y`` are equal (nested dicts, lists, tuples, arrays, tensors, numbers), or with ``false`` differ.

    Args:
        x: the value.
        y: the expected value.
        decimals: float precision when neither ``atol`` nor ``rtol`` is given.
        atol: absolute tolerance.
        rtol: relative tolerance.
        false: assert that they differ instead.

    Raises:
        AssertionError: they differ (or, with ``false``, do not).
    """
    if isinstance(x, Mapping) and isinstance(y, Mapping):
        same_keys = set(x) == set(y)
        if not same_keys and not false:
            raise AssertionError(f"keys differ: {sorted(map(str, x))} vs {sorted(map(str, y))}")
        if same_keys:
            _check_parts([(x[k], y[k]) for k in x], decimals, atol, rtol, false)
        return
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)) and not _numeric(x) and not _numeric(y):
        if len(x) != len(y):
            if not false:
                raise AssertionError(f"lengths differ: {len(x)} vs {len(y)}")
            return
        _check_parts(list(zip(x, y, strict=True)), decimals, atol, rtol, false)
        return
    a, b = (np.asarray(convert_to_numpy(v, reduce_type=False)) for v in (x, y))
    if a.dtype.kind in "fc" or b.dtype.kind in "fc":
        if atol is None and rtol is None:
            equal = a.shape == b.shape and np.allclose(a, b, atol=1.5 * 10.0 ** (-decimals), rtol=0.0, equal_nan=True)
        else:
            equal = a.shape == b.shape and np.allclose(a, b, atol=atol or 0.0, rtol=rtol or 0.0, equal_nan=True)
    else:
        equal = a.shape == b.shape and bool(np.all(a == b))
    if equal == false:
        raise AssertionError(f"{x!r} and {y!r} {'are equal' if false else 'differ'}")


def _numeric(value: Iterable[Any]) -> bool:
    return all(isinstance(v, (int, float, np.number, bool)) for v in value)


def _check_parts(pairs: list[tuple[Any, Any]], decimals: int, atol: float | None, rtol: float | None, false: bool) -> None:
    if not false:
        for a, b in pairs:
            check(a, b, decimals, atol, rtol)
        return
    for a, b in pairs:  # with false: the structures differ if any part does
        try:
            check(a, b, decimals, atol, rtol)
        except AssertionError:
            return
    raise AssertionError("the structures are equal")
