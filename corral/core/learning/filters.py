"""Observation filters: running normalisation whose statistics travel with the policy."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


class MeanStdFilter:
    """Normalise observations by a running mean and standard deviation, then clip.

    Statistics are updated from every batch seen while sampling with
    ``update=True`` (Chan et al.'s parallel variance update) and saved as
    tensors in the policy state, so evaluation and restored checkpoints see
    the same normalisation as training.

    With remote env runners each runner's copy also keeps what it saw since
    it last reported (:meth:`take_delta`, once ``keeps_delta`` is set); the
    driver folds those deltas into its own filter (:meth:`merge`) and sends the
    totals back with the weights.
    """

    def __init__(self, shape: tuple[int, ...], clip: float = 10.0, epsilon: float = 1e-8) -> None:
        self.mean = np.zeros(shape, dtype=np.float64)
        self.var = np.ones(shape, dtype=np.float64)
        self.count = 0.0
        self.clip = clip
        self.epsilon = epsilon
        self._delta = _empty_stats(shape)
        self.keeps_delta = False  # set in remote runners only: gathering the delta costs a second update per batch

    def __call__(self, obs: np.ndarray, update: bool | np.ndarray = True) -> np.ndarray:
        """Normalised ``obs``; first folds them into the running statistics when ``update`` (or, given a boolean
        mask of the rows, the rows it marks: episodes side by side, some already over)."""
        if isinstance(update, np.ndarray):
            self.update(obs[update])
        elif update:
            self.update(obs)
        out = (obs - self.mean) / np.sqrt(self.var + self.epsilon)
        return np.clip(out, -self.clip, self.clip).astype(np.float32)

    def update(self, batch: np.ndarray) -> None:
        """Fold a batch of observations (rows) into the statistics."""
        if batch.shape[0] == 0:
            return
        if batch.shape[0] == 1:  # one env's step: the row is its mean, with no spread (numpy's reductions cost more)
            stats = (batch[0], np.zeros_like(batch[0]), 1.0)
        else:
            stats = (batch.mean(axis=0), batch.var(axis=0), float(batch.shape[0]))
        self.mean, self.var, self.count = _combine((self.mean, self.var, self.count), stats)
        if self.keeps_delta:
            self._delta = _combine(self._delta, stats)

    def take_delta(self) -> dict[str, Any]:
        """The statistics of what this copy saw since the last call (``mean``, ``var``, ``count``); then forget them."""
        mean, var, count = self._delta
        self._delta = _empty_stats(self.mean.shape)
        return {"mean": mean, "var": var, "count": count}

    def restore_delta(self, delta: dict[str, Any]) -> None:
        """Go on gathering from a :meth:`take_delta` not reported yet (a copy that went to disk and came back).

        The statistics come out exactly as if the delta had never been taken.
        """
        self._delta = _stats_of(delta)

    def merge(self, delta: dict[str, Any]) -> None:
        """Fold another copy's :meth:`take_delta` into the statistics."""
        self.mean, self.var, self.count = _combine((self.mean, self.var, self.count), _stats_of(delta))

    def get_state(self) -> dict[str, Any]:
        """Tensors only, so checkpoints load with ``weights_only=True``."""
        return {"mean": torch.from_numpy(self.mean.copy()), "var": torch.from_numpy(self.var.copy()), "count": self.count}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`get_state` returned (a runner's unreported delta is kept).

        Raises:
            ValueError: the statistics have another shape, or are not finite, or the variance is negative.
        """
        mean = np.asarray(state["mean"], dtype=np.float64)
        var = np.asarray(state["var"], dtype=np.float64)
        count = float(state["count"])
        if mean.shape != self.mean.shape or var.shape != self.var.shape:
            raise ValueError(f"filter statistics have shape {mean.shape}, this filter {self.mean.shape}")
        if not (np.isfinite(mean).all() and np.isfinite(var).all() and np.isfinite(count)) or (var < 0).any() or count < 0:
            raise ValueError("filter statistics must be finite, with variances and count >= 0")
        self.mean, self.var, self.count = mean, var, count


Stats = tuple[np.ndarray, np.ndarray, float]


def _empty_stats(shape: tuple[int, ...]) -> Stats:
    return np.zeros(shape, dtype=np.float64), np.zeros(shape, dtype=np.float64), 0.0


def _stats_of(delta: dict[str, Any]) -> Stats:
    """A :meth:`MeanStdFilter.take_delta` dict as the ``(mean, var, count)`` the updates work on."""
    return np.asarray(delta["mean"]), np.asarray(delta["var"]), float(delta["count"])


def _combine(a: Stats, b: Stats) -> Stats:
    """Mean, variance and count of two sets of rows together (Chan et al.)."""
    (a_mean, a_var, a_n), (b_mean, b_var, b_n) = a, b
    total = a_n + b_n
    if total == 0:
        return a
    delta = b_mean - a_mean
    mean = a_mean + delta * b_n / total
    var = (a_var * a_n + b_var * b_n + delta**2 * a_n * b_n / total) / total
    return mean, var, total
