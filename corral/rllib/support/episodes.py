"""RLlib's ``evaluation.metrics`` functions: the episodes env runners finished, and RLlib's metrics of them.

A ``custom_evaluation_function(algorithm, eval_workers)`` gets the evaluation
:class:`~corral.core.sampling.env_runner_group.EnvRunnerGroup` as
``eval_workers``; RLlib's scripts sample on it and then call
``collect_episodes(workers=eval_workers)`` and ``summarize_episodes(episodes)``.

corral's runners keep each finished episode's summary until it is asked for:
the local runner and every remote one (``runner.get_metrics()``), and the
group keeps what the remote runners' sample calls brought back
(``group.get_metrics()``). :func:`collect_episodes` drains all of them, as
RLlib's does its workers'. :func:`summarize_episodes` gives RLlib's result
keys, on top of corral's own :func:`corral.core.sampling.metrics.summarize_episodes`.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import numbers
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from corral.core.common.sample_batch import DEFAULT_POLICY_ID
from corral.core.sampling.base_env_runner import BaseEnvRunner
from corral.core.sampling.env_runner_group import EnvRunnerGroup
from corral.core.sampling.metrics import EpisodeSummary, summarize_episodes as corral_summarize_episodes

logger = logging.getLogger("corral")


@dataclasses.dataclass
class RolloutMetrics(EpisodeSummary):
    """A finished episode's summary, also under RLlib's names (``episode_reward``, ``episode_length``).

    What :func:`collect_episodes` returns: corral's :class:`EpisodeSummary`
    (``reward``, ``length``, ``custom_metrics``, ``policy_rewards``,
    ``hist_data``), so code written for either reads it.
    """

    @property
    def episode_reward(self) -> float:
        """The episode's total reward (RLlib's name for ``reward``)."""
        return self.reward

    @property
    def episode_length(self) -> int:
        """The episode's env steps (RLlib's name for ``length``)."""
        return self.length

    @property
    def episode_faulty(self) -> bool:
        """Always False: corral's summaries carry no such flag (RLlib counts faulty episodes apart; here there are none)."""
        return False

    @classmethod
    def of(cls, episode: EpisodeSummary) -> RolloutMetrics:
        """``episode`` as a RolloutMetrics (the same one, when it already is).

        Args:
            episode: a runner's episode summary.

        Returns:
            The summary with RLlib's names too.
        """
        if isinstance(episode, cls):
            return episode
        return cls(**{f.name: getattr(episode, f.name) for f in dataclasses.fields(EpisodeSummary)})


def _runner_metrics(runner: BaseEnvRunner) -> list[EpisodeSummary]:
    """What a remote runner runs: hand over the episodes it finished since it was last asked."""
    return runner.get_metrics()


def _remote_episodes(group: EnvRunnerGroup, remote_worker_ids: list[int] | None, timeout: float | None) -> list[EpisodeSummary]:
    healthy = group.healthy_remote_ids()
    ids = healthy if remote_worker_ids is None else [i for i in remote_worker_ids if i in healthy]
    if not ids:
        return []
    pending = {index: group.remote_env_runner(index).apply.remote(_runner_metrics) for index in ids}
    done = group.ended(list(pending.values()), timeout)
    late = [index for index, call in pending.items() if call not in done]
    if late:
        logger.warning(
            "collect_episodes: remote env runners %s did not hand over their episodes within timeout_seconds=%s; "
            "their episodes are left out",
            late, timeout,
        )  # fmt: skip
    answered = group.gather({index: call for index, call in pending.items() if index not in late})
    return [episode for index in ids if index in answered for episode in answered[index]]


def _checked_ids(remote_worker_ids: Any) -> list[int] | None:
    if remote_worker_ids is None:
        return None
    if isinstance(remote_worker_ids, (str, bytes)) or not isinstance(remote_worker_ids, Iterable):
        raise TypeError(f"remote_worker_ids must be a list of remote runner indexes (1, 2, ...), got {remote_worker_ids!r}")
    ids = list(remote_worker_ids)
    wrong = [i for i in ids if isinstance(i, bool) or not isinstance(i, numbers.Integral)]
    if wrong:
        raise TypeError(f"remote_worker_ids must be remote runner indexes (1, 2, ...), got {wrong!r} among them")
    return [int(i) for i in ids]


def collect_episodes(
    workers: EnvRunnerGroup | BaseEnvRunner | None = None,
    remote_worker_ids: Sequence[int] | None = None,
    timeout_seconds: float | None = 180,
) -> list[RolloutMetrics]:
    """The episodes the env runners finished since they were last asked, as RLlib's custom evaluations collect them.

    A custom evaluation function samples on its ``eval_workers`` and then
    summarises what finished meanwhile. Asking drains: each episode is
    returned once (the algorithm's own results then leave it out).

    Args:
        workers: the env runner group a custom evaluation function gets (or an
            algorithm's training group); a single env runner gives its own episodes.
        remote_worker_ids: only these remote runners (indexes 1..N) besides the local one;
            default all healthy ones. The episodes the group already brought back from
            its remote runners' sample calls are always included.
        timeout_seconds: how long to wait for the remote runners; a runner that answers
            later is left out, with a warning (its episodes are lost, as in RLlib). None waits.

    Returns:
        The finished episodes: the local runner's, those the group holds, then each remote runner's by index.

    Raises:
        TypeError: ``workers`` is missing or is not an env runner group or env runner;
            ``remote_worker_ids`` is not a list of indexes.
        ValueError: ``timeout_seconds`` is negative or not a number.
    """
    if isinstance(workers, BaseEnvRunner):
        return [RolloutMetrics.of(e) for e in workers.get_metrics()]
    if not isinstance(workers, EnvRunnerGroup):
        raise TypeError(
            "collect_episodes(workers=...) takes the env runners to collect from: the EnvRunnerGroup a custom "
            f"evaluation function gets as its second argument (or algorithm.env_runner_group), got {type(workers).__name__}"
        )
    ids = _checked_ids(remote_worker_ids)
    if timeout_seconds is not None and (
        isinstance(timeout_seconds, bool) or not isinstance(timeout_seconds, numbers.Real) or timeout_seconds < 0
    ):
        raise ValueError(f"timeout_seconds must be a number of seconds >= 0 (or None to wait), got {timeout_seconds!r}")
    episodes = workers.get_metrics()
    if workers.remote_env_runners:
        timeout = None if timeout_seconds is None else float(timeout_seconds)
        episodes += _remote_episodes(workers, ids, timeout)
    return [RolloutMetrics.of(e) for e in episodes]


