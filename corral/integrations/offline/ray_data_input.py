"""Input files read through Ray Data: parallel read tasks on the cluster, streamed to the learner in blocks.

Used for Parquet input when the run has remote env runners or asks for it
(``input_config={"use_ray_data": True}``). Ray Data reads the files in
parallel tasks and streams blocks of :data:`RAY_DATA_BLOCK_ROWS` rows, in the
order of the file list, so a dataset larger than memory trains: only the
blocks in flight and the shuffle buffer are held at once.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from corral.integrations.offline.input_columns import Columns
from corral.integrations.offline.input_files import renamed, table_columns

RAY_DATA_BLOCK_ROWS = 8192
"""rows per block streamed from Ray Data"""
_PATH = "path"


def ray_data_blocks(
    paths: list[Path],
    columns: Mapping[str, str] | None,
    map_batches_kwargs: Mapping[str, Any] | None = None,
    prefetch_batches: int | None = None,
) -> Iterator[tuple[Path, dict[str, Columns]]]:
    """The files' rows in blocks, read by Ray Data tasks in parallel and yielded in file order.

    A Ray Data dataset of the file names, mapped by a reading function that
    yields each file's record batches: the files are read in Ray tasks, several
    at once, and the blocks stream back in order. (Ray's own ``read_parquet``
    lists paths with fsspec, which fails at random without aiohttp.)

    Args:
        paths: the Parquet files, in the order to read them.
        columns: corral column name -> the files' column name.
        map_batches_kwargs: the read tasks' ``concurrency`` and resources (``num_cpus``, ``num_gpus``,
            ``memory``), as ``offline_data(map_batches_kwargs=...)`` gives them; None: Ray Data's defaults.
        prefetch_batches: blocks fetched ahead of the one being read; None: Ray Data's default.

    Yields:
        ``(path, {policy_id: columns})`` for each block of each file.
    """
    import pyarrow.parquet as pq
    import ray.data

    logging.getLogger("ray.data").setLevel(logging.WARNING)  # its progress lines would drown corral's
    names = [os.path.abspath(p) for p in paths]
    metadata = {name: pq.read_schema(name).metadata for name in names}
    names_dataset = ray.data.from_items([{_PATH: name} for name in names], override_num_blocks=len(names))
    dataset = names_dataset.map_batches(
        _read_blocks, batch_size=1, batch_format="pyarrow", zero_copy_batch=True, **(map_batches_kwargs or {})
    )
    dataset.context.execution_options.preserve_order = True  # the same rows in the same order, run after run
    dataset.context.enable_progress_bars = False
    prefetch: dict[str, Any] = {} if prefetch_batches is None else {"prefetch_batches": prefetch_batches}
    for batch in dataset.iter_batches(batch_size=None, batch_format="pyarrow", **prefetch):
        table: Any = batch  # a pyarrow Table, as batch_format asks
        source = table.column(_PATH)[0].as_py()  # one file per block (see _read_blocks)
        policy_id, read = table_columns(Path(source), table.drop_columns([_PATH]), metadata[source])
        yield Path(source), renamed({policy_id: read}, columns)


def _read_blocks(files: Any) -> Iterator[Any]:
    """In a Ray task: each file's rows, :data:`RAY_DATA_BLOCK_ROWS` at a time, each block labelled with its file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for name in files.column(_PATH).to_pylist():
        for batch in pq.ParquetFile(name).iter_batches(batch_size=RAY_DATA_BLOCK_ROWS):
            table = pa.Table.from_batches([batch])
            yield table.append_column(_PATH, pa.array([name] * table.num_rows, pa.string()))
