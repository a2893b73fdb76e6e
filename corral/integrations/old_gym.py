"""Environments written for the old gym API, wrapped to gymnasium's (``auto_wrap_old_gym_envs``, on by default).

Two kinds reach corral: an env of the ``gym`` package (a ``gym.Env`` with
``gym.spaces``), and a ``gymnasium.Env`` subclass written to the API before
gym 0.26, whose ``reset()`` takes no seed and returns only the observation and
whose ``step()`` returns ``(obs, reward, done, info)``. Shimmy's compatibility
wrappers need the ``gym`` package itself (pinned to numpy below 2), so corral
wraps both kinds here, on gymnasium's own step-API converter, which splits
``done`` by the ``TimeLimit.truncated`` flag in ``info`` as gym's TimeLimit set it.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, cast

import gymnasium as gym
from gymnasium import spaces
from gymnasium.utils.step_api_compatibility import convert_to_terminated_truncated_step_api

from corral.core.contracts.integration_specs import integration
from corral.core.environments.env_creators import ENV_METHODS, env_name
from corral.errors import EnvError

if TYPE_CHECKING:
    from corral.core.contracts.config import AlgorithmConfig

StepResult = tuple[Any, float, bool, bool, dict[str, Any]]
"""what gymnasium's ``step`` returns: observation, reward, terminated, truncated, info"""


@integration
def adapted_sub_environment(env: Any, config: AlgorithmConfig) -> gym.Env | None:
    """The seam's answer: an old-gym env wrapped in :class:`OldGymEnv`, or refused without ``auto_wrap_old_gym_envs``.

    Args:
        env: what the env's creator returned.
        config: the algorithm's config.

    Returns:
        The wrapped env, or None for an env that follows gymnasium's API (or is no env at all).

    Raises:
        EnvError: ``env`` follows the old API and ``auto_wrap_old_gym_envs`` is off.
    """
    if not uses_old_api(env):
        return None
    if not config.auto_wrap_old_gym_envs:
        raise EnvError(
            f"{env_name(config.env)!r} follows the old gym API (reset() without a seed returning only the observation, "
            "a four-value step, or the gym package's Env); set environment(auto_wrap_old_gym_envs=True) to wrap "
            "it, or port it to gymnasium's API"
        )
    return OldGymEnv(env)


def uses_old_api(env: Any) -> bool:
    """Whether ``env`` is an old-gym env: an env-like object that is no ``gymnasium.Env``, or whose ``reset`` takes no seed.

    Args:
        env: what an env's creator returned.

    Returns:
        True for the two kinds this module wraps; False for a gymnasium env (and for anything that is no env at all).
    """
    if not isinstance(env, gym.Env):
        return all(callable(getattr(env, name, None)) for name in ENV_METHODS) and hasattr(env, "observation_space")
    return not _takes_seed(env.reset)


def _takes_seed(reset: Any) -> bool:
    try:
        parameters = inspect.signature(reset).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: assume the current API
        return True
    return any(p.name == "seed" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


class OldGymEnv(gym.Env):
    """An old-gym env behind gymnasium's API: ``reset(seed=, options=) -> (obs, info)`` and five-value ``step``.

    Args:
        env: the old-gym env; its spaces become gymnasium's, and ``reset(seed=...)``
            calls its ``seed(seed)`` where its ``reset`` takes no seed.

    Raises:
        EnvError: a space has a type gymnasium has no counterpart of.
    """

    def __init__(self, env: Any) -> None:
        self.env = env
        self.observation_space = gymnasium_space(env.observation_space, "observation_space")
        self.action_space = gymnasium_space(env.action_space, "action_space")
        self.metadata = dict(getattr(env, "metadata", None) or {})
        self.render_mode = getattr(env, "render_mode", None)
        self._seeds_in_reset = _takes_seed(env.reset)  # gym 0.22-0.26 took reset(seed=...)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Reset the wrapped env, seeding it first if asked; an info dict is added where it returns none."""
        super().reset(seed=seed)
        if self._seeds_in_reset:
            out = self.env.reset(seed=seed, **({"options": options} if options is not None else {}))
        else:
            if seed is not None and callable(getattr(self.env, "seed", None)):
                self.env.seed(seed)
            out = self.env.reset()
        returns_info = isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict)
        if returns_info and not isinstance(self.observation_space, spaces.Tuple):  # gym 0.26: (obs, info)
            return out[0], out[1]
        return out, {}

    def step(self, action: Any) -> StepResult:
        """Step the wrapped env; a four-value result is split into terminated and truncated."""
        out = self.env.step(action)
        return cast(StepResult, convert_to_terminated_truncated_step_api(out) if len(out) == 4 else out)

    def render(self) -> Any:
        """Render the wrapped env."""
        return self.env.render()

    def close(self) -> None:
        """Close the wrapped env, where it can be closed."""
        close = getattr(self.env, "close", None)
        if callable(close):
            close()


def gymnasium_space(space: Any, where: str = "space") -> gym.Space[Any]:
    """The gymnasium space equal to an old ``gym.spaces`` one (a gymnasium space is returned as it is).

    Args:
        space: the old env's space.
        where: the space's name, for the error message.

    Returns:
        A ``Box``, ``Discrete``, ``MultiDiscrete``, ``MultiBinary``, ``Tuple`` or ``Dict`` of gymnasium's.

    Raises:
        EnvError: the space is of another type.
    """
    if isinstance(space, gym.Space):
        return space
    kind = type(space).__name__
    if kind == "Box":
        return spaces.Box(low=space.low, high=space.high, shape=space.shape, dtype=space.dtype)
    if kind == "Discrete":
        return spaces.Discrete(int(space.n), start=int(getattr(space, "start", 0)))
    if kind == "MultiDiscrete":
        return spaces.MultiDiscrete(space.nvec)
    if kind == "MultiBinary":
        return spaces.MultiBinary(space.n)
    if kind == "Tuple":
        return spaces.Tuple([gymnasium_space(s, where) for s in space.spaces])
    if kind == "Dict":
        return spaces.Dict({key: gymnasium_space(s, where) for key, s in space.spaces.items()})
    raise EnvError(
        f"the old-gym env's {where} is a {type(space).__module__}.{kind}, which corral cannot turn into a gymnasium "
        "space (Box, Discrete, MultiDiscrete, MultiBinary, Tuple and Dict are); port the env to gymnasium"
    )
