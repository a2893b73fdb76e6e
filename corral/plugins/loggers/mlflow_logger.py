"""MLflow: each run is an MLflow run with the config as params and every numeric result as metrics.

``logger_config={"mlflow": {...}}`` turns it on; the settings are
``tracking_uri`` (default a local ``mlruns/`` folder beside the experiment
folders), ``experiment_name`` (default ``"corral"``), ``run_name`` (default the
experiment folder's name) and ``tags``. Needs the ``mlflow`` extra.
"""

from __future__ import annotations

import logging
import os
import re
import time
from typing import TYPE_CHECKING, Any

from corral.core.contracts.hookspecs import hookimpl
from corral.core.environments.envs import env_name
from corral.core.persistence.loggers import flatten
from corral.plugins.loggers import import_tracker, tracker_metrics, tracker_settings

if TYPE_CHECKING:
    from corral.core.training.algorithm import Algorithm

logger = logging.getLogger("corral")

SETTINGS = ("tracking_uri", "experiment_name", "run_name", "tags")
"""what logger_config["mlflow"] may hold"""

BATCH = 100
"""metrics or params per log_batch call (MLflow's limit for params)"""

_runs: dict[int, tuple[Any, str]] = {}
"""the open MLflow run of each algorithm in this process, by id(algorithm): (client, run id)"""


@hookimpl
def on_algorithm_init(algorithm: Algorithm) -> None:
    """Start the run's MLflow run and log its config as params, if ``logger_config`` asks for MLflow."""
    settings = tracker_settings(algorithm, "mlflow", SETTINGS)
    if settings is None:
        return
    tracking = import_tracker("mlflow.tracking", "mlflow")
    from mlflow.entities import Param

    uri = str(settings.get("tracking_uri") or default_tracking_uri(algorithm))
    allow_file_store(uri)
    client = tracking.MlflowClient(tracking_uri=uri)
    name = settings.get("experiment_name", "corral")
    found = client.get_experiment_by_name(name)
    experiment_id = found.experiment_id if found is not None else client.create_experiment(name)
    tags = {"corral.algorithm": algorithm.name, "corral.env": env_name(algorithm.config.env), **settings.get("tags", {})}
    run = client.create_run(experiment_id, run_name=settings.get("run_name", algorithm.logdir.name), tags=tags)
    params = [Param(_key(key), str(value)[:6000]) for key, value in flatten(algorithm.config.to_dict()).items()]
    for start in range(0, len(params), BATCH):
        client.log_batch(run.info.run_id, params=params[start : start + BATCH])
    _runs[id(algorithm)] = (client, run.info.run_id)


def default_tracking_uri(algorithm: Algorithm) -> str:
    """A local ``mlruns/`` beside the run's experiment folder, so every run of a results folder shares one store."""
    return (algorithm.logdir.parent / "mlruns").resolve().as_uri()


def allow_file_store(uri: str) -> None:
    """Let MLflow 3 use the file store a ``file:`` URI (or a plain path) names, as asked.

    MLflow 3 keeps its file store in maintenance mode and refuses it unless
    ``MLFLOW_ALLOW_FILE_STORE`` is set; corral sets it (said once at INFO) only for
    such a URI. A database or server URI is used as it is.
    """
    if "://" in uri and not uri.startswith("file:"):
        return
    if "MLFLOW_ALLOW_FILE_STORE" not in os.environ:
        os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
        logger.info("MLflow logs to its file store at %s (MLFLOW_ALLOW_FILE_STORE set); a tracking_uri can name a database", uri)


@hookimpl
def on_train_result(algorithm: Algorithm, result: dict[str, Any]) -> None:
    """Log the iteration's numeric results at its env steps.

    Args:
        algorithm: the run.
        result: the iteration's result.
    """
    found = _runs.get(id(algorithm))
    if found is None:
        return
    from mlflow.entities import Metric

    client, run_id = found
    values, step = tracker_metrics(algorithm, result)
    now = int(time.time() * 1000)
    metrics = [Metric(_key(key), value, now, step) for key, value in values.items()]
    for start in range(0, len(metrics), BATCH):
        client.log_batch(run_id, metrics=metrics[start : start + BATCH])


@hookimpl
def on_algorithm_stop(algorithm: Algorithm) -> None:
    """Mark the MLflow run finished."""
    found = _runs.pop(id(algorithm), None)
    if found is not None:
        client, run_id = found
        client.set_terminated(run_id, "FINISHED")


def _key(key: str) -> str:
    """A result or config key as MLflow accepts it (letters, digits and ``_-. /``; at most 250 characters)."""
    return re.sub(r"[^\w\-. /]", "_", key)[:250]
