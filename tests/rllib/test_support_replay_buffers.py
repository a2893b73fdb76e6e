"""RLlib's replay buffers: ``MultiAgentReplayBuffer`` for a training step of the script's own, ``ReplayBuffer`` to
subclass (and to name in a replay config), and the batch counts RLlib calls."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from corral.core.common.sample_batch import MultiAgentBatch, SampleBatch
from corral.errors import ConfigError
from corral.plugins.dqn import DQNConfig
from corral.rllib.support.replay_buffers import MultiAgentReplayBuffer, ReplayBuffer, StorageUnit, validate_buffer_config


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


class LessSampledReplayBuffer(ReplayBuffer):
    """RLlib's documentation's example: items drawn more than ``evict_sampled_more_than`` times are evicted."""

    def __init__(self, *args: Any, evict_sampled_more_than: int = 30, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.evict_sampled_more_than = evict_sampled_more_than
        self.samples_drawn = 0

    def sample(self, num_items: int, **kwargs: Any) -> SampleBatch:
        self.samples_drawn += 1
        idxes = [random.randint(0, len(self) - 1) for _ in range(num_items)]
        sample = self._encode_sample(idxes)
        for idx in sorted({i for i in idxes if self._hit_count[i] >= self.evict_sampled_more_than}, reverse=True):
            del self._storage[idx]
            self._hit_count = np.append(self._hit_count[:idx], self._hit_count[idx + 1 :])
        return sample


def test_rllib_s_item_buffer_keeps_items_by_its_storage_unit_up_to_its_capacity_in_timesteps() -> None:
    steps = ReplayBuffer(capacity=5)
    steps.add(_rows(0, 3))
    steps.add(_rows(3, 4))
    assert len(steps) == 5 and steps._eviction_started  # 7 steps into 5: the first two slots were written again
    assert [float(item[SampleBatch.OBS][0, 0]) for item in steps._storage] == [5.0, 6.0, 2.0, 3.0, 4.0]
    random.seed(0)
    drawn = steps.sample(10)
    assert drawn.count == 10 and steps._hit_count[:5].sum() == 10 and steps.stats()["sampled_count"] == 10
    fragments = ReplayBuffer(capacity=100, storage_unit=StorageUnit.FRAGMENTS)
    fragments.add(_rows(0, 3))
    assert len(fragments) == 1 and fragments.sample(2).count == 6
    sequences = ReplayBuffer(capacity=100, storage_unit="sequences")
    sequences.add(SampleBatch({**_rows(0, 5), SampleBatch.SEQ_LENS: np.array([2, 3])}))
    assert [item.count for item in sequences._storage] == [2, 3]
    with pytest.raises(ValueError, match=r"empty ReplayBuffer"):
        ReplayBuffer().sample(1)


def test_a_buffer_of_episodes_keeps_whole_ones_only(caplog: pytest.LogCaptureFixture) -> None:
    terminated = np.array([False, True, False, False, True, False])
    batch = SampleBatch(
        {**_rows(0, 6), SampleBatch.T: np.array([0, 1, 0, 1, 2, 0]), "terminateds": terminated, "truncateds": np.zeros(6, bool)}
    )
    episodes = ReplayBuffer(capacity=100, storage_unit=StorageUnit.EPISODES)
    with caplog.at_level("INFO", logger="corral"):
        episodes.add(batch)
    assert [item.count for item in episodes._storage] == [2, 3]  # the last row starts an episode that has not ended
    assert "keeps whole episodes only; 1 rows of a part of one were dropped" in caplog.text


def test_three_ways_of_naming_rllib_s_buffer_are_corral_s_own_uniform_replay() -> None:
    configs = [
        DQNConfig().training(replay_buffer_config={"type": given})
        for given in (ReplayBuffer, "ReplayBuffer", "corral.rllib.utils.replay_buffers.ReplayBuffer")
    ]
    for config in configs:
        validate_buffer_config(config)
    assert configs[0].replay_buffer_config == configs[1].replay_buffer_config == configs[2].replay_buffer_config
    assert configs[0].replay_buffer_config["type"] == "ReplayBuffer"


@pytest.mark.parametrize("nested", [False, True])
def test_dqn_replays_through_a_buffer_class_of_the_script_s_own(make_algo, nested: bool) -> None:
    own = {"type": LessSampledReplayBuffer, "evict_sampled_more_than": 3}
    replay = {"type": "MultiAgentReplayBuffer", "capacity": 5000, "underlying_replay_buffer_config": own} if nested else own
    config = (
        DQNConfig()
        .environment("CartPole-v1")
        .training(replay_buffer_config=replay, train_batch_size=16, learning_starts=100)
        .reporting(min_sample_timesteps_per_iteration=400)
        .debugging(seed=0)
    )
    algo = make_algo(config)
    result = algo.train()
    buffer = algo.replay_buffers["default_policy"].buffer
    assert isinstance(buffer, LessSampledReplayBuffer) and buffer.evict_sampled_more_than == 3  # the config's key
    assert buffer.samples_drawn > 0 and result["num_env_steps_trained"] > 0
    assert len(buffer) < buffer._num_timesteps_added  # its own eviction ran
    with pytest.raises(ConfigError, match=r"buffer class of your own, which corral neither saves"):
        config.copy().checkpointing(save_replay_buffer=True).validate()


def test_a_type_that_is_no_buffer_is_refused_naming_what_is() -> None:
    with pytest.raises(ConfigError, match=r"type .*dict.* is no replay buffer: name a built-in one"):
        DQNConfig().environment("CartPole-v1").training(replay_buffer_config={"type": dict}).validate()
