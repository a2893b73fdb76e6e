"""Building a policy copy alike in every process, its initial weights and generators all from the config's seed."""

from __future__ import annotations

import contextvars
from typing import TYPE_CHECKING, Any, NamedTuple

import gymnasium as gym
import torch

from corral.core.common.sample_batch import DEFAULT_POLICY_ID
from corral.core.contracts.config import AlgorithmConfig
from corral.core.devices import policies_on
from corral.core.learning.policies.heuristic_policies import check_rllib_overrides, check_view_requirements
from corral.core.seeding import int_seed, isolated_torch_seed

if TYPE_CHECKING:  # a type only: the policy module re-exports this one's names
    from corral.core.learning.policy import Policy

BUILDING_POLICY_ID: contextvars.ContextVar[str] = contextvars.ContextVar("BUILDING_POLICY_ID", default=DEFAULT_POLICY_ID)
"""the id of the policy :func:`build_policy` is building, for its Learner (``learner_class``) to know its module"""
BUILDING_WORKER_INDEX: contextvars.ContextVar[int] = contextvars.ContextVar("BUILDING_WORKER_INDEX", default=0)
"""the index of the env runner whose copy :func:`build_policy` is building (0: the learner's), for explorations
that differ by runner (``PerWorkerEpsilonGreedy``)"""


def build_policy(
    policy_class: type[Policy],
    observation_space: gym.Space[Any],
    action_space: gym.Space[Any],
    config: AlgorithmConfig,
    *path: str | int,
    device: torch.device | None = None,
) -> Policy:
    """Build a policy copy whose initial weights and generators all come from ``config.seed`` and ``path``.

    The model's initial weights are drawn from torch's global generator
    (``torch.nn.init``), forked and seeded for the duration, so two algorithms
    built with one seed start from the same weights and the process's
    generator is left alone.

    Args:
        policy_class: the algorithm's policy class.
        observation_space: one agent's observation space.
        action_space: one agent's action space.
        config: the algorithm's config (its ``seed``).
        path: names the copy: ``("policy", policy_id, stream, worker_index)``.
        device: where the policy lives (a remote env runner's device); None: the learner's (``num_gpus``).

    Returns:
        The policy, with its generators seeded.
    """
    is_policy_path = len(path) > 1 and path[0] == "policy"
    policy_id = str(path[1]) if is_policy_path else DEFAULT_POLICY_ID
    worker_index = path[3] if is_policy_path and len(path) > 3 and isinstance(path[3], int) else 0
    token, worker_token = BUILDING_POLICY_ID.set(policy_id), BUILDING_WORKER_INDEX.set(worker_index)
    try:
        with isolated_torch_seed(int_seed(config.seed, *path, "init")), policies_on(device):
            policy = policy_class(observation_space, action_space, config)
    finally:
        BUILDING_POLICY_ID.reset(token)
        BUILDING_WORKER_INDEX.reset(worker_token)
    policy.seed_rngs(config.seed, *path)
    check_view_requirements(policy)
    check_rllib_overrides(policy)
    return policy


class PolicyBuild(NamedTuple):
    """What builds a policy alike in every process (the learner's, each remote runner's): class, spaces, config.

    Attributes:
        policy_class: the policy's class (the algorithm's, or the one its ``PolicySpec`` names).
        observation_space: one agent's observation space.
        action_space: one agent's action space.
        config: the policy's frozen config (the algorithm's, with the policy's own options on top).
    """

    policy_class: type[Policy]
    observation_space: gym.Space[Any]
    action_space: gym.Space[Any]
    config: AlgorithmConfig

    def build(
        self, policy_id: str, stream: str = "sampling", worker_index: int = 0, device: torch.device | None = None
    ) -> Policy:
        """A copy of the policy, seeded from the config's seed and where it lives (see :func:`build_policy`).

        Args:
            policy_id: the policy's id.
            stream: ``"sampling"`` or ``"evaluation"``.
            worker_index: 0 for the learner's copy, 1..N for remote runners'.
            device: where the copy lives; None: the learner's device (``num_gpus``).

        Returns:
            The new policy.
        """
        return build_policy(
            self.policy_class,
            self.observation_space,
            self.action_space,
            self.config,
            "policy",
            policy_id,
            stream,
            worker_index,
            device=device,
        )
