"""Find, list and load corral's plugins: algorithms, explorations, estimators, hook plugins, integrations.

Every algorithm, even corral's own PPO, arrives through an entry point, so the
path third-party plugins take is the one always exercised. Importing this
package and listing plugins imports neither torch nor any plugin: entry points
are read from metadata and loaded one by one, only when looked up.

The registries are built on first use, not at import, so that importing
corral never scans ``sys.path`` and :func:`refresh` can rebuild them after the
environment changed.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import corral.errors as errors
from corral.registry.discovery import DISABLE_ENV_VAR, IN_PROCESS, PluginInfo, PluginStatus
from corral.registry.plugin_registry import PluginRegistry

if TYPE_CHECKING:  # for type checkers only: at run time the registry imports nothing above it
    from corral.core.contracts.config import AlgorithmConfig
    from corral.core.learning.exploration import Exploration
    from corral.core.training.algorithm import Algorithm
    from corral.integrations.estimation.estimator import OffPolicyEstimator

__all__ = [
    "ALGORITHMS_GROUP",
    "DISABLE_ENV_VAR",
    "EXPLORATIONS_GROUP",
    "HOOKS_GROUP",
    "INTEGRATIONS_GROUP",
    "IN_PROCESS",
    "PluginInfo",
    "PluginRegistry",
    "PluginStatus",
    "get_algorithm",
    "get_config",
    "get_estimator",
    "get_exploration",
    "get_hook_plugins",
    "get_integrations",
    "list_algorithms",
    "list_estimators",
    "list_explorations",
    "list_hook_plugins",
    "list_integrations",
    "on_algorithm_registered",
    "refresh",
    "register_algorithm",
    "register_estimator",
    "register_exploration",
    "register_integration",
    "registry_for",
]

ALGORITHMS_GROUP = "corral.algorithms"
EXPLORATIONS_GROUP = "corral.explorations"
ESTIMATORS_GROUP = "corral.estimators"
HOOKS_GROUP = "corral.hooks"
INTEGRATIONS_GROUP = "corral.integrations"

_registries: dict[str, PluginRegistry] = {}
_algorithm_listeners: list[Callable[[str, type[Algorithm]], None]] = []
_lock = threading.Lock()


def _make(group: str) -> PluginRegistry:
    if group == ALGORITHMS_GROUP:
        return PluginRegistry(
            group,
            "algorithm",
            unknown_error=errors.UnknownAlgorithmError,
            required_attribute="get_default_config",
            requirement="an algorithm must subclass corral's Algorithm (corral.Algorithm)",
        )
    if group == EXPLORATIONS_GROUP:
        return PluginRegistry(group, "exploration")
    if group == ESTIMATORS_GROUP:
        return PluginRegistry(group, "off-policy estimator")
    if group == HOOKS_GROUP:
        return PluginRegistry(group, "hook plugin", expects_class=False)
    if group == INTEGRATIONS_GROUP:
        return PluginRegistry(group, "integration", expects_class=False)
    raise ValueError(
        f"Unknown plugin group {group!r}; expected one of "
        f"{ALGORITHMS_GROUP!r}, {EXPLORATIONS_GROUP!r}, {ESTIMATORS_GROUP!r}, {HOOKS_GROUP!r}, {INTEGRATIONS_GROUP!r}"
    )


def registry_for(group: str) -> PluginRegistry:
    """Return the registry of one entry-point group, building it on first use.

    For tools such as ``corral list`` that treat all groups alike; most code
    wants the typed functions below instead.

    Args:
        group: ``"corral.algorithms"``, ``"corral.explorations"``, ``"corral.estimators"``, ``"corral.hooks"``
            or ``"corral.integrations"``.

    Returns:
        The group's registry (the same one until :func:`refresh`).

    Raises:
        ValueError: ``group`` is not one of corral's plugin groups.
    """
    with _lock:
        registry = _registries.get(group)
        if registry is None:
            registry = _registries[group] = _make(group)
        return registry


def refresh() -> None:
    """Forget everything discovered, loaded or registered in-process.

    Discovery is cached after its first use; call this after changing
    ``sys.path`` or ``CORRAL_DISABLE_PLUGINS`` (tests do) so the next call
    rediscovers. In-process registrations are dropped as well, so the
    registries afterwards reflect only the environment.
    """
    with _lock:
        for registry in _registries.values():
            registry.refresh()
        _registries.clear()
    importlib.invalidate_caches()  # metadata finders cache directory listings


# ------------------------------------------------------------------ algorithms


def list_algorithms(check: bool = False) -> list[PluginInfo]:
    """Describe every installed algorithm, importing none unless ``check``.

    Args:
        check: Import each one (failures caught, one at a time) so its status
            is ``"ok"``, ``"broken"`` or ``"incompatible"`` rather than ``"not loaded"``.

    Returns:
        One :class:`PluginInfo` per entry point or in-process registration,
        sorted by name.
    """
    return registry_for(ALGORITHMS_GROUP).list_plugins(check)


def get_algorithm(name: str, dist: str | None = None) -> type[Algorithm]:
    """Return the algorithm class registered as ``name`` (case-insensitive).

    Only this one plugin is imported, on first lookup, and cached.

    Args:
        name: The algorithm's registered name, e.g. ``"PPO"`` or ``"ppo"``.
        dist: The distribution to take it from when several provide it,
            e.g. ``"corral-fastppo"``.

    Returns:
        The ``Algorithm`` subclass.

    Raises:
        UnknownAlgorithmError: No installed plugin provides ``name``; the
            message lists installed algorithms and the closest name.
        PluginLoadError: The plugin failed to import, is blocked, is not an
            ``Algorithm`` class, or several distributions provide it.
    """
    algorithm: type[Algorithm] = registry_for(ALGORITHMS_GROUP).get(name, dist)  # checked: a class with get_default_config
    return algorithm


def get_config(name: str, dist: str | None = None) -> AlgorithmConfig:
    """Return a fresh default config for the algorithm ``name``.

    Args:
        name: The algorithm's registered name (case-insensitive).
        dist: As for :func:`get_algorithm`.

    Returns:
        ``get_algorithm(name, dist).get_default_config()``.

    Raises:
        UnknownAlgorithmError: As for :func:`get_algorithm`.
        PluginLoadError: As for :func:`get_algorithm`.
    """
    return get_algorithm(name, dist).get_default_config()


def register_algorithm(name: str, cls: type[Algorithm]) -> None:
    """Register an algorithm class in this process (tests, notebooks).

    It takes precedence over an installed algorithm of the same name, since
    registering it is an explicit choice; :func:`refresh` forgets it.

    Args:
        name: The name to look it up by (case-insensitive).
        cls: An ``Algorithm`` subclass.

    Raises:
        TypeError: ``name`` is not a string or ``cls`` is not a class.
        ValueError: ``name`` is empty.
        PluginLoadError: ``cls`` is not an ``Algorithm`` (no ``get_default_config``).
    """
    registry_for(ALGORITHMS_GROUP).register(name, cls)
    for listener in _algorithm_listeners:
        listener(name.strip(), cls)


def on_algorithm_registered(listener: Callable[[str, type[Algorithm]], None]) -> None:
    """Call ``listener(name, cls)`` after every later :func:`register_algorithm`.

    For integrations that mirror corral's algorithms elsewhere (``corral.tune``
    registers each one with Ray Tune), so an algorithm registered in a
    notebook after the integration was imported is still found there.
    """
    _algorithm_listeners.append(listener)


# ---------------------------------------------------------------- explorations


def list_explorations(check: bool = False) -> list[PluginInfo]:
    """Describe every installed exploration, importing none unless ``check``.

    Args:
        check: Import each one (failures caught, one at a time) so its status
            is ``"ok"``, ``"broken"`` or ``"incompatible"`` rather than ``"not loaded"``.

    Returns:
        One :class:`PluginInfo` per entry point or in-process registration,
        sorted by name.
    """
    return registry_for(EXPLORATIONS_GROUP).list_plugins(check)


def get_exploration(name: str, dist: str | None = None) -> type[Exploration]:
    """Return the exploration class registered as ``name`` (case-insensitive).

    This is how ``exploration_config={"type": "EpsilonGreedy"}`` resolves.

    Args:
        name: The exploration's registered name.
        dist: The distribution to take it from when several provide it.

    Returns:
        The exploration class.

    Raises:
        UnknownPluginError: No installed plugin provides ``name``.
        PluginLoadError: The plugin failed to import, is blocked, is not a
            class, or several distributions provide it.
    """
    exploration: type[Exploration] = registry_for(EXPLORATIONS_GROUP).get(name, dist)  # checked: a class
    return exploration


def register_exploration(name: str, cls: type[Exploration]) -> None:
    """Register an exploration class in this process (tests, notebooks).

    Args:
        name: The name to look it up by (case-insensitive).
        cls: The exploration class.

    Raises:
        TypeError: ``name`` is not a string or ``cls`` is not a class.
        ValueError: ``name`` is empty.
    """
    registry_for(EXPLORATIONS_GROUP).register(name, cls)


# ---------------------------------------------------------------- off-policy estimators


def list_estimators(check: bool = False) -> list[PluginInfo]:
    """Describe every installed off-policy estimator, importing none unless ``check``.

    Args:
        check: As for :func:`list_explorations`.

    Returns:
        One :class:`PluginInfo` per entry point or in-process registration, sorted by name.
    """
    return registry_for(ESTIMATORS_GROUP).list_plugins(check)


def get_estimator(name: str, dist: str | None = None) -> type[OffPolicyEstimator]:
    """Return the off-policy estimator class registered as ``name`` (case-insensitive).

    This is how ``off_policy_estimation_methods={"is": {"type": "ImportanceSampling"}}`` resolves.

    Args:
        name: The estimator's registered name.
        dist: The distribution to take it from when several provide it.

    Returns:
        The estimator class.

    Raises:
        UnknownPluginError: No installed plugin provides ``name``.
        PluginLoadError: The plugin failed to import, is blocked, is not a
            class, or several distributions provide it.
    """
    estimator: type[OffPolicyEstimator] = registry_for(ESTIMATORS_GROUP).get(name, dist)  # checked: a class
    return estimator


def register_estimator(name: str, cls: type[OffPolicyEstimator]) -> None:
    """Register an off-policy estimator class in this process (tests, notebooks).

    Args:
        name: The name to look it up by (case-insensitive).
        cls: The estimator class.

    Raises:
        TypeError: ``name`` is not a string or ``cls`` is not a class.
        ValueError: ``name`` is empty.
    """
    registry_for(ESTIMATORS_GROUP).register(name, cls)


# ---------------------------------------------------------------- hook plugins


def list_hook_plugins(check: bool = False) -> list[PluginInfo]:
    """Describe every installed hook plugin (group ``corral.hooks``), importing none unless ``check``.

    Args:
        check: As for :func:`list_algorithms`.

    Returns:
        One :class:`PluginInfo` per entry point, sorted by name.
    """
    return registry_for(HOOKS_GROUP).list_plugins(check)


def get_hook_plugins() -> list[tuple[PluginInfo, object]]:
    """Load every hook plugin, skipping (never raising for) those that fail.

    Hook plugins run in every training run, so one broken plugin must not stop
    training: it is logged, marked ``"broken"`` and left out. Blocked and
    conflicting ones are left out too.

    Returns:
        ``(info, plugin)`` pairs, ready to register in a pluggy
        ``PluginManager``, sorted by name.
    """
    return registry_for(HOOKS_GROUP).load_all()


# ---------------------------------------------------------------- integrations


def list_integrations(check: bool = False) -> list[PluginInfo]:
    """Describe every installed integration (group ``corral.integrations``), importing none unless ``check``.

    Args:
        check: As for :func:`list_algorithms`.

    Returns:
        One :class:`PluginInfo` per entry point or in-process registration, sorted by name.
    """
    return registry_for(INTEGRATIONS_GROUP).list_plugins(check)


def get_integrations() -> list[tuple[PluginInfo, object]]:
    """Load every integration, skipping (and logging, never raising for) those that fail to import.

    An integration is a module or object implementing some of the core's seams
    (:mod:`corral.core.contracts.integration_specs`); the core asks them through
    :func:`corral.core.contracts.integrations.integration_hooks`.

    Returns:
        ``(info, integration)`` pairs, sorted by name.
    """
    return registry_for(INTEGRATIONS_GROUP).load_all()


def register_integration(name: str, integration: object) -> None:
    """Register an integration in this process (tests, notebooks); the core's seams ask it from then on.

    Args:
        name: The name to list it by (case-insensitive).
        integration: A module or object whose functions are marked with
            :data:`corral.core.contracts.integration_specs.integration`.

    Raises:
        TypeError: ``name`` is not a string.
        ValueError: ``name`` is empty.
    """
    registry_for(INTEGRATIONS_GROUP).register(name, integration)
