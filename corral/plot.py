"""Learning curves of finished or running experiments, read from their ``progress.csv`` (``corral plot``).

Each experiment folder's ``progress.csv`` holds one row per iteration; a curve
is one result key (``episode_reward_mean`` by default) against env steps,
wall-clock time or iterations, one line per run, so two algorithms or seeds
compare in one picture. matplotlib (the ``viz`` extra) is imported only here.
"""

from __future__ import annotations

import csv
import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from corral.core.results import finite_number
from corral.errors import ConfigError

VIZ_EXTRA = "pip install 'corral[viz]'"
"""how to install what plotting needs (matplotlib; TensorBoard comes with it)"""

X_AXES = {
    "env_steps": ("num_env_steps_sampled", "env steps"),
    "time": ("time_total_s", "time (s)"),
    "iteration": ("training_iteration", "iteration"),
}
"""the x axes ``corral plot --x`` offers: the progress.csv column each reads, and its label"""


@dataclass(frozen=True)
class Curve:
    """One run's points: its label (the experiment folder's name), x and y, without the rows where y is NaN or missing."""

    label: str
    x: list[float]
    y: list[float]


def check_matplotlib() -> None:
    """Refuse, before any work, to plot without matplotlib.

    Raises:
        ConfigError: matplotlib is not installed (naming the extra).
    """
    if importlib.util.find_spec("matplotlib") is None:
        raise ConfigError(f"plotting needs matplotlib: {VIZ_EXTRA}")


def find_runs(folders: Sequence[str | Path]) -> list[Path]:
    """The experiment folders to plot: each folder given that holds a progress.csv, or the runs inside it.

    Args:
        folders: experiment folders, or folders of them (a storage path such as ``~/corral_results``).

    Returns:
        The experiment folders, in the order given (those inside a folder by name).

    Raises:
        ConfigError: a folder is missing or holds no run.
    """
    runs: list[Path] = []
    for given in folders:
        folder = Path(given).expanduser()
        if (folder / "progress.csv").is_file():
            runs.append(folder)
            continue
        inside = sorted(p.parent for p in folder.glob("*/progress.csv")) if folder.is_dir() else []
        if not inside:
            raise ConfigError(f"{str(folder)!r} holds no progress.csv, nor do the folders in it: give experiment folders")
        runs.extend(inside)
    return runs


def read_curve(run: Path, x: str, y: str) -> Curve:
    """Read one run's ``y`` against the x axis ``x`` from its progress.csv.

    Args:
        run: the experiment folder.
        x: one of :data:`X_AXES`.
        y: a progress.csv column (nested result keys joined by ``/``, e.g. ``evaluation/episode_reward_mean``).

    Returns:
        The curve; an offline run (no env steps sampled) is put against env steps trained.

    Raises:
        ConfigError: the run has no column ``y`` (the message lists the numeric ones).
    """
    with open(run / "progress.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    columns = list(rows[0]) if rows else []
    if y not in columns:
        from corral.errors import did_you_mean

        numeric = [c for c in columns if _number(rows[-1].get(c)) is not None] if rows else []
        raise ConfigError(f"{run.name} has no column {y!r}.{did_you_mean(y, numeric)} It has: {', '.join(numeric[:30])}")
    x_column = X_AXES[x][0]
    if x == "env_steps" and rows and not any(_number(row.get(x_column)) for row in rows):
        x_column = "num_env_steps_trained"  # an offline run samples nothing
    points = [(_number(row.get(x_column)), _number(row.get(y))) for row in rows]
    kept = [(a, b) for a, b in points if a is not None and b is not None]
    return Curve(run.name, [a for a, _ in kept], [b for _, b in kept])


def plot_runs(
    folders: Sequence[str | Path], out: str | Path, x: str = "env_steps", y: str = "episode_reward_mean"
) -> list[Curve]:
    """Draw ``y`` against ``x`` for each run into one picture, written to ``out`` (PNG, SVG or PDF by its suffix).

    Args:
        folders: experiment folders, or folders of them.
        out: the picture to write (its folder is created).
        x: ``"env_steps"``, ``"time"`` or ``"iteration"``.
        y: the result key to draw.

    Returns:
        The curves drawn, one per run.

    Raises:
        ConfigError: an unknown axis or file type, a folder without runs, a missing column, or no matplotlib.
    """
    if x not in X_AXES:
        raise ConfigError(f"--x {x!r} is not an axis; use one of {', '.join(X_AXES)}")
    target = Path(out).expanduser()
    if target.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise ConfigError(f"--out {str(target)!r} must end in .png, .svg or .pdf (the picture's format)")
    check_matplotlib()
    curves = [read_curve(run, x, y) for run in find_runs(folders)]
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.2), dpi=110)
    for curve in curves:
        axes.plot(curve.x, curve.y, label=curve.label, linewidth=1.6)
    axes.set_xlabel(X_AXES[x][1])
    axes.set_ylabel(y)
    axes.grid(alpha=0.3)
    axes.legend(fontsize="small", loc="best")
    figure.tight_layout()
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.stem}.tmp{target.suffix}")  # written whole, or not at all
    figure.savefig(temporary)
    plt.close(figure)
    temporary.replace(target)
    return curves


def _number(text: str | None) -> float | None:
    """A progress.csv cell as a finite float, or None (empty, NaN, or not a number)."""
    try:
        return finite_number(float(text)) if text else None
    except ValueError:
        return None
