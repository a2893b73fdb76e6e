"""What a recurrent policy carries from one step of a sub-environment to the next: its state, the last action and reward.

The env runner keeps one :class:`RecurrentCarry` for a recurrent policy. Each
step the policy acts from it, the runner records it beside the step
(``state_in_k``, ``prev_actions``, ``prev_rewards``: training cuts sequences
from those), and it moves on to what the model returned. A sub-environment
whose next step starts an episode starts over: the model's initial state, a
zero previous action and reward (RLlib's convention).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from corral.core.common.sample_batch import SampleBatch
from corral.core.common.spaces import zero_actions
from corral.core.learning.policy import Policy
from corral.core.learning.recurrent.sequences import STATE_IN_PREFIX, STATE_OUT_PREFIX


class RecurrentCarry:
    """Each sub-environment's recurrent state, previous action and previous reward.

    Args:
        policy: the recurrent policy that acts.
        num_envs: the sub-environments it acts in.
    """

    def __init__(self, policy: Policy, num_envs: int) -> None:
        self.policy = policy
        self.initial_state = policy.get_initial_state()
        self.state = [np.repeat(part[None], num_envs, axis=0) for part in self.initial_state]
        self.prev_actions = zero_actions(policy.action_adapter.policy_space, num_envs)
        self.prev_rewards = np.zeros(num_envs, dtype=np.float32)

    def inputs(self) -> dict[str, Any]:
        """The keyword arguments of ``Policy.compute_actions`` for the next step."""
        return {"state": self.state, SampleBatch.PREV_ACTIONS: self.prev_actions, SampleBatch.PREV_REWARDS: self.prev_rewards}

    def columns(self) -> dict[str, np.ndarray]:
        """What to record beside the next step: ``state_in_k``, ``prev_actions``, ``prev_rewards``."""
        columns = {f"{STATE_IN_PREFIX}{k}": part for k, part in enumerate(self.state)}
        columns[SampleBatch.PREV_ACTIONS] = self.prev_actions
        columns[SampleBatch.PREV_REWARDS] = self.prev_rewards
        return columns

    def advance(self, extras: dict[str, np.ndarray], actions: np.ndarray, rewards: np.ndarray, starting: np.ndarray) -> None:
        """Move on after a step.

        Args:
            extras: the policy's extras for the step (its ``state_out_k``).
            actions: the step's actions, in the policy's space.
            rewards: the step's rewards, as recorded.
            starting: ``[N]`` True where the next step starts an episode.
        """
        self.state = [extras[f"{STATE_OUT_PREFIX}{k}"].copy() for k in range(len(self.state))]
        self.prev_actions = actions.astype(self.prev_actions.dtype, copy=True)
        self.prev_rewards = rewards.astype(np.float32, copy=True)
        self.start_over(starting)

    def start_over(self, which: np.ndarray) -> None:
        """Sub-environments whose next step starts an episode: the initial state, zero previous action and reward.

        Args:
            which: an ``[N]`` boolean mask or index array.
        """
        for part, initial in zip(self.state, self.initial_state, strict=True):
            part[which] = initial
        self.prev_actions[which] = 0
        self.prev_rewards[which] = 0.0

    def get_state(self) -> dict[str, Any]:
        """The state, previous actions and rewards of every sub-environment, for a runner's checkpoint."""
        return {"state": list(self.state), "prev_actions": self.prev_actions, "prev_rewards": self.prev_rewards}

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
        prev_actions = np.asarray(saved.get("prev_actions"), dtype=self.prev_actions.dtype)
        prev_rewards = np.asarray(saved.get("prev_rewards"), dtype=np.float32)
        if prev_actions.shape != self.prev_actions.shape or prev_rewards.shape != self.prev_rewards.shape:
            raise ValueError("the saved previous actions or rewards do not fit this runner's sub-environments")
        self.state, self.prev_actions, self.prev_rewards = parts, prev_actions, prev_rewards
