"""Uniform and prioritized replay buffers, the sum-tree under them, and the factory."""

from __future__ import annotations

import io

import numpy as np
import pytest

from corral.core.common.sample_batch import SampleBatch
from corral.core.learning.replay.replay_buffers import PrioritizedReplayBuffer, ReplayBuffer, SumTree, make_replay_buffer
from corral.errors import CheckpointError, ConfigError


def rows(start: int, stop: int) -> SampleBatch:
    """Rows whose every column encodes the row number, so we can tell which rows are stored."""
    ids = np.arange(start, stop)
    return SampleBatch(
        obs=np.stack([ids, -ids], axis=1).astype(np.float32),
        actions=ids.astype(np.int64),
        rewards=ids.astype(np.float32),
        terminateds=ids % 2 == 0,
    )


def frequencies(buffer: ReplayBuffer, size: int, draws: int = 100_000, batch: int = 50, beta: float = 0.0) -> np.ndarray:
    counts = np.zeros(size)
    for _ in range(draws // batch):
        counts += np.bincount(buffer.sample(batch, beta)["batch_indexes"], minlength=size)
    return counts / counts.sum()


# ---------------------------------------------------------------------- #
# SumTree
# ---------------------------------------------------------------------- #
def test_sum_tree_find_matches_cumsum_search():
    rng = np.random.default_rng(0)
    tree = SumTree(7)
    assert tree.capacity == 8
    values = rng.random(7) + 0.01
    tree.set(np.arange(7), values)
    assert tree.total == pytest.approx(values.sum())
    assert tree.min == pytest.approx(values.min())
    queries = rng.random(1000) * values.sum()
    np.testing.assert_array_equal(tree.find(queries), np.searchsorted(np.cumsum(values), queries, side="right"))
    assert tree.find(np.array([values.sum()]))[0] == 6  # the very top never lands on an empty leaf


def test_sum_tree_repeated_index_last_value_wins_and_zero_leaves_skipped():
    tree = SumTree(4)
    tree.set(np.array([0, 1, 0, 2]), np.array([5.0, 1.0, 2.0, 0.0]))
    np.testing.assert_array_equal(tree.get(np.arange(4)), [2.0, 1.0, 0.0, 0.0])
    assert tree.total == 3.0 and tree.min == 1.0  # zero leaves are ignored by the min
    assert set(tree.find(np.linspace(0, 3.0, 50))) <= {0, 1}


# ---------------------------------------------------------------------- #
# uniform
# ---------------------------------------------------------------------- #
def test_uniform_covers_all_rows_with_unit_weights():
    buffer = ReplayBuffer(10, seed=0)
    buffer.add(rows(0, 10))
    assert len(buffer) == 10
    batch = buffer.sample(2000)
    assert set(batch["batch_indexes"]) == set(range(10))
    assert batch["batch_indexes"].dtype == np.int64
    assert batch["weights"].dtype == np.float32 and np.all(batch["weights"] == 1.0)
    np.testing.assert_array_equal(batch["actions"], batch["batch_indexes"])  # rows stay intact
    np.testing.assert_array_equal(batch["obs"][:, 1], -batch["batch_indexes"])
    buffer.update_priorities(batch["batch_indexes"], np.ones(2000))  # a no-op


def test_ring_overwrite_keeps_newest_rows():
    buffer = ReplayBuffer(5, seed=0)
    buffer.add(rows(0, 3))
    buffer.add(rows(3, 7))
    state = buffer.get_state()
    assert len(buffer) == 5 and int(state["next_index"]) == 2
    np.testing.assert_array_equal(state["columns/actions"], [5, 6, 2, 3, 4])
    buffer.add(rows(7, 19))  # longer than the capacity: only its last 5 rows stay
    state = buffer.get_state()
    assert int(state["next_index"]) == (2 + 12) % 5
    np.testing.assert_array_equal(np.sort(state["columns/actions"]), [14, 15, 16, 17, 18])
    np.testing.assert_array_equal(state["columns/actions"], [15, 16, 17, 18, 14])


def test_empty_and_mismatched_batches_are_errors():
    buffer = ReplayBuffer(5)
    with pytest.raises(ConfigError, match="empty"):
        buffer.sample(4)
    buffer.add(rows(0, 2))
    batch = rows(2, 4)
    batch["extra"] = np.zeros(2)
    del batch["rewards"]
    with pytest.raises(ConfigError, match=r"missing \['rewards'\], unexpected \['extra'\]"):
        buffer.add(batch)
    with pytest.raises(ConfigError, match="'obs'"):
        buffer.add(SampleBatch({**rows(2, 4), "obs": np.zeros((2, 3), dtype=np.float32)}))
    with pytest.raises(ConfigError, match="num_rows"):
        buffer.sample(0)
    with pytest.raises(ConfigError, match="capacity"):
        ReplayBuffer(0)


# ---------------------------------------------------------------------- #
# prioritized
# ---------------------------------------------------------------------- #
def per_with_priorities(priorities: list[float], alpha: float = 1.0, seed: int = 0) -> PrioritizedReplayBuffer:
    buffer = PrioritizedReplayBuffer(len(priorities), alpha=alpha, epsilon=1e-9, seed=seed)
    buffer.add(rows(0, len(priorities)))
    buffer.update_priorities(np.arange(len(priorities)), np.array(priorities))
    return buffer


@pytest.mark.parametrize("priorities", [[1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0, 5.0]])
def test_per_samples_in_proportion_to_priority(priorities):
    buffer = per_with_priorities(priorities)
    p = np.array(priorities)
    np.testing.assert_allclose(frequencies(buffer, len(p)), p / p.sum(), atol=0.006)


def test_per_alpha_zero_is_uniform():
    buffer = per_with_priorities([1.0, 2.0, 3.0, 10.0], alpha=0.0)
    np.testing.assert_allclose(frequencies(buffer, 4), 0.25, atol=0.006)
    assert np.all(buffer.sample(64, beta=1.0)["weights"] == 1.0)


@pytest.mark.parametrize("beta", [0.4, 1.0])
@pytest.mark.parametrize("alpha", [1.0, 0.6])
def test_per_importance_weights_by_hand(alpha, beta):
    p = np.array([1.0, 2.0, 3.0, 4.0])
    buffer = per_with_priorities(list(p), alpha=alpha)
    probs = p**alpha / np.sum(p**alpha)
    by_hand = (4 * probs) ** -beta / np.max((4 * probs) ** -beta)  # max over the buffer: the min-priority row
    batch = buffer.sample(400, beta=beta)
    np.testing.assert_allclose(batch["weights"], by_hand[batch["batch_indexes"]], rtol=1e-5)
    assert 0 in batch["batch_indexes"]
    assert batch["weights"][batch["batch_indexes"] == 0].max() == pytest.approx(1.0)
    assert batch["weights"].max() <= 1.0 + 1e-6


def test_update_priorities_changes_the_distribution():
    buffer = per_with_priorities([1.0, 1.0, 1.0, 1.0])
    np.testing.assert_allclose(frequencies(buffer, 4, draws=20_000), 0.25, atol=0.015)
    buffer.update_priorities(np.array([3, 3]), np.array([1.0, 7.0]))  # repeated index: the last value counts
    np.testing.assert_allclose(frequencies(buffer, 4, draws=20_000), [0.1, 0.1, 0.1, 0.7], atol=0.015)
    with pytest.raises(ConfigError, match="finite"):
        buffer.update_priorities(np.array([0]), np.array([np.nan]))
    with pytest.raises(ConfigError, match="indexes"):
        buffer.update_priorities(np.array([4]), np.array([1.0]))


def test_new_rows_get_max_priority():
    buffer = PrioritizedReplayBuffer(8, alpha=0.6, epsilon=0.01, seed=0)
    buffer.add(rows(0, 2))
    np.testing.assert_array_equal(buffer.get_state()["priorities"], [1.0, 1.0])  # max starts at 1
    buffer.update_priorities(np.array([0, 1]), np.array([5.0, 0.5]))
    buffer.add(rows(2, 4))
    state = buffer.get_state()
    np.testing.assert_allclose(state["priorities"], [5.01, 0.51, 5.01, 5.01])
    assert float(state["max_priority"]) == pytest.approx(5.01)


@pytest.mark.parametrize("max_priority", [0.0, -1.0, 5.0])
def test_a_max_priority_new_rows_could_not_be_replayed_with_is_refused(max_priority: float) -> None:
    buffer = PrioritizedReplayBuffer(8, alpha=0.6, epsilon=0.01, seed=0)
    buffer.add(rows(0, 2))
    buffer.update_priorities(np.array([0, 1]), np.array([5.0, 0.5]))
    state = {**buffer.get_state(), "max_priority": np.array(max_priority)}  # 5.0 is below the stored 5.01
    with pytest.raises(CheckpointError, match="max_priority must be > 0 and at least every stored priority"):
        PrioritizedReplayBuffer(8).set_state(state)


def test_per_ring_overwrite_keeps_tree_consistent():
    buffer = PrioritizedReplayBuffer(5, alpha=0.7, seed=0)
    buffer.add(rows(0, 5))
    buffer.update_priorities(np.arange(5), np.array([0.1, 0.2, 0.3, 9.0, 0.5]))
    buffer.add(rows(5, 8))  # overwrites slots 0, 1, 2 with max priority
    state = buffer.get_state()
    np.testing.assert_array_equal(state["columns/actions"], [5, 6, 7, 3, 4])
    stored = state["priorities"]
    assert stored[0] == stored[1] == stored[2] == pytest.approx(float(state["max_priority"]))
    tree = buffer._tree
    assert tree.total == pytest.approx(np.sum(stored**0.7))
    assert tree.min == pytest.approx(np.min(stored**0.7))
    np.testing.assert_allclose(tree.get(np.arange(5)), stored**0.7)
    assert set(buffer.sample(500)["batch_indexes"]) == set(range(5))


def test_state_round_trip_through_npz():
    buffer = PrioritizedReplayBuffer(6, alpha=0.6, seed=1)
    buffer.add(rows(0, 9))
    buffer.update_priorities(np.array([0, 2, 4]), np.array([3.0, 0.2, 1.5]))
    buffer.sample(10, beta=0.4)
    file = io.BytesIO()
    np.savez(file, **buffer.get_state())
    file.seek(0)
    with np.load(file, allow_pickle=False) as loaded:
        state = {k: loaded[k] for k in loaded.files}
    restored = PrioritizedReplayBuffer(6, alpha=0.6, seed=99)
    restored.set_state(state)
    assert len(restored) == len(buffer)
    for key, value in buffer.get_state().items():
        np.testing.assert_array_equal(restored.get_state()[key], value, err_msg=key)
    a, b = buffer.sample(32, beta=0.5), restored.sample(32, beta=0.5)  # the RNG came along too
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    restored.add(rows(100, 101))  # goes where the original would put it
    assert restored.get_state()["columns/actions"][int(state["next_index"])] == 100


def test_uniform_state_round_trip_and_mismatches():
    buffer = ReplayBuffer(4, seed=3)
    empty = ReplayBuffer(4)
    empty.set_state(ReplayBuffer(4).get_state())
    assert len(empty) == 0
    buffer.add(rows(0, 3))
    restored = ReplayBuffer(4)
    restored.set_state(buffer.get_state())
    np.testing.assert_array_equal(restored.sample(8)["actions"], buffer.sample(8)["actions"])
    with pytest.raises(CheckpointError, match="capacity"):
        ReplayBuffer(5).set_state(buffer.get_state())
    with pytest.raises(CheckpointError, match="priorities"):
        PrioritizedReplayBuffer(4).set_state(buffer.get_state())


# ---------------------------------------------------------------------- #
# factory
# ---------------------------------------------------------------------- #
def test_make_replay_buffer():
    uniform = make_replay_buffer({"type": "ReplayBuffer", "capacity": 10, "alpha": 0.6}, seed=0)
    assert type(uniform) is ReplayBuffer and uniform.capacity == 10
    per = make_replay_buffer({"type": "prioritizedreplaybuffer", "capacity": 10, "alpha": 0.5, "epsilon": 1e-4}, seed=0)
    assert isinstance(per, PrioritizedReplayBuffer) and per.alpha == 0.5 and per.epsilon == 1e-4
    rllib = make_replay_buffer(
        {
            "type": "MultiAgentPrioritizedReplayBuffer",
            "capacity": 10,
            "prioritized_replay_alpha": 0.7,
            "prioritized_replay_beta": 0.4,
            "prioritized_replay_eps": 1e-5,
        },
        seed=None,
    )
    assert isinstance(rllib, PrioritizedReplayBuffer) and rllib.alpha == 0.7
    # RLlib's new stack's episode buffers draw steps as corral's do: uniformly, or by priority
    assert type(make_replay_buffer({"type": "EpisodeReplayBuffer", "capacity": 10}, seed=0)) is ReplayBuffer
    episodes = make_replay_buffer({"type": "PrioritizedEpisodeReplayBuffer", "capacity": 10, "alpha": 0.3}, seed=0)
    assert isinstance(episodes, PrioritizedReplayBuffer) and episodes.alpha == 0.3


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"type": "PrioritisedReplayBuffer", "capacity": 10}, "Did you mean 'PrioritizedReplayBuffer'"),
        ({"type": "ReplayBuffer", "capacty": 10}, "Did you mean 'capacity'"),
        ({"type": "ReplayBuffer"}, "capacity"),
        ({"type": "ReplayBuffer", "capacity": 0}, "capacity"),
        ({"type": "PrioritizedReplayBuffer", "capacity": 8, "alpha": -1.0}, "alpha"),
        ({"type": "PrioritizedReplayBuffer", "capacity": 8, "epsilon": 0.0}, "epsilon"),
        ({"capacity": 8, "alpha": 0.5, "prioritized_replay_alpha": 0.6}, "twice"),
        # integers numpy cannot hold, and one no float can
        (
            {"type": "PrioritizedReplayBuffer", "capacity": 8, "beta": -(2**63) - 1},
            "prioritized replay beta must be a finite number >= 0",
        ),
        (
            {"type": "PrioritizedReplayBuffer", "capacity": 8, "alpha": 10**400},
            "prioritized replay alpha must be a finite number >= 0",
        ),
    ],
)
def test_make_replay_buffer_errors(config, message):
    with pytest.raises(ConfigError, match=message):
        make_replay_buffer(config, seed=0)
