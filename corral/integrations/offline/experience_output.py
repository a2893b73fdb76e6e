"""Sampled experiences out to files (``offline_data(output=...)``): Parquet or JSON lines, each file whole or absent.

Every sample call of an env runner (and each fragment an evaluation runner
plays) hands its fragments (before postprocessing) to an
:class:`ExperienceWriter`, which writes one row per transition: ``obs``,
``new_obs``, ``actions``, ``rewards``, ``terminateds``, ``truncateds``, the
action's extras (``action_logp``, ``action_dist_inputs``, ``vf_preds``, ...),
``eps_id``, ``agent_index``, ``t`` (the agent's step in its episode) and
``infos`` (the env's info dict of the step, as JSON data; a value JSON cannot
hold is left out). Observations are the policy's: preprocessed and filtered.
An agent's rows stay together, in time order.

- **Parquet** (the default; pyarrow): one file stream per policy, one row
  group per sample call; a multi-dimensional column is stored flat, its row
  shape in the schema metadata (``corral.shapes``). Columns named in
  ``output_compress_columns`` are compressed with zstd, the others with snappy.
  With ``output_write_episodes`` a row is one episode's steps in a sample call,
  each column a list over them (RLlib's new stack writes episodes), marked by
  :data:`~corral.integrations.offline.input_columns.EPISODES_KEY` in the metadata.
- **JSON lines**: one sample batch per line in the layout of RLlib's
  ``JsonWriter`` (``{"type": "SampleBatch", ...}``, or ``"MultiAgentBatch"``
  with ``policy_batches`` when a runner has several policies), columns as
  lists, so RLlib's JSON reader reads them. A compressed column is an encoded
  array (:mod:`corral.core.common.state_codec`, zlib-compressed bytes):
  RLlib's reader takes only the others, so its documented recipe sets
  ``output_compress_columns=[]``.

A file is written under a hidden temporary name (``.output-...tmp``) and
renamed to ``output-<time>_[evaluation-]worker-<i>[_policy-<id>]_<n>.<ext>`` when
it is closed: when it reaches ``output_max_file_size`` (or Parquet's
``output_max_rows_per_file``), and when the runner stops.
A crash leaves every closed file complete and readable; the file being
written stays hidden.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Collection, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from corral.core.common import state_codec
from corral.core.common.sample_batch import SampleBatch
from corral.core.contracts.config import OUTPUT_FORMATS as OUTPUT_FORMATS  # the config checks them
from corral.core.sampling.offline_output import OUTPUT_CONTEXT_COLUMNS as OUTPUT_CONTEXT_COLUMNS  # the runners record them
from corral.errors import ConfigError
from corral.integrations.offline.input_columns import EPISODES_KEY


def transitions(fragment: Mapping[str, np.ndarray], bootstrap_obs: np.ndarray) -> dict[str, np.ndarray]:
    """A ``[T, K]`` fragment's valid rows as flat transitions with ``new_obs``, each column's rows together.

    A row's next observation is the next row's observation: the next step's, or
    the final one (a reset row after the end of an episode holds it); the last
    row's is ``bootstrap_obs``.

    Args:
        fragment: time-major columns ``[T, K, ...]`` and the boolean ``valid`` column.
        bootstrap_obs: ``[K, ...]`` the observation after each column's last row.

    Returns:
        Flat columns of the valid rows, ordered by column then time.
    """
    valid = fragment[SampleBatch.VALID]
    horizon, width = valid.shape
    column, step = np.nonzero(valid.T)  # by column, then time
    rows = step * width + column  # where each one is in the time-major [T * K] layout
    out = {
        key: value.reshape(horizon * width, *value.shape[2:])[rows] for key, value in fragment.items() if key != SampleBatch.VALID
    }
    obs = fragment[SampleBatch.OBS]
    # the next row of a time-major layout is width rows on; after the last row come the bootstrap observations
    following = np.concatenate([obs.reshape(horizon * width, *obs.shape[2:]), np.asarray(bootstrap_obs, obs.dtype)])
    out[SampleBatch.NEXT_OBS] = following[rows + width]
    return out


def plain_info(info: Any) -> dict[str, Any]:
    """An env's info dict as JSON data: numpy values become numbers and lists; a value JSON cannot hold is left out.

    Args:
        info: the info dict (None, for a row without one, gives ``{}``).

    Returns:
        The keys whose values JSON can hold, as strings.
    """
    if not isinstance(info, dict):
        return {}
    plain = {}
    for key, value in info.items():
        try:
            plain[str(key)] = json.loads(json.dumps(value, default=_builtin))
        except (TypeError, ValueError):
            continue  # an object, a set, ...: "where serialisable"
    return plain


def _builtin(value: Any) -> Any:
    if isinstance(value, (np.ndarray, np.generic)):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON data")


def check_output_format(output_format: str) -> None:
    """Refuse, before sampling starts, a format whose library is missing.

    Raises:
        ConfigError: Parquet without pyarrow.
    """
    if output_format == "parquet":
        require_pyarrow("offline_data(output=...) writes", "or write JSON lines with output_config={'format': 'json'}")


def require_pyarrow(use: str, alternative: str) -> None:
    """Refuse Parquet work without pyarrow, naming the extra to install.

    Args:
        use: what needs it, e.g. ``"offline_data(output=...) writes"``.
        alternative: what to do instead, appended to the message.

    Raises:
        ConfigError: pyarrow is not installed.
    """
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise ConfigError(
            f"{use} Parquet files with pyarrow, which is not installed: pip install 'corral[offline]', {alternative}"
        ) from None


def parquet_table(batch: dict[str, np.ndarray], episodes: bool) -> tuple[Any, dict[str, list[int]]]:
    """One policy's transitions as a pyarrow table, and the row shapes of its multi-dimensional columns.

    A multi-dimensional column is stored flat (its row shape goes into the file's
    metadata); ``infos`` as JSON text. With ``episodes`` the rows of one episode
    (one ``eps_id`` and ``agent_index``, as :func:`transitions` keeps them
    together) become one row, each column a list over its steps.

    Args:
        batch: the transitions, by column.
        episodes: one row per episode instead of one per step.

    Returns:
        ``(table, shapes)``.
    """
    import pyarrow as pa

    arrays, shapes = {}, {}
    for key, value in batch.items():
        if key == SampleBatch.INFOS:  # JSON text: info dicts hold anything
            empty = not any(value)  # None, or {} (what most envs return)
            arrays[key] = pa.array(["{}"] * len(value) if empty else [json.dumps(plain_info(i)) for i in value], pa.string())
        elif value.ndim > 1:
            shapes[key] = list(value.shape[1:])
            flat = value.reshape(len(value), -1)
            arrays[key] = pa.FixedSizeListArray.from_arrays(pa.array(flat.reshape(-1)), flat.shape[1])
        else:
            arrays[key] = pa.array(value)
    if episodes:
        ids = np.stack([batch[SampleBatch.EPS_ID], batch[SampleBatch.AGENT_INDEX]], axis=1)
        starts = np.flatnonzero(np.any(ids[1:] != ids[:-1], axis=1)) + 1  # where the next episode's rows begin
        offsets = pa.array(np.concatenate([[0], starts, [len(ids)]]), pa.int32())
        arrays = {key: pa.ListArray.from_arrays(offsets, array) for key, array in arrays.items()}
    return pa.table(arrays), shapes


class ExperienceWriter:
    """Writes one env runner's transitions into a folder (see the module docstring).

    Args:
        folder: where the files go (created if missing).
        output_format: ``"parquet"`` or ``"json"``.
        compress_columns: the columns to compress.
        max_file_size: bytes after which a file is closed and the next one begun.
        worker_index: the env runner's index, in every file name.
        max_rows: Parquet rows after which a file is closed (None: no bound but the size).
        write_episodes: one Parquet row per episode, each column a list over its steps.
        label: before ``worker-<i>`` in every file name (``evaluation-`` for an evaluation runner's).

    Raises:
        ConfigError: Parquet without pyarrow, or a folder that cannot be created.
    """

    def __init__(
        self,
        folder: str | os.PathLike[str],
        output_format: str,
        compress_columns: Collection[str],
        max_file_size: int,
        worker_index: int,
        max_rows: int | None = None,
        write_episodes: bool = False,
        label: str = "",
    ) -> None:
        check_output_format(output_format)
        self.folder = Path(folder).expanduser()
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"output folder {str(self.folder)!r} cannot be created: {exc.strerror}") from None
        self.format = output_format
        self.compress_columns = set(compress_columns)
        self.max_file_size = max_file_size
        self.worker_index = worker_index
        self.max_rows = max_rows
        self.write_episodes = write_episodes
        self.label = label
        self._streams: dict[str | None, _Stream] = {}
        self._thread: ThreadPoolExecutor | None = None
        self._pending: Future[None] | None = None

    @classmethod
    def from_config(cls, config: Any, worker_index: int) -> ExperienceWriter | None:
        """The writer a runner built from ``config`` uses, or None without ``output``.

        Args:
            config: the runner's config; its ``output="logdir"`` must already name the
                experiment folder (the algorithm sees to that).
            worker_index: the runner's index.

        Returns:
            The writer, or None when ``config.output`` is None.

        Raises:
            ConfigError: see :class:`ExperienceWriter`.
        """
        if config.output is None:
            return None
        output_format = config.output_config.get("format", "parquet")
        return cls(
            config.output,
            output_format,
            config.output_compress_columns,
            config.output_max_file_size,
            worker_index,
            config.output_max_rows_per_file,
            config.output_write_episodes,
            "evaluation-" if getattr(config, "_is_evaluation_copy", False) else "",
        )

    def write_fragments(self, fragments: Mapping[str, tuple[Mapping[str, np.ndarray], np.ndarray]]) -> None:
        """Write one sample call's fragments as transitions (see :func:`transitions`): the env runners' call.

        Args:
            fragments: by policy id, ``(fragment, bootstrap_obs)`` as :func:`transitions` takes them;
                the transitions are copies, so the runner may change the fragments afterwards.
        """
        self.write({pid: transitions(fragment, bootstrap_obs) for pid, (fragment, bootstrap_obs) in fragments.items()})

    def write(self, batches: Mapping[str, dict[str, np.ndarray]]) -> None:
        """Write one sample call's transitions, by policy id (see :func:`transitions`), while sampling goes on.

        The encoding and compression run in a thread of this writer (pyarrow lets go
        of the GIL there), one call at a time: the next call, and :meth:`close`, wait
        for the one before and raise its error, if it had one.

        Args:
            batches: each policy's transitions, columns the writer owns from now on.
        """
        self._wait()
        batches = {pid: batch for pid, batch in batches.items() if len(batch[SampleBatch.OBS])}
        if not batches:
            return
        if self._thread is None:
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="corral-output")
        self._pending = self._thread.submit(self._write_now, batches)

    def _wait(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def _write_now(self, batches: dict[str, dict[str, np.ndarray]]) -> None:
        if self.format == "json":
            self._stream(None, ".json").write_line(self._json_line(batches))
            return
        for policy_id, batch in batches.items():
            table, shapes = parquet_table(batch, self.write_episodes)
            while table.num_rows:  # across files, when a file holds at most max_rows rows
                stream = self._stream(policy_id, ".parquet")
                room = table.num_rows if self.max_rows is None else self.max_rows - stream.rows
                stream.write_table(policy_id, table.slice(0, room), shapes, self.compress_columns, self.write_episodes)
                table = table.slice(room)

    def _stream(self, policy_id: str | None, suffix: str) -> _Stream:
        stream = self._streams.get(policy_id)
        if stream is not None and (stream.size >= self.max_file_size or stream.rows == self.max_rows):
            stream.close()
            stream = None
        if stream is None:
            label = "" if policy_id is None else f"_policy-{re.sub(r'[^A-Za-z0-9_.-]', '_', policy_id)}"
            stream = self._streams[policy_id] = _Stream(self.folder, f"{self.label}worker-{self.worker_index}{label}", suffix)
        return stream

    def _json_line(self, batches: Mapping[str, dict[str, np.ndarray]]) -> str:
        def column(key: str, value: np.ndarray) -> Any:
            if key == SampleBatch.INFOS:
                return [plain_info(info) for info in value]
            return state_codec.encode(value, compress=True) if key in self.compress_columns else value.tolist()

        def columns(batch: dict[str, np.ndarray]) -> dict[str, Any]:
            return {key: column(key, value) for key, value in batch.items()}

        if list(batches) == ["default_policy"]:
            return json.dumps({"type": "SampleBatch", **columns(batches["default_policy"])})
        count = max(len(batch[SampleBatch.OBS]) for batch in batches.values())
        return json.dumps(
            {"type": "MultiAgentBatch", "count": count, "policy_batches": {pid: columns(b) for pid, b in batches.items()}}
        )

    def close(self) -> None:
        """Close (and so publish) every open file. The writer may write again afterwards (into new files).

        Raises:
            OSError: the last write failed (the files written before it are published all the same).
        """
        try:
            self._wait()
        finally:
            for stream in self._streams.values():
                stream.close()
            self._streams.clear()
            if self._thread is not None:
                self._thread.shutdown()
                self._thread = None


class _Stream:
    """One output file being written under a hidden temporary name; :meth:`close` renames it into place."""

    def __init__(self, folder: Path, label: str, suffix: str) -> None:
        stamp = time.strftime("%Y-%m-%d_%H-%M-%S")
        n = 0
        while True:  # never clobber: another runner or run may write into the same folder
            self.path = folder / f"output-{stamp}_{label}_{n}{suffix}"
            self.temporary = folder / f".{self.path.name}.tmp"
            if not self.path.exists() and not self.temporary.exists():
                break
            n += 1
        self._file = open(self.temporary, "xb")  # noqa: SIM115  # closed in close()
        self._parquet: Any = None
        self.size = 0
        self.rows = 0

    def write_line(self, line: str) -> None:
        self._file.write(line.encode() + b"\n")
        self._file.flush()
        self.size = self._file.tell()

    def write_table(self, policy_id: str, table: Any, shapes: dict[str, list[int]], compress: set[str], episodes: bool) -> None:
        import pyarrow.parquet as pq

        if self._parquet is None:
            metadata = {b"corral.policy_id": policy_id.encode(), b"corral.shapes": json.dumps(shapes).encode()}
            if episodes:
                metadata[EPISODES_KEY] = b"1"
            schema = table.schema.with_metadata(metadata)
            codecs = {key: "zstd" if key in compress else "snappy" for key in table.column_names}
            self._parquet = pq.ParquetWriter(self._file, schema, compression=codecs)
        self._parquet.write_table(table.cast(self._parquet.schema))
        self.rows += table.num_rows
        self._file.flush()
        self.size = self._file.tell()

    def close(self) -> None:
        if self._parquet is not None:
            self._parquet.close()  # writes the footer; the file object stays open
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        os.replace(self.temporary, self.path)
