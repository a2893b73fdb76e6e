"""Input creators registered under a name: RLlib's ``register_input``, for ``offline_data(input_="name")``.

An input creator is called with each env runner's ``IOContext`` and makes
its input: an ``InputReader`` (batches for training, read by the algorithm)
or an ``ExternalEnv`` (a ``PolicyServerInput``: episodes served to clients).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from corral.core.common.tune_registry import share_with_tune, tune_imported, tune_registered
from corral.errors import ConfigError

TUNE_CATEGORY = "rllib_input"
"""the category of Ray Tune's registry where ``ray.tune.registry.register_input`` puts input creators"""

_INPUTS: dict[str, Callable[[Any], Any]] = {}


def register_input(name: str, creator: Callable[[Any], Any]) -> None:
    """Make ``name`` usable as ``offline_data(input_=name)``: ``creator(ioctx)`` makes each env runner's input.

    Where Ray Tune is imported the name is registered with it too, for its
    trials; a name given to ``ray.tune.registry.register_input`` is found
    without this.

    Args:
        name: the name configs use; any non-empty string.
        creator: called with an ``IOContext``; returns an ``InputReader``, an ``ExternalEnv`` or None.

    Raises:
        ConfigError: ``name`` is not a non-empty string, or ``creator`` is not callable.
    """
    if not isinstance(name, str) or not name:
        raise ConfigError(f"register_input needs a non-empty string name, got {name!r}")
    if not callable(creator):
        raise ConfigError(f"register_input({name!r}, ...) needs a callable creator, got {type(creator).__name__}")
    _INPUTS[name] = creator
    if tune_imported():  # Tune trials are other processes: they find it in Tune's registry
        share_with_tune(TUNE_CATEGORY, name, creator, "input")


def input_creator(input_: Any) -> Callable[[Any], Any] | None:
    """The creator an ``input_`` value calls: itself if callable, or the one registered under its name; else None.

    Args:
        input_: a config's ``input_``.

    Returns:
        The creator, or None where ``input_`` names files or the sampler.
    """
    if callable(input_):
        return input_  # type: ignore[no-any-return]
    if not isinstance(input_, str):
        return None
    found = _INPUTS.get(input_) or tune_registered(TUNE_CATEGORY, input_)
    return found if callable(found) else None
