"""Ray Tune's registry, where RLlib's scripts register envs, models and inputs: read and written where Tune is imported.

A script that registers with Tune has imported it, and so has every Tune
trial; any other process has nothing there, so nothing here imports Ray.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

logger = logging.getLogger("corral")


def tune_imported() -> bool:
    """Whether this process imported Ray Tune's registry (so a Tune run's trials may read what is shared with it)."""
    return "ray.tune.registry" in sys.modules


def tune_registered(category: str, name: str) -> Any | None:
    """What is registered under ``name`` in Tune's ``category``, where Tune is imported; else None.

    Args:
        category: Tune's category (``"env_creator"``, ``"rllib_model"``, ``"rllib_input"``).
        name: the registered name.

    Returns:
        The registered object, or None.
    """
    store = getattr(sys.modules.get("ray.tune.registry"), "_global_registry", None)  # RLlib reads this object too
    if store is None or not store.contains(category, name):
        return None
    return store.get(category, name)


def share_with_tune(category: str, name: str, value: Any, what: str) -> None:
    """Register ``value`` under ``name`` in Tune's ``category`` too, so a Tune run's trials (other processes) find it.

    Something Tune cannot pickle stays known in this process only, with a warning.

    Args:
        category: Tune's category.
        name: the name.
        value: what is registered.
        what: what it is, for the warning (``"custom model"``).
    """
    from ray.tune.registry import _global_registry

    try:
        _global_registry.register(category, name, value)
    except Exception as exc:  # pickling whatever it holds may fail
        logger.warning("%s %r is known in this process only (Ray Tune cannot pickle it: %s)", what, name, exc)
