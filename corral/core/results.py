"""The keys every ``train()`` result has, with their types: the contract for stop criteria and tools.

Kept free of imports so the CLI can check ``--stop`` keys, and the conformance
kit (``corral.testing``) can check results, without loading anything else.
"""

from __future__ import annotations

import math
from typing import Any

RESULT_KEY_TYPES: dict[str, tuple[type, ...]] = {
    "training_iteration": (int,),
    "timesteps_total": (int,),
    "agent_timesteps_total": (int,),
    "num_env_steps_sampled": (int,),
    "num_env_steps_trained": (int,),
    "num_agent_steps_sampled": (int,),
    "num_agent_steps_trained": (int,),
    "episode_reward_mean": (float, int),
    "episode_reward_min": (float, int),
    "episode_reward_max": (float, int),
    "episode_len_mean": (float, int),
    "episodes_this_iter": (int,),
    "episodes_total": (int,),
    "num_env_steps_sampled_this_iter": (int,),
    "num_env_steps_sampled_throughput_per_sec": (float, int),
    "time_this_iter_s": (float,),
    "time_total_s": (float,),
    "timestamp": (int,),
    "num_healthy_env_runners": (int,),
    "num_env_runner_restarts": (int,),
    "custom_metrics": (dict,),
    "policy_reward_mean": (dict,),
    "policy_reward_min": (dict,),
    "policy_reward_max": (dict,),
    "hist_stats": (dict,),
    "info": (dict,),
    "sampler_results": (dict,),
    "env_runners": (dict,),
    "num_env_steps_sampled_lifetime": (int,),
    "config": (dict,),
}
"""Every key of every result, and the types its value may have (episode stats are NaN before the first episode ends)."""

EVALUATION_KEY = "evaluation"
"""The key of evaluation metrics, present in the iterations that evaluate (``evaluation_interval``)."""

PERF_KEY = "perf"
"""RLlib's key of the machine's use (``cpu_util_percent``, ``ram_util_percent``), present while ``log_sys_usage`` is on."""

RESULT_KEYS: tuple[str, ...] = (*RESULT_KEY_TYPES, EVALUATION_KEY, PERF_KEY)
"""Every top-level key a result can have: what stop criteria may name."""

RLLIB_RESULT_GROUPS = ("sampler_results", "env_runners")
"""the sub-dicts RLlib 2.x puts episode stats under (2.5-2.9: ``sampler_results``; 2.10 on: ``env_runners``)"""


_GROUPED = (
    "episode_reward_max",
    "episode_reward_min",
    "episode_reward_mean",
    "episode_len_mean",
    "episodes_this_iter",
    "policy_reward_min",
    "policy_reward_max",
    "policy_reward_mean",
    "custom_metrics",
    "hist_stats",
)
RLLIB_COPIES = (*RLLIB_RESULT_GROUPS, "num_env_steps_sampled_lifetime", "config")
"""the keys of a result that copy others for RLlib's scripts (:func:`with_rllib_groups`), left out of result files"""


def with_rllib_groups(metrics: dict[str, Any], config: dict[str, Any] | None = None) -> dict[str, Any]:
    """Episode stats also where RLlib 2.x's scripts read them; the metrics dict, extended.

    ``sampler_results`` (Ray 2.5-2.9) holds them under corral's names;
    ``env_runners`` (Ray 2.10 on) too, and under the new API stack's names
    (``episode_return_mean``, ``num_episodes``); ``num_env_steps_sampled_lifetime``
    is ``num_env_steps_sampled``; ``config`` is the algorithm's config dict,
    which every RLlib result carries.

    Args:
        metrics: a train() or evaluation result's metrics (changed in place).
        config: the config dict to add; None adds none (an evaluation result's).

    Returns:
        ``metrics``.
    """
    grouped = {key: metrics[key] for key in _GROUPED if key in metrics}
    returns = {
        key.replace("episode_reward_", "episode_return_"): value
        for key, value in grouped.items()
        if key.startswith("episode_reward_")
    }
    metrics["sampler_results"] = grouped
    metrics["env_runners"] = {**grouped, **returns, "num_episodes": metrics.get("episodes_this_iter", 0)}
    if "num_env_steps_sampled" in metrics:  # the new stack's stop key (Tune reads it as it is named)
        metrics["num_env_steps_sampled_lifetime"] = metrics["env_runners"]["num_env_steps_sampled_lifetime"] = metrics[
            "num_env_steps_sampled"
        ]
    if config is not None:
        metrics["config"] = config
    return metrics


