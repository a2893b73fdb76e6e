"""Creating environments: the vector env an env runner steps, whatever the env spec names.

Every env runner steps a gymnasium ``VectorEnv``. A gymnasium id whose spec
has a native vectorised implementation (CartPole's is ~50x faster than a loop
of copies) gets it through ``gym.make_vec``; anything else is wrapped in a
``SyncVectorEnv``. Both reset a finished sub-environment on the *next* step,
which the env runner and :mod:`corral.core.learning.postprocessing` account for.

The environments' other concerns are a module each, whose names are
importable from here as before: what an env spec names and the registry of
names (:mod:`~corral.core.environments.env_creators`), and the checks on what
sub-environments return (:mod:`~corral.core.environments.sub_environment_guard`).

Integrations plug in where a sub-environment is made (the seams in
:mod:`corral.core.contracts.integration_specs`): one may make an id's
sub-environments itself (Atari's preprocessing), adapt what a creator returns
(old gym's API), or show sub-environment 0 (rendering and video).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import gymnasium as gym

from corral.core.contracts.integrations import integration_hooks
from corral.core.environments.displays import SubEnvironmentDisplay
from corral.core.environments.env_creators import (
    CONFIG_PARAMETERS as CONFIG_PARAMETERS,
    EnvContext as EnvContext,
    env_name as env_name,
    import_env as import_env,
    register_env as register_env,
    registered_creators as registered_creators,
    resolve_creator as resolve_creator,
    share_with_tune as share_with_tune,
)
from corral.core.environments.remote_sub_environments import RemoteVectorEnv, make_remote_actors
from corral.core.environments.sub_environment_guard import (
    MAX_REPLAY_STEPS as MAX_REPLAY_STEPS,
    SubEnvironmentGuard as SubEnvironmentGuard,
    bad_reward as bad_reward,
    check_vector_step as check_vector_step,
    is_guarded as is_guarded,
    prepare_replay as prepare_replay,
)
from corral.errors import ConfigError, EnvError

if TYPE_CHECKING:  # a type only: the config module sits above the environments
    from corral.core.contracts.config import AlgorithmConfig


def make_vector_env(
    config: AlgorithmConfig,
    num_envs: int,
    worker_index: int = 0,
    first_env: Any = None,
    display: SubEnvironmentDisplay | None = None,
    on_sub_environment: Callable[[Any, EnvContext], None] | None = None,
) -> gym.vector.VectorEnv:
    """The vector env an env runner steps: native vectorisation where the env offers it.

    Stepped in a loop instead (``vectorize_mode='sync'``, or an env without a
    native implementation), each sub-environment is wrapped in a
    :class:`SubEnvironmentGuard`, so a failure names the sub-environment and,
    with ``restart_failed_sub_environments``, restarts only it.

    Args:
        config: the algorithm's config: ``env``, ``env_config``, ``vectorize_mode``,
            ``restart_failed_sub_environments`` and ``disable_env_checking``.
        num_envs: the number of sub-environments.
        worker_index: the env runner's index (0 local), passed on in each :class:`EnvContext`.
        first_env: sub-environment 0, already made by the env's creator (to see its kind);
            None: make it. A restart makes it anew.
        display: how sub-environment 0 is shown or recorded (the ``sub_environment_display`` seam);
            it is then made in the render mode that needs, and no native vector env is used.
        on_sub_environment: called with each sub-environment as the user made it (see
            :attr:`SubEnvironmentGuard.user_env`) and its EnvContext, when it is made and
            whenever a restart makes it anew; a native vector env, which has no sub-environment
            objects, is given whole, once, as RLlib does.

    Returns:
        The vector env, not yet reset.

    Raises:
        EnvError: the env is unknown or cannot be imported, ``vectorize_mode='native'``
            is asked of an env without a native implementation, a creator returns
            something other than a ``gymnasium.Env``, or creating it raised ``TypeError``
            (wrong ``env_config`` keys, say); what ``display`` needs is not installed.
        ConfigError: ``is_atari=True`` for an env that is no ale-py game (or without the Atari
            integration), or a ``display`` with ``vectorize_mode='native'``.
    """
    env_id, creator = resolve_creator(config.env)
    if display is not None:
        if config.vectorize_mode == "native":
            raise ConfigError(
                "render_env and record_env show sub-environment 0 on its own, which a native vector env cannot render; "
                "use vectorize_mode='auto' (the rendering runner then steps its sub-environments in a loop)"
            )
        display.check(env_id, env_name(config.env))
    render_mode = {"render_mode": display.render_mode} if display is not None else {}

    def make_kwargs(ctx: EnvContext) -> dict[str, Any]:
        """``gym.make``'s keyword arguments: a gymnasium id's sub-environment 0 is made in the display's render mode."""
        return {**config.env_config, **(render_mode if ctx.vector_index == 0 else {})}

    context = EnvContext(config.env_config, worker_index=worker_index, num_workers=config.num_env_runners)
    maker = integration_hooks().sub_environment_maker(env_id=env_id, config=config) if env_id is not None else None
    if config.is_atari and maker is None:
        raise ConfigError(
            f"is_atari=True wraps ale-py games, given by their gymnasium id; {env_name(config.env)!r} is none "
            "(or corral's atari integration did not load: `corral list` shows it)"
        )
    try:
        if maker is not None:  # an integration makes this id's sub-environments (ale-py's games)
            creator = lambda ctx: maker(make_kwargs(ctx))  # noqa: E731
        elif env_id is not None:
            spec = gym.spec(env_id)
            if config.vectorize_mode == "native" and spec.vector_entry_point is None:
                raise EnvError(f"{env_id} has no native vectorised implementation; use vectorize_mode='sync' or 'auto'")
            if (
                spec.vector_entry_point is not None
                and config.vectorize_mode != "sync"
                and not config.restart_failed_sub_environments
                and config.observation_space is None
                and config.action_space is None
                and config.horizon is None
                and display is None  # a native vector env does not render
            ):
                return _native_vector_env(env_id, num_envs, config, context, on_sub_environment)
            creator = lambda ctx: gym_made(env_id, config, make_kwargs(ctx))  # noqa: E731
        elif config.vectorize_mode == "native":
            raise EnvError("vectorize_mode='native' needs a gymnasium id with a vector entry point")
        assert creator is not None

        made = [first_env] if first_env is not None else []

        def guarded(i: int) -> SubEnvironmentGuard:
            def make() -> tuple[gym.Env, Any, Any]:  # called again to remake the sub-environment on restart
                sub_context = context.copy_with(vector_index=i)
                created = made.pop() if i == 0 and made else creator(sub_context)
                # a gymnasium id's env is what its entry point made: gym.make's wrappers forward no attributes
                user_env = created.unwrapped if env_id is not None else created
                env = _adapted(_checked(created, config), config)
                if on_sub_environment is not None:
                    on_sub_environment(user_env, sub_context)
                shown = display.wrap(env, env_name(config.env)) if i == 0 and display is not None else env
                return shown, user_env, created

            return SubEnvironmentGuard(
                make, i, worker_index, config.restart_failed_sub_environments, check_observations=not config.disable_env_checking
            )

        return gym.vector.SyncVectorEnv([functools.partial(guarded, i) for i in range(num_envs)])
    except EnvError:
        raise
    except TypeError as exc:
        raise EnvError(
            f"creating environment {env_name(config.env)!r} with env_config={dict(config.env_config)} failed: {exc}"
        ) from exc


