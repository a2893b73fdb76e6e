"""RLlib's offline I/O classes: write batches as JSON lines, read them back.

RLlib's recipe for recording experiences without a simulator builds each
episode with :class:`~corral.rllib.support.sample_batch_builder.SampleBatchBuilder`
and writes it with :class:`JsonWriter`; :class:`JsonReader` reads such files batch by batch.
The files are RLlib's layout (one batch per line: ``{"type": "SampleBatch",
<column>: [...], ...}``, or ``"MultiAgentBatch"`` with ``count`` and
``policy_batches``), which corral's own offline input reads
(``config.offline_data(input_=folder)``).

As corral's experience output does, a file is written under a hidden name
(``.output-....json.tmp``) and renamed into place whole when it is closed:
when it reaches ``max_file_size``, on :meth:`JsonWriter.close`, and when the
writer is garbage collected or the interpreter exits. A script that reads the
files in the same process closes the writer first. Columns named in
``compress_columns`` are stored as corral's encoded arrays (zlib, exact dtype;
see :mod:`corral.core.common.state_codec`), which corral's input reads;
RLlib's LZ4-compressed pickles are never opened (``compress_columns=[]``
writes plain lists, which RLlib reads too).
"""

from __future__ import annotations

import abc
import glob
import io
import json
import logging
import math
import os
import random
import time
import weakref
import zipfile
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import IO, Any
from urllib.parse import urlparse

import numpy as np
import torch

from corral.core.common import state_codec
from corral.core.common.sample_batch import MultiAgentBatch, SampleBatch
from corral.core.sampling.external.io_context import IOContext
from corral.integrations.offline.experience_output import plain_info
from corral.rllib.support.batches import concat_samples

logger = logging.getLogger("corral")

_LOCAL_SCHEMES = ("", *(chr(c) for c in range(ord("a"), ord("z") + 1)))
"""no URI scheme, or a Windows drive letter"""
_MAX_SKIPS = 100
"""empty or corrupt lines (or empty files) passed over in a row before the reader gives up, as RLlib's does"""


def _is_local(path: str) -> bool:
    return urlparse(path).scheme in _LOCAL_SCHEMES


class _OpenFile:
    """The file a writer is filling, under its hidden name until :meth:`publish` renames it into place."""

    def __init__(self, folder: str, name: str) -> None:
        stem, suffix = os.path.splitext(name)
        n = 0
        while True:  # never clobber: another writer may use the same folder within the same second
            self.path = os.path.join(folder, f"{stem}{'' if n == 0 else f'-{n}'}{suffix}")
            self.hidden = os.path.join(folder, f".{os.path.basename(self.path)}.tmp")
            if not os.path.exists(self.path) and not os.path.exists(self.hidden):
                break
            n += 1
        self.file: IO[bytes] | None = open(self.hidden, "xb")  # noqa: SIM115  # closed in publish()

    def write_line(self, line: str) -> None:
        assert self.file is not None
        self.file.write(line.encode("utf-8") + b"\n")
        self.file.flush()

    def publish(self) -> None:
        """Close the file and rename it into place (once; later calls do nothing)."""
        file, self.file = self.file, None
        if file is None:
            return
        os.fsync(file.fileno())
        file.close()
        os.replace(self.hidden, self.path)


def _publish(holder: list[_OpenFile]) -> None:
    for open_file in holder:
        open_file.publish()
    holder.clear()


