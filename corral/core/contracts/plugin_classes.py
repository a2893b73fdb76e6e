"""The plugins a config names by type (explorations, off-policy estimators): found and checked without building one.

A config is checked before anything runs, so ``validate()`` must know that
``exploration_config={"type": "EpsilonGreedy", "final_epsilon": 0.1}`` names an
exploration with that option. The classes live above the config (the
``learning`` room, the estimation integration): they are found through the
registry (or an import path, as RLlib's custom explorations are given), and
checked against their base class by its module path, which is loaded whenever
a class derives from it, so this room imports neither.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, cast

from corral._lazy import is_subclass_of_loaded
from corral.core.common.import_paths import import_object, is_import_path
from corral.errors import ConfigError, UnknownPluginError, did_you_mean

EXPLORATION_BASE = ("corral.core.learning.exploration", "Exploration")
"""the module and name of the class every exploration derives from"""
ESTIMATOR_BASE = ("corral.integrations.estimation.estimator", "OffPolicyEstimator")
"""the module and name of the class every off-policy estimator derives from"""


def exploration_class(type_name: str) -> type:
    """The class a registered name or an import path (``"pkg.mod:Class"``, ``"pkg.mod.Class"``) names.

    Args:
        type_name: ``exploration_config["type"]``.

    Returns:
        The exploration class.

    Raises:
        ConfigError: nothing has that name, or it is not an ``Exploration``.
    """
    import corral.registry as registry

    # RLlib's custom exploration by its class path, else a registered name
    if is_import_path(type_name):
        cls = _found(import_object, type_name, "exploration_config", ConfigError)
    else:
        cls = _found(registry.get_exploration, type_name, "exploration_config", UnknownPluginError)
    if not is_subclass_of_loaded(cls, *EXPLORATION_BASE):
        raise ConfigError(f"exploration {type_name!r} ({cls!r}) does not subclass {'.'.join(EXPLORATION_BASE)}")
    return cast(type, cls)


def validate_exploration_config(exploration_config: dict[str, Any]) -> None:
    """Check the type exists and every other key is one of its arguments, without building it.

    Args:
        exploration_config: ``{"type": ..., **options}``.

    Raises:
        ConfigError: the type names no exploration, or a key is not one of its arguments.
    """
    options = dict(exploration_config)
    cls = exploration_class(options.pop("type"))
    _check_options(f"exploration {cls.__name__}", cls, options, ("self", "action_space"))


def estimator_class(type_name: Any) -> type:
    """The estimator class a config names (a registered name, or the class itself).

    Args:
        type_name: ``"ImportanceSampling"``, ... (case-insensitive), or an estimator class.

    Returns:
        The class.

    Raises:
        ConfigError: no estimator has that name, or the class is not an ``OffPolicyEstimator``.
    """
    import corral.registry as registry

    cls = type_name
    if isinstance(type_name, str):
        cls = _found(registry.get_estimator, type_name, "off_policy_estimation_methods", UnknownPluginError)
    if not is_subclass_of_loaded(cls, *ESTIMATOR_BASE):
        raise ConfigError(f"off-policy estimator {type_name!r} does not subclass {'.'.join(ESTIMATOR_BASE)}")
    return cast(type, cls)


def check_estimation_methods(methods: dict[str, Any]) -> None:
    """Check every entry names an estimator and only options it has, without building any.

    Args:
        methods: ``{name: {"type": ..., **options}}``.

    Raises:
        ConfigError: an entry is not a dict with a ``type``, names no estimator, or has an unknown option.
    """
    for name, spec in methods.items():
        if not isinstance(spec, dict) or "type" not in spec:
            raise ConfigError(
                f"off_policy_estimation_methods[{name!r}] must be a dict with a 'type', e.g. {{'type': 'ImportanceSampling'}}"
            )
        options = dict(spec)
        cls = estimator_class(options.pop("type"))
        _check_options(f"off-policy estimator {cls.__name__}", cls, options, ("self", "policy", "gamma"))


def _found(lookup: Callable[[str], object], type_name: str, option: str, missing: type[Exception]) -> object:
    """What ``lookup`` finds for ``type_name``; its ``missing`` error becomes a ConfigError naming ``option``."""
    try:
        return lookup(type_name)
    except missing as exc:
        raise ConfigError(f"{option} type: {exc}") from None


def _check_options(what: str, cls: type[Any], options: dict[str, Any], reserved: tuple[str, ...]) -> None:
    """Every key of ``options`` is an argument of ``cls`` that the config may set (not one corral passes itself)."""
    allowed = [p for p in inspect.signature(cls.__init__).parameters if p not in reserved]
    for key in options:
        if key not in allowed:
            advice = f"{did_you_mean(key, allowed)} Its options: {', '.join(allowed) or 'none'}"
            raise ConfigError(f"{what} has no option {key!r}.{advice}")