def gym_made(env_id: str, config: AlgorithmConfig, kwargs: dict[str, Any] | None = None) -> gym.Env:
    """``gym.make`` of a gymnasium id, with gymnasium's env checker as the config's ``disable_env_checking`` says.

    Args:
        env_id: the gymnasium id.
        config: the config (``env_config``, ``disable_env_checking``).
        kwargs: ``gym.make``'s keyword arguments instead of ``env_config``.

    Returns:
        The env ``gym.make`` returns, its wrappers (time limit, checker) included.
    """
    return gym.make(env_id, disable_env_checker=config.disable_env_checking, **(config.env_config if kwargs is None else kwargs))


def one_sub_environment(config: AlgorithmConfig, worker_index: int = 0) -> Any:
    """One sub-environment of the config's env as its creator makes it (``gym.make``'s for a gymnasium id).

    For reading the env's spaces, or stepping a copy beside the runner's (RLlib's ``worker.env``).

    Args:
        config: the config (``env``, ``env_config``, ``disable_env_checking``).
        worker_index: the env runner's index, in the EnvContext a creator gets.

    Returns:
        The env.

    Raises:
        EnvError: the env is unknown or cannot be imported.
    """
    env_id, creator = resolve_creator(config.env)
    if env_id is not None:
        return gym_made(env_id, config)
    assert creator is not None
    return creator(EnvContext(config.env_config, worker_index, num_workers=config.num_env_runners))


