"""Result files of an experiment folder: params.json, result.json, progress.csv, TensorBoard.

Written by the algorithm itself, so training from Python produces the same
folder as the CLI. TensorBoard events come from tensorboardX (a small,
well-kept writer that needs no TensorFlow); it is imported only when the first
result is written.
"""

from __future__ import annotations

import csv
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from corral.core.contracts.rllib_compat import NOOP_LOGGERS as NOOP_LOGGERS  # where the config reads it
from corral.core.results import finite_number, without_rllib_copies


def default_storage_path(storage_path: str | None) -> Path:
    """``storage_path``, else ``$CORRAL_RESULTS_DIR``, else ``~/corral_results``."""
    return Path(storage_path or os.environ.get("CORRAL_RESULTS_DIR") or "~/corral_results").expanduser()


def new_experiment_dir(storage_path: str | None, algo_name: str, env_name: str) -> Path:
    """A fresh ``<ALGO>_<ENV>_<timestamp>[_<n>]`` folder under the storage path.

    Creating the folder is the test of freshness, so two runs started in the
    same second (parallel processes, Tune trials) get different folders.

    Args:
        storage_path: the folder experiments go into; None means ``$CORRAL_RESULTS_DIR``,
            else ``~/corral_results`` (created if missing).
        algo_name: the algorithm's name, used as it is.
        env_name: the environment's name; characters other than letters, digits,
            ``-``, ``_`` and ``.`` become ``_``.

    Returns:
        The new, empty folder.
    """
    root = default_storage_path(storage_path)
    stamp = time.strftime("%Y-%m-%d_%H-%M-%S")
    safe_env = "".join(c if c.isalnum() or c in "-_." else "_" for c in env_name)
    base = root / f"{algo_name}_{safe_env}_{stamp}"
    root.mkdir(parents=True, exist_ok=True)
    path, n = base, 1
    while True:
        try:
            path.mkdir()
            return path
        except FileExistsError:
            n += 1
            path = base.with_name(f"{base.name}_{n}")


