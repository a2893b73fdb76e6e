"""Reading input files chunk by chunk, epoch after epoch, in a seeded order, through a shuffle buffer.

Files are read one at a time, so a dataset larger than memory trains as long
as each file fits (or, through Ray Data, a block at a time); where reading
stands (epoch, file order, the rows held back) is saved with the algorithm's
state, for exact resume.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from corral.core.common import state_codec
from corral.core.common.restored import restored_count
from corral.core.common.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch
from corral.core.seeding import generator_state, set_generator_state
from corral.errors import ConfigError
from corral.integrations.offline.input_columns import Columns
from corral.integrations.offline.input_files import read_experiences


class ExperienceReader:
    """Chunks of rows from a list of files, in a seeded order that changes every epoch.

    Files are read in blocks: one whole file at a time with pyarrow (or as JSON
    lines), or, with ``ray_data``, batches of :data:`RAY_DATA_BLOCK_ROWS` rows
    that Ray Data reads in parallel tasks and streams in file order, so only a
    few blocks are in memory at once. Each block is prepared (checked,
    postprocessed) as it arrives, then its rows wait in the shuffle buffer.

    Args:
        files: ``(path, format)`` of each file.
        prepare: turns one block's rows by policy id into training rows
            (checks, actions into the policy's space, postprocessing); its errors
            name the file.
        shuffle_buffer_size: rows held back and drawn at random; 0 reads in order.
        rng: the generator of file order and shuffling.
        columns: corral column name -> the files' column name.
        ray_data: read the (Parquet) files through Ray Data.
        ray_data_options: ``map_batches`` resources of the read tasks and ``prefetch_batches``
            (see :func:`~corral.integrations.offline.ray_data_input.ray_data_blocks`).
    """

    def __init__(
        self,
        files: Sequence[tuple[Path, str]],
        prepare: Callable[[Path, dict[str, Columns]], dict[str, Columns]],
        shuffle_buffer_size: int,
        rng: np.random.Generator,
        columns: Mapping[str, str] | None = None,
        ray_data: bool = False,
        ray_data_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.files = list(files)
        self.prepare = prepare
        self.shuffle_buffer_size = shuffle_buffer_size
        self.rng = rng
        self.columns = dict(columns or {})
        self.ray_data = ray_data
        self.ray_data_options = dict(ray_data_options or {})
        self.epoch = 0
        self._order = list(range(len(self.files)))
        self._consumed = 0  # blocks of this epoch already read
        self._blocks: Generator[tuple[Path, dict[str, Columns]], None, None] | None = None
        self._rows_this_epoch = 0
        self._pending: dict[str, Columns] = {}

    def next(self, steps: int) -> MultiAgentBatch:
        """The next ``steps`` steps (by policy id), reading blocks as needed.

        A row is a step, or, for a recurrent policy, a sequence of ``seq_lens``
        steps: sequences are taken whole, so a call may give a few steps more.

        Raises:
            ConfigError: a file fails its checks, or a whole epoch of files holds no rows.
        """
        while self._pending_steps() < steps or self._pending_rows() < self.shuffle_buffer_size:
            if not self._read_next_block() and self._pending_rows():
                break  # an epoch ended with fewer rows than asked for: what there is
        pending_rows, pending_steps = self._pending_rows(), self._pending_steps()
        # sequences: as many as hold ``steps`` at the buffer's mean length (the loop asks again if they fall short)
        rows = steps if pending_rows == pending_steps else -(-steps * pending_rows // max(pending_steps, 1))
        return self._take(min(rows, pending_rows))

    def _pending_rows(self) -> int:
        return sum(len(batch[SampleBatch.OBS]) for batch in self._pending.values())

    def _pending_steps(self) -> int:
        return sum(_steps_in(batch) for batch in self._pending.values())

    def close(self) -> None:
        """Stop reading: an open stream of blocks (Ray Data's tasks) is shut down; reading may start again later."""
        if self._blocks is not None:
            self._blocks.close()
            self._blocks = None

    def _read_next_block(self) -> bool:
        """Read one block into the buffer; False when an epoch just ended (the next one is set up)."""
        if self._blocks is None:
            self._blocks = self._epoch_blocks(skip=self._consumed)
        try:
            path, read = next(self._blocks)
        except StopIteration:
            if not self._rows_this_epoch:
                raise ConfigError(f"the input files hold no rows: {', '.join(str(p) for p, _ in self.files)}") from None
            self.epoch += 1
            self._order = [int(i) for i in self.rng.permutation(len(self.files))]
            self._consumed, self._rows_this_epoch, self._blocks = 0, 0, None
            return False
        self._consumed += 1
        for pid, batch in self.prepare(path, read).items():
            if not len(batch[SampleBatch.OBS]):
                continue
            self._rows_this_epoch += len(batch[SampleBatch.OBS])
            held = self._pending.get(pid)
            if held is not None:
                self._pending[pid] = _concat(held, batch)
            else:  # the shuffle buffer moves rows in place: it needs arrays of its own (pyarrow's are read-only)
                self._pending[pid] = {k: np.array(v) for k, v in batch.items()} if self.shuffle_buffer_size else batch
        return True

    def _epoch_blocks(self, skip: int) -> Generator[tuple[Path, dict[str, Columns]], None, None]:
        """This epoch's blocks, in its file order, after the first ``skip``."""
        if not self.ray_data:
            for index in self._order[skip:]:
                path, file_format = self.files[index]
                yield path, read_experiences(path, file_format, self.columns)
            return
        from corral.integrations.offline.ray_data_input import ray_data_blocks

        paths = [self.files[index][0] for index in self._order]
        for number, block in enumerate(ray_data_blocks(paths, self.columns, **self.ray_data_options)):
            if number >= skip:
                yield block

    def _take(self, rows: int) -> MultiAgentBatch:
        """``rows`` rows out of the buffer: the first ones, or random ones; the cost is in the rows taken, not the buffer."""
        counts = {pid: len(batch[SampleBatch.OBS]) for pid, batch in self._pending.items()}
        if self.shuffle_buffer_size:
            chosen = np.sort(self.rng.choice(sum(counts.values()), rows, replace=False))
        else:
            chosen = np.arange(rows)
        out: dict[str, SampleBatch] = {}
        start = 0
        for pid, count in counts.items():
            mine = chosen[(chosen >= start) & (chosen < start + count)] - start
            start += count
            if not len(mine):
                continue
            batch = self._pending[pid]
            out[pid] = SampleBatch({k: v[mine] for k, v in batch.items()})
            left = count - len(mine)
            if not left:
                del self._pending[pid]
            elif not self.shuffle_buffer_size:  # the first rows were taken: the rest is a view
                self._pending[pid] = {k: v[len(mine) :] for k, v in batch.items()}
            else:  # the rows kept beyond the new end move into the holes below it
                holes = mine[mine < left]
                movers = np.setdiff1d(np.arange(left, count), mine, assume_unique=True)
                for value in batch.values():
                    value[holes] = value[movers]
                self._pending[pid] = {k: v[:left] for k, v in batch.items()}
        steps = sum(_steps_in(batch) for batch in out.values())
        return MultiAgentBatch(out, steps, steps)

    def get_state(self) -> dict[str, Any]:
        """Where reading stands (epoch, file order, the rows held back) as JSON data, for exact resume."""
        return {
            "epoch": self.epoch,
            "order": list(self._order),
            "consumed": self._consumed,
            "rows_this_epoch": self._rows_this_epoch,
            "rng_state": generator_state(self.rng),
            "pending": {pid: {k: state_codec.encode(v, compress=True) for k, v in b.items()} for pid, b in self._pending.items()},
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Go on from what :meth:`get_state` returned.

        Raises:
            ValueError: the state does not fit these files (a tampered checkpoint, or other input files).
        """
        order = [int(i) for i in state["order"]]
        if sorted(order) != list(range(len(self.files))):
            raise ValueError(f"the saved input position is for {len(order)} files, but input_ names {len(self.files)}")
        consumed = restored_count(state["consumed"], "consumed")
        if not self.ray_data and consumed > len(order):
            raise ValueError(f"the saved input position {consumed} is outside the {len(order)} files")
        pending = {pid: {k: np.asarray(state_codec.decode(v)) for k, v in b.items()} for pid, b in state["pending"].items()}
        set_generator_state(self.rng, state["rng_state"])
        self.epoch, self._order, self._consumed, self._pending = int(state["epoch"]), order, consumed, pending
        self._rows_this_epoch = restored_count(state["rows_this_epoch"], "rows_this_epoch")
        self._blocks = None


def _steps_in(batch: Columns) -> int:
    """The steps a batch's rows hold: a row each, or the steps of each sequence a row holds.

    A recurrent policy's sequence has ``seq_lens`` steps; IMPALA's sequence
    (a ``[B, T]`` ``valid`` column) its valid ones.
    """
    seq_lens, valid = batch.get(SampleBatch.SEQ_LENS), batch.get(SampleBatch.VALID)
    if seq_lens is not None:
        return int(seq_lens.sum())
    if valid is not None and valid.ndim == 2:
        return int(valid.sum())
    return len(batch[SampleBatch.OBS])


def _concat(a: Columns, b: Columns) -> Columns:
    shared = [k for k in a if k in b]  # files may differ in optional columns; what all have stays
    return {k: np.concatenate([a[k], b[k]]) for k in shared}


class InputReaderSource(ExperienceReader):
    """Chunks of rows from a user's ``InputReader`` (RLlib's reader API): each ``next()`` batch is a block.

    The blocks are prepared (checked, postprocessed) and shuffled as files'
    are; the reader never ends, so there are no epochs. Where the reader
    stands is its own: a checkpoint keeps the rows held back, and a restored
    run goes on reading wherever the new reader starts.

    Args:
        reader: the ``InputReader``; ``next()`` gives a SampleBatch or a MultiAgentBatch.
        prepare: as :class:`ExperienceReader`'s, named by the reader's class instead of a file.
        shuffle_buffer_size: rows held back and drawn at random; 0 reads in order.
        rng: the generator of the shuffling.
    """

    def __init__(
        self,
        reader: Any,
        prepare: Callable[[Path, dict[str, Columns]], dict[str, Columns]],
        shuffle_buffer_size: int,
        rng: np.random.Generator,
    ) -> None:
        super().__init__([], prepare, shuffle_buffer_size, rng)
        self.reader = reader
        self.label = Path(f"<{type(reader).__name__}>")

    def _epoch_blocks(self, skip: int) -> Generator[tuple[Path, dict[str, Columns]], None, None]:
        while True:
            batch = self.reader.next()
            by_policy = batch.policy_batches if isinstance(batch, MultiAgentBatch) else {DEFAULT_POLICY_ID: batch}
            yield self.label, {str(pid): {k: np.asarray(v) for k, v in b.items()} for pid, b in by_policy.items()}

    def set_state(self, state: dict[str, Any]) -> None:
        """Take back the rows held back and the generator's state (the blocks read count for nothing: see the class).

        Raises:
            ValueError: the state is malformed.
        """
        super().set_state({**state, "order": [], "consumed": 0})
