"""Creating environments: gymnasium ids, import paths, classes and registered creators.

Every env runner steps a gymnasium ``VectorEnv``. A gymnasium id whose spec
has a native vectorised implementation (CartPole's is ~50x faster than a loop
of copies) gets it through ``gym.make_vec``; anything else is wrapped in a
``SyncVectorEnv``. Both reset a finished sub-environment on the *next* step,
which the env runner and :mod:`corral.core.learning.postprocessing` account for.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import math
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeGuard, cast

import gymnasium as gym
import numpy as np

from corral.core.common import state_codec
from corral.core.common.import_paths import import_object, is_import_path
from corral.core.common.spaces import ObservationCheck
from corral.core.environments.atari import is_ale_id, make_atari
from corral.core.environments.old_gym import ENV_METHODS, OldGymEnv, uses_old_api
from corral.core.environments.rendering import Display, check_display, displayed
from corral.core.seeding import generator_state, set_generator_state
from corral.errors import ConfigError, EnvError, EnvRunnerError, did_you_mean

if TYPE_CHECKING:  # a type only: the config module sits above the environments
    from corral.core.contracts.config import AlgorithmConfig

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
    if "ray.tune.registry" in sys.modules:  # Tune trials are other processes: they find it in Tune's registry
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
    """The creator registered under ``name`` with ``ray.tune.registry.register_env``, or None.

    Only where Tune is imported already: a script that registered with it did
    import it, and so did every Tune trial; any other process has nothing there.
    """
    registry = sys.modules.get("ray.tune.registry")
    store = getattr(registry, "_global_registry", None)  # Ray's own readers (RLlib) use this object too
    if store is None:
        return None
    category = registry.ENV_CREATOR  # type: ignore[union-attr]
    if not store.contains(category, name):
        return None
    return cast("Callable[[EnvContext], gym.Env]", store.get(category, name))


def _is_gym_id(name: str) -> bool:
    return ":" not in name and (name in gym.registry or is_ale_id(name))


def env_name(env: Any) -> str:
    """A short name for results folders and messages."""
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


CONFIG_PARAMETERS = ("config", "env_config", "env_context", "context", "ctx")
"""names an env class's first parameter may have for it to take the EnvContext, though it has a default"""


def _creator_for(obj: Any, label: str) -> Callable[[EnvContext], gym.Env]:
    old_gym_class = all(callable(getattr(obj, name, None)) for name in ENV_METHODS)  # made, then wrapped or refused
    if isinstance(obj, type) and not issubclass(obj, gym.Env) and not old_gym_class:
        raise EnvError(f"environment {label!r} is {obj!r}, which is not a gymnasium.Env subclass")
    return _class_creator(obj, label) if isinstance(obj, type) else obj


def _class_creator(cls: Callable[..., gym.Env], label: str) -> Callable[[EnvContext], gym.Env]:
    """How to build an env class from its ``env_config``, whatever its constructor's signature.

    RLlib's convention first: a class whose first parameter is required (or is named
    like a config) gets the EnvContext as that one argument. A class without
    parameters is built without it; one with keyword options only (gymnasium's
    style, ``__init__(self, render_mode=None, size=5)``) gets ``env_config``'s
    entries as keyword arguments, as ``gymnasium.make`` passes them.
    """
    init = cast(Any, cls).__init__
    if init is object.__init__:  # no constructor of its own
        return lambda ctx: cls()
    kind = inspect.Parameter
    params = [p for p in inspect.signature(init).parameters.values() if p.name != "self"]
    if not params:
        return lambda ctx: cls()
    first = params[0]
    if first.kind is kind.VAR_POSITIONAL or (
        first.kind in (kind.POSITIONAL_ONLY, kind.POSITIONAL_OR_KEYWORD)
        and (first.default is kind.empty or first.name in CONFIG_PARAMETERS)
    ):
        return lambda ctx: cls(ctx)
    takes_any = any(p.kind is kind.VAR_KEYWORD for p in params)
    names = {p.name for p in params if p.kind in (kind.POSITIONAL_OR_KEYWORD, kind.KEYWORD_ONLY)}

    def with_keywords(ctx: EnvContext) -> gym.Env:
        unknown = sorted(set(ctx) - names) if not takes_any else []
        if unknown:
            raise EnvError(
                f"environment {label!r} takes the keyword arguments {', '.join(sorted(names))}, "
                f"but env_config has {', '.join(map(repr, unknown))}"
            )
        return cls(**ctx)

    return with_keywords


