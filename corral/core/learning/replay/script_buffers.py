"""A replay buffer class of the script's, written to RLlib's API, replayed by corral's off-policy algorithms.

RLlib lets ``replay_buffer_config={"type": MyBuffer, ...}`` name a class of
one's own (a subclass of RLlib's ``ReplayBuffer`` that evicts often-drawn
items, say): the algorithm builds it with the config's keys, ``add``s each
sampled batch and ``sample(num_items)``s its train batches. corral does the
same through :class:`ScriptReplayBuffer`, which puts such a buffer behind the
interface corral's algorithms use. Its draws are the buffer's own: corral
gives it no priorities back, and it is not saved in checkpoints
(``save_replay_buffer`` saves corral's own buffers' arrays only).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from corral.core.common.sample_batch import SampleBatch
from corral.core.learning.replay.replay_buffers import ReplayBuffer
from corral.errors import ConfigError


def is_script_buffer_class(cls: Any) -> bool:
    """Whether ``cls`` is a buffer class of RLlib's API: a class with ``add(batch)`` and ``sample(num_items)``."""
    return isinstance(cls, type) and callable(getattr(cls, "add", None)) and callable(getattr(cls, "sample", None))


class ScriptReplayBuffer(ReplayBuffer):
    """A buffer of RLlib's API behind corral's replay interface (see the module docstring).

    Args:
        buffer_class: the script's class, built as ``buffer_class(capacity=capacity, **options)``.
        capacity: the config's ``capacity``.
        seed: corral's replay seed, which such a buffer does not take (RLlib's draw with Python's ``random``).
        **options: the config's other keys, for the class's constructor.
    """

    def __init__(self, buffer_class: type, capacity: int, seed: int | None = None, **options: Any) -> None:
        self.capacity = capacity
        self.buffer = buffer_class(capacity=capacity, **options)
        """the script's buffer"""

    def __len__(self) -> int:
        """The items the buffer holds (its own ``len``)."""
        return len(self.buffer)

    def add(self, batch: Mapping[str, np.ndarray]) -> None:
        """Hand the buffer the batch's rows as a ``SampleBatch`` (without corral's ``priorities`` column)."""
        self.buffer.add(SampleBatch({key: np.asarray(value) for key, value in batch.items() if key != SampleBatch.PRIORITIES}))

    def sample(self, num_rows: int, beta: float = 0.0) -> SampleBatch:
        """The buffer's ``sample(num_rows)``, with unit ``weights`` and no ``batch_indexes`` to update (-1).

        Args:
            num_rows: items to ask for (rows, for a buffer of timesteps).
            beta: prioritized replay's exponent, which this buffer does not take.

        Raises:
            ConfigError: the buffer gave no rows.
        """
        drawn = self.buffer.sample(num_rows)
        if drawn is None or not len(drawn):
            raise ConfigError(f"{type(self.buffer).__name__}.sample({num_rows}) gave no rows to learn from")
        batch = SampleBatch({key: np.asarray(value) for key, value in drawn.items()})
        batch[SampleBatch.BATCH_INDEXES] = np.full(batch.count, -1, dtype=np.int64)
        batch[SampleBatch.WEIGHTS] = np.ones(batch.count, dtype=np.float32)
        return batch

    def update_priorities(self, indexes: np.ndarray, priorities: np.ndarray) -> None:
        """Nothing: the buffer draws as it will, as it does in RLlib without a prioritized base."""

    def get_state(self) -> dict[str, np.ndarray]:
        """Refused: corral saves its own buffers' arrays only.

        Raises:
            ConfigError: always, naming what to do.
        """
        raise ConfigError(
            f"save_replay_buffer=True saves corral's own replay buffers; {type(self.buffer).__name__} is the script's: "
            "set save_replay_buffer=False, or replay with a built-in type"
        )

    def set_state(self, state: Mapping[str, np.ndarray], expected_shapes: Mapping[str, tuple[int, ...]] | None = None) -> None:
        """Refused, as :meth:`get_state` is.

        Raises:
            ConfigError: always.
        """
        self.get_state()


def replay_type(given: Any) -> tuple[Any, str | None]:
    """What a replay config's ``type`` names: the class (imported from a path), and the built-in buffer's name it
    stands for (a name as given; corral's classes; RLlib's ``ReplayBuffer`` itself), or None for the script's class.

    Args:
        given: the ``type``: a name, an import path or a class.

    Raises:
        ConfigError: an import path that does not import.
    """
    from corral.core.common.import_paths import import_object, is_import_path
    from corral.core.learning.replay.replay_buffers import _BUFFER_TYPES

    cls = import_object(given) if isinstance(given, str) and is_import_path(given) else given
    if isinstance(cls, str):
        return cls, cls
    named = vars(cls).get("__corral_replay_type__") if isinstance(cls, type) else None
    return cls, named or next((name for name, built_in in _BUFFER_TYPES.items() if built_in is cls), None)


def resolve_replay_type(config: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[type[ReplayBuffer], dict[str, Any]] | None]:
    """A replay config whose ``type`` names a built-in buffer by its name, or the script's buffer it names.

    RLlib's ``underlying_replay_buffer_config`` (the buffer a ``MultiAgentReplayBuffer`` gives each policy) is
    that buffer's config, as corral gives each policy its own buffer anyway. A class or import path in ``type``
    is a built-in buffer's name if it stands for one (corral's classes, RLlib's ``ReplayBuffer`` itself), else
    the script's buffer.

    Args:
        config: the ``replay_buffer_config``.

    Returns:
        The config with a built-in ``type`` named, and None; or it and ``(ScriptReplayBuffer, its arguments)``.

    Raises:
        ConfigError: the type does not import, or is a class with no ``add`` and ``sample``; no ``capacity``.
    """
    from corral.core.learning.replay.replay_buffers import _BUFFER_TYPES, _check_int

    options = dict(config)
    underlying = options.pop("underlying_replay_buffer_config", None)
    if isinstance(underlying, Mapping):
        options = {key: value for key, value in options.items() if key != "type"} | dict(underlying)
    given = options.get("type", "ReplayBuffer")
    cls, named = replay_type(given)
    if named is not None:
        return {**options, "type": named}, None
    if not is_script_buffer_class(cls):
        raise ConfigError(
            f"replay_buffer_config type {given!r} is no replay buffer: name a built-in one ({sorted(_BUFFER_TYPES)}) or a "
            "class with RLlib's add(batch) and sample(num_items) (a subclass of corral.rllib.utils.replay_buffers.ReplayBuffer)"
        )
    if "capacity" not in options:
        raise ConfigError("replay_buffer_config needs 'capacity' (timesteps to keep, an int >= 1)")
    arguments = {key: value for key, value in options.items() if key != "type"}
    arguments["capacity"] = _check_int("replay buffer capacity", arguments["capacity"], 1)
    return options, (ScriptReplayBuffer, {"buffer_class": cls, **arguments})
