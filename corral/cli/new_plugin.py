"""``corral new-plugin``: write a new algorithm plugin distribution, ready to install and test."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    """The ``new-plugin`` command's flags."""
    scaffold = sub.add_parser("new-plugin", help="write a new algorithm plugin distribution, ready to install and test")
    scaffold.add_argument("name", help="the algorithm's name and class name, e.g. MyPG")
    scaffold.add_argument("--dir", default=".", help="where to create the corral-<name> folder (default: here)")
    scaffold.set_defaults(handler=_new_plugin)


def _new_plugin(args: argparse.Namespace) -> int:
    from corral.scaffold import new_plugin

    path = new_plugin(args.name, args.dir)
    print(
        f'Wrote {path}. Next:\n  pip install -e "{path}[test]"\n  python -m pytest {path}\n'
        f"  corral train --algo {args.name} --env CartPole-v1"
    )
    return 0
