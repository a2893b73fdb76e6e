"""What a recurrent policy carries from one step of a sub-environment to the next: its state, the last action and reward.

The env runner keeps one :class:`RecurrentCarry` for a recurrent policy. Each
step the policy acts from it, the runner records it beside the step
(``state_in_k``, ``prev_actions``, ``prev_rewards``: training cuts sequences
from those), and it moves on to what the model returned. A sub-environment
whose next step starts an episode starts over: the model's initial state, a
zero previous action and reward (RLlib's convention).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from corral.core.common.actions import zero_actions
from corral.core.common.sample_batch import STATE_OUT_PREFIX, SampleBatch, state_columns, state_in_key, state_out_key
from corral.core.learning.policies.heuristic_policies import follows_rllib_protocol
from corral.core.learning.policy import Policy


def recorded_inputs(inputs: dict[str, Any]) -> dict[str, np.ndarray]:
    """A recurrent policy's inputs of a step as sample columns: ``state_in_k``, ``prev_actions``, ``prev_rewards``.

    Args:
        inputs: the keyword arguments given to ``Policy.compute_actions`` (``state`` and the rest).

    Returns:
        The columns, a row per acting sub-environment or agent.
    """
    columns = {state_in_key(k): part for k, part in enumerate(inputs["state"])}
    columns[SampleBatch.PREV_ACTIONS] = inputs[SampleBatch.PREV_ACTIONS]
    columns[SampleBatch.PREV_REWARDS] = inputs[SampleBatch.PREV_REWARDS]
    return columns


class RecurrentCarry:
    """Each sub-environment's recurrent state, previous action and previous reward.

    Args:
        policy: the recurrent policy that acts.
        num_envs: the sub-environments it acts in.
    """

    def __init__(self, policy: Policy, num_envs: int) -> None:
        self.policy = policy
        self.fresh_starts = follows_rllib_protocol(policy)
        """RLlib asks an RLlib-protocol policy for its state at every episode's start (a heuristic may draw it)"""
        self.initial_state = policy.get_initial_state()
        self.state = [np.repeat(part[None], num_envs, axis=0) for part in self.initial_state]
        self.prev_actions = zero_actions(policy.action_adapter.policy_space, num_envs)
        self.prev_rewards = np.zeros(num_envs, dtype=np.float32)

    def inputs(self) -> dict[str, Any]:
        """The keyword arguments of ``Policy.compute_actions`` for the next step."""
        return {"state": self.state, SampleBatch.PREV_ACTIONS: self.prev_actions, SampleBatch.PREV_REWARDS: self.prev_rewards}

    def columns(self) -> dict[str, np.ndarray]:
        """What to record beside the next step: ``state_in_k``, ``prev_actions``, ``prev_rewards``."""
        return recorded_inputs(self.inputs())

    def advance(self, extras: dict[str, np.ndarray], actions: np.ndarray, rewards: np.ndarray, starting: np.ndarray) -> None:
        """Move on after a step.

        Args:
            extras: the policy's extras for the step (its ``state_out_k``).
            actions: the step's actions, in the policy's space.
            rewards: the step's rewards, as recorded.
            starting: ``[N]`` True where the next step starts an episode.
        """
        self.state = [extras[state_out_key(k)].copy() for k in range(len(self.state))]
        self.prev_actions = actions.astype(self.prev_actions.dtype, copy=True)
        self.prev_rewards = rewards.astype(np.float32, copy=True)
        self.start_over(starting)

    def start_over(self, which: np.ndarray) -> None:
        """Sub-environments whose next step starts an episode: the initial state, zero previous action and reward.

        Args:
            which: an ``[N]`` boolean mask or index array.
        """
        if self.fresh_starts:
            for index in np.arange(len(self.prev_rewards))[which]:
                for part, initial in zip(self.state, self.policy.get_initial_state(), strict=True):
                    part[index] = initial
        else:
            for part, initial in zip(self.state, self.initial_state, strict=True):
                part[which] = initial
        self.prev_actions[which] = 0
        self.prev_rewards[which] = 0.0

    def get_state(self) -> dict[str, Any]:
        """The state, previous actions and rewards of every sub-environment, for a runner's checkpoint."""
        return {
            "state": list(self.state),
            SampleBatch.PREV_ACTIONS: self.prev_actions,
            SampleBatch.PREV_REWARDS: self.prev_rewards,
        }

    def set_state(self, saved: Any) -> None:
        """Restore :meth:`get_state`, checked against this policy's shapes.

        Args:
            saved: what :meth:`get_state` returned, decoded.

        Raises:
            ValueError: it is malformed or its shapes are not this policy's for this many sub-environments.
        """
        if not isinstance(saved, dict) or not isinstance(saved.get("state"), list):
            raise ValueError("a recurrent carry's state must be a dict with a 'state' list")
        parts = [np.asarray(part, dtype=np.float32) for part in saved["state"]]
        expected = [part.shape for part in self.state]
        if [part.shape for part in parts] != expected:
            raise ValueError(f"the saved recurrent state has shapes {[p.shape for p in parts]}, this policy's are {expected}")
        prev_actions = np.asarray(saved.get(SampleBatch.PREV_ACTIONS), dtype=self.prev_actions.dtype)
        prev_rewards = np.asarray(saved.get(SampleBatch.PREV_REWARDS), dtype=np.float32)
        if prev_actions.shape != self.prev_actions.shape or prev_rewards.shape != self.prev_rewards.shape:
            raise ValueError("the saved previous actions or rewards do not fit this runner's sub-environments")
        self.state, self.prev_actions, self.prev_rewards = parts, prev_actions, prev_rewards


