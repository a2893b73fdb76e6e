"""RLlib's replay buffer API: ``ReplayBuffer``, ``MultiAgentReplayBuffer``, ``StorageUnit``, ``validate_buffer_config``.

RLlib's scripts that write their own training loop (two algorithms' policies
trained side by side, say) build a buffer, ``add`` each sampled batch and
``sample(num_items=...)`` a train batch. ``MultiAgentReplayBuffer`` keeps one
of corral's replay buffers per policy and answers with RLlib's calls.
``ReplayBuffer`` is RLlib's item buffer, written to be subclassed as RLlib's
is (its ``_storage``, ``_hit_count`` and ``_encode_sample``): a subclass named
in ``replay_buffer_config={"type": MyBuffer}`` is what corral's off-policy
algorithms replay through; this class itself names corral's own uniform replay.
"""

from __future__ import annotations

import logging
import random
from enum import Enum
from typing import Any

import numpy as np

from corral.core.common.sample_batch import MultiAgentBatch, SampleBatch
from corral.core.learning.replay.replay_buffers import ReplayBuffer as RowReplayBuffer, check_replay_buffer_config
from corral.core.learning.replay.script_buffers import replay_type
from corral.errors import ConfigError
from corral.rllib.support.batches import concat_samples

logger = logging.getLogger("corral")


class StorageUnit(str, Enum):
    """What one stored item of RLlib's buffers is; a string, so a config that holds one stays plain data."""

    TIMESTEPS = "timesteps"
    SEQUENCES = "sequences"
    EPISODES = "episodes"
    FRAGMENTS = "fragments"


class MultiAgentReplayBuffer:
    """One uniform replay buffer per policy, with RLlib's ``add`` and ``sample`` (its ``"independent"`` replay mode).

    Args:
        capacity: env steps kept, over all shards, as in RLlib: each policy's buffer keeps ``capacity // num_shards``.
        storage_unit: ``"timesteps"``, the one unit this buffer stores (a row per step); corral's R2D2
            replays sequences through its ``replay_buffer_config``.
        num_shards: the shards ``capacity`` is divided among (RLlib's Ape-X runs several).
        replay_mode: ``"independent"``: each policy's rows are drawn on their own.
        seed: seeds the draws, for a reproducible run.
        **kwargs: RLlib's further keyword arguments (``replay_sequence_length``, ``replay_burn_in``,
            ``replay_zero_init_states``, ``underlying_buffer_config``, ...) are for sequence storage,
            which this buffer does not do: any of them is refused.

    Raises:
        ConfigError: another storage unit or replay mode, or one of the sequence arguments.
    """

    def __init__(
        self,
        capacity: int = 10_000,
        storage_unit: str | StorageUnit = StorageUnit.TIMESTEPS,
        num_shards: int = 1,
        replay_mode: str = "independent",
        seed: int | None = None,
        **kwargs: Any,
    ) -> None:
        if StorageUnit(storage_unit) is not StorageUnit.TIMESTEPS:
            raise ConfigError(
                f"MultiAgentReplayBuffer stores timesteps here, not {StorageUnit(storage_unit).value}; corral replays "
                "sequences in R2D2 (replay_buffer_config={'storage_unit': 'sequences'})"
            )
        if replay_mode != "independent":
            raise ConfigError(f"MultiAgentReplayBuffer replays each policy's rows independently, not {replay_mode!r}")
        if kwargs:
            raise ConfigError(
                f"MultiAgentReplayBuffer takes no {', '.join(sorted(kwargs))} here: they are for sequence storage, which "
                "corral's R2D2 does (replay_buffer_config); this buffer stores timesteps"
            )
        if not isinstance(num_shards, int) or num_shards < 1:
            raise ConfigError(f"MultiAgentReplayBuffer num_shards is an int >= 1, not {num_shards!r}")
        self.capacity = capacity // num_shards
        self.replay_buffers: dict[str, RowReplayBuffer] = {}
        """each policy's buffer, by policy id (RLlib's attribute)"""
        self._seed = seed

    def __len__(self) -> int:
        """Rows stored, over every policy."""
        return sum(len(buffer) for buffer in self.replay_buffers.values())

    def add(self, batch: SampleBatch | MultiAgentBatch, **kwargs: Any) -> None:
        """Store each policy's rows in its own buffer (a ``SampleBatch`` is the default policy's).

        Args:
            batch: what a sample call returned.
            **kwargs: RLlib passes its buffers' own ``add`` arguments here; none is needed.
        """
        samples = batch.as_multi_agent() if isinstance(batch, SampleBatch) else batch
        for policy_id, rows in samples.policy_batches.items():
            if policy_id not in self.replay_buffers:
                seed = None if self._seed is None else self._seed + len(self.replay_buffers)
                self.replay_buffers[policy_id] = RowReplayBuffer(self.capacity, seed=seed)
            self.replay_buffers[policy_id].add(rows)

    def sample(self, num_items: int, policy_id: str | None = None, **kwargs: Any) -> MultiAgentBatch:
        """``num_items`` rows of each policy (or only ``policy_id``'s), drawn uniformly with replacement.

        Args:
            num_items: rows per policy.
            policy_id: draw only this policy's rows.
            **kwargs: RLlib passes its buffers' own ``sample`` arguments here; none is needed.

        Returns:
            A multi-agent batch (empty while nothing is stored), its env steps the rows drawn per policy.

        Raises:
            KeyError: ``policy_id`` has stored nothing.
        """
        if policy_id is not None and policy_id not in self.replay_buffers:
            raise KeyError(f"policy {policy_id!r} has no rows in this buffer; it holds {sorted(self.replay_buffers)}")
        chosen = [policy_id] if policy_id is not None else list(self.replay_buffers)
        drawn = {pid: self.replay_buffers[pid].sample(num_items) for pid in chosen if len(self.replay_buffers[pid])}
        return MultiAgentBatch(drawn, num_items if drawn else 0)

    def stats(self) -> dict[str, Any]:
        """Rows stored per policy (RLlib's method reports more about its storage)."""
        return {f"policy_{pid}": {"num_entries": len(buffer)} for pid, buffer in self.replay_buffers.items()}


