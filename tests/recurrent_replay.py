"""Replaying a recurrent policy through a sampled batch's sequences: does each row hold the state its episode was in?"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from corral.core.common.sample_batch import SampleBatch


def replay_sequences(
    policy: Any, batch: Any, carried: dict[Hashable, Any], episode_of: Callable[[int], Hashable | None]
) -> list[tuple[int, int]]:
    """Step ``policy`` through each sequence from its episode's carried state, checking the rows against it.

    Each sequence's ``state_in`` must be the state its episode reached (the initial one at its start), each row's
    previous action and reward the episode's last, and its ``action_logp`` the policy's likelihood of the action in
    that state.

    Args:
        policy: the recurrent policy that acted (or a copy with its weights).
        batch: a ``[sequences, max_seq_len]`` recurrent batch.
        carried: each episode's ``(state, previous action, previous reward)`` after the sequences already replayed;
            updated.
        episode_of: a sequence's episode, a new key for an episode's first sequence; None skips the sequence.

    Returns:
        ``(sequence, step)`` of every row checked.
    """
    initial = policy.get_initial_state()
    parts = range(len(initial))
    checked = []
    for seq, length in enumerate(batch[SampleBatch.SEQ_LENS]):
        episode = episode_of(seq)
        if episode is None:
            continue
        state, prev_action, prev_reward = carried.get(episode, (initial, 0, 0.0))
        for k in parts:
            np.testing.assert_allclose(batch[f"state_in_{k}"][seq], state[k], rtol=1e-4, atol=1e-5)
        for t in range(length):
            obs, action = batch[SampleBatch.OBS][seq, t : t + 1], batch[SampleBatch.ACTIONS][seq, t]
            assert batch[SampleBatch.PREV_ACTIONS][seq, t] == prev_action
            assert batch[SampleBatch.PREV_REWARDS][seq, t] == prev_reward
            inputs = {
                "state": [part[None] for part in state],
                SampleBatch.PREV_ACTIONS: np.array([prev_action]),
                SampleBatch.PREV_REWARDS: np.array([prev_reward], np.float32),
            }
            logp = policy.compute_log_likelihoods(obs, np.array([action]), **inputs)
            np.testing.assert_allclose(batch[SampleBatch.ACTION_LOGP][seq, t], logp[0], rtol=1e-4, atol=1e-5)
            _, extras = policy.compute_actions(obs, explore=False, **inputs)
            state = [extras[f"state_out_{k}"][0] for k in parts]
            prev_action, prev_reward = int(action), float(batch[SampleBatch.REWARDS][seq, t])
            checked.append((seq, t))
        carried[episode] = (state, prev_action, prev_reward)
    return checked
