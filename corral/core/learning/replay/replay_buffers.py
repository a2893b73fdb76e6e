"""Replay buffers for off-policy algorithms (DQN, SAC, ...): uniform and prioritized.

Storage is one preallocated numpy array per column, sized to the full capacity
when the first batch arrives, and used as a ring: no Python object per row, and
sampling is a handful of vectorised numpy operations whatever the batch size.

Both buffers return sampled batches with two extra columns: ``batch_indexes``
(int64, where each row lives, to hand back to :meth:`ReplayBuffer.update_priorities`)
and ``weights`` (float32 importance-sampling weights; all 1.0 for uniform replay).
Their whole state is numpy arrays (:meth:`ReplayBuffer.get_state`), so it can be
saved with ``np.savez`` and loaded with ``allow_pickle=False``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, cast

import numpy as np
from numpy.typing import DTypeLike

from corral.core.common.sample_batch import SampleBatch
from corral.core.learning.replay.sum_tree import SumTree, last_occurrences
from corral.errors import CheckpointError, ConfigError, did_you_mean

__all__ = [
    "PrioritizedReplayBuffer",
    "ReplayBuffer",
    "SumTree",
    "check_replay_buffer_config",
    "make_replay_buffer",
]

_COLUMN_PREFIX = "columns/"
MAX_CAPACITY = 2**40
"""The most rows a replay buffer may be configured for (memory is checked at build, against the machine)."""
_MASK64 = (1 << 64) - 1


def _check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _check_float(name: str, value: Any, minimum: float, strict: bool = False) -> float:
    ok = isinstance(value, (int, float, np.number)) and not isinstance(value, bool) and _finite(value)
    if not ok or value < minimum or (strict and value == minimum):
        bound = f"> {minimum}" if strict else f">= {minimum}"
        raise ConfigError(f"{name} must be a finite number {bound}, got {value!r}")
    return float(value)


def _finite(value: float | np.number) -> bool:
    """Whether a number is finite; a Python int too large for numpy, or for a float, counts as not."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


