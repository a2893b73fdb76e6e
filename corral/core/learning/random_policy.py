"""A policy that acts uniformly at random and never learns: the baseline opponent and a league's first member."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from corral.core.common.sample_batch import SampleBatch
from corral.core.contracts.config import AlgorithmConfig
from corral.core.learning.exploration import Random
from corral.core.learning.fused_adam import FusedAdam
from corral.core.learning.policies.optimizer_set import Optimizer
from corral.core.learning.policy import Policy
from corral.core.networks.default_models import Model


class _UniformLogits(Model):
    """Equal distribution inputs for every observation: one zero vector, never trained."""

    def __init__(self, num_outputs: int) -> None:
        super().__init__()
        self.logits = nn.Parameter(torch.zeros(num_outputs), requires_grad=False)

    def _forward(self, obs: torch.Tensor) -> dict[str, torch.Tensor]:
        return {SampleBatch.ACTION_DIST_INPUTS: self.logits.expand(obs.shape[0], -1)}


class RandomPolicy(Policy):
    """Uniformly random actions over the legal ones (with an action mask), whether or not asked to explore.

    Use it as ``PolicySpec(policy_class=RandomPolicy)`` for an opponent to
    measure against (``"win rate against random"``) or to start a self-play
    pool. It has no weights to train: ``learn_on_batch`` changes nothing, and
    it works under any algorithm's config.

    Args:
        observation_space: one agent's observation space.
        action_space: one agent's action space.
        config: the algorithm's (frozen) config.
    """

    thread_safe_learning = True
    data_parallel_learning = True  # it learns nothing, on any Learner

    def __init__(self, observation_space: gym.Space[Any], action_space: gym.Space[Any], config: AlgorithmConfig) -> None:
        super().__init__(observation_space, action_space, config)
        self.exploration = Random(self.action_adapter.policy_space)
        self.exploration.generator = self.torch_rng

    def make_model(self) -> nn.Module:
        """A model without trainable weights whose distribution is uniform."""
        return _UniformLogits(self.num_outputs)

    def make_optimizer(self) -> Optimizer:
        """Adam with a learning rate of 0 over nothing trainable: the state a checkpoint expects, and no step ever taken."""
        return FusedAdam(self.model.parameters(), lr=0.0)

    def compute_actions(
        self, obs: np.ndarray, explore: bool | None = None, timestep: int | None = None, **recurrent: Any
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Uniformly random actions, even with ``explore=False`` (see :meth:`Policy.compute_actions`; it has no memory)."""
        return super().compute_actions(obs, explore=True, timestep=timestep)

    def learn_on_batch(self, batch: SampleBatch) -> dict[str, Any]:
        """Nothing to learn: no stats."""
        return {}
