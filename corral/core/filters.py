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
    """

    def __init__(self, shape: tuple[int, ...], clip: float = 10.0, epsilon: float = 1e-8) -> None:
        self.mean = np.zeros(shape, dtype=np.float64)
        self.var = np.ones(shape, dtype=np.float64)
        self.count = 0.0
        self.clip = clip
        self.epsilon = epsilon

    def __call__(self, obs: np.ndarray, update: bool = True) -> np.ndarray:
        if update:
            self.update(obs)
        out = (obs - self.mean) / np.sqrt(self.var + self.epsilon)
        return np.clip(out, -self.clip, self.clip).astype(np.float32)

    def update(self, batch: np.ndarray) -> None:
        """Fold a batch of observations (rows) into the statistics."""
        n = batch.shape[0]
        if n == 0:
            return
        b_mean = batch.mean(axis=0)
        b_var = batch.var(axis=0)
        total = self.count + n
        delta = b_mean - self.mean
        self.mean = self.mean + delta * n / total
        self.var = (self.var * self.count + b_var * n + delta**2 * self.count * n / total) / total
        self.count = total

    def get_state(self) -> dict[str, Any]:
        """Tensors only, so checkpoints load with ``weights_only=True``."""
        return {"mean": torch.from_numpy(self.mean.copy()), "var": torch.from_numpy(self.var.copy()), "count": self.count}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`get_state` returned."""
        self.mean = state["mean"].numpy().astype(np.float64)
        self.var = state["var"].numpy().astype(np.float64)
        self.count = float(state["count"])