class ReplayBuffer:
    """Uniform replay over rows of SampleBatch columns.

    The first :meth:`add` fixes the columns, their dtypes and trailing shapes
    and allocates every column at full capacity; later batches must have the
    same columns (values are cast to the stored dtype if numpy allows it
    within the same kind). When full, the oldest rows are overwritten.

    Args:
        capacity: rows kept; an int >= 1.
        seed: seeds the sampling RNG, so a seeded buffer samples reproducibly.
    """

    def __init__(self, capacity: int, seed: int | None = None) -> None:
        self.capacity = _check_int("replay buffer capacity", capacity, 1)
        if seed is not None:
            seed = _check_int("replay buffer seed", seed, 0)
        self._rng = np.random.default_rng(seed)
        self._storage: dict[str, np.ndarray] | None = None
        self._next_index = 0
        self._size = 0

    def __len__(self) -> int:
        """Rows currently stored."""
        return self._size

    def add(self, batch: Mapping[str, np.ndarray]) -> None:
        """Append the batch's rows; a batch longer than the capacity keeps its last ``capacity`` rows.

        A ``priorities`` column (:attr:`SampleBatch.PRIORITIES`, computed where the
        rows were sampled) is not stored: a prioritized buffer starts the rows at
        those priorities instead of the largest seen so far; uniform replay drops it.
        """
        columns = {k: np.asarray(v) for k, v in batch.items()}
        priorities = columns.pop(SampleBatch.PRIORITIES, None)
        if not columns:
            return
        reserved = sorted({SampleBatch.BATCH_INDEXES, SampleBatch.WEIGHTS} & columns.keys())
        if reserved:
            raise ConfigError(f"columns {reserved} are reserved for sampled batches; drop them before add()")
        lengths = {k: (v.shape[0] if v.ndim else None) for k, v in columns.items()}
        if len(set(lengths.values())) > 1 or None in lengths.values():
            raise ConfigError(f"every column of a batch must have the same number of rows, got {lengths}")
        rows = cast(int, next(iter(lengths.values()), 0))  # None was refused above
        if priorities is not None and (
            priorities.shape != (rows,) or not np.all(np.isfinite(priorities)) or (rows and priorities.min() < 0)
        ):
            raise ConfigError(f"the {SampleBatch.PRIORITIES!r} column needs one finite priority >= 0 per row")
        if self._storage is None:
            self._storage = {k: np.zeros((self.capacity, *v.shape[1:]), dtype=v.dtype) for k, v in columns.items()}
        self._check_columns(columns)
        if rows == 0:
            return
        keep = min(rows, self.capacity)
        start = (self._next_index + rows - keep) % self.capacity
        first = min(keep, self.capacity - start)
        for key, store in self._storage.items():
            data = columns[key][rows - keep :]
            store[start : start + first] = data[:first]
            store[: keep - first] = data[first:]
        given = None if priorities is None else priorities[rows - keep :]
        self._on_added((start + np.arange(keep, dtype=np.int64)) % self.capacity, given)
        self._next_index = (self._next_index + rows) % self.capacity
        self._size = min(self._size + rows, self.capacity)

    def _check_columns(self, columns: dict[str, np.ndarray]) -> None:
        storage = self._storage or {}
        missing, extra = sorted(storage.keys() - columns.keys()), sorted(columns.keys() - storage.keys())
        if missing or extra:
            raise ConfigError(f"batch columns differ from the buffer's {sorted(storage)}: missing {missing}, unexpected {extra}")
        for key, store in storage.items():
            value = columns[key]
            if value.shape[1:] != store.shape[1:] or not np.can_cast(value.dtype, store.dtype, "same_kind"):
                raise ConfigError(
                    f"column {key!r} has rows of shape {value.shape[1:]} and dtype {value.dtype}; "
                    f"the buffer stores shape {store.shape[1:]} and dtype {store.dtype}"
                )

    def _on_added(self, positions: np.ndarray, priorities: np.ndarray | None) -> None:
        """Hook for subclasses: ``positions`` were just (over)written, with these initial priorities if given."""

    def sample(self, num_rows: int, beta: float = 0.0) -> SampleBatch:
        """``num_rows`` rows drawn uniformly with replacement (``beta`` is ignored: weights are all 1).

        Args:
            num_rows: rows to draw, an int >= 1; more than are stored is allowed (rows repeat).
            beta: the importance-sampling exponent of prioritized replay, >= 0; a
                uniform buffer ignores it, so callers pass it whichever buffer they have.

        Returns:
            The rows' columns plus ``batch_indexes`` (int64, each row's slot, for
            :meth:`update_priorities`) and ``weights`` (float32 importance weights).

        Raises:
            ConfigError: ``num_rows`` is not an int >= 1, or the buffer is empty.
        """
        indexes = self._rng.integers(0, self._check_sample(num_rows), size=num_rows, dtype=np.int64)
        return self._gather(indexes, np.ones(num_rows, dtype=np.float32))

    def _check_sample(self, num_rows: int) -> int:
        _check_int("num_rows to sample", num_rows, 1)
        if self._size == 0:
            raise ConfigError("cannot sample from an empty replay buffer; add rows first (e.g. wait for learning_starts)")
        return self._size

    def _gather(self, indexes: np.ndarray, weights: np.ndarray) -> SampleBatch:
        batch = SampleBatch({k: v[indexes] for k, v in (self._storage or {}).items()})
        batch[SampleBatch.BATCH_INDEXES] = indexes
        batch[SampleBatch.WEIGHTS] = weights
        return batch

    def update_priorities(self, indexes: np.ndarray, priorities: np.ndarray) -> None:
        """Nothing to do for uniform replay; present so algorithms need not care which buffer they have.

        Args:
            indexes: the ``batch_indexes`` column of a batch from :meth:`sample`.
            priorities: the rows' new priorities, one per index: their ``|TD error|``, finite and >= 0.
        """

    # ------------------------------------------------------------------ #
    # state
    # ------------------------------------------------------------------ #
    def get_state(self) -> dict[str, np.ndarray]:
        """Stored rows (in slot order), counters and RNG state, as numpy arrays only."""
        state = {
            "capacity": np.array(self.capacity, dtype=np.int64),
            "size": np.array(self._size, dtype=np.int64),
            "next_index": np.array(self._next_index, dtype=np.int64),
        }
        for key, store in (self._storage or {}).items():
            state[_COLUMN_PREFIX + key] = store[: self._size].copy()
        rng_state = self._rng.bit_generator.state
        if rng_state["bit_generator"] == "PCG64":
            s, inc = rng_state["state"]["state"], rng_state["state"]["inc"]
            words = [s >> 64, s & _MASK64, inc >> 64, inc & _MASK64, rng_state["has_uint32"], rng_state["uinteger"]]
            state["rng_state"] = np.array(words, dtype=np.uint64)
        return state

    def set_state(self, state: Mapping[str, np.ndarray], expected_shapes: Mapping[str, tuple[int, ...]] | None = None) -> None:
        """Restore what :meth:`get_state` returned; the capacity must match this buffer's.

        Everything is checked before anything changes: the counters, that every
        column is numeric with one row per stored row, and, for the columns in
        ``expected_shapes``, the shape of a row.

        Args:
            state: arrays as :meth:`get_state` returned them (read from a checkpoint's ``.npz``).
            expected_shapes: the row shape each named column must have (for the
                observation and action columns, from the algorithm's spaces); columns
                not named, or None, are not checked for shape.

        Raises:
            CheckpointError: the state is inconsistent or does not fit.
        """
        for key in ("capacity", "size", "next_index"):
            if key not in state:
                raise CheckpointError(f"replay buffer state lacks {key!r}; has {sorted(state)}")
        capacity, size, next_index = (_state_int(state, k) for k in ("capacity", "size", "next_index"))
        if capacity != self.capacity:
            raise CheckpointError(f"replay buffer state has capacity {capacity}, this buffer {self.capacity}")
        columns = {k[len(_COLUMN_PREFIX) :]: np.asarray(v) for k, v in state.items() if k.startswith(_COLUMN_PREFIX)}
        consistent = 0 <= size <= capacity and 0 <= next_index < capacity and (size == capacity or next_index == size)
        if not consistent or any(v.ndim == 0 or len(v) != size for v in columns.values()) or (size and not columns):
            raise CheckpointError(f"inconsistent replay buffer state (size {size}, next_index {next_index})")
        for key, value in columns.items():
            if value.dtype.kind not in "biuf":
                raise CheckpointError(f"replay buffer column {key!r} holds {value.dtype} values, not numbers")
            want = (expected_shapes or {}).get(key)
            if want is not None and tuple(value.shape[1:]) != tuple(want):
                raise CheckpointError(
                    f"replay buffer column {key!r} has rows of shape {value.shape[1:]}, this algorithm {tuple(want)}"
                )
        rng = self._rng
        if "rng_state" in state:
            words = np.asarray(state["rng_state"])
            if words.shape != (6,) or words.dtype != np.uint64:
                raise CheckpointError("replay buffer rng_state must be 6 uint64 words")
            w = [int(x) for x in words]
            rng = np.random.default_rng()
            try:
                rng.bit_generator.state = {
                    "bit_generator": "PCG64",
                    "state": {"state": (w[0] << 64) | w[1], "inc": (w[2] << 64) | w[3]},
                    "has_uint32": w[4],
                    "uinteger": w[5],
                }
            except (TypeError, ValueError) as exc:
                raise CheckpointError(f"replay buffer rng_state is not a PCG64 state: {exc}") from None
        self._storage = None
        if columns:
            self._storage = {k: np.zeros((capacity, *v.shape[1:]), dtype=v.dtype) for k, v in columns.items()}
            for key, value in columns.items():
                self._storage[key][:size] = value
        self._size, self._next_index, self._rng = size, next_index, rng


