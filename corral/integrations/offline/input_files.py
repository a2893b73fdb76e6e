"""Input files (``offline_data(input_=...)``): which files an ``input_`` names, and reading one of them.

``input_`` names a folder, a glob pattern, a file or a list of them. Files are
Parquet (the default) or JSON lines, as
:mod:`corral.integrations.offline.experience_output` writes them; Parquet written
by other tools reads too when its columns are named as corral's (or mapped with
``input_config={"columns": {"obs": "observation", ...}}``). A file is read
whole, by policy id, as numpy columns; checking them against the policy is
:mod:`~corral.integrations.offline.input_check`'s job.
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from corral.core.common import state_codec
from corral.core.common.sample_batch import DEFAULT_POLICY_ID, SampleBatch
from corral.errors import ConfigError
from corral.integrations.offline.experience_output import OUTPUT_FORMATS
from corral.integrations.offline.input_columns import EPISODES_KEY, Columns

SAMPLER = "sampler"
INPUT_SUFFIXES = {".parquet": "parquet", ".json": "json", ".jsonl": "json"}


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


def holds_episodes(path: Path, file_format: str) -> bool:
    """Whether an input file holds one row per episode (``output_write_episodes=True``), not one per step.

    Args:
        path: the file.
        file_format: ``"parquet"`` or ``"json"`` (JSON lines hold sample batches: never episodes).

    Returns:
        True for a Parquet file corral wrote with ``output_write_episodes=True``.
    """
    if file_format != "parquet":
        return False
    import pyarrow.parquet as pq

    return EPISODES_KEY in (pq.read_schema(path).metadata or {})


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
        metadata: the file's schema metadata (``corral.policy_id``, ``corral.shapes``, and
            :data:`EPISODES_KEY` when a row is an episode), or None.

    Returns:
        ``(policy_id, columns)``: ``default_policy`` for files without corral's metadata;
        a multi-dimensional column in its row shape; no ``infos``.

    Raises:
        ConfigError: a list column whose rows differ in shape.
    """
    import pyarrow as pa

    metadata = metadata or {}
    if EPISODES_KEY in metadata:  # one row per episode, each column a list over its steps: the steps' rows
        table = pa.table({name: table.column(name).combine_chunks().flatten() for name in table.column_names})
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
