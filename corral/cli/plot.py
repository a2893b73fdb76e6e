"""``corral plot``: learning curves of one or several runs, drawn into a picture."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    """The ``plot`` command's flags."""
    plot = sub.add_parser("plot", help="draw learning curves of one or several runs into a picture")
    plot.add_argument("runs", nargs="+", metavar="RUN_DIR", help="experiment folders, or folders of them (~/corral_results)")
    plot.add_argument("--x", choices=("env_steps", "time", "iteration"), default="env_steps", help="the x axis")
    plot.add_argument("--y", default="episode_reward_mean", help="the result key to draw (nested keys joined by '/')")
    plot.add_argument(
        "--out", help="the picture: .png, .svg or .pdf (default RUN_DIR/progress.png for one run, else learning_curves.png)"
    )
    plot.set_defaults(handler=_plot)


def _plot(args: argparse.Namespace) -> int:
    from corral.plot import find_runs, plot_runs

    runs = find_runs(args.runs)
    out = args.out or (runs[0] / "progress.png" if len(runs) == 1 else Path("learning_curves.png"))
    curves = plot_runs(runs, out, x=args.x, y=args.y)
    print(f"Wrote {out}: {args.y} against {args.x} for {len(curves)} run{'s' if len(curves) != 1 else ''}")
    return 0
