"""Episode metrics: smoothing over recent episodes and custom-metric aggregation."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable

from corral.core.env_runner import EpisodeSummary


def summarize_episodes(episodes: Iterable[EpisodeSummary]) -> dict[str, float | dict[str, float]]:
    """``episode_reward_mean/min/max``, ``episode_len_mean`` and ``custom_metrics`` of some episodes.

    With no episodes the means are NaN (nothing finished yet), as in RLlib.
    """
    episodes = list(episodes)
    rewards = [e.reward for e in episodes]
    lengths = [e.length for e in episodes]
    custom: dict[str, list[float]] = {}
    for episode in episodes:
        for key, value in episode.custom_metrics.items():
            custom.setdefault(key, []).append(float(value))
    aggregated: dict[str, float] = {}
    for key, values in custom.items():
        aggregated[f"{key}_mean"] = sum(values) / len(values)
        aggregated[f"{key}_min"] = min(values)
        aggregated[f"{key}_max"] = max(values)
    return {
        "episode_reward_mean": sum(rewards) / len(rewards) if rewards else math.nan,
        "episode_reward_min": min(rewards) if rewards else math.nan,
        "episode_reward_max": max(rewards) if rewards else math.nan,
        "episode_len_mean": sum(lengths) / len(lengths) if lengths else math.nan,
        "custom_metrics": aggregated,
    }


class EpisodeHistory:
    """The last ``window`` finished episodes, for smoothed training metrics."""

    def __init__(self, window: int) -> None:
        self.episodes: deque[EpisodeSummary] = deque(maxlen=window)
        self.total = 0

    def add(self, episodes: list[EpisodeSummary]) -> None:
        """Record newly finished episodes."""
        self.episodes.extend(episodes)
        self.total += len(episodes)
