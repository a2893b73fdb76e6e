"""Per-agent trajectories of a multi-agent env runner, packed per policy into time-major fragments.

A multi-agent env gives observations to some agents at each step. An
agent's row (the observation it acted on, its action and the action's
extras) opens when it acts and closes when the agent next gets an
observation or leaves the episode; rewards that arrive in between are summed
into it, so a turn-based game credits a player's move with what the
opponent's reply brought. Closed rows form *chunks*: one agent's rows for one
policy, in the fragment being sampled.

At the end of a sample call each policy's chunks become one ``[T, K]``
fragment, a chunk per column, *right-aligned*: invalid rows pad the start, so
the last row of every column is followed by that column's bootstrap
observation exactly as in a single-agent fragment. A row that ends an
agent's episode is followed, if the chunk goes on, by a reset row holding the
agent's final observation (the convention of
:mod:`corral.core.learning.postprocessing`). GAE, n-step returns and V-trace
therefore run unchanged, batched over every agent of a policy.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from corral.core.common import state_codec
from corral.core.common.sample_batch import SampleBatch
from corral.core.common.spaces import stack_observations
from corral.core.learning.policies.heuristic_policies import follows_rllib_protocol

if TYPE_CHECKING:
    from corral.core.learning.policy import Policy

AgentKey = tuple[int, Hashable]
"""(sub-environment index, agent id)"""


@dataclass
class _Records:
    """What one policy's acting produced in the fragment: one array per act call, concatenated at the end."""

    obs: list[np.ndarray] = field(default_factory=list)
    actions: list[np.ndarray] = field(default_factory=list)
    extras: list[dict[str, np.ndarray]] = field(default_factory=list)
    count: int = 0

    def add(self, obs: np.ndarray, actions: np.ndarray, extras: dict[str, np.ndarray]) -> int:
        start = self.count
        self.obs.append(obs)
        self.actions.append(actions)
        self.extras.append(extras)
        self.count += len(obs)
        return start

    def joined(self) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """Every row so far as one array per column (joined once; later calls reuse it)."""
        if len(self.obs) > 1:
            self.obs, self.actions = [np.concatenate(self.obs)], [np.concatenate(self.actions)]
            self.extras = [{key: np.concatenate([e[key] for e in self.extras]) for key in self.extras[0]}]
        return self.obs[0], self.actions[0], self.extras[0]


@dataclass
class _Pending:
    """An agent's open row: the policy that acted, its record, the rewards summed so far, the raw observation."""

    policy_id: str
    record: int
    raw_obs: Any
    reward: float = 0.0


@dataclass
class _Chunk:
    """One agent's closed rows for one policy; ``rows`` index the policy's records, ``~j`` its j-th reset observation."""

    rows: list[int] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    terminateds: list[bool] = field(default_factory=list)
    truncateds: list[bool] = field(default_factory=list)
    valid: list[bool] = field(default_factory=list)
    infos: list[Any] = field(default_factory=list)
    """the env's info for each row (None for reset rows), kept when the collector keeps infos"""
    after: Any = None
    """the raw observation that follows the last row (the final one if ``done``)"""
    done: bool = False
    episodes: list[Any] = field(default_factory=list)
    """the episodes its rows belong to, in order (for per-trajectory postprocessing and ``on_postprocess_trajectory``)"""


@dataclass
class PolicyFragment:
    """One policy's samples of a sample call, ready for ``postprocess_trajectory``."""

    fragment: SampleBatch
    """``[T, K]`` columns, one column per chunk, right-aligned"""
    bootstrap_obs: np.ndarray
    """``[K, ...]`` preprocessed observations after each column's last row"""
    agents: list[AgentKey]
    """the (sub-environment, agent) of each column"""
    episodes: list[list[Any]] = field(default_factory=list)
    """the episodes each column's rows belong to, in order (the last: its last row's), as given to
    :meth:`AgentCollector.close`; a column's rows split at each episode end are one episode each"""


