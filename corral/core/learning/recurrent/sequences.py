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

from corral.core.common.sample_batch import STATE_IN_PREFIX, STATE_OUT_PREFIX, SampleBatch, state_in_key, state_out_key


def is_step_column(key: str) -> bool:
    """Whether a column of a batch of sequences has a row per step (``[S, L, ...]``), not one per sequence."""
    return key not in (SampleBatch.SEQ_LENS, SampleBatch.BURN_IN) and not key.startswith(STATE_IN_PREFIX)


def chop_into_sequences(fragment: SampleBatch, max_seq_len: int, burn_in: int = 0) -> SampleBatch:
    """The valid rows of a ``[T, N]`` fragment as sequences of at most ``max_seq_len`` steps, one per batch row.

    With ``burn_in``, each sequence also starts up to that many steps earlier
    in its episode (the steps before it, which the previous sequence holds
    too): steps a learner runs through to warm the state up, not to learn from
    (RLlib's R2D2 ``replay_burn_in``).

    Args:
        fragment: ``[T, N, ...]`` columns with ``valid``, and ``state_in_k`` columns
            holding the state each step started from.
        max_seq_len: the longest sequence, burn-in aside.
        burn_in: how many earlier steps each sequence starts with, where its episode has them.

    Returns:
        ``S`` sequences, sub-environment by sub-environment and in time order: each step
        column ``[S, burn_in + max_seq_len, ...]`` zero-padded, ``state_in_k`` ``[S, ...]`` at each
        sequence's first step, ``seq_lens`` ``[S]`` (int32), and with ``burn_in`` the
        ``burn_in`` column ``[S]``: how many of each sequence's first steps are burn-in.
        ``valid`` and the ``state_out_k`` columns are left out.
    """
    step, env_index, run_start = _valid_rows(fragment[SampleBatch.VALID])
    rows = len(step)
    run_first = np.flatnonzero(run_start)
    run_of_row = np.cumsum(run_start) - 1
    position = np.arange(rows) - run_first[run_of_row]
    starts = np.flatnonzero(position % max_seq_len == 0)  # each sequence's first step to learn from
    run_ends = np.append(run_first[1:], rows)
    first = np.maximum(starts - burn_in, run_first[run_of_row[starts]])  # the burn-in reaches back within the episode
    end = np.minimum(starts + max_seq_len, run_ends[run_of_row[starts]])
    width = max_seq_len + burn_in
    index = first[:, None] + np.arange(width)[None, :]
    real = index < end[:, None]
    out = SampleBatch()
    for key, column in fragment.items():
        if key == SampleBatch.VALID or key.startswith(STATE_OUT_PREFIX):
            continue
        if key.startswith(STATE_IN_PREFIX):
            out[key] = column[step[first], env_index[first]]
            continue
        padded = np.zeros((len(starts), width, *column.shape[2:]), dtype=column.dtype)
        rows_taken = index[real]
        padded[real] = column[step[rows_taken], env_index[rows_taken]]
        out[key] = padded
    out[SampleBatch.SEQ_LENS] = (end - first).astype(np.int32)
    if burn_in:
        out[SampleBatch.BURN_IN] = (starts - first).astype(np.int32)
    return out


def _valid_rows(valid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A ``[T, N]`` fragment's valid rows, sub-environment by sub-environment in time order: ``(step, env, run_start)``.

    A run of consecutive valid steps of one sub-environment is one episode's (a
    reset row sits between episodes); ``run_start`` is True at each run's first row.
    """
    env_index, step = np.nonzero(valid.T)
    run_start = np.ones(len(step), dtype=bool)
    run_start[1:] = (env_index[1:] != env_index[:-1]) | (step[1:] != step[:-1] + 1)
    return step, env_index, run_start


def episode_grid(valid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each episode's steps in a ``[T, N]`` fragment as a row of a grid, to run its episodes side by side.

    Args:
        valid: the fragment's ``[T, N]`` ``valid`` column.

    Returns:
        ``(step, env, real)``, each ``[E, L]`` for ``E`` runs of valid rows of at most ``L``
        steps: the fragment row and sub-environment of each run's ``l``-th step, and
        whether the run has that step (where not, ``step`` and ``env`` point at its first).
    """
    step, env_index, run_start = _valid_rows(valid)
    run_first = np.flatnonzero(run_start)
    lengths = np.diff(np.append(run_first, len(step)))
    longest = int(lengths.max()) if len(lengths) else 0
    real = np.arange(longest)[None, :] < lengths[:, None]
    rows = np.where(real, run_first[:, None] + np.arange(longest)[None, :], run_first[:, None])
    return step[rows], env_index[rows], real


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


def step_inputs(fragment: SampleBatch, initial_state: list[np.ndarray]) -> dict[str, Any]:
    """What a recurrent model reads at every row of a fragment, to estimate each row's value as it acted.

    A valid row brings its own ``state_in_k``, previous action and reward. A
    reset row (the row after an episode's end, holding the episode's final
    observation, whose value a truncated episode bootstraps from) is the step
    after the row before it: that row's ``state_out_k``, action and reward; at
    a fragment's first row, an episode's start.

    Args:
        fragment: ``[T, N, ...]`` columns with ``valid``, ``actions``, ``rewards``, ``state_in_k`` and
            ``state_out_k``; ``prev_actions`` and ``prev_rewards`` where recorded (else zeros).
        initial_state: the model's state at an episode's start, without a batch axis.

    Returns:
        The keyword arguments of ``Policy.compute_values`` for the fragment's rows flattened
        (``[T * N, ...]``, time-major): ``state``, ``prev_actions`` and ``prev_rewards``.
    """
    valid = fragment[SampleBatch.VALID]
    actions, rewards = fragment[SampleBatch.ACTIONS], fragment[SampleBatch.REWARDS]

    def at_each_row(own: np.ndarray, before: np.ndarray, start: np.ndarray | float) -> np.ndarray:
        first = np.broadcast_to(np.asarray(start, dtype=own.dtype), own.shape[1:])[None]
        after_previous = np.concatenate([first, before[:-1]])  # row t's inputs if it follows row t - 1
        chosen = np.where(valid.reshape(*valid.shape, *([1] * (own.ndim - 2))), own, after_previous)
        return chosen.reshape(-1, *own.shape[2:])

    state = [
        at_each_row(fragment[state_in_key(k)], fragment[state_out_key(k)], initial) for k, initial in enumerate(initial_state)
    ]
    prev_actions = fragment.get(SampleBatch.PREV_ACTIONS, np.zeros_like(actions))
    prev_rewards = fragment.get(SampleBatch.PREV_REWARDS, np.zeros_like(rewards))
    return {
        "state": state,
        SampleBatch.PREV_ACTIONS: at_each_row(prev_actions, actions, 0),
        SampleBatch.PREV_REWARDS: at_each_row(prev_rewards, rewards, 0.0),
    }