def flatten(result: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts to ``a/b/c`` keys (lists and other non-scalars are dropped).

    Args:
        result: one iteration's result, dicts nested in dicts.
        prefix: put before every key (``"info/"`` when called for a nested dict).

    Returns:
        A flat dict of the ``int``, ``float``, ``str``, ``bool`` and None values, numpy
        number and boolean scalars as the Python numbers they hold; other values (lists,
        arrays) are left out.
    """
    flat: dict[str, Any] = {}
    for key, value in result.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, name + "/"))
        elif isinstance(value, (int, float, str, bool)) or value is None:
            flat[name] = value
        elif isinstance(value, np.generic) and value.dtype.kind in "biuf":
            flat[name] = value.item()  # a metric a callback computed with numpy (np.float32, np.int64, np.bool_)
    return flat


def _json_value(value: Any) -> Any:
    """What ``json.dumps`` writes for a value it cannot: numpy scalars as numbers, anything else as its ``str``."""
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        return value.item()
    return str(value)


def finite_metrics(flat: dict[str, Any]) -> dict[str, float]:
    """What a tracker can plot of a flattened result: its finite numbers by key (NaN, inf, bools and text left out).

    Args:
        flat: a result as :func:`flatten` gives it.

    Returns:
        The numbers as floats, by key.
    """
    return {key: number for key, value in flat.items() if (number := finite_number(value)) is not None}


def tensorboard_step(result: dict[str, Any], fallback: int) -> int:
    """The x-axis value of a result in TensorBoard: env steps sampled, so runs of different algorithms line up.

    An offline run samples nothing: its env steps trained; failing both, the iteration (or ``fallback``).

    Args:
        result: a train() result.
        fallback: the step when the result has none of those counters.

    Returns:
        The global step to write the result's scalars at.
    """
    for key in ("num_env_steps_sampled", "num_env_steps_trained", "training_iteration"):
        value = result.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return fallback


class ResultWriter:
    """Appends each iteration's result to result.json, progress.csv and TensorBoard."""

    def __init__(self, logdir: Path, params: dict[str, Any], tensorboard: bool = True) -> None:
        self.logdir = logdir
        (logdir / "params.json").write_text(json.dumps(params, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        self._rows: list[dict[str, Any]] = []
        self._columns: list[str] = []
        self._tensorboard = tensorboard
        self._tb: Any = None

    def write(self, result: dict[str, Any]) -> None:
        """Record one iteration's result (without the copies it holds for RLlib's scripts: :func:`without_rllib_copies`)."""
        result = without_rllib_copies(result)
        adopted = not self._rows and self._adopt_earlier_rows(int(result.get("training_iteration", 1)))
        with open(self.logdir / "result.json", "a", encoding="utf-8") as f:
            f.write(json.dumps(result, default=_json_value) + "\n")
        flat = flatten(result)
        self._rows.append(flat)
        new_columns = [k for k in flat if k not in self._columns]
        if new_columns or not self._columns or adopted:
            # A key appeared (evaluation, say), or a resumed run dropped rows: rewrite the file.
            self._columns.extend(new_columns)
            self._write_csv(self._rows, "w")
        else:
            self._write_csv([flat], "a")
        if self._tensorboard:
            self._write_tensorboard(flat, tensorboard_step(result, len(self._rows)))

    def _adopt_earlier_rows(self, iteration: int) -> bool:
        """A run resumed in its folder (``corral train --resume``): keep the rows of the iterations before ``iteration``.

        Rows from after the checkpoint it resumed from are dropped, so each iteration
        appears once; the files are rewritten whole, by way of a temporary file.

        Returns:
            Whether there were earlier files.
        """
        results = self.logdir / "result.json"
        if not results.exists():
            return False
        kept = []
        for line in results.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue  # a line cut short by a crash
            if isinstance(row, dict) and isinstance(row.get("training_iteration"), int) and row["training_iteration"] < iteration:
                kept.append(row)
        temporary = results.with_name(".result.json.tmp")
        temporary.write_text("".join(json.dumps(row) + "\n" for row in kept), encoding="utf-8")
        temporary.replace(results)
        for row in kept:
            flat = flatten(row)
            self._rows.append(flat)
            self._columns.extend(k for k in flat if k not in self._columns)
        return True

    def _write_csv(self, rows: list[dict[str, Any]], mode: str) -> None:
        with open(self.logdir / "progress.csv", mode, newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=self._columns, extrasaction="ignore")
            if mode == "w":
                writer.writeheader()
            writer.writerows(rows)

    def _write_tensorboard(self, flat: dict[str, Any], step: int) -> None:
        if self._tb is None:
            from tensorboardX import SummaryWriter

            self._tb = SummaryWriter(str(self.logdir), flush_secs=30)
        for key, value in finite_metrics(flat).items():
            self._tb.add_scalar(f"corral/{key}", value, step)
        self._tb.flush()

    def close(self) -> None:
        """Flush and close the TensorBoard writer."""
        if self._tb is not None:
            self._tb.close()
            self._tb = None


class NoopLogger:
    """A result logger that writes nothing: ``logger_config={"type": "NoopLogger"}`` (Ray Tune's name)."""

    def __init__(self, config: dict[str, Any] | None = None, logdir: str | None = None) -> None:
        """Take what every result logger is made with, and keep none of it."""

    def on_result(self, result: dict[str, Any]) -> None:
        """Write nothing."""


class CustomResultLogger:
    """A user's result logger in place of :class:`ResultWriter`: RLlib's ``logger_creator`` or ``logger_config`` type.

    It has Ray Tune's Logger interface: ``on_result(result)`` for each iteration,
    and ``flush()`` and ``close()`` (where it has them) when the algorithm stops.
    """

    def __init__(self, logger: Any) -> None:
        """Wrap ``logger``, an object with ``on_result(result)``."""
        self.logger = logger

    def write(self, result: dict[str, Any]) -> None:
        """Hand one iteration's result to the logger."""
        self.logger.on_result(result)

    def close(self) -> None:
        """Flush and close the logger, where it has those methods."""
        for name in ("flush", "close"):
            method = getattr(self.logger, name, None)
            if callable(method):
                method()