def make_vector_env(
    config: AlgorithmConfig,
    num_envs: int,
    worker_index: int = 0,
    first_env: Any = None,
    display: Display | None = None,
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
        display: how sub-environment 0 is shown or recorded (:mod:`corral.core.environments.rendering`);
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
        ConfigError: ``is_atari=True`` for an env that is no ale-py game, or a ``display``
            with ``vectorize_mode='native'``.
    """
    env_id, creator = resolve_creator(config.env)
    if display is not None:
        if config.vectorize_mode == "native":
            raise ConfigError(
                "render_env and record_env show sub-environment 0 on its own, which a native vector env cannot render; "
                "use vectorize_mode='auto' (the rendering runner then steps its sub-environments in a loop)"
            )
        check_display(display, env_id, env_name(config.env))
    render_mode = {"render_mode": display.render_mode} if display is not None else {}

    def make_kwargs(ctx: EnvContext) -> dict[str, Any]:
        """``gym.make``'s keyword arguments: a gymnasium id's sub-environment 0 is made in the display's render mode."""
        return {**config.env_config, **(render_mode if ctx.vector_index == 0 else {})}

    context = EnvContext(config.env_config, worker_index=worker_index, num_workers=config.num_env_runners)
    ale = env_id is not None and is_ale_id(env_id)
    atari = ale if config.is_atari is None else config.is_atari  # atari_wanted(config), the id resolved once
    if atari and not ale:
        raise ConfigError(f"is_atari=True wraps ale-py games, given by their gymnasium id; {env_name(config.env)!r} is none")
    try:
        if atari:
            game = cast(str, env_id)
            creator = lambda ctx: make_atari(game, make_kwargs(ctx), check=not config.disable_env_checking)  # noqa: E731
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
                and not ale  # ale-py's vector env preprocesses by itself, channels first
                and display is None  # a native vector env does not render
            ):
                return _native_vector_env(env_id, num_envs, config, context, on_sub_environment)
            checker_off = config.disable_env_checking  # gym.make wraps every env in gymnasium's checker by default
            creator = lambda ctx: gym.make(env_id, disable_env_checker=checker_off, **make_kwargs(ctx))  # noqa: E731
        elif config.vectorize_mode == "native":
            raise EnvError("vectorize_mode='native' needs a gymnasium id with a vector entry point")
        assert creator is not None

        made = [first_env] if first_env is not None else []

        def guarded(i: int) -> SubEnvironmentGuard:
            def make() -> tuple[gym.Env, Any]:  # called again to remake the sub-environment on restart
                sub_context = context.copy_with(vector_index=i)
                created = made.pop() if i == 0 and made else creator(sub_context)
                # a gymnasium id's env is what its entry point made: gym.make's wrappers forward no attributes
                user_env = created.unwrapped if env_id is not None else created
                env = _adapted(_checked(created, config), config)
                if on_sub_environment is not None:
                    on_sub_environment(user_env, sub_context)
                return (displayed(env, display, env_name(config.env)) if i == 0 and display is not None else env), user_env

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