class AgentCarry:
    """A multi-agent runner's recurrent state, previous action and previous reward of each agent in each sub-environment.

    Agents act a few at a time, each for its own policy; an agent's entry is
    made when it first acts (the policy's initial state), moves on with each of
    its actions, sums the rewards it gets until it next acts, and is dropped when
    its episode ends. Feed-forward policies' agents have no entry.
    """

    def __init__(self) -> None:
        self._entries: dict[tuple[int, Any], tuple[str, list[np.ndarray], np.ndarray, float]] = {}
        self._starts: dict[str, tuple[Policy, tuple[str, list[np.ndarray], np.ndarray, float]]] = {}
        """by policy id, the policy and an agent's entry at an episode's start, made once: this runs at every step"""

    def inputs(self, policy_id: str, policy: Policy, keys: list[tuple[int, Any]]) -> dict[str, Any]:
        """The keyword arguments of ``Policy.compute_actions`` for these agents, stacked in their order.

        Args:
            policy_id: the policy that acts for all of them.
            policy: that policy (recurrent).
            keys: ``(sub-environment, agent id)`` of each.

        Returns:
            ``state``, ``prev_actions`` and ``prev_rewards``.
        """
        cached = self._starts.get(policy_id)
        if cached is None or cached[0] is not policy:  # made anew for a policy replaced under its id
            zero = zero_actions(policy.action_adapter.policy_space, 1)[0]
            cached = self._starts[policy_id] = (policy, (policy_id, policy.get_initial_state(), zero, 0.0))
        start = cached[1]
        initial = start[1]
        found = [self._entries.get(key) for key in keys]
        rows = [row if row is not None and row[0] == policy_id else start for row in found]
        if follows_rllib_protocol(policy):  # RLlib asks at every agent's episode start (a heuristic may draw it)
            rows = [row if row is not start else (policy_id, policy.get_initial_state(), start[2], 0.0) for row in rows]
        return {
            "state": [np.stack([row[1][k] for row in rows]) for k in range(len(initial))],
            SampleBatch.PREV_ACTIONS: np.stack([row[2] for row in rows]),
            SampleBatch.PREV_REWARDS: np.array([row[3] for row in rows], dtype=np.float32),
        }

    def advance(self, policy_id: str, keys: list[tuple[int, Any]], extras: dict[str, np.ndarray], actions: np.ndarray) -> None:
        """After the agents acted: their next state and action; their rewards start from 0.

        Args:
            policy_id: the policy that acted.
            keys: the agents, in the order of the rows.
            extras: the policy's extras (its ``state_out_k``).
            actions: the actions, in the policy's action space.
        """
        parts = state_columns(extras, STATE_OUT_PREFIX)
        for row, key in enumerate(keys):
            self._entries[key] = (policy_id, [extras[part][row].copy() for part in parts], actions[row].copy(), 0.0)

    def add_reward(self, key: tuple[int, Any], reward: float) -> None:
        """A reward the agent got since it last acted (its next step's previous reward).

        Args:
            key: the agent, ``(sub-environment, agent id)``.
            reward: the reward, as learning sees it (clipped if ``clip_rewards``).
        """
        entry = self._entries.get(key)
        if entry is not None:
            self._entries[key] = (*entry[:3], entry[3] + reward)

    def forget(self, key: tuple[int, Any]) -> None:
        """The agent's episode ended: it starts over when it next acts."""
        self._entries.pop(key, None)

    def forget_sub_environment(self, index: int) -> None:
        """The sub-environment's episode ended: every agent in it starts over."""
        for key in [key for key in self._entries if key[0] == index]:
            del self._entries[key]

    def get_state(self) -> list[list[Any]]:
        """Every agent's entry, ``[sub-environment, agent id, policy id, state, previous action, previous reward]``."""
        return [
            [i, agent, pid, list(state), action, reward] for (i, agent), (pid, state, action, reward) in self._entries.items()
        ]

    def set_state(self, saved: Any, policies: Mapping[str, Policy]) -> None:
        """Restore :meth:`get_state`, each entry checked against its policy's shapes.

        Args:
            saved: what :meth:`get_state` returned, decoded.
            policies: the runner's policies by id.

        Raises:
            ValueError: it is malformed, names a policy the runner lacks, or its shapes are not the policy's.
        """
        if not isinstance(saved, list):
            raise ValueError("a multi-agent recurrent carry's state must be a list of entries")
        entries = {}
        for entry in saved:
            if not (isinstance(entry, list) and len(entry) == 6 and entry[2] in policies):
                raise ValueError(f"a saved recurrent entry must name one of the policies {sorted(policies)}")
            i, agent, pid, state, action, reward = entry
            policy = policies[pid]
            parts = [np.asarray(part, dtype=np.float32) for part in state]
            if [p.shape for p in parts] != [p.shape for p in policy.get_initial_state()]:
                raise ValueError(f"the saved recurrent state of agent {agent!r} does not fit policy {pid!r}")
            zero = zero_actions(policy.action_adapter.policy_space, 1)[0]
            entries[(int(i), agent)] = (pid, parts, np.asarray(action, dtype=zero.dtype).reshape(zero.shape), float(reward))
        self._entries = entries
