"""Experiences in from files (``offline_data(input_=...)``): what to read, checked before training, read in chunks.

``input_`` names a folder, a glob pattern, a file or a list of them, or a
dict mixing ``"sampler"`` (the env runners) with any of these at given
proportions. Files are Parquet (the default) or JSON lines, as
:mod:`corral.core.persistence.experience_output` writes them; Parquet written
by other tools reads too when its columns are named as corral's (or mapped with
``input_config={"columns": {"obs": "observation", ...}}``).

Before training starts every file's columns are checked against the policy
that is to learn from them: a missing path, a missing column, or a column
whose shape or type does not fit the policy's observation or action space is
a :class:`~corral.errors.ConfigError` naming the file and the column. Values
(an action outside the space, a non-finite observation) are checked as each
file is read, and every column is read under corral's name and in the
policy's dtype, whatever wrote the file (:mod:`~corral.core.persistence.input_columns`).

Files are read one at a time, in a seeded order that changes every epoch, so
a dataset larger than memory trains as long as each file fits;
``shuffle_buffer_size`` rows are held back and drawn at random. Chunks are
one sample call's rows, so a mix with the sampler is balanced in rows.
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Callable, Generator, Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from corral.core.common import state_codec
from corral.core.common.restored import restored_count
from corral.core.common.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch
from corral.core.common.spaces import add_batch_dim
from corral.core.persistence.experience_output import OUTPUT_FORMATS, require_pyarrow
from corral.core.persistence.input_columns import Columns, standard_names, typed_columns
from corral.core.seeding import generator_state, numpy_generator, set_generator_state
from corral.errors import ConfigError

SAMPLER = "sampler"
INPUT_SUFFIXES = {".parquet": "parquet", ".json": "json", ".jsonl": "json"}
TRANSITION_COLUMNS = (SampleBatch.REWARDS, SampleBatch.NEXT_OBS, SampleBatch.TERMINATEDS, SampleBatch.TRUNCATEDS)
"""what postprocessing (``postprocess_inputs``) and learning from rewards need besides obs and actions"""


def input_files(spec: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], file_format: str | None) -> list[Path]:
    """The files an ``input_`` (a folder, glob, file or list of them) names, in sorted order.

    Args:
        spec: the ``input_`` value, or one key of an ``input_`` dict.
        file_format: ``input_config["format"]``, or None to go by each file's suffix.

    Returns:
        The files, each readable in its format (see :func:`file_format_of`).

    Raises:
        ConfigError: a path that does not exist, a folder or pattern without input files.
    """
    items = [spec] if isinstance(spec, (str, os.PathLike)) else list(spec)
    if not items:
        raise ConfigError("offline_data(input_=[]) names no files; give a folder, a glob pattern or files")
    suffixes = [s for s, f in INPUT_SUFFIXES.items() if file_format in (None, f)]
    files: list[Path] = []
    for item in items:
        text = os.path.expanduser(os.fspath(item))
        if glob.has_magic(text):
            found = [Path(p) for p in sorted(glob.glob(text)) if Path(p).is_file()]
        elif Path(text).is_dir():
            found = sorted(p for p in Path(text).iterdir() if p.is_file() and p.suffix in suffixes and not p.name.startswith("."))
        elif Path(text).is_file():
            found = [Path(text)]
        else:
            raise ConfigError(f"offline_data(input_=...): {text!r} does not exist; give a folder, a glob pattern or a file")
        if not found:
            raise ConfigError(
                f"offline_data(input_=...): {text!r} holds no input files (files ending in {', '.join(suffixes)}; "
                "the hidden .output-*.tmp files of a run still writing are not read)"
            )
        files.extend(found)
    for path in files:
        file_format_of(path, file_format)
    return files


def input_beside(spec: Any, folder: Path) -> Any:
    """An experiment file's ``input`` with its relative paths read beside the file where the working folder lacks them.

    A tuned example names its data relative to itself, so it trains from any
    working folder (RLlib's reader likewise tries its package's folder for a
    path the working folder lacks); a path that names something in the working
    folder keeps its meaning, and one that names nothing in either stays as
    given, to be refused by name at build.

    Args:
        spec: the ``input`` value: a path or glob, a list of them, or a dict of them (and ``"sampler"``) to proportions.
        folder: the experiment file's folder.

    Returns:
        ``spec`` with such paths joined to ``folder``; anything else as it was.
    """

    def names_something(text: str) -> bool:
        return bool(glob.glob(text)) if glob.has_magic(text) else os.path.exists(text)

    def beside(item: Any) -> Any:
        if not isinstance(item, (str, os.PathLike)) or item == SAMPLER:
            return item
        text = os.path.expanduser(os.fspath(item))
        if os.path.isabs(text) or names_something(text) or not names_something(str(folder / text)):
            return item
        return str(folder / text)

    if isinstance(spec, Mapping):
        return {beside(key): share for key, share in spec.items()}
    if isinstance(spec, (list, tuple)):
        return [beside(item) for item in spec]
    return beside(spec)


def file_format_of(path: Path, file_format: str | None) -> str:
    """The format a file is read in: the configured one, else by its suffix.

    Args:
        path: the file.
        file_format: ``input_config["format"]``, or None.

    Returns:
        ``"parquet"`` or ``"json"``.

    Raises:
        ConfigError: no format configured and a suffix that names none.
    """
    if file_format is not None:
        return file_format
    found = INPUT_SUFFIXES.get(path.suffix)
    if found is None:
        raise ConfigError(
            f"input file {str(path)!r}: its suffix names no format; name the files *.parquet or *.json, "
            f"or set input_config={{'format': ...}} (one of {', '.join(map(repr, OUTPUT_FORMATS))})"
        )
    return found


# ---------------------------------------------------------------------- #
# reading one file
# ---------------------------------------------------------------------- #
def read_experiences(
    path: Path, file_format: str, columns: Mapping[str, str] | None = None, head: bool = False
) -> dict[str, Columns]:
    """Every row of one input file, by policy id (the ``infos`` column left out).

    Args:
        path: the file.
        file_format: ``"parquet"`` or ``"json"``.
        columns: corral column name -> the file's column name, for files whose names differ.
        head: read only the first row group (Parquet) or line (JSON), to check the file quickly.

    Returns:
        Each policy's columns, arrays of equal length.

    Raises:
        ConfigError: the file cannot be read, or a column cannot be made an array (naming both).
    """
    try:
        read = _read_parquet(path, head) if file_format == "parquet" else _read_json(path, head)
    except ConfigError:
        raise
    except Exception as exc:  # pyarrow's and json's many errors: the file is not what it claims to be
        raise ConfigError(f"input file {str(path)!r} cannot be read as {file_format}: {exc}") from None
    read = renamed(read, columns)
    for pid, batch in read.items():
        lengths = {len(v) for v in batch.values()}
        if len(lengths) > 1:
            raise ConfigError(f"input file {str(path)!r}: policy {pid!r}'s columns differ in length ({sorted(lengths)})")
    return read


def _read_parquet(path: Path, head: bool) -> dict[str, Columns]:
    import pyarrow.parquet as pq

    if head:
        file = pq.ParquetFile(path)
        table = file.read_row_group(0) if file.num_row_groups else file.schema_arrow.empty_table()
        metadata = file.schema_arrow.metadata
    else:
        table = pq.read_table(path)
        metadata = table.schema.metadata
    policy_id, columns = table_columns(path, table, metadata)
    return {policy_id: columns}


def table_columns(path: Path, table: Any, metadata: Mapping[bytes, bytes] | None) -> tuple[str, Columns]:
    """A pyarrow table of one input file as numpy columns, and the policy it is for (from corral's schema metadata).

    Args:
        path: the file (for messages).
        table: its rows (all of them, or some).
        metadata: the file's schema metadata (``corral.policy_id``, ``corral.shapes``), or None.

    Returns:
        ``(policy_id, columns)``: ``default_policy`` for files without corral's metadata;
        a multi-dimensional column in its row shape; no ``infos``.

    Raises:
        ConfigError: a list column whose rows differ in shape.
    """
    import pyarrow as pa

    metadata = metadata or {}
    policy_id = metadata.get(b"corral.policy_id", DEFAULT_POLICY_ID.encode()).decode()
    shapes = json.loads(metadata.get(b"corral.shapes", b"{}"))
    out: Columns = {}
    for name in table.column_names:
        if name == SampleBatch.INFOS:
            continue
        column = table.column(name).combine_chunks()
        if pa.types.is_fixed_size_list(column.type):
            values = np.asarray(column.flatten())
            out[name] = values.reshape(len(column), *shapes.get(name, [column.type.list_size]))
        elif pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
            out[name] = _stacked(path, name, column.to_numpy(zero_copy_only=False))
        else:
            out[name] = column.to_numpy(zero_copy_only=False)
    return policy_id, out


def _read_json(path: Path, head: bool) -> dict[str, Columns]:
    parts: dict[str, dict[str, list[np.ndarray]]] = {}
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            record = json.loads(line)
            if not isinstance(record, dict) or record.get("type") not in ("SampleBatch", "MultiAgentBatch"):
                raise ConfigError(f"input file {str(path)!r} line {number}: not a SampleBatch or MultiAgentBatch record")
            batches = record["policy_batches"] if record["type"] == "MultiAgentBatch" else {DEFAULT_POLICY_ID: record}
            for pid, batch in batches.items():
                into = parts.setdefault(pid, {})
                for name, value in batch.items():
                    if name in ("type", SampleBatch.INFOS):
                        continue
                    if isinstance(value, str):  # RLlib's JsonWriter writes a compressed column as one string
                        raise ConfigError(
                            f"input file {str(path)!r} line {number} column {name!r}: one string, as RLlib packs a "
                            "compressed column (LZ4 over a pickle), which corral never opens; write the file with "
                            "output_compress_columns=[]"
                        )
                    array = state_codec.decode(value) if isinstance(value, dict) else _stacked(path, name, value)
                    into.setdefault(name, []).append(np.asarray(array))
            if head:
                break
    return {pid: {name: np.concatenate(chunks) for name, chunks in cols.items()} for pid, cols in parts.items()}


def renamed(read: dict[str, Columns], columns: Mapping[str, str] | None) -> dict[str, Columns]:
    """``read`` with the files' column names mapped to corral's (``input_config["columns"]``).

    Args:
        read: columns by policy id, as the file names them.
        columns: corral's name -> the file's, or None.

    Returns:
        The same arrays under corral's names.
    """
    if not columns:
        return read
    names = {file_name: name for name, file_name in columns.items()}
    return {pid: {names.get(k, k): v for k, v in batch.items()} for pid, batch in read.items()}


def _stacked(path: Path, name: str, rows: Any) -> np.ndarray:
    try:
        return np.asarray(list(rows) if len(rows) and isinstance(rows[0], (list, np.ndarray)) else rows)
    except ValueError:
        raise ConfigError(f"input file {str(path)!r} column {name!r}: its rows differ in shape") from None


# ---------------------------------------------------------------------- #
# checking a file against the policy that learns from it
# ---------------------------------------------------------------------- #
class InputCheck:
    """What a policy needs of its input rows, and whether a file's rows have it.

    Args:
        policy: the policy that learns from the rows (its preprocessed observations'
            shape and dtype, and its action space).
        required: the columns the algorithm reads.
        actions_normalized: whether Box actions in the files are already in [-1, 1].
        computed: the required columns that postprocessing would compute (``postprocess_inputs``
            is off): a file without one is told to turn it on.
    """

    def __init__(self, policy: Any, required: Sequence[str], actions_normalized: bool, computed: Sequence[str] = ()) -> None:
        space = self.observation_space = policy.observation_space
        sample = np.asarray(policy.preprocess(add_batch_dim(space, space.sample())))
        self.obs_shape, self.obs_dtype = tuple(sample.shape[1:]), sample.dtype
        self.adapter = policy.action_adapter
        self.action_space = self.adapter.space
        self.policy_space = self.adapter.policy_space
        self.required = tuple(required)
        self.computed = tuple(computed)
        self.normalize = self.adapter.normalize and not actions_normalized

    def check(self, path: Path, policy_id: str, batch: Columns) -> Columns:
        """``batch`` checked and with actions in the policy's space; a problem names the file and the column.

        Args:
            path: the file the rows are from.
            policy_id: the policy they are for.
            batch: the rows, by column.

        Returns:
            The rows under corral's column names and in the policy's dtypes
            (:mod:`~corral.core.persistence.input_columns`), actions as the policy
            takes them (integers, or float32 rows in its space).

        Raises:
            ConfigError: a required column is missing, or a column's shape, type or values do not fit.
        """

        def refuse(column: str, problem: str) -> ConfigError:
            where = "" if policy_id == DEFAULT_POLICY_ID else f" (policy {policy_id!r})"
            return ConfigError(f"input file {str(path)!r}{where} column {column!r}: {problem}")

        batch = standard_names(batch)
        missing = [c for c in self.required if c not in batch]
        if missing:
            problem = f"missing; the file has {sorted(batch)}, the algorithm reads {list(self.required)}"
            if missing[0] in self.computed:
                problem += "; postprocessing computes it from the file's episodes: set offline_data(postprocess_inputs=True)"
            raise refuse(missing[0], problem)
        for column in (SampleBatch.OBS, SampleBatch.NEXT_OBS):
            if column not in batch:
                continue
            if tuple(batch[column].shape[1:]) != self.obs_shape:
                raise refuse(
                    column,
                    f"rows of shape {tuple(batch[column].shape[1:])}, but the policy's observations of "
                    f"{self.observation_space} are {self.obs_shape} once preprocessed",
                )
            if batch[column].dtype.kind not in "fiub":
                raise refuse(column, f"{batch[column].dtype} rows; observations are numbers")
            if batch[column].dtype.kind == "f" and not np.all(np.isfinite(batch[column])):
                raise refuse(column, "holds NaN or infinite values")
        out = typed_columns(batch, self.obs_dtype, refuse)
        out[SampleBatch.ACTIONS] = self._actions(batch[SampleBatch.ACTIONS], refuse)
        if SampleBatch.REWARDS in out and not np.all(np.isfinite(out[SampleBatch.REWARDS])):
            raise refuse(SampleBatch.REWARDS, "holds NaN or infinite values")
        return out

    def _actions(self, actions: np.ndarray, refuse: Callable[[str, str], ConfigError]) -> np.ndarray:
        space, name = self.action_space, SampleBatch.ACTIONS
        if isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
            expected = () if isinstance(space, gym.spaces.Discrete) else tuple(space.nvec.shape)
            if tuple(actions.shape[1:]) != expected or actions.dtype.kind not in "iub":
                found = f"{actions.dtype} rows of shape {actions.shape[1:]}"
                raise refuse(name, f"{found}, but the env's {space} takes integers of shape {expected}")
            start = int(space.start) if isinstance(space, gym.spaces.Discrete) else 0
            high = int(space.n) if isinstance(space, gym.spaces.Discrete) else space.nvec
            if actions.size and (np.any(actions < 0) or np.any(actions >= high)):
                stored = f" (actions are stored without the space's start, {start})" if start else ""
                raise refuse(name, f"holds an action outside [0, n){stored}; the env's space is {space}")
            return actions.astype(np.int64)
        size = int(np.prod(self.policy_space.shape))
        flat = actions.reshape(len(actions), -1) if actions.ndim > 1 else actions.reshape(len(actions), 1)
        if flat.shape[1] != size or actions.dtype.kind not in "fiu":
            found = f"{actions.dtype} rows of shape {actions.shape[1:]}"
            raise refuse(name, f"{found}, but the env's {space} takes {size} numbers per action")
        flat = flat.astype(np.float32)
        if not np.all(np.isfinite(flat)):
            raise refuse(name, "holds NaN or infinite values")
        if self.normalize:  # the policy acts in [-1, 1]; the file holds the env's units
            low, high = (b.reshape(-1).astype(np.float64) for b in (space.low, space.high))
            flat = np.clip(2.0 * (flat - low) / (high - low) - 1.0, -1.0, 1.0).astype(np.float32)
        return flat


# ---------------------------------------------------------------------- #
# rows back into fragments, for postprocess_inputs
# ---------------------------------------------------------------------- #
def episode_order(rows: Columns) -> tuple[Columns, np.ndarray]:
    """Rows in episode order (by ``eps_id``, ``agent_index`` and ``t`` where present), and where each run ends.

    A run is consecutive steps of one agent in one episode; it ends at
    ``terminateds`` or ``truncateds``, where the next row belongs to another
    episode or agent or skips a step, and at the last row.

    Args:
        rows: flat transitions with ``terminateds`` and ``truncateds``.

    Returns:
        ``(ordered rows, ends)``: ``ends`` is a boolean per row, True on the last row of each run.
    """
    keys = [k for k in (SampleBatch.EPS_ID, SampleBatch.AGENT_INDEX, SampleBatch.T) if k in rows]
    count = len(rows[SampleBatch.TERMINATEDS])
    order = np.lexsort([rows[k] for k in reversed(keys)]) if keys else np.arange(count)
    rows = {k: v[order] for k, v in rows.items()}
    ends = rows[SampleBatch.TERMINATEDS] | rows[SampleBatch.TRUNCATEDS]
    if count:
        ends[-1] = True
    same_run = np.ones(max(count - 1, 0), dtype=bool)
    for key in keys:
        step = 1 if key == SampleBatch.T else 0
        same_run &= rows[key][1:] == rows[key][:-1] + step
    ends[:-1] |= ~same_run
    return rows, ends


def as_fragment(rows: Columns) -> tuple[SampleBatch, np.ndarray]:
    """Transitions as one time-major ``[T, 1]`` fragment of the kind env runners make, to postprocess them.

    Rows are put in episode order (by ``eps_id``, ``agent_index`` and ``t`` where the
    file has them) and a reset row (invalid, its observation the episode's next
    one) follows the end of every run of consecutive steps. A run that ends
    without ``terminateds`` (its episode goes on in another file, or the data
    just stops) is marked truncated: the value of its next observation bootstraps it.

    Args:
        rows: flat transitions with ``obs``, ``new_obs``, ``terminateds`` and ``truncateds``.

    Returns:
        ``(fragment, bootstrap_obs)`` as :meth:`Policy.postprocess_trajectory` takes them.
    """
    rows, ends = episode_order(rows)
    count = len(ends)
    truncateds = rows[SampleBatch.TRUNCATEDS] | (ends & ~rows[SampleBatch.TERMINATEDS])
    # row i goes to i + (resets before it); each end's reset row right after it
    position = np.arange(count) + np.concatenate([[0], np.cumsum(ends)[:-1]]) if count else np.zeros(0, np.int64)
    length = count + int(ends.sum())
    fragment: dict[str, np.ndarray] = {}
    for key, value in {**rows, SampleBatch.TRUNCATEDS: truncateds}.items():
        column = np.zeros((length, *value.shape[1:]), value.dtype)
        column[position] = value
        fragment[key] = column[:, None]
    fragment[SampleBatch.OBS][position[ends] + 1, 0] = rows[SampleBatch.NEXT_OBS][ends]
    valid = np.zeros((length, 1), bool)
    valid[position] = True
    fragment[SampleBatch.VALID] = valid
    bootstrap = rows[SampleBatch.NEXT_OBS][-1:] if count else fragment[SampleBatch.OBS][:0, 0]
    return SampleBatch(fragment), bootstrap


# ---------------------------------------------------------------------- #
# reading chunks, epoch after epoch
# ---------------------------------------------------------------------- #
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
    """

    def __init__(
        self,
        files: Sequence[tuple[Path, str]],
        prepare: Callable[[Path, dict[str, Columns]], dict[str, Columns]],
        shuffle_buffer_size: int,
        rng: np.random.Generator,
        columns: Mapping[str, str] | None = None,
        ray_data: bool = False,
    ) -> None:
        self.files = list(files)
        self.prepare = prepare
        self.shuffle_buffer_size = shuffle_buffer_size
        self.rng = rng
        self.columns = dict(columns or {})
        self.ray_data = ray_data
        self.epoch = 0
        self._order = list(range(len(self.files)))
        self._consumed = 0  # blocks of this epoch already read
        self._blocks: Generator[tuple[Path, dict[str, Columns]], None, None] | None = None
        self._rows_this_epoch = 0
        self._pending: dict[str, Columns] = {}

    def next(self, rows: int) -> MultiAgentBatch:
        """The next ``rows`` rows (by policy id), reading blocks as needed.

        Raises:
            ConfigError: a file fails its checks, or a whole epoch of files holds no rows.
        """
        while self._pending_rows() < max(rows, self.shuffle_buffer_size):
            if not self._read_next_block() and self._pending_rows():
                break  # an epoch ended with fewer rows than asked for: what there is
        return self._take(min(rows, self._pending_rows()))

    def _pending_rows(self) -> int:
        return sum(len(batch[SampleBatch.OBS]) for batch in self._pending.values())

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
        from corral.core.persistence.ray_data_input import ray_data_blocks

        paths = [self.files[index][0] for index in self._order]
        for number, block in enumerate(ray_data_blocks(paths, self.columns)):
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
        return MultiAgentBatch(out, rows, rows)

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


def _concat(a: Columns, b: Columns) -> Columns:
    shared = [k for k in a if k in b]  # files may differ in optional columns; what all have stays
    return {k: np.concatenate([a[k], b[k]]) for k in shared}


# ---------------------------------------------------------------------- #
# where training samples come from
# ---------------------------------------------------------------------- #
class ExperienceInput:
    """The files, the sampler, or a mix of them at given proportions, as one source of sample calls.

    Each call is served by the source furthest below its share of the rows
    served so far, so the proportions hold in rows whatever each source's
    batch size (the sampler's calls lose an episode's reset rows).

    Args:
        sources: ``(name, proportion, reader)``; ``reader`` None is the sampler.
        rows: rows per read from files: one sample call's worth.
    """

    def __init__(self, sources: Sequence[tuple[str, float, ExperienceReader | None]], rows: int) -> None:
        self.sources = list(sources)
        self.rows = rows
        self.rows_from = [0] * len(self.sources)

    def next(self, sample: Callable[[], MultiAgentBatch], rows: int | None = None) -> MultiAgentBatch:
        """The next sample call's rows.

        Args:
            sample: samples the env runners (called when the sampler's turn comes).
            rows: rows to read from files this call; default one full sample call's worth.

        Returns:
            The rows, by policy id.
        """
        total = sum(self.rows_from)
        behind = [share * total - served for (_, share, _), served in zip(self.sources, self.rows_from, strict=True)]
        index = max(range(len(self.sources)), key=lambda i: (behind[i], self.sources[i][1]))
        reader = self.sources[index][2]
        batch = sample() if reader is None else reader.next(rows or self.rows)
        self.rows_from[index] += batch.agent_steps
        return batch

    def close(self) -> None:
        """Stop every reader's stream of blocks (see :meth:`ExperienceReader.close`)."""
        for _, _, reader in self.sources:
            if reader is not None:
                reader.close()

    def get_state(self) -> dict[str, Any]:
        """The rows served by each source and each reader's position, as JSON data."""
        return {
            "rows_from": list(self.rows_from),
            "readers": [None if reader is None else reader.get_state() for _, _, reader in self.sources],
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Go on from what :meth:`get_state` returned.

        Raises:
            ValueError: the state is for other sources.
        """
        if len(state["rows_from"]) != len(self.sources) or len(state["readers"]) != len(self.sources):
            saved = len(state["rows_from"])
            raise ValueError(f"the saved input state is for {saved} sources, but input_ names {len(self.sources)}")
        for (_, _, reader), saved in zip(self.sources, state["readers"], strict=True):
            if reader is not None:
                reader.set_state(saved)
        self.rows_from = [int(n) for n in state["rows_from"]]


def build_experience_input(config: Any, policies: Mapping[str, Any]) -> ExperienceInput | None:
    """The input ``config.input_`` asks for, every file checked against its policy; None for the sampler alone.

    Args:
        config: the algorithm's config (``input_``, ``input_config``, ``shuffle_buffer_size``,
            ``actions_in_input_normalized``, ``postprocess_inputs``).
        policies: the learner's policies by id (their spaces check the files; they
            postprocess the rows when ``postprocess_inputs`` is on).

    Returns:
        The input, or None when ``input_`` is ``"sampler"``.

    Raises:
        ConfigError: a missing path, a file without input files, a file whose policy,
            columns or values do not fit (naming the file and the column).
    """
    spec = config.input_
    if isinstance(spec, str) and spec == SAMPLER:
        return None
    entries = list(spec.items()) if isinstance(spec, Mapping) else [(spec, 1.0)]
    checks: dict[str, InputCheck] = {}

    def check_for(path: Path, policy_id: str) -> InputCheck:
        if policy_id not in policies:
            raise ConfigError(
                f"input file {str(path)!r} holds experiences of policy {policy_id!r}, but this run's policies are "
                f"{sorted(policies)}; map them with multi_agent(policies=...)"
            )
        if policy_id not in checks:
            policy = policies[policy_id]
            reads, computed = type(policy).input_columns, type(policy).postprocessing_columns
            if config.postprocess_inputs:  # the transitions postprocessing reads, instead of what it computes
                required, computed = (*(c for c in reads if c not in computed), *TRANSITION_COLUMNS), ()
            else:
                required = reads
            checks[policy_id] = InputCheck(policy, tuple(dict.fromkeys(required)), config.actions_in_input_normalized, computed)
        return checks[policy_id]

    def prepare(path: Path, read: dict[str, Columns]) -> dict[str, Columns]:
        out = {}
        for pid, batch in read.items():
            rows = check_for(path, pid).check(path, pid, batch)
            if len(rows[SampleBatch.OBS]):
                policy = policies[pid]
                if config.postprocess_inputs:
                    rows = dict(policy.postprocess_trajectory(*as_fragment(rows)))
                rows = dict(policy.input_rows(SampleBatch(rows), config.postprocess_inputs))
            out[pid] = rows
        return out

    file_format = config.input_config.get("format")
    columns = config.input_config.get("columns") or {}
    sources: list[tuple[str, float, ExperienceReader | None]] = []
    for source, share in entries:
        name = str(source)
        if source == SAMPLER:
            sources.append((name, share, None))
            continue
        paths = input_files(source, file_format)
        files = [(path, file_format_of(path, file_format)) for path in paths]
        if any(fmt == "parquet" for _, fmt in files):
            require_pyarrow("offline_data(input_=...) reads", "or read JSON lines (input_config={'format': 'json'})")
        for path, fmt in files:  # before training: each file's first rows
            for pid, batch in read_experiences(path, fmt, columns, head=True).items():
                check_for(path, pid).check(path, pid, batch)
        ray_data = _reads_through_ray_data(config, [fmt for _, fmt in files])
        rng = numpy_generator(config.seed, "input", len(sources))  # each reader its own: its state is saved with it
        reader = ExperienceReader(files, prepare, config.shuffle_buffer_size, rng, columns, ray_data)
        sources.append((name, share, reader))
    rows = config.get_rollout_fragment_length() * config.num_envs_per_env_runner * max(1, config.num_env_runners)
    return ExperienceInput(sources, rows)


def _reads_through_ray_data(config: Any, formats: list[str]) -> bool:
    """Whether a reader goes through Ray Data: when asked, or by default on a Ray cluster (remote env runners).

    Raises:
        ConfigError: ``use_ray_data=True`` for JSON lines files (Ray Data reads corral's Parquet).
    """
    wanted = config.input_config.get("use_ray_data")
    if wanted and "json" in formats:
        raise ConfigError(
            "input_config use_ray_data=True reads Parquet files, but the input holds JSON lines; "
            "record with output_config={'format': 'parquet'}, or read them in this process (use_ray_data=False)"
        )
    if wanted is None:
        return config.num_env_runners > 0 and "json" not in formats
    return bool(wanted)
