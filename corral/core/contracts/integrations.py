"""Asking the installed integrations: one pluggy manager of them per process, rebuilt when they change.

The seams are the specs in :mod:`corral.core.contracts.integration_specs`;
the integrations are found through the registry (group ``corral.integrations``),
loaded on the first question, never at import.
"""

from __future__ import annotations

import threading
from typing import Any

import pluggy

from corral.core.contracts import integration_specs
from corral.errors import ConfigError

_lock = threading.Lock()
_built: tuple[tuple[int, ...], pluggy.PluginManager] | None = None


def integration_hooks() -> Any:
    """The seams' hook caller: ``integration_hooks().<spec>(**arguments)`` asks every integration that implements it.

    Returns:
        The manager's hook relay (a pluggy ``HookRelay``), with one attribute per spec.
    """
    global _built
    import corral.registry as registry  # the registry reads entry points; it imports nothing of the core

    loaded = registry.get_integrations()
    key = tuple(id(obj) for _, obj in loaded)  # an in-process registration or a refresh changes it
    with _lock:
        if _built is None or _built[0] != key:
            manager = pluggy.PluginManager(integration_specs.PROJECT)
            manager.add_hookspecs(integration_specs)
            for info, obj in loaded:
                manager.register(obj, name=f"{info.name} ({info.dist})")
            _built = (key, manager)
        return _built[1].hook


def implemented(seam: str) -> bool:
    """Whether an installed integration implements ``seam``: asked before any work starts, where the user needs it.

    Args:
        seam: the spec's name in :mod:`corral.core.contracts.integration_specs`.

    Returns:
        True where at least one integration implements it.
    """
    return bool(getattr(integration_hooks(), seam).get_hookimpls())


def required_answer(seam: str, missing: ConfigError, **arguments: Any) -> Any:
    """Ask ``seam`` for what the user's config asked for; no answer from any integration is ``missing``.

    Args:
        seam: the spec's name (a ``firstresult`` one).
        missing: the error that says which integration would answer.
        **arguments: the spec's arguments.

    Returns:
        The first integration's answer.

    Raises:
        ConfigError: ``missing``, where every integration answered None (or none implements the seam).
    """
    found = getattr(integration_hooks(), seam)(**arguments)
    if found is None:
        raise missing
    return found
