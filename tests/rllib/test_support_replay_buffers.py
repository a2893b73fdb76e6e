"""RLlib's ``MultiAgentReplayBuffer`` for a training step of the script's own, and the batch counts RLlib calls."""

from __future__ import annotations

import numpy as np
import pytest

from corral.core.common.sample_batch import MultiAgentBatch, SampleBatch
from corral.errors import ConfigError
from corral.rllib.support.replay_buffers import MultiAgentReplayBuffer, StorageUnit


def _rows(start: int, count: int) -> SampleBatch:
    return SampleBatch({SampleBatch.OBS: np.arange(start, start + count, dtype=np.float32)[:, None]})


def test_each_policy_s_rows_are_kept_and_drawn_on_their_own() -> None:
    buffer = MultiAgentReplayBuffer(capacity=100, num_shards=2, seed=0)
    buffer.add(MultiAgentBatch({"a": _rows(0, 30), "b": _rows(1000, 10)}, env_steps=30))
    buffer.add(MultiAgentBatch({"a": _rows(30, 40)}, env_steps=40))
    assert len(buffer) == 50 + 10, "each policy keeps capacity // num_shards rows: 'a' dropped its oldest 20"
    drawn = buffer.sample(num_items=64)
    assert drawn.env_steps == 64 and {pid: b.count for pid, b in drawn.policy_batches.items()} == {"a": 64, "b": 64}
    assert drawn.policy_batches["a"][SampleBatch.OBS].min() >= 20 and drawn.policy_batches["b"][SampleBatch.OBS].min() >= 1000
    only_b = buffer.sample(8, policy_id="b")
    assert set(only_b.policy_batches) == {"b"}
    with pytest.raises(KeyError, match=r"'c' has no rows"):
        buffer.sample(8, policy_id="c")
    assert buffer.stats() == {"policy_a": {"num_entries": 50}, "policy_b": {"num_entries": 10}}


def test_a_sample_batch_is_the_default_policy_s_and_a_seeded_buffer_draws_the_same_rows() -> None:
    draws = []
    for _ in range(2):
        buffer = MultiAgentReplayBuffer(capacity=10, seed=3)
        buffer.add(_rows(0, 10))
        draws.append(buffer.sample(5).policy_batches["default_policy"][SampleBatch.OBS])
    np.testing.assert_array_equal(draws[0], draws[1])
    assert MultiAgentReplayBuffer().sample(4).policy_batches == {}, "nothing stored: an empty batch"


def test_what_this_buffer_does_not_store_is_refused_with_what_to_use() -> None:
    assert StorageUnit.SEQUENCES == "sequences", "a string, so a config holding it stays plain data"
    with pytest.raises(ConfigError, match=r"stores timesteps here, not sequences.*R2D2"):
        MultiAgentReplayBuffer(storage_unit=StorageUnit.SEQUENCES)
    with pytest.raises(ConfigError, match=r"takes no replay_burn_in here"):
        MultiAgentReplayBuffer(replay_burn_in=4)
    with pytest.raises(ConfigError, match=r"independently, not 'lockstep'"):
        MultiAgentReplayBuffer(replay_mode="lockstep")


def test_a_batch_s_counts_read_as_numbers_and_as_rllib_s_method_calls() -> None:
    single = _rows(0, 4)
    assert single.env_steps == single.env_steps() == single.agent_steps() == 4  # one agent: a row is a step of each
    batch = MultiAgentBatch({"a": _rows(0, 6), "b": _rows(0, 4)}, env_steps=6)
    assert batch.env_steps == batch.env_steps() == batch.count == 6
    assert batch.agent_steps == batch.agent_steps() == 10
    assert type(batch.agent_steps + 1) is int