class AgentCollector:
    """Rows per agent as they open and close, and the fragments they make (see the module docstring)."""

    def __init__(self, keep_infos: bool = False) -> None:
        self.keep_infos = keep_infos
        """give each fragment an ``infos`` column (the env's info dict of each row), for the output"""
        self._records: dict[str, _Records] = {}
        self._pending: dict[AgentKey, _Pending] = {}
        self._chunks: dict[tuple[int, Hashable, str], _Chunk] = {}
        self._reset_obs: dict[str, list[Any]] = {}
        self._agent_indexes: dict[int, dict[Hashable, int]] = {}
        """by sub-environment, each agent's ``agent_index`` in the output"""

    def act(
        self, policy_id: str, agents: Sequence[AgentKey], raw_obs: Sequence[Any], obs: np.ndarray, actions: np.ndarray,
        extras: dict[str, np.ndarray],
    ) -> None:  # fmt: skip
        """Open a row for each agent that acted: ``obs[j]``, ``actions[j]`` and ``extras`` row ``j`` are ``agents[j]``'s.

        Args:
            policy_id: the policy that acted for all of them.
            agents: ``(sub-environment, agent id)`` of each row.
            raw_obs: each agent's observation as the env gave it.
            obs: ``[B, ...]`` the preprocessed observations.
            actions: ``[B, ...]`` the actions, in the policy's action space.
            extras: the policy's extra action outputs, ``[B, ...]`` each.
        """
        start = self._records.setdefault(policy_id, _Records()).add(obs, actions, extras)
        for j, key in enumerate(agents):
            self._pending[key] = _Pending(policy_id, start + j, raw_obs[j])

    def output_context(
        self, agents: Sequence[AgentKey], episodes: Sequence[Any], possible_agents: Callable[[int], Sequence[Hashable]]
    ) -> dict[str, np.ndarray]:
        """The output's ``eps_id``, ``agent_index`` and ``t`` (the agent's step in its episode) of each acting agent.

        An agent's index is its place in its sub-environment's ``possible_agents``; an agent
        not listed there gets the next free index of its sub-environment when it first acts.

        Args:
            agents: ``(sub-environment, agent id)`` of each acting agent.
            episodes: each sub-environment's episode (its ``episode_id`` and ``agent_steps``).
            possible_agents: the agents a sub-environment lists, by its index.

        Returns:
            The three columns, a row per agent.
        """
        n, indexes = len(agents), self._agent_indexes
        for i in {i for i, _ in agents} - indexes.keys():
            indexes[i] = {a: k for k, a in enumerate(possible_agents(i))}
        return {
            SampleBatch.EPS_ID: np.fromiter((episodes[i].episode_id for i, _ in agents), np.int64, n),
            SampleBatch.AGENT_INDEX: np.fromiter((indexes[i].setdefault(a, len(indexes[i])) for i, a in agents), np.int64, n),
            SampleBatch.T: np.fromiter((episodes[i].agent_steps.get(a, 0) for i, a in agents), np.int64, n),
        }

    def add_reward(self, key: AgentKey, reward: float) -> None:
        """Add to the agent's open row; a reward to an agent that has not acted yet has no row to go to.

        Args:
            key: the agent.
            reward: what the env gave it on this step.
        """
        pending = self._pending.get(key)
        if pending is not None:
            pending.reward += reward

    def has_open_row(self, key: AgentKey) -> bool:
        """Whether the agent acted and its row is still open."""
        return key in self._pending

    def close(
        self, key: AgentKey, next_raw_obs: Any, terminated: bool, truncated: bool, info: Any = None, episode: Any = None
    ) -> None:
        """Close the agent's open row: it got ``next_raw_obs`` (or left the episode with it as its final observation).

        Args:
            key: the agent.
            next_raw_obs: its next observation; None if the env gave none (the row's own is used).
            terminated: the agent's episode ended for good.
            truncated: the agent's episode was cut short (bootstrapped from ``next_raw_obs``).
            info: the env's info for the agent at this step (kept with ``keep_infos``).
            episode: the episode the row belongs to (kept for the fragment's ``episodes``).
        """
        pending = self._pending.pop(key)
        chunk = self._chunks.setdefault((*key, pending.policy_id), _Chunk())
        if chunk.done:  # the previous row ended an episode: a reset row carries its final observation
            resets = self._reset_obs.setdefault(pending.policy_id, [])
            chunk.rows.append(~len(resets))
            resets.append(chunk.after)
            chunk.rewards.append(0.0)
            chunk.terminateds.append(False)
            chunk.truncateds.append(False)
            chunk.valid.append(False)
            chunk.infos.append(None)
        chunk.rows.append(pending.record)
        chunk.rewards.append(pending.reward)
        chunk.terminateds.append(terminated)
        chunk.truncateds.append(truncated)
        chunk.valid.append(True)
        chunk.infos.append(info)
        chunk.after = pending.raw_obs if next_raw_obs is None else next_raw_obs
        if chunk.done or not chunk.episodes:
            chunk.episodes.append(episode)
        chunk.done = terminated or truncated

    def longest_chunk(self) -> int:
        """The most rows one column of the next fragment has: the horizon :meth:`build` needs at least."""
        return max((len(chunk.rows) for chunk in self._chunks.values()), default=0)

    def build(self, policies: Mapping[str, Policy], horizon: int) -> dict[str, PolicyFragment]:
        """Each policy's closed rows as a right-aligned ``[horizon, K]`` fragment; open rows carry over to the next.

        Args:
            policies: the policies by id (to preprocess the observations that were not acted on).
            horizon: ``T``, at least the longest chunk (the steps of the sample call).

        Returns:
            By policy id, its fragment, bootstrap observations and the agent of each column;
            policies without closed rows are left out.
        """
        by_policy: dict[str, list[tuple[AgentKey, _Chunk]]] = {}
        for (env_index, agent, policy_id), chunk in self._chunks.items():
            by_policy.setdefault(policy_id, []).append(((env_index, agent), chunk))
        fragments = {
            policy_id: self._fragment(
                policies[policy_id], self._records[policy_id], self._reset_obs.get(policy_id, []), chunks, horizon
            )
            for policy_id, chunks in by_policy.items()
        }
        self._carry_over_open_rows()
        self._chunks.clear()
        self._reset_obs.clear()
        return fragments

    def _fragment(
        self, policy: Policy, records: _Records, reset_raw: list[Any], chunks: list[tuple[AgentKey, _Chunk]], horizon: int
    ) -> PolicyFragment:
        # a policy with closed rows acted in this call, or carried an open row into it
        acted_obs, acted_actions, acted_extras = records.joined()
        obs, actions = [acted_obs], [acted_actions]
        extras = {key: [value] for key, value in acted_extras.items()}
        if reset_raw:  # a forward pass gives the reset rows their extras (the final observation's value estimate)
            reset_obs = policy.preprocess(stack_observations(reset_raw, policy.observation_space))
            if follows_rllib_protocol(policy):  # a heuristic estimates no value: its reset rows are zeros
                reset_actions = np.zeros((len(reset_obs), *acted_actions.shape[1:]), acted_actions.dtype)
                reset_extras: dict[str, np.ndarray] = {}
            else:
                reset_actions, reset_extras = policy.compute_actions(reset_obs, explore=False)
            obs.append(reset_obs)
            actions.append(reset_actions)
            for key, parts in extras.items():  # a column the policy does not compute (the output's context) is zero
                parts.append(reset_extras.get(key, np.zeros((len(reset_obs), *parts[0].shape[1:]), parts[0].dtype)))
        # one zero row at the end, for the padding
        columns = {SampleBatch.OBS: obs, SampleBatch.ACTIONS: actions, **extras}
        store = {
            key: np.concatenate([*parts, np.zeros((1, *parts[0].shape[1:]), parts[0].dtype)]) for key, parts in columns.items()
        }
        reset_offset, pad = records.count, records.count + len(reset_raw)
        width = len(chunks)
        index = np.full((horizon, width), pad, dtype=np.int64)
        rewards = np.zeros((horizon, width), dtype=np.float32)
        terminateds = np.zeros((horizon, width), dtype=bool)
        truncateds = np.zeros((horizon, width), dtype=bool)
        valid = np.zeros((horizon, width), dtype=bool)
        infos = np.full((horizon, width), None, dtype=object) if self.keep_infos else None
        copy_infos = infos is not None and any(any(chunk.infos) for _, chunk in chunks)  # most envs return {}
        for k, (_, chunk) in enumerate(chunks):
            rows = np.asarray(chunk.rows, dtype=np.int64)
            start = horizon - len(rows)
            index[start:, k] = np.where(rows >= 0, rows, reset_offset + ~rows)
            rewards[start:, k] = chunk.rewards
            terminateds[start:, k] = chunk.terminateds
            truncateds[start:, k] = chunk.truncateds
            valid[start:, k] = chunk.valid
            if copy_infos and infos is not None:
                for j, info in enumerate(chunk.infos):  # one by one: numpy would read a list of dicts as rows
                    infos[start + j, k] = info
        fragment = SampleBatch({key: value[index] for key, value in store.items()})
        if infos is not None:
            fragment[SampleBatch.INFOS] = infos
        fragment.update(
            {
                SampleBatch.REWARDS: rewards,
                SampleBatch.TERMINATEDS: terminateds,
                SampleBatch.TRUNCATEDS: truncateds,
                SampleBatch.VALID: valid,
            }
        )
        bootstrap = policy.preprocess(stack_observations([chunk.after for _, chunk in chunks], policy.observation_space))
        return PolicyFragment(fragment, bootstrap, [key for key, _ in chunks], [chunk.episodes for _, chunk in chunks])

    def _carry_over_open_rows(self) -> None:
        """Move the open rows' records into fresh stores: they close in the next sample call."""
        old, self._records = self._records, {}
        by_policy: dict[str, list[tuple[AgentKey, _Pending]]] = {}
        for key, pending in self._pending.items():
            by_policy.setdefault(pending.policy_id, []).append((key, pending))
        for policy_id, open_rows in by_policy.items():
            rows = np.asarray([pending.record for _, pending in open_rows])
            obs, actions, extras = old[policy_id].joined()  # joined already if the policy had closed rows
            start = self._records.setdefault(policy_id, _Records()).add(
                obs[rows], actions[rows], {k: v[rows] for k, v in extras.items()}
            )
            for j, (_, pending) in enumerate(open_rows):
                pending.record = start + j

    def forget_policy(self, policy_id: str) -> None:
        """Drop every row of a policy that was removed, open or closed. Returns nothing; its agents act anew."""
        for key in [key for key, pending in self._pending.items() if pending.policy_id == policy_id]:
            del self._pending[key]
        for chunk_key in [chunk_key for chunk_key in self._chunks if chunk_key[2] == policy_id]:
            del self._chunks[chunk_key]
        self._records.pop(policy_id, None)
        self._reset_obs.pop(policy_id, None)

    def get_state(self) -> dict[str, Any]:
        """The open rows, as JSON: taken between sample calls, when every closed row is already in a fragment.

        Raises:
            ValueError: closed rows wait for a fragment (a sample call is under way).
        """
        if self._chunks:
            raise ValueError("the agent collector's state is taken between sample calls, not during one")
        records = {}
        for policy_id, found in self._records.items():
            if found.count:
                obs, actions, extras = found.joined()
                records[policy_id] = [obs, actions, extras]
        pending = [
            [env_index, agent, row.policy_id, row.record, row.reward, row.raw_obs]
            for (env_index, agent), row in self._pending.items()
        ]
        state: dict[str, Any] = state_codec.encode({"records": records, "pending": pending})  # a dict encodes to a dict
        return state

    def set_state(self, state: Any, policy_ids: Collection[str]) -> None:
        """Restore :meth:`get_state` into an empty collector.

        Args:
            state: what :meth:`get_state` returned.
            policy_ids: the policies that exist; every open row must be one of theirs.

        Raises:
            ValueError: the state is malformed or names another policy.
        """
        if (
            not isinstance(state, dict)
            or not isinstance(state.get("records"), dict)
            or not isinstance(state.get("pending"), list)
        ):
            raise ValueError("an agent collector state needs records (a dict) and pending (a list)")
        state = state_codec.decode(state)
        self._records.clear()
        self._pending.clear()
        for policy_id, columns in state["records"].items():
            if policy_id not in policy_ids or not (isinstance(columns, list) and len(columns) == 3):
                raise ValueError(f"the saved open rows of policy {policy_id!r} do not fit; the policies are {sorted(policy_ids)}")
            self._records[policy_id] = records = _Records()
            records.add(*columns)
        for entry in state["pending"]:
            if not (isinstance(entry, list) and len(entry) == 6):
                raise ValueError("a saved open row must be [env_index, agent, policy_id, record, reward, raw_obs]")
            env_index, agent, policy_id, record, reward, raw_obs = entry
            found = self._records.get(policy_id)
            if found is None or not isinstance(record, int) or not 0 <= record < found.count:
                raise ValueError(f"the saved open row of agent {agent!r} points at no saved record of policy {policy_id!r}")
            self._pending[(env_index, agent)] = _Pending(policy_id, record, raw_obs, float(reward))

    def drop_open_row(self, key: AgentKey) -> None:
        """Forget one agent's open row, if it has one (its outcome will never come)."""
        self._pending.pop(key, None)

    def drop_open_rows(self, env_index: int) -> None:
        """Forget the open rows of one sub-environment (its episode was cut off without a last step)."""
        for key in [key for key in self._pending if key[0] == env_index]:
            del self._pending[key]