class JsonWriter:
    """Writes batches as RLlib's JSON lines into a folder, one batch per line (see the module docstring).

    Args:
        path: the folder the files go in (created if missing); a local path.
        ioctx: the I/O context: its ``worker_index`` goes into the file names. Default: a fresh one (index 0).
        max_file_size: bytes after which a file is closed and published and the next one begun.
        compress_columns: the columns stored compressed (as corral's encoded arrays); the others as lists.

    Raises:
        ValueError: ``path`` is a URI (corral writes local folders), or ``max_file_size`` is not a positive number.
        OSError: the folder cannot be created.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        ioctx: IOContext | None = None,
        max_file_size: int = 64 * 1024 * 1024,
        compress_columns: Collection[str] = frozenset(["obs", "new_obs"]),
    ) -> None:
        text = os.fspath(path)
        if not _is_local(text):
            raise ValueError(f"JsonWriter writes into a local folder; {text!r} is a URI (write locally, then upload)")
        if isinstance(max_file_size, bool) or not isinstance(max_file_size, (int, float)) or max_file_size <= 0:
            raise ValueError(f"max_file_size must be a positive number of bytes, got {max_file_size!r}")
        if isinstance(compress_columns, str):
            raise ValueError(f"compress_columns is a list of column names, got the string {compress_columns!r}")
        self.path = os.path.abspath(os.path.expanduser(text))
        os.makedirs(self.path, exist_ok=True)
        self.ioctx = ioctx or IOContext()
        self.max_file_size = max_file_size
        self.compress_columns = frozenset(compress_columns)
        self.file_index = 0
        self.bytes_written = 0
        self._open: list[_OpenFile] = []  # the file being filled, if any; shared with the finalizer
        self._finalizer = weakref.finalize(self, _publish, self._open)

    def write(self, sample_batch: SampleBatch | MultiAgentBatch) -> None:
        """Append one batch as one line (an empty batch writes nothing: readers skip it anyway).

        Args:
            sample_batch: a SampleBatch, or a MultiAgentBatch (written with its policies' batches and its env steps).

        Raises:
            TypeError: ``sample_batch`` is neither kind of batch, or a column holds what JSON cannot (a key
                that is not a string, say).
        """
        if isinstance(sample_batch, MultiAgentBatch):
            if not any(b.count for b in sample_batch.policy_batches.values()):
                return
        elif isinstance(sample_batch, Mapping):
            if not SampleBatch(sample_batch).count:
                return
        else:
            raise TypeError(f"JsonWriter.write takes a SampleBatch or a MultiAgentBatch, got {type(sample_batch).__name__}")
        line = json.dumps(_json_record(sample_batch, self.compress_columns), default=_json_fallback)
        self._current_file().write_line(line)
        self.bytes_written += len(line)

    def _current_file(self) -> _OpenFile:
        if self._open and self.bytes_written < self.max_file_size:
            return self._open[0]
        _publish(self._open)
        stamp = time.strftime("%Y-%m-%d_%H-%M-%S")
        name = f"output-{stamp}_worker-{self.ioctx.worker_index}_{self.file_index}.json"
        self._open.append(_OpenFile(self.path, name))
        self.file_index += 1
        self.bytes_written = 0
        return self._open[0]

    def close(self) -> None:
        """Publish the file being written (rename it into place); a later write begins a new file."""
        _publish(self._open)

    def __enter__(self) -> JsonWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _json_column(key: str, value: Any, compress: bool) -> Any:
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    if key == SampleBatch.INFOS and isinstance(value, (list, np.ndarray)):
        return [plain_info(info) if isinstance(info, dict) else info for info in value]
    if isinstance(value, np.ndarray):
        if compress and value.dtype.kind in "biuf":
            return state_codec.encode(value, compress=True)
        return value.tolist()
    return value


def _json_record(batch: SampleBatch | Mapping[str, Any] | MultiAgentBatch, compress: frozenset[str]) -> dict[str, Any]:
    def columns(columns_of: Mapping[str, Any]) -> dict[str, Any]:
        return {key: _json_column(key, value, key in compress) for key, value in columns_of.items()}

    if isinstance(batch, MultiAgentBatch):
        policy_batches = {pid: columns(b) for pid, b in batch.policy_batches.items()}
        return {"type": "MultiAgentBatch", "count": batch.env_steps, "policy_batches": policy_batches}
    return {"type": "SampleBatch", **columns(batch)}


def _json_fallback(value: Any) -> Any:
    """What JSON cannot write as it is: numpy numbers and arrays, tensors; anything else as its text (as RLlib)."""
    if isinstance(value, (np.ndarray, np.generic)):
        return value.tolist()
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().tolist()
    return str(value)


class InputReader(abc.ABC):
    """Where experiences come from, batch by batch: what RLlib's offline readers derive from."""

    @abc.abstractmethod
    def next(self) -> SampleBatch | MultiAgentBatch:
        """The next batch of experiences.

        Returns:
            A SampleBatch, or a MultiAgentBatch of several policies' rows.
        """


class ShuffledInput(InputReader):
    """Another reader's batches in random order, over a sliding window of ``n`` batches (RLlib's ``ShuffledInput``).

    Each :meth:`next` gives a batch drawn at random from the window and puts
    the child's next batch in its place; ``n`` of 0 or 1 passes the batches
    through in order. The rows inside a batch keep their order.

    Args:
        child: the reader whose batches are shuffled.
        n: how many batches the window holds.

    Raises:
        ValueError: ``n`` is negative.
    """

    def __init__(self, child: InputReader, n: int = 0) -> None:
        if n < 0:
            raise ValueError(f"ShuffledInput's window holds n >= 0 batches, not {n}")
        self.child = child
        self.n = n
        self.buffer: list[SampleBatch | MultiAgentBatch] = []

    def next(self) -> SampleBatch | MultiAgentBatch:
        """A batch drawn from the window (filled first), replaced there by the child's next one.

        Returns:
            A batch of the child's.
        """
        if self.n <= 1:
            return self.child.next()
        while len(self.buffer) < self.n:
            self.buffer.append(self.child.next())
        index = random.randrange(self.n)  # Python's generator, as JsonReader's file order: seeded with random.seed
        drawn, self.buffer[index] = self.buffer[index], self.child.next()
        return drawn


class _RefusedColumn(ValueError):
    """A column the reader will not open (RLlib's pickled columns): an error, never a line to skip."""


def _input_files(inputs: Any) -> list[str]:
    if isinstance(inputs, (str, os.PathLike)):
        text = os.fspath(inputs)
        if not _is_local(text):
            raise ValueError(f"JsonReader reads local files; {text!r} is a URI (download the files, then read them)")
        text = os.path.abspath(os.path.expanduser(text))
        patterns = [os.path.join(text, "*.json"), os.path.join(text, "*.zip")] if os.path.isdir(text) else [text]
        files = [path for pattern in patterns for path in sorted(glob.glob(pattern))]
    elif isinstance(inputs, (list, tuple)):
        files = []
        for item in inputs:
            if not isinstance(item, (str, os.PathLike)):
                raise ValueError(f"JsonReader's inputs are paths; the list holds {item!r} ({type(item).__name__})")
            text = os.path.expanduser(os.fspath(item))
            if not _is_local(text):
                raise ValueError(f"JsonReader reads local files; {text!r} is a URI (download the files, then read them)")
            if glob.has_magic(text):
                files.extend(sorted(glob.glob(text)))
            elif os.path.isdir(text):
                files.extend(sorted(glob.glob(os.path.join(text, "*.json")) + glob.glob(os.path.join(text, "*.zip"))))
            else:
                files.append(text)  # read as given, as RLlib does: a missing one is an error when it is opened
    else:
        raise ValueError(
            f"JsonReader's inputs are a path, a glob pattern or a folder, or a list of them; got {type(inputs).__name__}"
        )
    if not files:
        raise ValueError(f"JsonReader: no files found matching {inputs!r} (a folder is read for its *.json and *.zip files)")
    return files


def _open_input(path: str) -> IO[str]:
    """A file to read lines from; a ``.zip`` gives the JSON file inside it (named as the zip, or its only one)."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"JsonReader: the input file {path} does not exist")
    if not path.endswith(".zip"):
        return open(path, encoding="utf-8")
    with zipfile.ZipFile(path) as archive:
        names = [n for n in archive.namelist() if n.endswith(".json")]
        wanted = os.path.basename(path)[: -len(".zip")] + ".json"
        name = wanted if wanted in names else names[0] if len(names) == 1 else None
        if name is None:
            raise ValueError(f"JsonReader: {path} should hold one JSON file ({wanted}); it holds {archive.namelist()}")
        return io.StringIO(archive.read(name).decode("utf-8"))


def _config_value(config: Any, name: str, default: Any) -> Any:
    if config is None:
        return default
    getter = getattr(config, "get", None)
    return getter(name, default) if callable(getter) else getattr(config, name, default)


def _array(key: str, value: Any) -> Any:
    if isinstance(value, str):
        raise _RefusedColumn(
            f"column {key!r} is one string, as RLlib packs a compressed column (LZ4 over a pickle), which corral never "
            "opens; write the file again with compress_columns=[] (RLlib: output_compress_columns=[])"
        )
    if isinstance(value, dict):
        decoded = state_codec.decode(value)
        return decoded if isinstance(decoded, dict) else np.asarray(decoded)
    if key == SampleBatch.INFOS and isinstance(value, list):
        infos = np.empty(len(value), dtype=object)
        infos[:] = value
        return infos
    try:
        return np.array(value)
    except ValueError:
        raise ValueError(f"column {key!r}: its rows differ in shape") from None


def _batch_of(columns: Mapping[str, Any]) -> SampleBatch:
    # RLlib's files before Ray 2.3 name an episode's end "dones"; RLlib's reader takes it as "terminateds"
    renamed = {("terminateds" if key == "dones" else key): value for key, value in columns.items()}
    return SampleBatch({key: _array(key, value) for key, value in renamed.items()})


class JsonReader(InputReader):
    """Reads batches from RLlib-layout JSON-lines files (what :class:`JsonWriter` writes), as RLlib's reader does.

    Each :meth:`next` reads lines until it has the config's
    ``train_batch_size`` rows (1 without a config: one line), shared among the
    remote env runners; the files are taken in random order (Python's
    ``random``), starting, for an env runner, at one picked by its index; the
    reading never ends, it goes on with another file. Empty and corrupt lines
    are skipped, with a log message. Columns come back as arrays (``infos`` as
    an object array of dicts; ``dones`` as ``terminateds``); actions are not
    clipped or normalised, and batches are not postprocessed.

    Args:
        inputs: a file, a glob pattern or a folder (its ``*.json`` and ``*.zip`` files),
            or a list of them; local paths.
        ioctx: the I/O context (its config's ``train_batch_size`` and number of env
            runners, its runner's index). Default: a fresh one (no config: a line per call).

    Raises:
        ValueError: ``inputs`` is a URI, of another type, or names no file.
    """

    def __init__(self, inputs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], ioctx: IOContext | None = None) -> None:
        self.ioctx = ioctx or IOContext()
        config = self.ioctx.config
        size = _config_value(config, "train_batch_size", 1)
        self.batch_size = int(size) if isinstance(size, (int, float)) and not isinstance(size, bool) and size > 0 else 1
        runners = _config_value(config, "num_env_runners", None)
        runners = _config_value(config, "num_workers", 0) if runners is None else runners
        if isinstance(runners, int) and runners > 0:
            self.batch_size = max(math.ceil(self.batch_size / runners), 1)
        self.files = _input_files(inputs)
        self.cur_file: IO[str] | None = None
        self._cur_path: str | None = None

    def next(self) -> SampleBatch | MultiAgentBatch:
        """The next batch: whole lines until it holds ``batch_size`` rows, joined.

        Returns:
            A SampleBatch, or a MultiAgentBatch where the lines hold several policies' rows.

        Raises:
            ValueError: a hundred lines in a row were empty or corrupt, or every file is empty;
                a record that is no batch; a column packed by RLlib (LZ4 over a pickle).
            FileNotFoundError: a listed file does not exist.
        """
        batches: list[SampleBatch | MultiAgentBatch] = []
        count = 0
        while count < self.batch_size:
            batch = self._try_parse(self._next_line())
            tries = 0
            while batch is None and tries < _MAX_SKIPS:
                tries += 1
                batch = self._try_parse(self._next_line())
            if batch is None:
                raise ValueError(f"JsonReader: no valid experience batch in {_MAX_SKIPS} lines of {self._cur_path}")
            count += batch.env_steps if isinstance(batch, MultiAgentBatch) else batch.count
            batches.append(batch)
        return concat_samples(batches)

    def read_all_files(self) -> Iterator[SampleBatch | MultiAgentBatch]:
        """Every batch of every file once, in the files' order (a file ends at its first empty or corrupt line).

        Yields:
            One SampleBatch or MultiAgentBatch per line.
        """
        for path in self.files:
            with _open_input(path) as file:
                self._cur_path = path
                for line in file:
                    batch = self._try_parse(line)
                    if batch is None:
                        break
                    yield batch

    def _try_parse(self, line: str) -> SampleBatch | MultiAgentBatch | None:
        line = line.strip()
        if not line:
            return None
        try:
            batch = self._from_json(line)
        except _RefusedColumn as exc:
            raise ValueError(f"JsonReader: {self._cur_path}: {exc}") from None
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            logger.warning("JsonReader: ignoring a corrupt record in %s: %s", self._cur_path, exc)
            return None
        empty = not any(b.count for b in batch.policy_batches.values()) if isinstance(batch, MultiAgentBatch) else not batch.count
        return None if empty else batch

    def _from_json(self, line: str) -> SampleBatch | MultiAgentBatch:
        record = json.loads(line)
        if not isinstance(record, dict) or "type" not in record:
            raise ValueError("the JSON record has no 'type' field")
        kind = record.pop("type")
        if kind == "SampleBatch":
            policies = getattr(self.ioctx.worker, "policy_map", None)
            if policies is not None and len(policies) != 1:
                raise ValueError(f"a single-agent SampleBatch, but the env runner has {len(policies)} policies")
            return _batch_of(record)
        if kind == "MultiAgentBatch":
            policy_batches = {str(pid): _batch_of(columns) for pid, columns in record["policy_batches"].items()}
            return MultiAgentBatch(policy_batches, int(record["count"]))
        raise ValueError(f"the record's type is {kind!r}, not 'SampleBatch' or 'MultiAgentBatch'")

    def _next_line(self) -> str:
        if self.cur_file is None:
            self.cur_file = self._next_file()
        line = self.cur_file.readline()
        tries = 0
        while not line and tries < _MAX_SKIPS:
            tries += 1
            self.cur_file.close()
            self.cur_file = self._next_file()
            line = self.cur_file.readline()
        if not line:
            raise ValueError(f"JsonReader: every file read is empty: {self.files}")
        return line

    def _next_file(self) -> IO[str]:
        worker = self.ioctx.worker
        if self.cur_file is None and worker is not None:  # the first file: each env runner starts at a different one
            total = getattr(worker, "num_workers", 0) or 1
            path = self.files[round((len(self.files) - 1) * (worker.worker_index / total))]
        else:
            path = random.choice(self.files)
        self._cur_path = path
        return _open_input(path)