def make_remote_vector_env(
    config: AlgorithmConfig,
    num_envs: int,
    worker_index: int = 0,
    first_env: Any = None,
    on_sub_environment: Callable[[Any, EnvContext], None] | None = None,
) -> gym.vector.VectorEnv:
    """RLlib's ``remote_worker_envs``: each sub-environment a Ray actor (see :mod:`.remote_sub_environments`).

    Args:
        config: the algorithm's config (``env``, ``env_config``, ``disable_env_checking``).
        num_envs: the number of sub-environments.
        worker_index: the env runner's index, in each :class:`EnvContext`.
        first_env: an env the probe made to see its kind, closed: the actors make their own.
        on_sub_environment: called with each actor and its EnvContext, as RLlib calls ``on_sub_environment_created``.

    Returns:
        The vector env over the actors, not yet reset.

    Raises:
        EnvError: the env is unknown or cannot be imported.
        ConfigError: Ray is not installed, or the sub-environments' spaces differ.
    """
    env_id, creator = resolve_creator(config.env)
    if env_id is not None:  # made in the actor's process as gym.make makes it
        creator = lambda ctx: gym_made(env_id, config)  # noqa: E731
    assert creator is not None
    if first_env is not None:
        first_env.close()
    contexts = [EnvContext(config.env_config, worker_index, i, num_workers=config.num_env_runners) for i in range(num_envs)]
    env_class = config.env if isinstance(config.env, type) else None
    actors = make_remote_actors(env_class, creator, contexts, env_name(config.env))
    if on_sub_environment is not None:  # RLlib gives the callback the actor
        for actor, context in zip(actors, contexts, strict=True):
            on_sub_environment(actor, context)
    return RemoteVectorEnv(actors)


def _native_vector_env(
    env_id: str,
    num_envs: int,
    config: AlgorithmConfig,
    context: EnvContext,
    on_sub_environment: Callable[[Any, EnvContext], None] | None,
) -> gym.vector.VectorEnv:
    """gymnasium's own vector implementation of ``env_id``; it has no sub-environment objects, so it is shown whole."""
    vector_env = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", **config.env_config)
    if on_sub_environment is not None:
        on_sub_environment(vector_env, context.copy_with(vector_index=0))
    return vector_env


def _adapted(env: gym.Env, config: AlgorithmConfig) -> gym.Env:
    """``env`` with the config's ``observation_space``/``action_space``, cut at ``horizon``, behind gymnasium's checker.

    The checker (unless ``disable_env_checking``, and unless ``gym.make`` already
    put one in) checks the spaces now and the first reset and step: a result of
    the wrong form is an error there, a doubtful one a warning.
    """
    if config.observation_space is not None or config.action_space is not None:
        wrapped: gym.Wrapper = gym.Wrapper(env)  # the user's env object keeps its own attributes
        if config.observation_space is not None:
            wrapped.observation_space = config.observation_space
        if config.action_space is not None:
            wrapped.action_space = config.action_space
        env = wrapped
    if config.horizon is not None:
        env = gym.wrappers.TimeLimit(env, max_episode_steps=config.horizon)
    if not config.disable_env_checking and not _has_checker(env):
        env = gym.wrappers.PassiveEnvChecker(env)
    return env


def _has_checker(env: gym.Env) -> bool:
    """Whether one of ``env``'s wrappers is gymnasium's env checker."""
    while isinstance(env, gym.Wrapper):
        if isinstance(env, gym.wrappers.PassiveEnvChecker):
            return True
        env = env.env
    return False


def _checked(env: Any, config: AlgorithmConfig) -> gym.Env:
    """A created sub-environment as a gymnasium env: one of another API adapted by an integration (old gym's), or refused."""
    from corral.core.environments.multi_agent_env import MultiAgentEnv  # it imports this module

    spec = config.env
    adapted = integration_hooks().adapted_sub_environment(env=env, config=config)
    env = env if adapted is None else adapted
    if not isinstance(env, gym.Env):
        raise EnvError(f"the creator of {env_name(spec)!r} returned {type(env).__name__}, not a gymnasium.Env")
    if isinstance(env, MultiAgentEnv):  # make_env_runner gives a multi-agent env its own runner
        raise EnvError(f"{env_name(spec)!r} is a multi-agent env (corral.MultiAgentEnv); step it with a MultiAgentEnvRunner")
    return env