def _state_int(state: Mapping[str, np.ndarray], key: str) -> int:
    value = np.asarray(state[key])
    if value.shape != () or value.dtype.kind not in "iu":
        raise CheckpointError(f"replay buffer state {key!r} must be an integer, got {value.dtype} of shape {value.shape}")
    return int(value)


class PrioritizedReplayBuffer(ReplayBuffer):
    """Proportional prioritized replay (Schaul et al., 2016) over a sum-tree.

    Row ``i`` is drawn with probability ``P(i) = p_i**alpha / sum_j p_j**alpha``,
    stratified: the total mass is cut into ``num_rows`` equal segments and one
    row is drawn from each, which lowers the variance of a batch's make-up
    (rows come back ordered by slot, not shuffled). New rows get the largest
    priority seen so far (1.0 at first), so every row is replayed at least
    once with high probability. Importance weights
    ``(N * P(i))**-beta`` are divided by their largest possible value (that of
    the least likely stored row) so they never exceed 1.

    Args:
        capacity: rows kept.
        alpha: how strongly priorities matter, >= 0; 0 is uniform replay.
        epsilon: > 0, added to every ``|td|`` so no row becomes impossible to draw.
        seed: seeds the sampling RNG.
    """

    def __init__(self, capacity: int, alpha: float = 0.6, epsilon: float = 1e-6, seed: int | None = None) -> None:
        super().__init__(capacity, seed)
        self.alpha = _check_float("prioritized replay alpha", alpha, 0.0)
        self.epsilon = _check_float("prioritized replay epsilon", epsilon, 0.0, strict=True)
        self._tree = SumTree(self.capacity)
        self._priorities = np.zeros(self.capacity, dtype=np.float64)  # raw p_i, before ** alpha
        self._max_priority = 1.0

    def _on_added(self, positions: np.ndarray, priorities: np.ndarray | None) -> None:
        # positions are at most `capacity` consecutive ring slots: distinct and in range
        if priorities is None:
            self._priorities[positions] = self._max_priority
            self._tree.set_unique(positions, np.full(positions.size, self._max_priority**self.alpha))
            return
        p = priorities.astype(np.float64) + self.epsilon
        self._priorities[positions] = p
        self._tree.set_unique(positions, p**self.alpha)
        self._max_priority = max(self._max_priority, float(p.max()))

    def sample(self, num_rows: int, beta: float = 0.0) -> SampleBatch:
        """``num_rows`` rows drawn in proportion to priority, with importance weights for ``beta`` >= 0.

        Raises:
            ConfigError: ``num_rows`` is not an int >= 1, the buffer is empty, or ``beta``
                is not a finite number >= 0.
        """
        self._check_sample(num_rows)
        beta = _check_float("prioritized replay beta", beta, 0.0)
        segment = self._tree.total / num_rows
        prefix_sums = (np.arange(num_rows) + self._rng.random(num_rows)) * segment
        indexes = self._tree.find(prefix_sums)
        weights = (self._tree.get(indexes) / self._tree.min) ** -beta
        return self._gather(indexes, weights.astype(np.float32))

    def update_priorities(self, indexes: np.ndarray, priorities: np.ndarray) -> None:
        """Set ``p = priorities + epsilon`` at ``indexes`` (pass ``|td error|``); tracks the max priority.

        Raises:
            ConfigError: ``indexes`` and ``priorities`` differ in length, an index lies
                outside the stored rows, or a priority is NaN, inf or negative.
        """
        idx = np.asarray(indexes, dtype=np.int64).reshape(-1)
        p = np.asarray(priorities, dtype=np.float64).reshape(-1)
        if idx.shape != p.shape:
            raise ConfigError(f"update_priorities got {idx.size} indexes but {p.size} priorities")
        if idx.size == 0:
            return
        if idx.min() < 0 or idx.max() >= self._size:
            raise ConfigError(f"update_priorities indexes must lie in [0, {self._size}), got {idx.min()}..{idx.max()}")
        if not np.all(np.isfinite(p)) or p.min() < 0:
            raise ConfigError("update_priorities needs finite priorities >= 0 (pass |td error|); got NaN, inf or < 0")
        keep = last_occurrences(idx)  # a row sampled twice keeps its last priority
        idx, p = idx[keep], p[keep] + self.epsilon
        self._priorities[idx] = p
        self._tree.set_unique(idx, p**self.alpha)
        self._max_priority = max(self._max_priority, float(p.max()))

    def get_state(self) -> dict[str, np.ndarray]:
        """The uniform buffer's state plus ``priorities`` (raw, stored rows) and ``max_priority``."""
        state = super().get_state()
        state["priorities"] = self._priorities[: self._size].copy()
        state["max_priority"] = np.array(self._max_priority, dtype=np.float64)
        return state

    def set_state(self, state: Mapping[str, np.ndarray], expected_shapes: Mapping[str, tuple[int, ...]] | None = None) -> None:
        """Restore rows and priorities; the tree is rebuilt with this buffer's ``alpha``.

        Raises:
            CheckpointError: as for :meth:`ReplayBuffer.set_state`, or the priorities do not fit.
        """
        if "priorities" not in state or "max_priority" not in state:
            raise CheckpointError("prioritized replay state lacks 'priorities' or 'max_priority'")
        priorities = np.asarray(state["priorities"])
        max_priority = np.asarray(state["max_priority"])
        size = _state_int(state, "size") if "size" in state else -1
        if priorities.shape != (size,) or priorities.dtype.kind != "f":
            raise CheckpointError(f"prioritized replay state has priorities of shape {priorities.shape} for {size} rows")
        if (
            not (np.isfinite(priorities).all() and (priorities >= 0).all())
            or max_priority.shape != ()
            or not np.isfinite(max_priority)
        ):
            raise CheckpointError("prioritized replay priorities must be finite and >= 0")
        if not float(max_priority) > 0 or (priorities.size and float(max_priority) < float(priorities.max())):
            # new rows get max_priority: at 0 they would never be replayed
            raise CheckpointError(
                f"prioritized replay max_priority must be > 0 and at least every stored priority; got {float(max_priority)}"
            )
        super().set_state(state, expected_shapes)
        priorities = priorities.astype(np.float64)
        self._tree = SumTree(self.capacity)
        self._priorities[:] = 0.0
        self._priorities[: self._size] = priorities
        self._tree.set(np.arange(self._size), priorities**self.alpha)
        self._max_priority = float(max_priority)