class SubEnvironmentGuard(gym.Wrapper):
    """One sub-environment of a runner's vector env: checks what it returns, names it when it fails, or restarts it.

    Every step's reward must be finite and, unless ``disable_env_checking``,
    every observation must belong to the observation space (its shape, its
    bounds, no NaN). A sub-environment that breaks this or whose ``step``
    raises is, with ``restart``, closed and made anew: the step reports the
    episode as truncated at the last good observation (so nothing learns from
    the broken transition), and the vector env's autoreset starts the new one.
    Without ``restart`` a broken value raises :class:`~corral.errors.EnvError`
    and an exception :class:`~corral.errors.EnvRunnerError`, both naming
    the runner, the sub-environment and the step.

    Args:
        make: makes the sub-environment (again, on a restart): ``(env, user_env)``, the env
            with corral's wrappers and the env as the user made it.
        index: the sub-environment's index in its runner.
        worker_index: the runner's index.
        restart: make the env anew when it fails, instead of raising.
        check_observations: check each observation against the observation space.
    """

    def __init__(
        self,
        make: Callable[[], tuple[gym.Env, Any]],
        index: int,
        worker_index: int,
        restart: bool,
        check_observations: bool = True,
    ) -> None:
        env, user_env = make()
        self.user_env = user_env
        """the env as the user made it, without corral's wrappers (checker, horizon, spaces, old-gym adapter): what
        ``foreach_env`` and the callbacks see. For a gymnasium id, the env its entry point made (``env.unwrapped``)."""
        super().__init__(env)
        self._make = make
        self.index = index
        self.worker_index = worker_index
        self.restart = restart
        self.restarts = 0
        self._last_obs: Any = None
        self._t = 0
        self._check = ObservationCheck(self.env.observation_space) if check_observations else None
        self._record: dict[str, Any] | None = None  # how the episode in progress began, and its actions (for replay)

    @property
    def where(self) -> str:
        """Which sub-environment this is, for messages."""
        return f"sub-environment {self.index} of env runner {self.worker_index}"

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        """Reset the sub-environment, check its first observation and remember it (and how the episode began)."""
        rng = self.env.unwrapped._np_random  # read without creating one (np_random would seed it from the OS)
        self._record = {
            "seed": kwargs.get("seed"),
            "options": kwargs.get("options"),
            "rng": generator_state(rng) if rng is not None else None,
            "actions": [],
        }
        obs, info = self.env.reset(**kwargs)
        self._t = 0
        found = self._check.problem(obs) if self._check is not None else None
        if found is not None:
            raise EnvError(f"{self.where}: the observation from reset() {found[1]}")
        self._last_obs = obs
        return obs, info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        """Step and check the result; on a failure, restart (if asked) or raise naming this sub-environment."""
        self._t += 1
        try:
            obs, reward, terminated, truncated, info = self.env.step(action)
        except Exception as exc:  # an environment may raise anything
            if not self.restart:
                raise EnvRunnerError(
                    f"{self.where} raised {type(exc).__name__}: {exc} at step {self._t} of its episode "
                    "(set fault_tolerance(restart_failed_sub_environments=True) to restart a failed sub-environment and go on)"
                ) from exc
            return self._restarted(f"raised {type(exc).__name__}: {exc}")
        problem = bad_reward(reward)
        if problem is None and self._check is not None:
            found = self._check.problem(obs)
            problem = f"returned an observation that {found[1]}" if found is not None else None
        if problem is not None:
            if not self.restart:
                raise EnvError(f"{self.where} {problem} at step {self._t} of its episode{_CHECK_ADVICE}")
            return self._restarted(problem)
        self._last_obs = obs
        if self._record is not None:
            if len(self._record["actions"]) < MAX_REPLAY_STEPS:
                self._record["actions"].append(np.array(action, copy=True))
            else:
                self._record = None  # too long to keep: after a restore this episode starts anew
        return obs, reward, terminated, truncated, info

    def episode_record(self) -> dict[str, Any] | None:
        """How the episode in progress began and its actions, as JSON (None: it cannot be replayed)."""
        record = self._record
        if record is None:
            return None
        try:
            actions = state_codec.encode(np.stack(record["actions"])) if record["actions"] else []
            encoded: dict[str, Any] = state_codec.encode({**record, "actions": actions})  # a dict encodes to a dict
            return encoded
        except (TypeError, ValueError):
            return None  # options or actions that are not plain data

    def replay(self, record: Any) -> None:
        """Bring a fresh sub-environment to where :meth:`episode_record` was taken: reset it as then, step the actions.

        Raises:
            ValueError: the record is malformed.
        """
        if record is None:
            logger.warning(
                "%s: its episode in progress was not recorded for replay; after the restore it starts anew", self.where
            )
            self.reset()
            return
        seed, options = prepare_replay(self.env, record, self.where)
        self.reset(seed=seed, options=options)
        actions = state_codec.decode(record["actions"])
        for action in actions:
            self.step(action)

    def _restarted(self, problem: str) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        logger.warning("%s %s at step %d of its episode; restarting it", self.where, problem, self._t)
        with contextlib.suppress(Exception):  # the broken env may fail to close too; it is dropped either way
            self.env.close()
        self.env, self.user_env = self._make()
        self.restarts += 1
        return self._last_obs, 0.0, False, True, {"corral_env_restarted": True}


