"""``corral list``: the installed plugins, each with the first line of its docstring, or the tuned examples shipped with corral.

Imports neither torch nor any plugin (unless ``--check``): descriptions are read from the plugins' source.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import Any

from corral.cli.experiments import TUNED_EXAMPLES, experiments_from_file
from corral.cli.stop import BUDGET_KEYS
from corral.registry.descriptions import static_description


def add_parser(sub: Any) -> None:
    """The ``list`` command's flags."""
    listing = sub.add_parser("list", help="installed algorithms, explorations, off-policy estimators and hook plugins")
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    listing.add_argument(
        "--examples", action="store_true", help="the tuned examples shipped with corral, with the reward and budget of each"
    )
    listing.add_argument(
        "--check", action="store_true", help="import every plugin to find broken and incompatible ones (slower: imports torch)"
    )
    listing.set_defaults(handler=_list)


def _list(args: argparse.Namespace) -> int:
    if args.examples:
        return _list_examples(args.json)
    from corral import registry

    sections = {
        "algorithms": registry.list_algorithms(args.check),
        "explorations": registry.list_explorations(args.check),
        "off-policy estimators": registry.list_estimators(args.check),
        "hook plugins": registry.list_hook_plugins(args.check),
        "integrations": registry.list_integrations(args.check),
    }
    described = {title: [(p, static_description(p.value)) for p in plugins] for title, plugins in sections.items()}
    if args.json:
        as_dicts = {k.replace(" ", "_"): [{**asdict(p), "description": d} for p, d in v] for k, v in described.items()}
        print(json.dumps(as_dicts, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    # Piped output (grep, a file) gets room for whole names and entry points instead of rich's 80-column cut.
    console = Console(width=None if sys.stdout.isatty() else 320)
    for title, plugins_described in described.items():
        table = Table(title=title, title_justify="left")
        table.add_column("name")
        table.add_column("description", max_width=110, no_wrap=True, overflow="ellipsis")  # a plugin per line, for grep
        for column in ("provider", "version", "entry point", "status"):
            table.add_column(column)
        for p, description in plugins_described:
            status = p.status if not p.error else f"{p.status}: {p.error.splitlines()[0]}"
            style = {"broken": "red", "incompatible": "red", "conflict": "yellow", "shadowed": "yellow", "blocked": "dim"}.get(
                p.status, ""
            )
            shown = f"[{style}]{status}[/{style}]" if style else status
            table.add_row(p.name, description or "", p.dist or "", p.version or "", p.value, shown)
        if not plugins_described:
            table.add_row("(none)", "", "", "", "", "")
        console.print(table)
    return 0


def _list_examples(as_json: bool) -> int:
    """Each shipped tuned example's experiments: the name to run it by, algorithm, env, and its stop block."""
    rows = []
    for file in sorted(TUNED_EXAMPLES.glob("*.yaml")):
        for exp in experiments_from_file(str(file)):
            stop = exp["stop"]
            reward = {key: value for key, value in stop.items() if key not in BUDGET_KEYS}
            budget = {key: value for key, value in stop.items() if key in BUDGET_KEYS}
            rows.append({"name": file.stem, "algorithm": exp["run"], "env": exp["env"], "reward": reward, "budget": budget})
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title="tuned examples (corral train -f NAME)", title_justify="left")
    for column in ("name", "algorithm", "env", "reaches", "within"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row["name"],
            row["algorithm"],
            str(row["env"]),
            ", ".join(f"{key} {value:g}" for key, value in row["reward"].items()),
            ", ".join(f"{key} {value:,}" for key, value in row["budget"].items()),
        )
    Console(width=None if sys.stdout.isatty() else 240).print(table)
    return 0
