"""What ``corral train`` shows of each iteration: a progress line, with ``-v`` the learner's stats and corral's
INFO messages, with ``-vv`` each whole result as JSON.

Kept free of heavy imports (``corral list`` imports the CLI and must not import torch).
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

from corral.core.results import EVALUATION_KEY, LEARNER_STATS_KEY, finite_number, result_value


def learns_from_data_only(config: Any) -> bool:
    """Whether a run trains on recorded data alone, so that no training episode is ever played (``input_``).

    Args:
        config: the run's config.
    """
    source = config.input_
    return source != "sampler" and not (isinstance(source, dict) and "sampler" in source)


def progress_line(result: dict[str, Any], offline: bool = False) -> str:
    """One line for an iteration: its counters, the reward, the time and the speed.

    A run that samples shows its episodes' mean reward and length (``-`` until an
    episode has ended) and the evaluation's reward when it evaluated. A run that
    learns from recorded data plays no episodes while it trains: its line shows
    the evaluation's reward (``-`` in iterations that do not evaluate) and the
    learner's mean ``total_loss``, where the algorithm reports one.

    Args:
        result: the result of one ``train()``.
        offline: whether the run learns from recorded data only (:func:`learns_from_data_only`).
    """
    evaluation = finite_number(result_value(result, f"{EVALUATION_KEY}/episode_reward_mean"))
    text = f"iter {result['training_iteration']:>4}  steps {result['timesteps_total']:>9,}  "
    if offline:
        losses = [stats["total_loss"] for stats in _learner_stats(result).values() if "total_loss" in stats]
        text += f"eval {_shown(evaluation, '8.2f')}  "
        text += f"loss {_shown(sum(losses) / len(losses), '8.4f')}  " if losses else ""
    else:
        text += f"reward {_shown(result['episode_reward_mean'], '8.2f')}  len {_shown(result['episode_len_mean'], '7.1f')}  "
    text += f"time {result['time_total_s']:7.1f}s  {result['num_env_steps_sampled_throughput_per_sec']:,.0f} steps/s"
    if not offline and EVALUATION_KEY in result:
        text += f"  eval {_shown(evaluation, '.2f')}"
    return text


def learner_lines(result: dict[str, Any]) -> list[str]:
    """``-v``: a line per policy with the learner's numbers of the iteration (losses, entropy, KL, ...).

    Args:
        result: the result of one ``train()``.
    """
    lines = []
    for policy_id, stats in _learner_stats(result).items():
        shown = "  ".join(f"{key} {value:.4g}" for key, value in stats.items() if finite_number(value) is not None)
        lines.append(f"      {policy_id}: {shown or 'no update this iteration'}")
    return lines


def result_json(result: dict[str, Any]) -> str:
    """``-vv``: the whole result as valid JSON; a NaN or infinite number (a mean of no episodes) is ``null``.

    Args:
        result: the result of one ``train()``.
    """
    return json.dumps(_plain(result), allow_nan=False)


def show_log_messages(verbose: int) -> None:
    """Show corral's log messages on stderr from ``-v`` on: INFO (what corral adjusted and why), with ``-vv`` DEBUG.

    Without a handler of its own only warnings would reach the terminal, whatever the level. The level holds
    from the start (the config's own messages included) until an algorithm sets its config's ``log_level``,
    which the CLI sets from ``-v`` too unless the config names one.

    Args:
        verbose: how many ``-v`` were given.
    """
    if verbose < 1:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("corral")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if verbose >= 2 else logging.INFO)


def _learner_stats(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each policy's ``info/learner/<policy id>/learner_stats`` (with its model's metrics)."""
    learner = result_value(result, "info/learner")
    if not isinstance(learner, dict):
        return {}
    return {
        str(pid): {**info.get(LEARNER_STATS_KEY, {}), **info.get("model", {})}
        for pid, info in learner.items()
        if isinstance(info, dict)
    }


def _shown(value: Any, spec: str) -> str:
    """``value`` in the format ``spec``, or ``-`` in its width where it is not a finite number."""
    number = finite_number(value)
    if number is not None:
        return format(number, spec)
    width = spec.split(".")[0]
    return format("-", f">{width}") if width else "-"


def _plain(value: Any) -> Any:
    """``value`` as JSON data: non-finite floats become None, numpy values Python ones, anything else its ``str``."""
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, float):
        return value if finite_number(value) is not None else None
    if value is None or isinstance(value, str | int):
        return value
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return _plain(value.tolist())
    return str(value)
