"""What the learner benchmarks share: timing updates on one sampled batch, and writing a result file.

``learners.py``, ``learner_step_cost.py`` and ``torch_compile.py`` import it
(each runs as ``python benchmarks/NAME.py``, so this folder is on the path).
"""

from __future__ import annotations

import copy
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def timed_updates(config: Any, repeats: int) -> list[tuple[float, dict[str, Any]]]:
    """Build ``config``'s algorithm, sample one train batch and learn on it ``repeats`` times from the same state.

    The policy's state is put back before each update, so every update does
    the same work.

    Args:
        config: the algorithm's config.
        repeats: how many updates to time.

    Returns:
        Each update's seconds and the default policy's stats, in order.
    """
    algo = config.build()
    try:
        batch = algo.sample(algo.config.train_batch_size)
        state = algo.get_policy().get_state()
        timed = []
        for _ in range(repeats):
            algo.get_policy().set_state(state)
            start = time.perf_counter()
            stats = algo.learn_on_batch(copy.deepcopy(batch))["default_policy"]
            timed.append((time.perf_counter() - start, stats))
        return timed
    finally:
        algo.stop()


def write_result(name: str, load_at_start: float, **figures: Any) -> None:
    """Write ``results/NAME.json``: the date, the machine, the load average at start and end, and ``figures``.

    Args:
        name: the file's name, without ``.json``.
        load_at_start: the 1-minute load average when the benchmark started.
        **figures: the measured figures.
    """
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "load_average_at_start": load_at_start,
        "load_average_at_end": os.getloadavg()[0],
        **figures,
    }
    out = RESULTS / f"{name}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")