_BUFFER_TYPES: dict[str, type[ReplayBuffer]] = {
    "ReplayBuffer": ReplayBuffer,
    "PrioritizedReplayBuffer": PrioritizedReplayBuffer,
    "MultiAgentReplayBuffer": ReplayBuffer,  # RLlib's names, single-agent here
    "MultiAgentPrioritizedReplayBuffer": PrioritizedReplayBuffer,
    # RLlib's new stack keeps whole episodes and draws steps from them, uniformly or by priority: the same draw
    "EpisodeReplayBuffer": ReplayBuffer,
    "PrioritizedEpisodeReplayBuffer": PrioritizedReplayBuffer,
    "MultiAgentEpisodeReplayBuffer": ReplayBuffer,
    "MultiAgentPrioritizedEpisodeReplayBuffer": PrioritizedReplayBuffer,
}
_OPTION_ALIASES = {"prioritized_replay_alpha": "alpha", "prioritized_replay_eps": "epsilon", "prioritized_replay_beta": "beta"}
_SEQUENCE_OPTIONS = ("storage_unit", "replay_burn_in", "zero_init_states", "replay_zero_init_states")
"""RLlib's keys for what a buffer's row is and how many of a replayed sequence's first steps only warm up the state:
the policy's business (a recurrent DQN's), checked here and left out of the buffer's arguments"""
_OPTIONS = {"type", "capacity", "alpha", "epsilon", "beta", "worker_side_prioritization", *_OPTION_ALIASES, *_SEQUENCE_OPTIONS}


