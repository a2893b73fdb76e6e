"""What every part of a ``Policy`` may read: the attributes ``Policy.__init__`` sets, typed once.

``Policy`` is composed of parts (acting, updates, state), each a class of its
own module that it inherits from, as ``Algorithm`` is of its parts
(:mod:`corral.core.training.part`). A part reads the policy's attributes and
calls what an algorithm overrides through ``self``; this base names their
types, for readers and the type checker, and holds nothing at run time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
import torch

from corral.core.common.actions import ActionAdapter
from corral.core.common.sample_batch import SampleBatch
from corral.core.common.spaces import ObservationPreprocessor
from corral.core.contracts.config import AlgorithmConfig
from corral.core.contracts.rllib_compat import CallableBool
from corral.core.learning.exploration import Exploration
from corral.core.learning.filters import MeanStdFilter
from corral.core.learning.learners.gradient_sync import GradientSync
from corral.core.learning.policies.optimizer_set import Optimizer
from corral.core.learning.schedules import PiecewiseSchedule
from corral.core.networks.action_masking import MaskedObservationPreprocessor
from corral.core.networks.default_models import Model
from corral.core.networks.distributions import ActionDistribution

if TYPE_CHECKING:  # a type only: the Learner module reads policies
    from corral.core.learning.learners.learner import Learner


class PolicyPart:
    """The attributes of a policy, for the parts that read them (see the module docstring)."""

    observation_space: gym.Space[Any]
    action_space: gym.Space[Any]
    config: AlgorithmConfig
    policy_id: str
    device: torch.device
    action_mask: MaskedObservationPreprocessor | None
    preprocessor: ObservationPreprocessor
    model_observation_space: gym.Space[Any]
    action_adapter: ActionAdapter
    dist_class: type[ActionDistribution]
    num_outputs: int
    model: Model
    is_recurrent: CallableBool
    exploration: Exploration
    observation_filter: MeanStdFilter | None
    optimizer: Optimizer
    global_timestep: int
    torch_rng: torch.Generator
    np_rng: np.random.Generator
    _schedules: dict[str, PiecewiseSchedule]
    gradient_sync: GradientSync | None
    learner: Learner | None

    # What the parts call on Policy itself, declared once for the type checker; at run time it comes from policy.py.
    if TYPE_CHECKING:

        def extra_action_out(
            self, model_out: dict[str, torch.Tensor], dist: ActionDistribution, actions: torch.Tensor
        ) -> dict[str, torch.Tensor]:
            """Defined in policy.py."""

        def learn_on_batch(self, batch: SampleBatch) -> dict[str, Any]:
            """Defined by each algorithm's policy."""