def prepare_replay(env: gym.Env, record: Any, where: str) -> tuple[int | None, Any]:
    """Check a replay record and give ``env`` back the generator it had before the recorded episode's reset.

    Args:
        env: the fresh env to replay the episode in.
        record: a guard's episode record (``seed``, ``options``, ``rng``, ``actions``).
        where: names the sub-environment in messages.

    Returns:
        ``(seed, options)`` to reset it with, as the episode began.

    Raises:
        ValueError: the record is malformed.
    """
    if not isinstance(record, dict) or not {"seed", "options", "rng", "actions"} <= set(record):
        raise ValueError(f"{where}: a replay record needs seed, options, rng and actions")
    seed = record["seed"]
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ValueError(f"{where}: the replay seed {seed!r} is not an integer")
    if record["rng"] is not None:
        rng = np.random.default_rng()
        set_generator_state(rng, record["rng"])
        env.unwrapped.np_random = rng
    return seed, state_codec.decode(record["options"])


MAX_REPLAY_STEPS = 100_000
"""The longest episode a sub-environment records for replay after a restore (its actions are kept in memory)."""


def is_guarded(env: gym.vector.VectorEnv) -> TypeGuard[gym.vector.SyncVectorEnv]:
    """Whether a vector env steps its sub-environments in a loop, each in a :class:`SubEnvironmentGuard`."""
    return isinstance(env, gym.vector.SyncVectorEnv) and all(isinstance(e, SubEnvironmentGuard) for e in env.envs)


_CHECK_ADVICE = (
    " (fix the env; set fault_tolerance(restart_failed_sub_environments=True) to restart such a sub-environment, "
    "or environment(disable_env_checking=True) to stop checking observations against the space)"
)


def bad_reward(reward: Any) -> str | None:
    """Why a reward cannot be learned from (not a finite number), or None."""
    try:
        value = float(reward)
    except (TypeError, ValueError):
        return f"returned the reward {reward!r}, not a number"
    return None if math.isfinite(value) else f"returned the reward {value}"


def check_vector_step(
    obs: Any, rewards: np.ndarray, check: ObservationCheck | None, steps: np.ndarray, worker_index: int
) -> None:
    """The checks a :class:`SubEnvironmentGuard` makes, on a whole batch from a natively vectorised env.

    Args:
        obs: the batch of observations the vector env's ``step`` returned.
        rewards: ``[N]`` rewards of that step; each must be finite.
        check: the observation check of the env's single observation space; None skips it
            (``disable_env_checking``).
        steps: ``[N]`` steps each sub-environment's episode had taken before this one, for the message.
        worker_index: the env runner's index, for the message.

    Raises:
        EnvError: naming the sub-environment, its step and what was wrong.
    """
    finite = np.isfinite(rewards)
    if not finite.all():
        i = int(np.flatnonzero(~finite)[0])
        raise EnvError(
            f"sub-environment {i} of env runner {worker_index} returned the reward {rewards[i]} "
            f"at step {int(steps[i]) + 1} of its episode{_CHECK_ADVICE}"
        )
    found = check.problem(obs, batched=True) if check is not None else None
    if found is not None:
        i = found[0]
        raise EnvError(
            f"sub-environment {i} of env runner {worker_index} returned an observation that {found[1]} "
            f"at step {int(steps[i]) + 1} of its episode{_CHECK_ADVICE}"
        )


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
    """A created sub-environment as a gymnasium env: an old-gym one wrapped (or refused), anything else refused."""
    from corral.core.environments.multi_agent_env import MultiAgentEnv  # it imports this module

    spec = config.env
    if uses_old_api(env):
        if not config.auto_wrap_old_gym_envs:
            raise EnvError(
                f"{env_name(spec)!r} follows the old gym API (reset() without a seed returning only the observation, "
                "a four-value step, or the gym package's Env); set environment(auto_wrap_old_gym_envs=True) to wrap "
                "it, or port it to gymnasium's API"
            )
        env = OldGymEnv(env)
    if not isinstance(env, gym.Env):
        raise EnvError(f"the creator of {env_name(spec)!r} returned {type(env).__name__}, not a gymnasium.Env")
    if isinstance(env, MultiAgentEnv):  # make_env_runner gives a multi-agent env its own runner
        raise EnvError(f"{env_name(spec)!r} is a multi-agent env (corral.MultiAgentEnv); step it with a MultiAgentEnvRunner")
    return env