def check_replay_buffer_config(config: Any) -> tuple[type[ReplayBuffer], dict[str, Any]]:
    """Check an algorithm's ``replay_buffer_config`` without allocating anything.

    Keys: ``type`` (``"ReplayBuffer"`` (default) or ``"PrioritizedReplayBuffer"``,
    case-insensitive; RLlib's ``MultiAgent...`` names map to these),
    ``capacity``, ``alpha`` and ``epsilon`` (RLlib's ``prioritized_replay_alpha``
    / ``prioritized_replay_eps`` too). ``beta`` (``prioritized_replay_beta``) is
    accepted so one dict can hold all replay settings, but it is the caller's
    to pass to :meth:`ReplayBuffer.sample`. The prioritized keys are accepted
    and ignored by the uniform buffer, so switching ``type`` is a one-word edit.
    RLlib's ``storage_unit`` (``"timesteps"`` or ``"sequences"``),
    ``replay_burn_in`` and ``zero_init_states`` (or ``replay_zero_init_states``)
    are checked here and read by the algorithm, which says
    whether it takes them (its config's ``replays_sequences``); so is
    ``worker_side_prioritization`` (its config's ``worker_side_priorities``).

    Returns:
        The buffer class and the keyword arguments to build it with (besides ``seed``).

    Raises:
        ConfigError: an unknown key or type, or a value out of its range.
    """
    if not isinstance(config, Mapping):
        raise ConfigError(f"replay_buffer_config must be a dict, got {type(config).__name__}")
    from corral.core.learning.replay.script_buffers import resolve_replay_type  # it builds on this module

    config, script_buffer = resolve_replay_type(config)  # a class, a path, RLlib's underlying config: a built-in's name
    if script_buffer is not None:
        return script_buffer
    for key in config:
        if key not in _OPTIONS:
            raise ConfigError(
                f"unknown replay_buffer_config key {key!r}; allowed: {sorted(_OPTIONS)}.{did_you_mean(str(key), _OPTIONS)}"
            )
    checked: Mapping[str, Any] = config  # every key is one of _OPTIONS
    options = {_OPTION_ALIASES.get(k, k): v for k, v in checked.items()}
    if len(options) < len(config):
        raise ConfigError(f"replay_buffer_config gives an option twice, under its name and its RLlib alias: {sorted(config)}")
    type_name = options.pop("type", "ReplayBuffer")
    by_lower = {name.lower(): cls for name, cls in _BUFFER_TYPES.items()}
    if not isinstance(type_name, str) or type_name.lower() not in by_lower:
        raise ConfigError(
            f"unknown replay buffer type {type_name!r}; allowed: {sorted(_BUFFER_TYPES)}."
            f"{did_you_mean(str(type_name), _BUFFER_TYPES)}"
        )
    if "capacity" not in options:
        raise ConfigError("replay_buffer_config needs 'capacity' (rows to keep, an int >= 1)")
    cls = by_lower[type_name.lower()]
    capacity = _check_int("replay buffer capacity", options["capacity"], 1)
    if capacity > MAX_CAPACITY:
        raise ConfigError(f"replay buffer capacity {capacity} is more than {MAX_CAPACITY} rows")
    if "beta" in options:
        _check_float("prioritized replay beta", options.pop("beta"), 0.0)
    _check_sequence_options(options, config)
    if not isinstance(options.pop("worker_side_prioritization", False), bool):
        given = config["worker_side_prioritization"]
        raise ConfigError(f"replay_buffer_config worker_side_prioritization is True or False, not {given!r}")
    if cls is PrioritizedReplayBuffer:
        if "alpha" in options:
            _check_float("prioritized replay alpha", options["alpha"], 0.0)
        if "epsilon" in options:
            _check_float("prioritized replay epsilon", options["epsilon"], 0.0, strict=True)
        return cls, options
    return cls, {"capacity": capacity}


