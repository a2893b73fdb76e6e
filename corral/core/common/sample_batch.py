"""Columnar sample storage: one numpy array per column, rows are transitions.

Env runners produce a :class:`MultiAgentBatch` (a :class:`SampleBatch` per policy
id) so that the path from sampling to learning is keyed by policy from the
start; a single-agent run has exactly one policy, :data:`DEFAULT_POLICY_ID`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np

DEFAULT_POLICY_ID = "default_policy"

STATE_IN_PREFIX = "state_in_"
"""a recurrent model's state parts are columns ``state_in_0``, ``state_in_1``, ... (where a step or sequence starts)"""
STATE_OUT_PREFIX = "state_out_"
"""... and ``state_out_0``, ... (after a step): model outputs, sample columns and exported outputs alike"""


def state_in_key(index: int) -> str:
    """The column of a state part where a step or sequence starts (RLlib's ``state_in_0``, ...)."""
    return f"{STATE_IN_PREFIX}{index}"


def state_out_key(index: int) -> str:
    """The model output (and sample column) of a state part after a step (RLlib's ``state_out_0``, ...)."""
    return f"{STATE_OUT_PREFIX}{index}"


def state_columns(keys: Iterable[Any], prefix: str) -> list[str]:
    """The keys naming state parts, ``prefix`` and an index, in the parts' order (``state_in_10`` after ``state_in_9``).

    Args:
        keys: any keys (a batch's, a model's outputs', an input dict's).
        prefix: :data:`STATE_IN_PREFIX` or :data:`STATE_OUT_PREFIX`.

    Returns:
        The matching keys, sorted by their index.
    """
    found = [key for key in keys if isinstance(key, str) and key.startswith(prefix) and key[len(prefix) :].isdigit()]
    return sorted(found, key=lambda key: int(key[len(prefix) :]))


class SampleBatch(dict[str, Any]):
    """A dict of equally long numpy columns (``obs``, ``actions``, ``rewards``, ...).

    The column names are class constants so that typos fail loudly; a model's
    outputs use the same names (``ACTION_DIST_INPUTS``, ``VF_PREDS``).
    """

    OBS = "obs"
    CUR_OBS = OBS  # RLlib's older name of the column
    ACTIONS = "actions"
    REWARDS = "rewards"
    TERMINATEDS = "terminateds"
    TRUNCATEDS = "truncateds"
    DONES = "dones"
    """RLlib's older name for an episode's end: read from a batch, ``terminateds | truncateds`` (never stored)"""
    ACTION_LOGP = "action_logp"
    ACTION_DIST_INPUTS = "action_dist_inputs"
    VF_PREDS = "vf_preds"
    ADVANTAGES = "advantages"
    VALUE_TARGETS = "value_targets"
    NEXT_OBS = "new_obs"
    EPS_ID = "eps_id"
    AGENT_INDEX = "agent_index"
    """the agent's index in its episode (0 in a single-agent run)"""
    T = "t"
    """the agent's step in its episode, from 0"""
    INFOS = "infos"
    """the info dict the env returned with each transition (kept only while output is written)"""
    # A time-major fragment [T, N] keeps a row per step and sub-environment, and the step after an
    # episode ends is a reset row, not a transition: VALID marks the real transitions.
    VALID = "valid"
    DISCOUNTS = "discounts"
    """gamma**k, or 0 after a termination, for the n-step target's bootstrap value"""
    WEIGHTS = "weights"
    """importance-sampling weights of prioritized replay (1 for uniform replay)"""
    PRIORITIES = "priorities"
    """replay priorities (``|TD error|``) an env runner computed for its rows (``worker_side_prioritization``)"""
    BATCH_INDEXES = "batch_indexes"
    """the replay buffer rows a replayed batch came from, to update their priorities"""
    BOOTSTRAP_OBS = "bootstrap_obs"
    """the observation after each sequence's last row, whose value bootstraps its targets"""
    SEQ_LENS = "seq_lens"
    """in a recurrent policy's batches, each sequence's steps: its other step columns are ``[S, max_seq_len, ...]``"""
    PREV_ACTIONS = "prev_actions"
    """the action before each step in its episode (zeros at the first), for models that read it"""
    PREV_REWARDS = "prev_rewards"
    """the reward before each step in its episode (0 at the first), for models that read it"""
    BURN_IN = "burn_in"
    """in a batch of sequences cut with a burn-in (R2D2's), how many of each sequence's first steps only warm up the state"""
    STATE_IN = "state_in"
    """an RLModule's state where a step or sequence starts: a dict of its parts (RLlib's ``Columns.STATE_IN``)"""
    STATE_OUT = "state_out"
    """... and after it, in the module's outputs"""
    EMBEDDINGS = "embeddings"
    """features an RLModule may return for its ``compute_values`` to reuse"""
    QF_PREDS = "qf_preds"
    """Q-values, as RLlib's DQN modules name their outputs"""

    @property
    def count(self) -> int:
        """Number of rows."""
        for column in self.values():
            return len(column)
        return 0

    def __len__(self) -> int:  # len() of a batch is its row count, as in RLlib
        return self.count

    def __missing__(self, key: str) -> Any:
        """RLlib's derived ``"dones"`` column (``terminateds | truncateds``); any other missing key is a KeyError.

        Raises:
            KeyError: the batch has no such column.
        """
        if key == self.DONES and self.TERMINATEDS in self and self.TRUNCATEDS in self:
            return np.logical_or(self[self.TERMINATEDS], self[self.TRUNCATEDS])
        raise KeyError(key)

    @property
    def env_steps(self) -> StepCount:
        """The env steps of a single-agent batch: its rows (RLlib's ``batch.env_steps()``, also called)."""
        return StepCount(self.count)

    @property
    def agent_steps(self) -> StepCount:
        """The agent steps: its rows too, as a :class:`MultiAgentBatch` counts a policy's (``batch.agent_steps()``)."""
        return StepCount(self.count)

    def select(self, rows: np.ndarray | slice) -> SampleBatch:
        """Rows by index array, boolean mask or slice, as a new batch."""
        return SampleBatch({k: v[rows] for k, v in self.items()})

    def shuffle(self, rng: np.random.Generator) -> SampleBatch:
        """Rows in a random order drawn from ``rng``."""
        return self.select(rng.permutation(self.count))

    def minibatches(self, size: int, rng: np.random.Generator | None = None) -> Iterator[SampleBatch]:
        """Consecutive minibatches of ``size`` rows (the last may be shorter), shuffled if ``rng``.

        Args:
            size: rows per minibatch, >= 1.
            rng: draws one permutation of all rows before they are cut; None keeps the rows' order.

        Returns:
            An iterator over new batches that together hold every row once.
        """
        order = rng.permutation(self.count) if rng is not None else np.arange(self.count)
        for start in range(0, self.count, size):
            yield self.select(order[start : start + size])

    @staticmethod
    def concat(batches: list[SampleBatch]) -> SampleBatch:
        """Join batches, rows in order; the columns are those every batch has (files and the sampler may differ in extras)."""
        if len(batches) == 1:
            return batches[0]
        keys = [k for k in batches[0] if all(k in b for b in batches[1:])]
        return SampleBatch({k: np.concatenate([b[k] for b in batches]) for k in keys})

    def as_multi_agent(self) -> MultiAgentBatch:
        """This batch as the default policy's part of a multi-agent batch (its rows are its env steps), as in RLlib."""
        return MultiAgentBatch({DEFAULT_POLICY_ID: self}, self.count)


