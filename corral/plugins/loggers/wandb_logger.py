"""Weights & Biases: each run is a W&B run with the config and every numeric result.

``logger_config={"wandb": {...}}`` turns it on; the settings are ``project``
(default ``"corral"``), ``entity``, ``group``, ``name`` (default the experiment
folder's name), ``tags`` and ``mode``: ``"offline"`` when no API key is set
(``WANDB_API_KEY``), so a run never fails for want of one; ``wandb sync``
uploads it later. Its files go into the experiment folder. Needs the ``wandb`` extra.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

from corral.core.contracts.hookspecs import hookimpl
from corral.plugins.loggers import import_tracker, tracker_metrics, tracker_settings

if TYPE_CHECKING:
    from corral.core.training.algorithm import Algorithm

logger = logging.getLogger("corral")

SETTINGS = ("project", "entity", "group", "name", "tags", "mode")
"""what logger_config["wandb"] may hold"""

_runs: dict[int, Any] = {}
"""the open W&B run of each algorithm in this process, by id(algorithm)"""


@hookimpl
def on_algorithm_init(algorithm: Algorithm) -> None:
    """Start the run's W&B run with its config, if ``logger_config`` asks for W&B."""
    settings = tracker_settings(algorithm, "wandb", SETTINGS)
    if settings is None:
        return
    wandb = import_tracker("wandb", "wandb")
    mode = settings.get("mode") or ("online" if os.environ.get("WANDB_API_KEY") else "offline")
    if mode == "offline" and "mode" not in settings:
        logger.info("W&B logs offline (no WANDB_API_KEY); `wandb sync %s/wandb` uploads it", algorithm.logdir)
    _runs[id(algorithm)] = wandb.init(
        project=settings.get("project", "corral"),
        entity=settings.get("entity"),
        group=settings.get("group"),
        name=settings.get("name", algorithm.logdir.name),
        tags=settings.get("tags"),
        mode=mode,
        dir=str(algorithm.logdir),
        config=algorithm.config.to_dict(),
        reinit="create_new",  # several algorithms in one process each get their own run
    )


@hookimpl
def on_train_result(algorithm: Algorithm, result: dict[str, Any]) -> None:
    """Log the iteration's numeric results at its env steps.

    Args:
        algorithm: the run.
        result: the iteration's result.
    """
    run = _runs.get(id(algorithm))
    if run is not None:
        values, step = tracker_metrics(algorithm, result)
        run.log(values, step=step)


@hookimpl
def on_algorithm_stop(algorithm: Algorithm) -> None:
    """Finish the W&B run (an offline one is then complete on disk)."""
    run = _runs.pop(id(algorithm), None)
    if run is not None:
        run.finish()
