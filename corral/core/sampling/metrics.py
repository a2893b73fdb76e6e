"""Episode metrics: what is kept of a finished episode, smoothing over recent episodes, custom-metric aggregation."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from corral.core.common.restored import restored_count, restored_float


@dataclass
class EpisodeSummary:
    """What metrics need of a finished episode."""

    reward: float
    length: int
    custom_metrics: dict[str, float] = field(default_factory=dict)
    policy_rewards: dict[str, list[float]] = field(default_factory=dict)
    """multi-agent episodes: by policy id, the total reward of each agent that policy acted for"""
    hist_data: dict[str, list[float]] = field(default_factory=dict)
    """what callbacks put into the episode's ``hist_data``, reported whole under ``hist_stats``"""


def hist_lists(hist_data: dict[str, Any]) -> dict[str, list[float]]:
    """An episode's ``hist_data`` as plain float lists, for its :class:`EpisodeSummary` (numpy numbers and arrays too)."""
    return {key: [float(v) for v in values] for key, values in hist_data.items()}


def summarize_episodes(episodes: Iterable[EpisodeSummary], keep_per_episode_custom_metrics: bool = False) -> dict[str, Any]:
    """``episode_reward_mean/min/max``, ``episode_len_mean``, ``custom_metrics``, ``policy_reward_mean/min/max``, ``hist_stats``.

    With no episodes the means are NaN (nothing finished yet), as in RLlib.
    ``policy_reward_*`` are dicts by policy id over every agent a policy acted
    for in a multi-agent episode (empty in a single-agent run). ``hist_stats``
    holds RLlib's lists: every episode's reward (``episode_reward``) and length
    (``episode_lengths``), each policy's agents' rewards (``policy_<id>_reward``)
    and what callbacks put into ``episode.hist_data``, joined over the episodes.

    Args:
        episodes: the finished episodes to summarise.
        keep_per_episode_custom_metrics: report each custom metric as the list of its
            episodes' values instead of its mean, min and max.
    """
    episodes = list(episodes)
    by_policy: dict[str, list[float]] = {}
    for episode in episodes:
        for policy_id, rewards in episode.policy_rewards.items():
            by_policy.setdefault(policy_id, []).extend(rewards)
    rewards = [e.reward for e in episodes]
    lengths = [e.length for e in episodes]
    custom: dict[str, list[float]] = {}
    for episode in episodes:
        for key, value in episode.custom_metrics.items():
            custom.setdefault(key, []).append(float(value))
    aggregated: dict[str, Any] = {}
    for key, values in custom.items():
        if keep_per_episode_custom_metrics:
            aggregated[key] = values
            continue
        aggregated[f"{key}_mean"] = sum(values) / len(values)
        aggregated[f"{key}_min"] = min(values)
        aggregated[f"{key}_max"] = max(values)
    hist_stats: dict[str, list[float]] = {"episode_reward": rewards, "episode_lengths": [float(n) for n in lengths]}
    for policy_id, policy_rewards in by_policy.items():
        hist_stats[f"policy_{policy_id}_reward"] = policy_rewards
    for episode in episodes:
        for key, values in episode.hist_data.items():
            hist_stats.setdefault(key, []).extend(values)
    return {
        "episode_reward_mean": sum(rewards) / len(rewards) if rewards else math.nan,
        "episode_reward_min": min(rewards) if rewards else math.nan,
        "episode_reward_max": max(rewards) if rewards else math.nan,
        "episode_len_mean": sum(lengths) / len(lengths) if lengths else math.nan,
        "custom_metrics": aggregated,
        "policy_reward_mean": {pid: sum(r) / len(r) for pid, r in by_policy.items()},
        "policy_reward_min": {pid: min(r) for pid, r in by_policy.items()},
        "policy_reward_max": {pid: max(r) for pid, r in by_policy.items()},
        "hist_stats": hist_stats,
    }


def _number(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number, got {value!r}")
    return float(value)


class EpisodeHistory:
    """The last ``window`` finished episodes, for smoothed training metrics."""

    def __init__(self, window: int) -> None:
        self.episodes: deque[EpisodeSummary] = deque(maxlen=window)
        self.total = 0

    def add(self, episodes: list[EpisodeSummary]) -> None:
        """Record newly finished episodes."""
        self.episodes.extend(episodes)
        self.total += len(episodes)

    def get_state(self) -> dict[str, Any]:
        """The episodes in the window and the total, as JSON (for checkpoints: smoothed metrics resume as they were)."""
        return {
            "total": self.total,
            "episodes": [[e.reward, e.length, e.custom_metrics, e.policy_rewards, e.hist_data] for e in self.episodes],
        }

    def set_state(self, state: Any) -> None:
        """Restore :meth:`get_state` (only the newest ``window`` episodes are kept).

        Raises:
            ValueError: the state is malformed.
        """
        if not isinstance(state, dict) or not isinstance(state.get("episodes"), list):
            raise ValueError("an episode history must be a dict with a list of episodes")
        episodes = []
        for item in state["episodes"]:
            # corral 0.1 saved three items; the policies' rewards came with multi-agent runs, hist_data after them
            if not (isinstance(item, list) and len(item) in (3, 4, 5) and all(isinstance(v, dict) for v in item[2:])):
                raise ValueError("each episode in the history is [reward, length, custom_metrics, policy_rewards, hist_data]")
            reward = restored_float(item[0], "episode reward")
            length = restored_count(item[1], "episode length")
            custom = {str(k): _number(v, f"custom metric {k!r}") for k, v in item[2].items()}
            policy_rewards = {}
            for policy_id, rewards in (item[3] if len(item) >= 4 else {}).items():
                if not isinstance(rewards, list):
                    raise ValueError(f"the rewards of policy {policy_id!r} in the episode history must be a list")
                policy_rewards[str(policy_id)] = [restored_float(r, f"policy {policy_id!r} reward") for r in rewards]
            hist_data = {}
            for key, values in (item[4] if len(item) == 5 else {}).items():
                if not isinstance(values, list):
                    raise ValueError(f"the hist_data {key!r} in the episode history must be a list")
                hist_data[str(key)] = [_number(v, f"hist_data {key!r} value") for v in values]
            episodes.append(EpisodeSummary(reward, length, custom, policy_rewards, hist_data))
        total = restored_count(state.get("total", len(episodes)), "episodes total")
        self.episodes.clear()
        self.episodes.extend(episodes)
        self.total = total
