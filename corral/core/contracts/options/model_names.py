"""Custom model classes registered under a name: what a ``model.custom_model`` string names besides an import path.

``ModelCatalog.register_custom_model(name, cls)`` (RLlib's spelling, in
:mod:`corral.core.networks.catalog`) registers here, so that
``model={"custom_model": name}`` is plain data: a config, a Tune trial's
config and a checkpoint record the name, never the class. Every process that
builds the model must know the name: a script that restores a checkpoint
registers it again, remote env runners get the classes their config names
(as registered env creators travel), and where Ray Tune is imported the name
is registered with Tune too (RLlib's category ``rllib_model``), for its trials.
A name registered with RLlib's own ``ModelCatalog`` (Tune's registry) is
found as well.
"""

from __future__ import annotations

from typing import Any

from corral.core.common.tune_registry import share_with_tune, tune_imported, tune_registered
from corral.errors import ConfigError, did_you_mean

_MODELS: dict[str, type] = {}

TUNE_CATEGORY = "rllib_model"
"""the category of Ray Tune's registry where RLlib's ``ModelCatalog`` keeps custom models (``ray.tune.registry.RLLIB_MODEL``)"""


def is_action_dist_class(cls: Any) -> bool:
    """Whether a class is an action distribution RLlib's way: ``required_model_output_shape``, ``sample``, ``logp``."""
    return isinstance(cls, type) and all(
        callable(getattr(cls, name, None)) for name in ("required_model_output_shape", "sample", "logp")
    )


def register_model_class(name: str, cls: type, action_dist: bool = False) -> None:
    """Make ``name`` usable as ``model={"custom_model": name}`` (or ``custom_action_dist``); again replaces its class.

    Models and action distributions share the names (one registry travels to
    remote runners and Tune's trials): a name stays a model or a distribution.

    Args:
        name: the name configs use; any non-empty string.
        cls: the model class, a ``torch.nn.Module`` subclass; or an action distribution class.
        action_dist: whether ``cls`` is an action distribution (``register_custom_action_dist``).

    Raises:
        ConfigError: ``name`` is not a non-empty string, ``cls`` is not of its kind, or the name
            already names the other kind.
    """
    from torch import nn

    caller = "register_custom_action_dist" if action_dist else "register_custom_model"
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{caller} needs a non-empty string name, got {name!r}")
    if action_dist and not is_action_dist_class(cls):
        raise ConfigError(
            f"{caller}({name!r}, ...) needs an action distribution class (required_model_output_shape, sample, logp: "
            f"a TorchDistributionWrapper subclass), got {cls!r}"
        )
    if not action_dist and not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise ConfigError(f"{caller}({name!r}, ...) needs a torch.nn.Module subclass, got {cls!r}")
    if name in _MODELS and is_action_dist_class(_MODELS[name]) != action_dist:
        other = "custom action distribution" if action_dist is False else "custom model"
        raise ConfigError(f"{caller}({name!r}, ...): {name!r} already names a {other}; give this class another name")
    _MODELS[name] = cls
    if tune_imported():  # Tune trials are other processes: they find it in Tune's registry
        share_models_with_tune(name)


def share_models_with_tune(*names: str) -> None:
    """Register model classes (those named, default all) with Ray Tune too, under RLlib's category.

    A class that Tune cannot pickle stays known in this process only, with a warning.

    Args:
        *names: names given to :func:`register_model_class`.
    """
    for name in names or list(_MODELS):
        share_with_tune(TUNE_CATEGORY, name, _MODELS[name], "custom model")


def registered_model_class(name: str) -> type | None:
    """The class registered under ``name`` here, or with Ray Tune's registry where Tune is imported; else None.

    Args:
        name: a ``custom_model`` string.

    Returns:
        The class, or None if the name is not registered.
    """
    if name in _MODELS:
        return _MODELS[name]
    found = tune_registered(TUNE_CATEGORY, name)  # RLlib's ModelCatalog registers there too
    return found if isinstance(found, type) else None


def registered_model_classes(*names: Any) -> dict[str, type]:
    """The classes registered under ``names`` (what is not a registered name is left out).

    A remote env runner is another process, whose registry is empty: the
    classes its config names travel with it (Ray serialises them) and are
    registered there again.

    Args:
        *names: ``custom_model`` values from configs; only registered strings count.

    Returns:
        ``{name: class}``.
    """
    found = {}
    for name in names:
        cls = registered_model_class(name) if isinstance(name, str) else None
        if cls is not None:
            found[name] = cls
    return found


def model_classes_of(*configs: Any) -> dict[str, type]:
    """The classes registered under the names the configs' networks use, to register again in another process.

    Every network's options count: ``model``'s ``custom_model`` and
    ``custom_action_dist``, and any other dict option's ``custom_model`` (SAC's
    ``q_model_config``).

    Args:
        *configs: algorithm configs (an algorithm's and its policies').

    Returns:
        ``{name: class}`` (see :func:`registered_model_classes`).
    """
    names: list[Any] = []
    for config in configs:
        values = [getattr(config, name) for name in type(config).model_fields]
        names += [config.model.custom_model, config.model.custom_action_dist]
        names += [v.get("custom_model") for v in values if isinstance(v, dict)]
    return registered_model_classes(*names)


def unknown_model_name(name: str) -> ConfigError:
    """The error for a ``custom_model`` string that is neither a registered name nor an import path.

    Args:
        name: the string.

    Returns:
        The error to raise, with the closest registered name and how to register one.
    """
    return ConfigError(
        f"model.custom_model {name!r} is not a registered model name.{did_you_mean(name, list(_MODELS))} Register it "
        f"with ModelCatalog.register_custom_model({name!r}, YourModel) (from corral.core import ModelCatalog) in "
        "every script that builds this config or restores a checkpoint of it, or give the class itself or its "
        "'package.module:Class' path"
    )