def without_rllib_copies(result: dict[str, Any]) -> dict[str, Any]:
    """A result without the copies :func:`with_rllib_groups` made, for result files (params.json holds the config).

    Args:
        result: a train() result.
    """
    kept = {key: value for key, value in result.items() if key not in RLLIB_COPIES}
    if isinstance(kept.get(EVALUATION_KEY), dict):
        kept[EVALUATION_KEY] = without_rllib_copies(kept[EVALUATION_KEY])
    return kept


LEARNER_STATS_KEY = "learner_stats"
"""The key of a policy's training statistics in ``result["info"]["learner"][policy_id]``, as RLlib's old API stack has it."""

BESIDE_LEARNER_STATS = (
    "model",
    "custom_metrics",
    "num_agent_steps_trained",
    "num_grad_updates_lifetime",
    "diff_num_grad_updates_vs_sampler_policy",
    "td_error",
)
"""What RLlib puts beside a policy's ``learner_stats``: the model's ``metrics()``, what ``on_learn_on_batch``
callbacks added, its update counts and per-row TD errors"""


def learner_info(stats: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Policies' update stats in RLlib's layout, the ``info/learner`` of a result.

    Each policy's entry holds its loss terms and schedules under
    ``learner_stats``, and beside them the model's metrics (``model``), what
    ``on_learn_on_batch`` callbacks added (``custom_metrics``) and its counts.
    An entry that has ``learner_stats`` already (a ``training_step`` that
    wrote RLlib's layout, or :func:`train_one_step`'s) is kept as it is.

    Args:
        stats: by policy id, its update's stats as corral's updates return them (one flat dict each).

    Returns:
        By policy id, ``{"learner_stats": {...}, "model": {...}, "custom_metrics": {...}, ...}``.
    """
    info: dict[str, dict[str, Any]] = {}
    for policy_id, policy_stats in stats.items():
        if LEARNER_STATS_KEY in policy_stats:
            info[policy_id] = policy_stats
            continue
        learner = {key: value for key, value in policy_stats.items() if key not in BESIDE_LEARNER_STATS}
        beside = {key: policy_stats[key] for key in BESIDE_LEARNER_STATS if key in policy_stats}
        info[policy_id] = {LEARNER_STATS_KEY: learner, "model": {}, "custom_metrics": {}, **beside}
    return info


def corral_result_key(key: str) -> str:
    """The corral result key that an RLlib 2.x stop or result key names (corral's own keys are returned as they are).

    ``sampler_results/episode_reward_mean`` and ``env_runners/episode_return_mean``
    are ``episode_reward_mean``; under ``evaluation/`` likewise;
    ``num_env_steps_sampled_lifetime`` is ``num_env_steps_sampled``.

    Args:
        key: a ``/``-separated result key.

    Returns:
        corral's key for it.
    """
    parts = key.split("/")
    prefix = [EVALUATION_KEY] if parts[0] == EVALUATION_KEY else []
    rest = parts[len(prefix) :]
    if rest and rest[0] in RLLIB_RESULT_GROUPS:
        rest = rest[1:]
    name = "/".join(rest).replace("episode_return_", "episode_reward_")
    if name == "num_env_steps_sampled_lifetime":
        name = "num_env_steps_sampled"
    return "/".join([*prefix, name]) if name else key


def finite_number(value: Any) -> float | None:
    """A result value as a float if it is a finite number (not a bool, NaN or inf), else None.

    Args:
        value: any value of a result.
    """
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def result_value(result: dict[str, Any], key: str) -> Any:
    """The value at a ``/``-separated key of a (nested) result, or None where the result has none.

    Args:
        result: a result dict.
        key: e.g. ``"episode_reward_mean"`` or ``"evaluation/episode_reward_mean"``.
    """
    value: Any = result
    for part in key.split("/"):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value