def _episode_list(episodes: Any, argument: str) -> list[EpisodeSummary]:
    if isinstance(episodes, EpisodeSummary) or not isinstance(episodes, Iterable):
        raise TypeError(f"summarize_episodes: {argument} must be a list of episodes (what collect_episodes returns)")
    listed = list(episodes)
    for number, episode in enumerate(listed):
        if not isinstance(episode, EpisodeSummary):
            raise TypeError(
                f"summarize_episodes: {argument}[{number}] is a {type(episode).__name__}; it takes the episode "
                "summaries collect_episodes returns (corral's EpisodeSummary)"
            )
    return listed


def _custom_metrics(episodes: list[EpisodeSummary], keep: bool) -> dict[str, Any]:
    """RLlib's aggregation: NaN values are left out; each metric's mean, min and max (NaN when none is left), or the values."""
    values: dict[str, list[Any]] = {}
    for episode in episodes:
        for key, value in episode.custom_metrics.items():
            values.setdefault(key, []).append(value)
    out: dict[str, Any] = {}
    for key, found in values.items():
        kept = [v for v in found if not np.any(np.isnan(v))]
        if keep:
            out[key] = kept
        elif kept:
            out[f"{key}_mean"] = float(np.mean(kept))
            out[f"{key}_min"] = float(np.min(kept))
            out[f"{key}_max"] = float(np.max(kept))
        else:
            out[f"{key}_mean"] = out[f"{key}_min"] = out[f"{key}_max"] = math.nan
    return out


def summarize_episodes(
    episodes: Iterable[EpisodeSummary],
    new_episodes: Iterable[EpisodeSummary] | None = None,
    keep_custom_metrics: bool = False,
) -> dict[str, Any]:
    """RLlib's metrics of a list of episodes, under RLlib's keys, for a custom evaluation function to return.

    ``episode_reward_mean/min/max`` and ``episode_len_mean`` (NaN without
    episodes); ``policy_reward_mean/min/max`` by policy id over the agents each
    policy acted for (the default policy left out, as RLlib does, so a
    single-agent run's are empty); ``custom_metrics`` (NaN values left out);
    ``hist_stats`` with every episode's reward and length, each policy's agents'
    rewards and what callbacks put into ``hist_data``; ``episodes_this_iter``;
    and RLlib's ``episode_media``, ``sampler_perf``, ``connector_metrics``
    (empty: corral records none of them per episode) and ``num_faulty_episodes`` (0).

    Args:
        episodes: the episodes to summarise (maybe older ones too, for smoothing).
        new_episodes: the episodes that finished this iteration (``episodes_this_iter``
            counts them); default ``episodes``.
        keep_custom_metrics: report each custom metric as the list of its values
            instead of its mean, min and max.

    Returns:
        The metrics.

    Raises:
        TypeError: ``episodes`` or ``new_episodes`` is not a list of episode summaries.
    """
    listed = _episode_list(episodes, "episodes")
    new = listed if new_episodes is None else _episode_list(new_episodes, "new_episodes")
    # corral's summary gives the totals, the policies' rewards and the joined hist_data; the custom metrics are RLlib's
    plain = [
        EpisodeSummary(
            e.reward, e.length, {}, {pid: r for pid, r in e.policy_rewards.items() if pid != DEFAULT_POLICY_ID}, e.hist_data
        )
        for e in listed
    ]
    summary = corral_summarize_episodes(plain)
    hist_stats: dict[str, list[Any]] = summary["hist_stats"]
    # RLlib writes these after joining hist_data, so they win over a callback's list of the same name
    hist_stats["episode_reward"] = [e.reward for e in listed]
    hist_stats["episode_lengths"] = [e.length for e in listed]
    by_policy: dict[str, list[float]] = {}
    for episode in plain:
        for policy_id, rewards in episode.policy_rewards.items():
            by_policy.setdefault(policy_id, []).extend(rewards)
    for policy_id, rewards in by_policy.items():
        hist_stats[f"policy_{policy_id}_reward"] = rewards
    return {
        "episode_reward_max": summary["episode_reward_max"],
        "episode_reward_min": summary["episode_reward_min"],
        "episode_reward_mean": summary["episode_reward_mean"],
        "episode_len_mean": summary["episode_len_mean"],
        "episode_media": {},
        "episodes_this_iter": len(new),
        "policy_reward_min": summary["policy_reward_min"],
        "policy_reward_max": summary["policy_reward_max"],
        "policy_reward_mean": summary["policy_reward_mean"],
        "custom_metrics": _custom_metrics(listed, keep_custom_metrics),
        "hist_stats": hist_stats,
        "sampler_perf": {},
        "num_faulty_episodes": 0,
        "connector_metrics": {},
    }
