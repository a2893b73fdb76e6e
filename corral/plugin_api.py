"""The version of the plugin contract, so a plugin written for another one is reported, not a crash.

A plugin class states the contract it was written for with a class attribute,
``corral_api = 1``. corral bumps :data:`PLUGIN_API_VERSION` when a change to
``corral.core`` would break existing plugins, and lists in
:data:`SUPPORTED_PLUGIN_APIS` the versions it still honours. The registry
checks the attribute when it loads a plugin (``corral list --check`` shows the
result); a distribution's ``corral`` requirement is checked earlier, from its
metadata, without importing it. This module imports nothing, so the registry
can use it without importing torch.
"""

from __future__ import annotations

from typing import Any

PLUGIN_API_VERSION = 1
"""The plugin contract this corral defines; new plugins set ``corral_api`` to it."""

SUPPORTED_PLUGIN_APIS = frozenset({1})
"""Every ``corral_api`` value this corral can load."""


def api_problem(plugin: Any) -> str | None:
    """Why ``plugin`` cannot work with this corral, or None if it can (or does not say).

    A plugin without ``corral_api`` is assumed to follow the current contract:
    nothing else can be known without running it.
    """
    declared = getattr(plugin, "corral_api", None)
    if declared is None or declared in SUPPORTED_PLUGIN_APIS:
        return None
    supported = ", ".join(str(v) for v in sorted(SUPPORTED_PLUGIN_APIS))
    newer = isinstance(declared, int) and declared > PLUGIN_API_VERSION
    advice = "upgrade corral" if newer else "install a release of the plugin written for it"
    return f"written for corral plugin API {declared!r}, but this corral supports API {supported}; {advice}"
