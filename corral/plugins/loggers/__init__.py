"""Loggers that send every run's config and results to an experiment tracker, as hook plugins.

Each is registered in entry-point group ``corral.hooks`` like a third-party
hook plugin and stays idle unless the run's ``logger_config`` names it
(``{"mlflow": {...}}`` or ``{"wandb": {...}}``, RLlib's form); its library is
an extra, imported only then. A run's metrics are its numeric results, nested
keys joined by ``/``, written against env steps as TensorBoard's are.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from corral.core.persistence.loggers import finite_metrics, flatten, tensorboard_step
from corral.errors import ConfigError

if TYPE_CHECKING:
    from corral.core.training.algorithm import Algorithm


def tracker_settings(algorithm: Algorithm, name: str, allowed: tuple[str, ...]) -> dict[str, Any] | None:
    """The run's settings for the tracker ``name`` (``logger_config[name]``), or None when it is not asked for.

    Args:
        algorithm: the run.
        name: ``"mlflow"`` or ``"wandb"``.
        allowed: the keys the settings may have.

    Returns:
        The settings (a dict; ``True`` counts as ``{}``), or None.

    Raises:
        ConfigError: the settings are not a dict or have a key not in ``allowed``.
    """
    settings = (algorithm.config.logger_config or {}).get(name)
    if settings is None or settings is False:
        return None
    if settings is True:
        return {}
    if not isinstance(settings, dict):
        raise ConfigError(f"logger_config {name!r} must be a dict of settings ({', '.join(allowed)}), not {settings!r:.80}")
    unknown = sorted(set(settings) - set(allowed))
    if unknown:
        raise ConfigError(f"logger_config {name!r} has no setting {unknown[0]!r}; its settings are {', '.join(allowed)}")
    return settings


def tracker_metrics(algorithm: Algorithm, result: dict[str, Any]) -> tuple[dict[str, float], int]:
    """What a tracker logs of an iteration: its finite numbers, nested keys joined by ``/``, and the step (env steps).

    Args:
        algorithm: the run.
        result: the iteration's result.

    Returns:
        The metrics by key, and the step to log them at (TensorBoard's).
    """
    return finite_metrics(flatten(result)), tensorboard_step(result, algorithm.iteration)


def import_tracker(module: str, extra: str) -> Any:
    """Import the tracker's library, or say which extra installs it.

    Args:
        module: the module to import (``"wandb"``, ``"mlflow.tracking"``).
        extra: corral's extra that installs it.

    Returns:
        The module.

    Raises:
        ConfigError: the library is not installed.
    """
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigError(f"logger_config asks for {module}, which is not installed: pip install 'corral[{extra}]'") from None