def _check_sequence_options(options: dict[str, Any], config: Mapping[str, Any]) -> None:
    """Check (and take out of ``options``) what a replayed row is: RLlib's sequence keys, the algorithm's to read."""
    if options.pop("storage_unit", "timesteps") not in ("timesteps", "sequences"):
        raise ConfigError(f"replay_buffer_config storage_unit is 'timesteps' or 'sequences', not {config['storage_unit']!r}")
    if "replay_burn_in" in options:
        _check_int("replay_burn_in", options.pop("replay_burn_in"), 0)
    for key in ("zero_init_states", "replay_zero_init_states"):  # RLlib 2.x's R2D2 buffers; R2D2 checks them
        if not isinstance(options.pop(key, True), bool):
            raise ConfigError(f"replay_buffer_config {key} is True or False, not {config[key]!r}")


def make_replay_buffer(config: Mapping[str, Any], seed: int | None) -> ReplayBuffer:
    """Build a buffer from an algorithm's ``replay_buffer_config`` (see :func:`check_replay_buffer_config`).

    Args:
        config: ``{"type": ..., "capacity": ..., ...}`` as :func:`check_replay_buffer_config` takes it.
        seed: seeds the buffer's sampling (an int >= 0); None draws fresh entropy.

    Raises:
        ConfigError: the config is invalid.
    """
    cls, options = check_replay_buffer_config(config)
    return cls(seed=seed, **options)


def replay_row_bytes(batch_shapes: Mapping[str, tuple[tuple[int, ...], DTypeLike]]) -> int:
    """Bytes one stored row takes, for columns given as ``{name: (row shape, dtype)}``."""
    return sum(int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize for shape, dtype in batch_shapes.values())
