"""What an env spec names: a gymnasium id, an import path, a class, or a creator registered under a name.

:func:`register_env` registers a creator under a name (and with Ray Tune where
it is imported); :func:`resolve_creator` turns any spec a config may hold into
a gymnasium id or a creator, which is called with an :class:`EnvContext` for
every sub-environment.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any, cast

import gymnasium as gym

from corral.core.common.import_paths import import_object, is_import_path
from corral.core.common.tune_registry import tune_imported, tune_registered
from corral.core.contracts.integrations import integration_hooks
from corral.core.environments.external_env import ExternalEnv
from corral.errors import ConfigError, EnvError, did_you_mean

logger = logging.getLogger("corral")

_ENV_CREATORS: dict[str, Callable[[EnvContext], gym.Env]] = {}


class EnvContext(dict[str, Any]):
    """The ``env_config`` dict, plus where the env lives: runner and vector indices.

    A creator registered with :func:`register_env` (or an env class given as
    ``env``) is called with one of these, as in RLlib.
    """

    def __init__(self, env_config: dict[str, Any], worker_index: int = 0, vector_index: int = 0, num_workers: int = 0) -> None:
        super().__init__(env_config)
        self.worker_index = worker_index
        self.vector_index = vector_index
        self.num_workers = num_workers

    def copy_with(self, **overrides: int) -> EnvContext:
        """The same config with other indices."""
        values = {"worker_index": self.worker_index, "vector_index": self.vector_index, "num_workers": self.num_workers}
        values.update(overrides)
        return EnvContext(dict(self), **values)


def register_env(name: str, creator: Callable[[EnvContext], gym.Env]) -> None:
    """Make ``name`` usable as ``config.environment(name)``; ``creator(env_context)`` returns an env.

    Remote env runners (Ray actors, other processes) get the creator of the
    name their config uses, serialised by Ray, so it must be picklable by
    cloudpickle (functions and lambdas are); where Ray Tune is imported, the
    name is registered with Tune too, for its trials. A registered name takes
    precedence over a gymnasium id of the same name, which takes precedence over a
    name given to ``ray.tune.registry.register_env`` (which corral resolves too);
    registering a name again replaces its creator.

    Args:
        name: the name configs use; any non-empty string.
        creator: called with an :class:`EnvContext` (the ``env_config`` plus the runner
            and sub-environment indices) for every sub-environment; returns a ``gymnasium.Env``.

    Raises:
        EnvError: ``name`` is not a non-empty string, or ``creator`` is not callable.
    """
    if not isinstance(name, str) or not name:
        raise EnvError("register_env needs a non-empty string name")
    if not callable(creator):
        raise EnvError(f"register_env({name!r}, ...) needs a callable creator, got {type(creator).__name__}")
    _ENV_CREATORS[name] = creator
    if tune_imported():  # Tune trials are other processes: they find it in Tune's registry
        share_with_tune(name)


def share_with_tune(*names: str) -> None:
    """Register env creators (those named, default all) with Ray Tune too: a Tune run's trials then resolve their names.

    A creator that Tune cannot pickle stays in this process, with a warning.

    Args:
        *names: names given to :func:`register_env`.
    """
    from ray.tune.registry import register_env as tune_register_env

    for name in names or list(_ENV_CREATORS):
        try:
            tune_register_env(name, _ENV_CREATORS[name])
        except Exception as exc:  # pickling whatever the creator holds may fail
            logger.warning("env %r is known in this process only (Ray Tune cannot pickle its creator: %s)", name, exc)


def registered_creators(*names: Any) -> dict[str, Callable[[EnvContext], gym.Env]]:
    """The creators registered under ``names`` (names that are not registered are left out).

    A remote env runner is another process, whose registry is empty: the
    creators a config names travel with it (Ray serialises them) and are
    registered there again.

    Args:
        *names: env specs from a config; only strings registered with :func:`register_env` count.

    Returns:
        ``{name: creator}``.
    """
    found = {name: _ENV_CREATORS[name] for name in names if isinstance(name, str) and name in _ENV_CREATORS}
    for name in names:
        if isinstance(name, str) and name not in found and not _is_gym_id(name):
            creator = _tune_creator(name)
            if creator is not None:
                found[name] = creator
    return found


def _tune_creator(name: str) -> Callable[[EnvContext], gym.Env] | None:
    """The creator registered under ``name`` with ``ray.tune.registry.register_env``, or None."""
    return cast("Callable[[EnvContext], gym.Env] | None", tune_registered("env_creator", name))


def _is_gym_id(name: str) -> bool:
    return ":" not in name and (name in gym.registry or bool(integration_hooks().known_env_id(env_id=name)))


def env_name(env: Any) -> str:
    """A short name for results folders and messages (``"None"`` where there is none, as RLlib's folders say)."""
    if env is None:
        return "None"
    if isinstance(env, str):
        return env.rpartition(":")[2] or env
    return getattr(env, "__name__", type(env).__name__)


def resolve_creator(env: Any) -> tuple[str | None, Callable[[EnvContext], gym.Env] | None]:
    """``(gymnasium_id, None)`` or ``(None, creator)`` for an env spec; raises EnvError if unknown."""
    if isinstance(env, str):
        if env in _ENV_CREATORS:
            return None, _ENV_CREATORS[env]
        if _is_gym_id(env):  # gymnasium 1.x knows ale-py's once registered
            return env, None
        registered = _tune_creator(env)
        if registered is not None:
            return None, registered
        if ":" in env:
            try:
                obj = import_env(env)
            except Exception as exc:  # ConfigError for bad paths; re-raised as EnvError with context
                raise EnvError(f"environment {env!r} cannot be imported: {exc}") from None
            return None, _creator_for(obj, env)
        import_problem = ""
        if is_import_path(env):  # RLlib's dotted "package.module.Class"
            try:
                return None, _creator_for(import_object(env), env)
            except ConfigError as exc:
                import_problem = f" As an import path: {exc}."
        known = list(_ENV_CREATORS) + list(gym.registry)
        hint = did_you_mean(env, known)
        raise EnvError(
            f"unknown environment {env!r}.{hint}{import_problem} Use a gymnasium id (e.g. 'CartPole-v1'), "
            "a 'package.module:Class' path, or a name given to corral.register_env() (or ray.tune.registry.register_env())"
        )
    if callable(env):
        return None, _creator_for(env, env_name(env))
    raise EnvError(f"env must be a gymnasium id, an import path, a class or a creator, not {type(env).__name__}")


def import_env(path: str) -> Any:
    """The env class or creator an import path names; ``make_multi_agent``'s classes by the reference they carry.

    Raises:
        ConfigError: the path is malformed, or the module or name does not exist.
    """
    from corral.core.environments.multi_agent_env import multi_agent_of_reference  # it imports this module

    made = multi_agent_of_reference(path)
    return made if made is not None else import_object(path)


ENV_METHODS = ("reset", "step")
"""what an object needs to be taken for an env (one of the old gym API too, which an integration adapts)"""
CONFIG_PARAMETERS = ("config", "env_config", "env_context", "context", "ctx")
"""names an env class's first parameter may have for it to take the EnvContext, though it has a default"""


def _creator_for(obj: Any, label: str) -> Callable[[EnvContext], gym.Env]:
    old_gym_class = all(callable(getattr(obj, name, None)) for name in ENV_METHODS)  # made, then wrapped or refused
    if isinstance(obj, type) and not issubclass(obj, (gym.Env, ExternalEnv)) and not old_gym_class:
        raise EnvError(f"environment {label!r} is {obj!r}, which is not a gymnasium.Env subclass")
    return _class_creator(obj, label) if isinstance(obj, type) else obj


def _class_creator(cls: Callable[..., gym.Env], label: str) -> Callable[[EnvContext], gym.Env]:
    """How to build an env class from its ``env_config`` (see :func:`constructor_arguments`)."""
    arguments = constructor_arguments(cls, label)

    def build(ctx: EnvContext) -> gym.Env:
        args, kwargs = arguments(ctx)
        return cls(*args, **kwargs)

    return build


def constructor_arguments(cls: Callable[..., Any], label: str) -> Callable[[EnvContext], tuple[tuple[Any, ...], dict[str, Any]]]:
    """What an env class's constructor is given for an ``env_config``, whatever its signature: ``ctx -> (args, kwargs)``.

    RLlib's convention first: a class whose first parameter is required (or is named
    like a config) gets the EnvContext as that one argument. A class without
    parameters is built without it; one with keyword options only (gymnasium's
    style, ``__init__(self, render_mode=None, size=5)``) gets ``env_config``'s
    entries as keyword arguments, as ``gymnasium.make`` passes them.

    Args:
        cls: the env class.
        label: how the config names it, for errors.

    Returns:
        A function of the EnvContext; it raises EnvError naming ``env_config`` keys the class does not take.
    """
    init = cast(Any, cls).__init__
    params = [] if init is object.__init__ else [p for p in inspect.signature(init).parameters.values() if p.name != "self"]
    if not params:
        return lambda ctx: ((), {})
    kind = inspect.Parameter
    first = params[0]
    if first.kind is kind.VAR_POSITIONAL or (
        first.kind in (kind.POSITIONAL_ONLY, kind.POSITIONAL_OR_KEYWORD)
        and (first.default is kind.empty or first.name in CONFIG_PARAMETERS)
    ):
        return lambda ctx: ((ctx,), {})
    takes_any = any(p.kind is kind.VAR_KEYWORD for p in params)
    names = {p.name for p in params if p.kind in (kind.POSITIONAL_OR_KEYWORD, kind.KEYWORD_ONLY)}

    def keywords(ctx: EnvContext) -> tuple[tuple[Any, ...], dict[str, Any]]:
        unknown = sorted(set(ctx) - names) if not takes_any else []
        if unknown:
            raise EnvError(
                f"environment {label!r} takes the keyword arguments {', '.join(sorted(names))}, "
                f"but env_config has {', '.join(map(repr, unknown))}"
            )
        return (), dict(ctx)

    return keywords