class StepCount(int):
    """A count of steps that may also be called: corral reads ``batch.env_steps``; RLlib's scripts call
    ``batch.env_steps()`` and ``batch.agent_steps()``, and both read the same number."""

    def __call__(self) -> int:
        """The count, for RLlib's method call."""
        return int(self)


class MultiAgentBatch:
    """Samples of one or more policies, and the env steps that produced them.

    ``env_steps`` counts environment transitions; with several agents one env
    step yields a row for each acting agent, so it can be less than the rows.
    ``agent_steps`` counts the agents' actions; by default the rows (env runners
    pass it, since a row of IMPALA's batches is a whole sequence).
    """

    def __init__(self, policy_batches: Mapping[str, SampleBatch], env_steps: int, agent_steps: int | None = None) -> None:
        self.policy_batches: dict[str, SampleBatch] = dict(policy_batches)
        self.env_steps = StepCount(env_steps)
        self.agent_steps = StepCount(sum(b.count for b in self.policy_batches.values()) if agent_steps is None else agent_steps)

    @property
    def count(self) -> int:
        """RLlib's name for the env steps."""
        return int(self.env_steps)

    def count_in(self, unit: str) -> int:
        """``env_steps`` or ``agent_steps``, as ``count_steps_by`` names the unit."""
        return self.agent_steps if unit == "agent_steps" else self.env_steps

    @staticmethod
    def concat(batches: list[MultiAgentBatch]) -> MultiAgentBatch:
        """Join per policy id."""
        by_policy: dict[str, list[SampleBatch]] = {}
        for batch in batches:
            for pid, b in batch.policy_batches.items():
                by_policy.setdefault(pid, []).append(b)
        return MultiAgentBatch(
            {pid: SampleBatch.concat(bs) for pid, bs in by_policy.items()},
            sum(b.env_steps for b in batches),
            sum(b.agent_steps for b in batches),
        )

    def __repr__(self) -> str:
        sizes = ", ".join(f"{pid}: {b.count}" for pid, b in self.policy_batches.items())
        return f"MultiAgentBatch({{{sizes}}}, env_steps={self.env_steps})"


class Columns:
    """RLlib's ``Columns`` (new API stack): the names of batch columns and module outputs an RLModule reads and writes."""

    OBS = SampleBatch.OBS
    NEXT_OBS = SampleBatch.NEXT_OBS
    ACTIONS = SampleBatch.ACTIONS
    REWARDS = SampleBatch.REWARDS
    TERMINATEDS = SampleBatch.TERMINATEDS
    TRUNCATEDS = SampleBatch.TRUNCATEDS
    INFOS = SampleBatch.INFOS
    EPS_ID = SampleBatch.EPS_ID
    T = SampleBatch.T
    SEQ_LENS = SampleBatch.SEQ_LENS
    STATE_IN = SampleBatch.STATE_IN
    STATE_OUT = SampleBatch.STATE_OUT
    ACTION_DIST_INPUTS = SampleBatch.ACTION_DIST_INPUTS
    ACTION_LOGP = SampleBatch.ACTION_LOGP
    VF_PREDS = SampleBatch.VF_PREDS
    ADVANTAGES = SampleBatch.ADVANTAGES
    VALUE_TARGETS = SampleBatch.VALUE_TARGETS
    EMBEDDINGS = SampleBatch.EMBEDDINGS
