"""Find plugins' entry points without importing them.

Discovery reads only installed distributions' metadata (``entry_points.txt``),
so ``corral list`` can show every plugin, even a broken one, without importing
torch or any plugin module. Loading happens later, one entry point at a time,
in :mod:`corral.registry.plugin_registry`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import importlib_metadata

PluginStatus = Literal["ok", "not loaded", "broken", "incompatible", "blocked", "conflict", "shadowed"]
"""Where a plugin stands; shown by ``corral list``.

* ``"ok"``: loaded (or registered in-process) and usable.
* ``"not loaded"``: discovered, not imported yet (``corral list --check`` imports).
* ``"broken"``: importing it failed, or it is not what its group expects.
* ``"incompatible"``: written for another corral: its distribution's ``corral``
  requirement excludes the installed corral, or its ``corral_api`` is not supported.
* ``"blocked"``: named in ``CORRAL_DISABLE_PLUGINS``, so never imported.
* ``"conflict"``: another distribution registers the same name.
* ``"shadowed"``: a plugin registered in-process under the same name is used instead.
"""

IN_PROCESS = "<in-process>"
"""The ``dist`` of plugins registered with ``register_*`` rather than installed."""

DISABLE_ENV_VAR = "CORRAL_DISABLE_PLUGINS"
"""Comma-separated entry-point names the user wants never to be imported."""


@dataclass(frozen=True)
class PluginInfo:
    """One plugin as the user sees it in ``corral list``.

    Frozen, because it is a snapshot: the registry builds a new one whenever it
    is asked, so a caller cannot corrupt the registry's state through it.

    Attributes:
        name: The registered name, spelled as the distribution spells it.
        group: The entry-point group, e.g. ``"corral.algorithms"``.
        dist: The distribution that provides it, or ``"<in-process>"``.
        version: The distribution's version (``""`` for in-process plugins).
        value: Where it lives, ``"module:attr"``.
        status: One of :data:`PluginStatus`.
        error: Why it is not usable (for a broken plugin, the exception type
            and first line of its message); None when it is.
    """

    name: str
    group: str
    dist: str
    version: str
    value: str
    status: PluginStatus
    error: str | None = None


@dataclass(frozen=True)
class DiscoveredEntryPoint:
    """An entry point together with the distribution that declares it.

    Kept apart from :class:`PluginInfo` because it carries the (unloaded)
    entry point object, which only the registry should touch.

    Attributes:
        name: The entry point's name.
        dist: The declaring distribution's name.
        version: The declaring distribution's version.
        value: The entry point's value, ``"module:attr"``.
        entry_point: The entry point itself, to be loaded on demand.
        incompatible: Why the distribution's ``corral`` requirement excludes
            the installed corral, or None.
    """

    name: str
    dist: str
    version: str
    value: str
    entry_point: Any
    incompatible: str | None = None


def normalize_dist_name(name: str) -> str:
    """Normalize a distribution name as PEP 503 does.

    Users type ``corral_fastppo`` or ``Corral-FastPPO`` for the same
    distribution; comparing normalized names accepts both.

    Args:
        name: A distribution name as written anywhere.

    Returns:
        The name lower-cased, with runs of ``-``, ``_`` and ``.`` made one ``-``.
    """
    return re.sub(r"[-_.]+", "-", name).lower()


def disabled_names(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """Read the entry-point names that ``CORRAL_DISABLE_PLUGINS`` blocks.

    This is the user's kill switch for a plugin that misbehaves at import, so
    it is forgiving: case-insensitive, whitespace and empty items ignored.

    Args:
        environ: Where to read the variable; ``os.environ`` if None.

    Returns:
        The blocked names, lower-cased.
    """
    raw = (os.environ if environ is None else environ).get(DISABLE_ENV_VAR, "")
    return frozenset(part.strip().lower() for part in raw.split(",") if part.strip())


def discover(group: str) -> list[DiscoveredEntryPoint]:
    """List a group's entry points from installed metadata, importing nothing.

    The same distribution can be seen more than once (for example when its
    directory is on ``sys.path`` twice); such repeats are one plugin, not a
    conflict, so they are dropped here, keeping the first one found, which is
    the one Python would import.

    Args:
        group: The entry-point group, e.g. ``"corral.algorithms"``.

    Returns:
        One record per (distribution, case-insensitive name), in discovery order.
    """
    corral_version = _installed_corral_version()
    return _dedupe(_describe(ep, corral_version) for ep in importlib_metadata.entry_points(group=group))


def _describe(ep: Any, corral_version: str | None) -> DiscoveredEntryPoint:
    dist = getattr(ep, "dist", None)
    dist_name = (getattr(dist, "name", None) or "unknown") if dist is not None else "unknown"
    version = (getattr(dist, "version", None) or "unknown") if dist is not None else "unknown"
    incompatible = None
    if dist is not None and corral_version is not None and normalize_dist_name(dist_name) != "corral":
        incompatible = corral_requirement_problem(dist.requires or [], corral_version)
    return DiscoveredEntryPoint(
        name=ep.name, dist=dist_name, version=version, value=ep.value, entry_point=ep, incompatible=incompatible
    )


def corral_requirement_problem(requires: Iterable[str], corral_version: str) -> str | None:
    """Why a distribution's ``corral`` requirement excludes ``corral_version``, or None.

    Read from metadata, so an incompatible plugin is reported without being
    imported. Requirements behind an extra (``; extra == "x"``) are ignored:
    they do not apply to a plain install.

    Args:
        requires: The distribution's ``Requires-Dist`` lines.
        corral_version: The installed corral's version.
    """
    from packaging.requirements import InvalidRequirement, Requirement

    for line in requires:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if normalize_dist_name(requirement.name) != "corral":
            continue
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        if not requirement.specifier.contains(corral_version, prereleases=True):
            return f"requires corral{requirement.specifier}, but corral {corral_version} is installed"
    return None


def _installed_corral_version() -> str | None:
    try:
        return importlib_metadata.version("corral")
    except importlib_metadata.PackageNotFoundError:  # running from a source tree that is not installed
        return None


def _dedupe(found: Iterable[DiscoveredEntryPoint]) -> list[DiscoveredEntryPoint]:
    seen: set[tuple[str, str]] = set()
    unique = []
    for record in found:
        key = (normalize_dist_name(record.dist), record.name.lower())
        if key not in seen:
            seen.add(key)
            unique.append(record)
    return unique
