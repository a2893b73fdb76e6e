"""The ``corral`` command: ``train``, ``serve``, ``evaluate`` (``rollout``), ``export``, ``plot``, ``list``, ``new-plugin``.

One module per command, each adding its flags with ``add_parser``. A
:class:`~corral.errors.CorralError` (or malformed JSON/YAML) is the user's
mistake: it is printed as one line and the exit status is 2. Anything else is a
bug and keeps its traceback. ``corral list`` imports neither torch nor any
plugin (unless ``--check``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from corral.cli import evaluate, export, listing, new_plugin, plot, serve, train
from corral.errors import CorralError


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``corral`` console script; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(_normalise(list(sys.argv[1:] if argv is None else argv)))
    try:
        return int(args.handler(args) or 0)
    except CorralError as exc:
        print(f"corral: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("corral: interrupted", file=sys.stderr)
        return 130


def _normalise(argv: list[str]) -> list[str]:
    """Accept ``rollout`` for ``evaluate`` and ``train file X`` for ``train -f X``, as the seeds' docs do."""
    if argv[:1] == ["rollout"]:
        argv[0] = "evaluate"
    if argv[:2] == ["train", "file"]:
        argv[1] = "-f"
    return argv


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="corral", description="Train and evaluate reinforcement-learning agents.")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in (train, serve, evaluate, export, plot, listing, new_plugin):
        command.add_parser(sub)
    return parser
