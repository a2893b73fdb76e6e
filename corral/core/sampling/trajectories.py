"""A fragment postprocessed one trajectory at a time: for ``on_postprocess_trajectory``, and for policies that
postprocess in RLlib's per-trajectory form.

An env runner normally postprocesses a policy's whole ``[T, K]`` fragment in
one call. RLlib's hook sees one trajectory at a time, before and after
postprocessing; a column of the fragment (one sub-environment, or one agent in
one) is that trajectory here. Return estimators work per column already, so
the rows that come out are the same, column by column.

A policy whose ``postprocess_trajectory(sample_batch, other_agent_batches,
episode)`` takes RLlib's arguments (a centralized critic's, which reads the
other agents' observations and actions) is called as RLlib calls it: once per
agent and episode, with that episode's rows of the agent (``obs``
preprocessed, ``actions``, ``rewards``, the flags and the policy's extras) and
of every other agent of the sub-environment, before postprocessing. What it
returns is what the policy learns from, columns it added included.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from corral.core.common.sample_batch import SampleBatch
from corral.core.learning.policies.heuristic_policies import postprocesses_trajectories

if TYPE_CHECKING:
    from corral.core.sampling.agent_collector import PolicyFragment
    from corral.core.sampling.multi_agent_env_runner import AnyEnvRunner


@dataclass
class Trajectory:
    """One column of a fragment (or, for a policy postprocessing in RLlib's form, one episode of it), before and after
    postprocessing."""

    env_index: int
    """the sub-environment it was sampled in"""
    agent_id: Hashable
    """the agent it belongs to (None in a single-agent run)"""
    episode: Any
    """the episode its last row belongs to (None where the runner kept none)"""
    original: SampleBatch
    """its transitions before postprocessing (the valid rows, flattened)"""
    postprocessed: SampleBatch = field(default_factory=SampleBatch)
    """what ``policy.postprocess_trajectory`` made of it (the hook may edit it)"""

    @property
    def has_transitions(self) -> bool:
        """Whether it holds a transition (a column of reset rows only has none, and no hook call)."""
        return self.original.count > 0


def _column(fragment: SampleBatch, k: int) -> SampleBatch:
    return SampleBatch({key: value[:, k : k + 1] for key, value in fragment.items()})


def _last(episodes: list[Any]) -> Any:
    return episodes[-1] if episodes else None


def episode_pieces(trajectory: Trajectory, episodes: list[Any]) -> list[Trajectory]:
    """A column's trajectory cut at every episode end: one per episode, not yet postprocessed.

    The episodes the runner recorded for the column are matched to its pieces from
    the last one back (a piece whose episode was not kept gets None).

    Args:
        trajectory: the column's valid rows (its ``original``).
        episodes: the episodes of its rows, in order.

    Returns:
        The pieces, in time order.
    """
    rows = trajectory.original
    if not rows.count:  # a column of reset rows only
        return []
    ends = np.flatnonzero(rows[SampleBatch.TERMINATEDS] | rows[SampleBatch.TRUNCATEDS]) + 1
    bounds = [0, *(int(end) for end in ends if end < rows.count), rows.count]
    count = len(bounds) - 1
    matched = [None] * max(0, count - len(episodes)) + list(episodes[-count:])
    return [
        Trajectory(trajectory.env_index, trajectory.agent_id, episode, SampleBatch({k: v[start:stop] for k, v in rows.items()}))
        for (start, stop), episode in zip(itertools.pairwise(bounds), matched, strict=True)
    ]


def postprocess_for_hook(runner: AnyEnvRunner, parts: Mapping[str, PolicyFragment]) -> dict[str, SampleBatch]:
    """Postprocess each trajectory of each policy's fragment on its own and show it to ``on_postprocess_trajectory``.

    A policy postprocesses column by column, or, in RLlib's per-trajectory form
    (see the module), episode by episode. As in RLlib, each hook call also gets
    the trajectories of every agent of the same sub-environment before
    postprocessing (``original_batches``, by agent id: None in a single-agent
    run), whatever policy acts for it: ``(policy_id, policy, batch)``, or
    ``(policy, batch)`` with ``enable_connectors=False``; where the trajectory is
    one episode, theirs in that episode. A trajectory without a transition, or
    without an episode, is not shown to the hook.

    Args:
        runner: the env runner that sampled the fragments (its callbacks and policies).
        parts: by policy id, its fragment with the agent and episodes of each column.

    Returns:
        By policy id, its training rows: the postprocessed trajectories (as the hook left them), joined.
    """
    policies = runner.policies
    with_ids = runner.config.enable_connectors  # RLlib's older sampler (False) gave (policy, batch)
    columns = {
        pid: [
            Trajectory(env_index, agent_id, _last(part.episodes[k]), policy.flatten_fragment(_column(part.fragment, k)))
            for k, (env_index, agent_id) in enumerate(part.agents)
        ]
        for pid, part in parts.items()
        for policy in [policies[pid]]
    }
    per_episode = {pid for pid in parts if postprocesses_trajectories(policies[pid])}
    pieces = {  # every policy's, where one postprocesses per episode: it is given the other agents' of its episode
        pid: [piece for k, c in enumerate(columns[pid]) for piece in episode_pieces(c, part.episodes[k])]
        for pid, part in parts.items()
        if per_episode
    }
    by_env: dict[int, dict[Hashable, tuple[Any, ...]]] = {}
    by_episode: dict[tuple[int, int], dict[Hashable, tuple[Any, ...]]] = {}
    for pid in parts:
        entry = (pid, policies[pid]) if with_ids else (policies[pid],)
        for t in columns[pid]:
            by_env.setdefault(t.env_index, {})[t.agent_id] = (*entry, t.original)
        for t in pieces.get(pid, []):
            by_episode.setdefault((t.env_index, id(t.episode)), {})[t.agent_id] = (*entry, t.original)
    trajectories: dict[str, list[Trajectory]] = {}
    for pid, part in parts.items():
        policy: Any = policies[pid]  # with per_episode, its postprocess_trajectory takes RLlib's arguments
        if pid in per_episode:
            trajectories[pid] = pieces[pid]
            for t in pieces[pid]:
                episode_rows = by_episode[(t.env_index, id(t.episode))]
                others = {agent: entry for agent, entry in episode_rows.items() if agent != t.agent_id}
                own = SampleBatch({key: value.copy() for key, value in t.original.items()})  # others' entries are views of it
                t.postprocessed = policy.postprocess_trajectory(own, others, t.episode)
        else:
            trajectories[pid] = columns[pid]
            for k, t in enumerate(columns[pid]):
                t.postprocessed = policy.postprocess_trajectory(_column(part.fragment, k), part.bootstrap_obs[k : k + 1])
        if runner.callbacks.has_postprocess_trajectory:
            for t in trajectories[pid]:
                if t.has_transitions and t.episode is not None:
                    originals = by_episode[(t.env_index, id(t.episode))] if pid in per_episode else by_env[t.env_index]
                    runner.callbacks.postprocess_trajectory(
                        runner, pid, policy, t.postprocessed, agent_id=t.agent_id, episode=t.episode,
                        original_batches=originals,
                    )  # fmt: skip
    return {pid: SampleBatch.concat([t.postprocessed for t in group]) for pid, group in trajectories.items()}
