"""A recurrent policy's training rows: a time-major fragment cut into sequences, and the state it ends in.

An env runner's ``[T, N]`` fragment holds each sub-environment's steps in a
column, episodes apart by a reset row (``valid`` False), with the state each
step started from (``state_in_k``) and ended in (``state_out_k``). Training
needs sequences that start from a known state: each run of valid rows (one
episode's steps in this fragment) is cut into chunks of at most
``max_seq_len`` steps, as RLlib does. A chunk is one row of the batch: its step
columns ``[S, max_seq_len, ...]``, zero-padded after ``seq_lens[s]`` steps, and
the state at its first step. So a batch of sequences concatenates, shuffles and
splits into minibatches like any batch, a sequence at a time.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from corral.core.common.sample_batch import STATE_IN_PREFIX, STATE_OUT_PREFIX, SampleBatch, state_out_key


def is_step_column(key: str) -> bool:
    """Whether a column of a batch of sequences has a row per step (``[S, L, ...]``), not one per sequence."""
    return key != SampleBatch.SEQ_LENS and not key.startswith(STATE_IN_PREFIX)


def chop_into_sequences(fragment: SampleBatch, max_seq_len: int) -> SampleBatch:
    """The valid rows of a ``[T, N]`` fragment as sequences of at most ``max_seq_len`` steps, one per batch row.

    Args:
        fragment: ``[T, N, ...]`` columns with ``valid``, and ``state_in_k`` columns
            holding the state each step started from.
        max_seq_len: the longest sequence.

    Returns:
        ``S`` sequences, sub-environment by sub-environment and in time order: each step
        column ``[S, max_seq_len, ...]`` zero-padded, ``state_in_k`` ``[S, ...]`` at each
        sequence's first step, and ``seq_lens`` ``[S]`` (int32). ``valid`` and the
        ``state_out_k`` columns are left out.
    """
    env_index, step = np.nonzero(fragment[SampleBatch.VALID].T)  # sub-environment by sub-environment, in time order
    rows = len(step)
    # a run of consecutive valid steps of one sub-environment is one episode's (a reset row sits between episodes)
    run_start = np.ones(rows, dtype=bool)
    run_start[1:] = (env_index[1:] != env_index[:-1]) | (step[1:] != step[:-1] + 1)
    run_first = np.flatnonzero(run_start)
    position = np.arange(rows) - run_first[np.cumsum(run_start) - 1]
    chunk_start = position % max_seq_len == 0
    chunk = np.cumsum(chunk_start) - 1
    offset = position % max_seq_len
    sequences = int(chunk[-1]) + 1 if rows else 0
    starts = np.flatnonzero(chunk_start)
    out = SampleBatch()
    for key, column in fragment.items():
        if key == SampleBatch.VALID or key.startswith(STATE_OUT_PREFIX):
            continue
        if key.startswith(STATE_IN_PREFIX):
            out[key] = column[step[starts], env_index[starts]]
            continue
        padded = np.zeros((sequences, max_seq_len, *column.shape[2:]), dtype=column.dtype)
        padded[chunk, offset] = column[step, env_index]
        out[key] = padded
    out[SampleBatch.SEQ_LENS] = np.bincount(chunk, minlength=sequences).astype(np.int32)
    return out


def inputs_after(fragment: SampleBatch, initial_state: list[np.ndarray]) -> dict[str, Any]:
    """What a recurrent model reads at the step after a fragment's last row, to bootstrap values from.

    After a valid row: the row's ``state_out``, action and reward. After a reset
    row a new episode starts: ``initial_state``, and zero previous action and reward.

    Args:
        fragment: ``[T, N, ...]`` columns with ``valid``, ``actions``, ``rewards`` and ``state_out_k``.
        initial_state: the model's state at an episode's start, without a batch axis.

    Returns:
        The keyword arguments of ``Policy.compute_values``: ``state`` (an ``[N, ...]`` array
        per state part), ``prev_actions`` and ``prev_rewards`` (``[N, ...]``).
    """
    ended_valid = fragment[SampleBatch.VALID][-1]

    def last_or(column: np.ndarray, start: np.ndarray | float) -> np.ndarray:
        return np.where(ended_valid.reshape(-1, *([1] * (column.ndim - 2))), column[-1], start)

    state = [last_or(fragment[state_out_key(k)], initial) for k, initial in enumerate(initial_state)]
    actions = fragment[SampleBatch.ACTIONS]
    prev_actions = last_or(actions, np.zeros((), dtype=actions.dtype)).astype(actions.dtype)
    rewards = last_or(fragment[SampleBatch.REWARDS], 0.0)
    return {"state": state, SampleBatch.PREV_ACTIONS: prev_actions, SampleBatch.PREV_REWARDS: rewards}
