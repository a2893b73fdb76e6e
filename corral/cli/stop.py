"""When ``corral train`` stops: the stop criteria a run is given (or its default), checked, and whether a result meets them.

Kept free of heavy imports (``corral list`` imports the CLI and must not import torch).
"""

from __future__ import annotations

import math
from typing import Any

from corral.core.results import EVALUATION_KEY, PERF_KEY, RESULT_KEYS, corral_result_key, finite_number, result_value
from corral.errors import ConfigError, did_you_mean

BUDGET_KEYS = (
    "training_iteration",
    "timesteps_total",
    "time_total_s",
    "episodes_total",
    "num_env_steps_sampled",
    "num_env_steps_trained",
    "num_agent_steps_sampled",
    "num_agent_steps_trained",
)
"""stop keys that measure how long a run went on: reaching one means the budget ran out, not that it learned"""

DEFAULT_BUDGET_STEPS = 1_000_000
"""how many env steps a run without stop criteria takes at most (``timesteps_total``; a million, the usual benchmark budget)"""

REWARD_KEY = "episode_reward_mean"
OVERRIDE = "--stop sets others"


def default_stop(gymnasium_id: str | None) -> tuple[dict[str, Any], str]:
    """The stop criteria of a run given none, and the sentence that says what they are and where they come from.

    A gymnasium env with a ``reward_threshold`` in its registration (CartPole-v1: 475)
    stops when the mean reward of the last 100 episodes reaches it, which is what
    gymnasium calls solved; every run stops after :data:`DEFAULT_BUDGET_STEPS` env steps
    at the latest, so none trains for ever.

    Args:
        gymnasium_id: the run's gymnasium id, or None for an env given as a class, a path or a registered name.

    Returns:
        ``(stop, sentence)``.
    """
    budget = f"timesteps_total {DEFAULT_BUDGET_STEPS:,}"
    threshold = _reward_threshold(gymnasium_id)
    if threshold is None:
        source = f"{gymnasium_id} registers no reward_threshold" if gymnasium_id else "the env is not a gymnasium id"
        return {"timesteps_total": DEFAULT_BUDGET_STEPS}, f"no --stop given: stopping at {budget} ({source}); {OVERRIDE}"
    solved = f"{REWARD_KEY} {threshold:g} ({gymnasium_id}'s reward_threshold in gymnasium's registry)"
    return (
        {REWARD_KEY: threshold, "timesteps_total": DEFAULT_BUDGET_STEPS},
        f"no --stop given: stopping at {solved} or at {budget}, whichever comes first; {OVERRIDE}",
    )


def _reward_threshold(gymnasium_id: str | None) -> float | None:
    if gymnasium_id is None:
        return None
    import gymnasium as gym

    try:
        threshold = gym.spec(gymnasium_id).reward_threshold
    except gym.error.Error:  # an id corral resolves that gymnasium's spec() does not (a namespace not yet loaded)
        return None
    return finite_number(threshold)


def checked_stop(given: dict[str, Any], config: Any, fail_below: float | None) -> dict[str, Any]:
    """The stop criteria under corral's keys (RLlib's 2.x keys too), checked against the config, with ``--fail-below``.

    Args:
        given: the stop criteria as the user wrote them.
        config: the run's config (an ``evaluation/`` key needs evaluation, a ``perf/`` key ``log_sys_usage``).
        fail_below: ``--fail-below``'s value (NaN: the stop reward), or None.

    Returns:
        The criteria, by corral's result keys.

    Raises:
        ConfigError: a key no result has or could have, a value that is no number, or ``--fail-below``
            without a reward to take.
    """
    stop = {corral_result_key(key): value for key, value in given.items()}
    for key, value in stop.items():
        head = key.split("/")[0]
        if head not in RESULT_KEYS:
            raise ConfigError(
                f"--stop key {key!r} is not a result key.{stop_key_hint(head, RESULT_KEYS)} Result keys: {', '.join(RESULT_KEYS)}"
            )
        if head == EVALUATION_KEY and config.evaluation_interval is None:
            raise ConfigError(f"--stop key {key!r} needs evaluation; set evaluation_interval in --config")
        if head == PERF_KEY and not config.log_sys_usage:
            raise ConfigError(f"--stop key {key!r} needs the machine's use in the results; drop log_sys_usage=false")
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise ConfigError(f"--stop value for {key!r} must be a number, got {value!r}")
    if fail_below is not None and math.isnan(fail_below) and goal_key(stop) not in stop:
        raise ConfigError(
            "--fail-below without a value takes the --stop reward, and --stop names none; give one: --fail-below 400"
        )
    return stop


def stop_key_hint(word: str, names: Any) -> str:
    """``" Did you mean 'x'?"`` for a misspelt stop key; a stem of a statistic (``episode_reward``) means its ``_mean``.

    Args:
        word: the key (or its last part) as given.
        names: the keys there are.
    """
    return f" Did you mean '{word}_mean'?" if f"{word}_mean" in names else did_you_mean(word, names)


def goal_key(stop: dict[str, Any]) -> str:
    """The stop key that says what the run is to reach (the first that is not a budget), else the mean reward."""
    return next((key for key in stop if key not in BUDGET_KEYS), REWARD_KEY)


def stop_reason(result: dict[str, Any], stop: dict[str, Any]) -> str | None:
    """Why ``result`` ends the run (the first ``stop`` key reached), or None to train on.

    Args:
        result: the result of one ``train()``.
        stop: the stop criteria, by corral's result keys.
    """
    for key, threshold in stop.items():
        value = finite_number(result_value(result, key))
        if value is not None and value >= threshold:
            if key in BUDGET_KEYS:
                return f"{key} budget {threshold:,} reached"
            return f"{key} {value:.1f} >= {threshold:g}"
    return None


def check_stop_leaves(result: dict[str, Any], stop: dict[str, Any], checked: set[str]) -> None:
    """Refuse a stop key whose group exists in the result but lacks it (it could never be reached).

    A key is checked once its group holds something, or, for a group of episode
    metrics (``custom_metrics``), once an episode has ended; ``evaluation/`` keys
    once the first evaluation ran.

    Args:
        result: the result of one ``train()``.
        stop: the stop criteria, by corral's result keys.
        checked: the keys checked so far (updated).

    Raises:
        ConfigError: the key, and what its group holds.
    """
    for key in stop.keys() - checked:
        parent, _, leaf = key.rpartition("/")
        group = result_value(result, parent) if parent else result
        if not isinstance(group, dict) or not (group or result.get("episodes_total")):
            continue  # the group is not there yet
        checked.add(key)
        if leaf not in group:
            names = sorted(group)
            listed = f"{', '.join(names[:40])}{' ...' if len(names) > 40 else ''}" if names else "nothing"
            raise ConfigError(
                f"--stop key {key!r} is not in the results.{stop_key_hint(leaf, names)} Under {parent or 'the top level'}: "
                f"{listed}"
            )
