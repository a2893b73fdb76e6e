"""RLlib's ``IOContext``: what a function given as ``offline_data(input_=...)`` is called with, once per env runner."""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass
class IOContext:
    """Which env runner an input is made for, and its config: RLlib's scripts pick a port by ``worker_index``.

    Args:
        log_dir: where the run writes its results, where the runner knows it (None otherwise).
        config: the algorithm's config.
        worker_index: 0 for the local env runner, 1..N for remote ones.
        worker: the env runner itself (RLlib's rollout worker): ``worker.num_workers`` is the number of remote runners.
    """

    log_dir: str | None = None
    config: Any = None
    worker_index: int = 0
    worker: Any = None

    @property
    def input_config(self) -> dict[str, Any]:
        """The config's ``input_config``."""
        return dict(getattr(self.config, "input_config", {}) or {})