class ReplayBuffer:
    """RLlib's replay buffer of items: steps, sequences, episodes or fragments by ``storage_unit``, drawn uniformly.

    Items are kept in a list (``_storage``) until ``capacity`` timesteps were
    added, then overwritten from the first on; ``_hit_count`` counts each
    slot's draws. A subclass changes ``add``, ``sample`` or ``_encode_sample``
    as RLlib's documentation shows, and corral's off-policy algorithms replay
    through it when ``replay_buffer_config={"type": TheSubclass, ...}`` names it
    (the config's other keys go to its constructor, as RLlib passes them). This
    class itself, named there, is corral's own uniform replay: the same draws, kept in arrays.

    Args:
        capacity: timesteps kept before the oldest items are overwritten.
        storage_unit: what one item is (:class:`StorageUnit`).
        **kwargs: the replay config's other keys, which RLlib's buffers take and ignore.
    """

    __corral_replay_type__ = "ReplayBuffer"
    """read on this class alone (not a subclass): the built-in buffer it stands for in ``replay_buffer_config``"""

    def __init__(self, capacity: int = 10_000, storage_unit: str | StorageUnit = StorageUnit.TIMESTEPS, **kwargs: Any) -> None:
        if not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 1:
            raise ConfigError(f"ReplayBuffer capacity is an int >= 1 (timesteps), not {capacity!r}")
        self.capacity = capacity
        self.storage_unit = StorageUnit(storage_unit)
        self._storage: list[SampleBatch] = []
        self._next_idx = 0
        self._hit_count = np.zeros(capacity, dtype=np.int64)
        self._eviction_started = False
        self._num_timesteps_added = 0
        self._num_timesteps_added_wrap = 0
        self._num_timesteps_sampled = 0

    def __len__(self) -> int:
        """Items stored."""
        return len(self._storage)

    def add(self, batch: SampleBatch, **kwargs: Any) -> None:
        """Store a batch as items of the storage unit: each step, each sequence, each whole episode, or the batch.

        Args:
            batch: the rows (a ``SampleBatch``, or a dict of columns).
            **kwargs: passed to :meth:`_add_single_batch`, as RLlib does.
        """
        batch = batch if isinstance(batch, SampleBatch) else SampleBatch(batch)
        if not batch.count:
            return
        if self.storage_unit is StorageUnit.TIMESTEPS:
            items = [batch.select(slice(row, row + 1)) for row in range(batch.count)]
        elif self.storage_unit is StorageUnit.SEQUENCES:
            items = _sequences(batch)
        elif self.storage_unit is StorageUnit.EPISODES:
            items = _whole_episodes(batch)
        else:
            items = [batch]
        for item in items:
            self._add_single_batch(item, **kwargs)

    def _add_single_batch(self, item: SampleBatch, **kwargs: Any) -> None:
        """Store one item in the next slot; once ``capacity`` timesteps were added, the slots are reused from the first."""
        self._num_timesteps_added += item.count
        self._num_timesteps_added_wrap += item.count
        if self._next_idx >= len(self._storage):
            self._storage.append(item)
        else:
            self._storage[self._next_idx] = item
        if self._next_idx < len(self._hit_count):
            self._hit_count[self._next_idx] = 0
        if self._num_timesteps_added_wrap >= self.capacity:
            self._eviction_started = True
            self._num_timesteps_added_wrap = 0
            self._next_idx = 0
        else:
            self._next_idx += 1

    def sample(self, num_items: int, **kwargs: Any) -> SampleBatch:
        """``num_items`` items drawn uniformly with replacement (Python's ``random``, as RLlib's), joined in one batch.

        Args:
            num_items: items to draw.
            **kwargs: a subclass's own options, as RLlib passes them.

        Raises:
            ValueError: the buffer is empty.
        """
        if not self._storage:
            raise ValueError("cannot sample from an empty ReplayBuffer; add items first")
        idxes = [random.randint(0, len(self._storage) - 1) for _ in range(num_items)]
        sample = self._encode_sample(idxes)
        self._num_timesteps_sampled += sample.count
        return sample

    def _encode_sample(self, idxes: list[int]) -> SampleBatch:
        """The items at ``idxes`` joined in one batch, each slot's hit count raised."""
        for index in idxes:
            self._hit_count[index] += 1
        joined = concat_samples([self._storage[index] for index in idxes]) if idxes else SampleBatch()
        return joined if isinstance(joined, SampleBatch) else SampleBatch()

    def stats(self, debug: bool = False) -> dict[str, Any]:
        """RLlib's counters of this buffer.

        Args:
            debug: RLlib's switch for more; these are all there are.
        """
        return {
            "added_count": self._num_timesteps_added,
            "added_count_wrapped": self._num_timesteps_added_wrap,
            "eviction_started": self._eviction_started,
            "sampled_count": self._num_timesteps_sampled,
            "num_entries": len(self._storage),
        }

    def get_state(self) -> dict[str, Any]:
        """The items and counters, to restore with :meth:`set_state` in this process."""
        return {
            "_storage": list(self._storage),
            "_next_idx": self._next_idx,
            "_hit_count": self._hit_count.copy(),
            **self.stats(),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`get_state`'s items and counters."""
        self._storage = list(state["_storage"])
        self._next_idx = int(state["_next_idx"])
        self._hit_count = np.array(state["_hit_count"], dtype=np.int64)
        self._num_timesteps_added = int(state["added_count"])
        self._num_timesteps_added_wrap = int(state["added_count_wrapped"])
        self._eviction_started = bool(state["eviction_started"])
        self._num_timesteps_sampled = int(state["sampled_count"])


def _sequences(batch: SampleBatch) -> list[SampleBatch]:
    """A batch's sequences by its ``seq_lens`` (one item for a batch without)."""
    if SampleBatch.SEQ_LENS not in batch:
        return [batch]
    rows = SampleBatch({key: value for key, value in batch.items() if key != SampleBatch.SEQ_LENS})
    ends = np.cumsum(np.asarray(batch[SampleBatch.SEQ_LENS], dtype=np.int64))
    return [
        rows.select(slice(int(end - length), int(end))) for end, length in zip(ends, batch[SampleBatch.SEQ_LENS], strict=True)
    ]


def _whole_episodes(batch: SampleBatch) -> list[SampleBatch]:
    """The batch's whole episodes (from step 0 to a termination or truncation); a part of one is dropped, saying so."""
    done = np.zeros(batch.count, dtype=bool)
    for column in ("terminateds", "truncateds", "dones"):
        if column in batch:
            done |= np.asarray(batch[column], dtype=bool)
    if SampleBatch.EPS_ID in batch:
        ids = np.asarray(batch[SampleBatch.EPS_ID])
        ends = [row for row in range(batch.count) if row == batch.count - 1 or ids[row + 1] != ids[row]]
    else:
        ends = [row for row in range(batch.count) if done[row] or row == batch.count - 1]
    episodes, start = [], 0
    for end in ends:
        episode = batch.select(slice(start, end + 1))
        starts_at_zero = SampleBatch.T not in batch or int(np.asarray(batch[SampleBatch.T])[start]) == 0
        if starts_at_zero and done[end]:
            episodes.append(episode)
        else:
            logger.info(
                "a ReplayBuffer of episodes keeps whole episodes only; %d rows of a part of one were dropped", episode.count
            )
        start = end + 1
    return episodes


def validate_buffer_config(config: Any) -> None:
    """Check a config's ``replay_buffer_config`` as its algorithm will build it, naming a built-in buffer by its name.

    ``{"type": ReplayBuffer}``, ``{"type": "ReplayBuffer"}`` and the class's import path all name corral's
    uniform replay and read back alike (RLlib's function makes them alike too).

    Args:
        config: an off-policy algorithm's config.

    Raises:
        ConfigError: the replay config is invalid.
    """
    check_replay_buffer_config(config.replay_buffer_config)
    given = config.replay_buffer_config.get("type")
    named = None if given is None else replay_type(given)[1]
    if named is not None:
        config.replay_buffer_config = {**config.replay_buffer_config, "type": named}
