"""Episode metrics: smoothing over recent episodes and custom-metric aggregation."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from typing import Any

from corral.core.persistence.checkpoints import restored_count, restored_float
from corral.core.sampling.env_runner import EpisodeSummary


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
            "episodes": [[e.reward, e.length, e.custom_metrics] for e in self.episodes],
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
            if not (isinstance(item, list) and len(item) == 3 and isinstance(item[2], dict)):
                raise ValueError("each episode in the history is [reward, length, custom_metrics]")
            reward = restored_float(item[0], "episode reward")
            length = restored_count(item[1], "episode length")
            custom = {str(k): _number(v, f"custom metric {k!r}") for k, v in item[2].items()}
            episodes.append(EpisodeSummary(reward, length, custom))
        total = restored_count(state.get("total", len(episodes)), "episodes total")
        self.episodes.clear()
        self.episodes.extend(episodes)
        self.total = total
