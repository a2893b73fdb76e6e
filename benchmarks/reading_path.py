"""The PPO reading path: which of corral's files run from ``build()`` through one ``train()``, and how long they are.

The README promises a core small enough to read in an afternoon; this counts
what a reader following default PPO on CartPole-v1 would have to open. Every
Python function corral runs in that span is recorded with ``sys.setprofile``;
a file "does real work" when more than ``--min-lines`` of its lines ran.

    python benchmarks/reading_path.py            # prints JSON: files, their lines, lines that ran

Issue 30 (house-2) reports it before and after each step in CONTRIBUTING.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import corral

PACKAGE = Path(corral.__file__).resolve().parent


def main() -> None:
    """Build default PPO, train one iteration under a line tracer, print what ran."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--min-lines", type=int, default=10, help="lines that must run for a file to count as real work")
    args = parser.parse_args()
    ran: dict[str, set[int]] = {}

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        filename = frame.f_code.co_filename
        if filename.startswith(str(PACKAGE)):
            ran.setdefault(filename, set()).add(frame.f_lineno)
            return trace
        return None

    config = corral.get_config("PPO").environment("CartPole-v1").reporting(log_to_tensorboard=False).debugging(seed=0)
    sys.settrace(trace)
    try:
        algo = config.build()
        algo.train()
    finally:
        sys.settrace(None)
    algo.stop()
    files = {Path(name).relative_to(PACKAGE.parent).as_posix(): lines for name, lines in ran.items()}
    sizes = {name: len((PACKAGE.parent / name).read_text(encoding="utf-8").splitlines()) for name in files}
    working = sorted(name for name, lines in files.items() if len(lines) > args.min_lines)
    print(
        json.dumps(
            {
                "files": len(files),
                "lines_of_those_files": sum(sizes.values()),
                "files_doing_real_work": len(working),
                "lines_of_those": sum(sizes[name] for name in working),
                "lines_that_ran": sum(len(lines) for lines in files.values()),
                "by_file": {name: [sizes[name], len(files[name])] for name in sorted(files)},
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
