"""A fragment postprocessed one trajectory at a time, for callbacks that look at each (``on_postprocess_trajectory``).

An env runner normally postprocesses a policy's whole ``[T, K]`` fragment in
one call. RLlib's hook sees one trajectory at a time, before and after
postprocessing; a column of the fragment (one sub-environment, or one agent in
one) is that trajectory here. Return estimators work per column already, so
the rows that come out are the same, column by column.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from corral.core.common.sample_batch import SampleBatch

if TYPE_CHECKING:
    from corral.core.learning.policy import Policy
    from corral.core.sampling.agent_collector import PolicyFragment
    from corral.core.sampling.multi_agent_env_runner import AnyEnvRunner


@dataclass
class Trajectory:
    """One column of a fragment, before and after postprocessing."""

    column: int
    """its index in the fragment"""
    original: SampleBatch
    """its transitions before postprocessing (the valid rows, flattened)"""
    postprocessed: SampleBatch
    """what ``policy.postprocess_trajectory`` made of it (the hook may edit it)"""

    @property
    def has_transitions(self) -> bool:
        """Whether it holds a transition (a column of reset rows only has none, and no hook call)."""
        return self.original.count > 0


def postprocess_columns(policy: Policy, fragment: SampleBatch, bootstrap_obs: np.ndarray) -> list[Trajectory]:
    """Postprocess each column of a time-major fragment on its own.

    Args:
        policy: the policy whose fragment it is.
        fragment: ``[T, K, ...]`` columns plus ``valid``.
        bootstrap_obs: ``[K, ...]`` preprocessed observations after each column's last row.

    Returns:
        A trajectory per column, in column order; joined, their ``postprocessed`` batches
        are the policy's training rows.
    """
    trajectories = []
    for k in range(fragment[SampleBatch.VALID].shape[1]):
        column = SampleBatch({key: value[:, k : k + 1] for key, value in fragment.items()})
        original = policy.flatten_fragment(column)
        trajectories.append(Trajectory(k, original, policy.postprocess_trajectory(column, bootstrap_obs[k : k + 1])))
    return trajectories


def postprocess_for_hook(runner: AnyEnvRunner, parts: Mapping[str, PolicyFragment]) -> dict[str, SampleBatch]:
    """Postprocess each column of each policy's fragment on its own and show it to ``on_postprocess_trajectory``.

    As in RLlib, each call also gets every trajectory of the same sub-environment
    before postprocessing (``original_batches``, by agent id: None in a
    single-agent run), whatever policy acts for it: ``(policy_id, policy,
    batch)``, or ``(policy, batch)`` with ``enable_connectors=False``. A column without a
    transition, or without an episode, is not shown to the hook.

    Args:
        runner: the env runner that sampled the fragments (its callbacks and policies).
        parts: by policy id, its fragment with the agent and episode of each column.

    Returns:
        By policy id, its training rows: the postprocessed columns (as the hook left them), joined.
    """
    policies = runner.policies
    trajectories = {pid: postprocess_columns(policies[pid], part.fragment, part.bootstrap_obs) for pid, part in parts.items()}
    originals: dict[int, dict[Hashable, tuple[Any, ...]]] = {}
    with_ids = runner.config.enable_connectors  # RLlib's older sampler (False) gave (policy, batch)
    for pid, part in parts.items():
        for (env_index, agent_id), trajectory in zip(part.agents, trajectories[pid], strict=True):
            entry = (pid, policies[pid], trajectory.original) if with_ids else (policies[pid], trajectory.original)
            originals.setdefault(env_index, {})[agent_id] = entry
    for pid, part in parts.items():
        for (env_index, agent_id), episode, trajectory in zip(part.agents, part.episodes, trajectories[pid], strict=True):
            if trajectory.has_transitions and episode is not None:
                runner.callbacks.postprocess_trajectory(
                    runner, pid, policies[pid], trajectory.postprocessed, agent_id=agent_id, episode=episode,
                    original_batches=originals[env_index],
                )  # fmt: skip
    return {pid: SampleBatch.concat([t.postprocessed for t in columns]) for pid, columns in trajectories.items()}
