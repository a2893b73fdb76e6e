"""Sub-environments as Ray actors (RLlib's ``remote_worker_envs``): each steps in its own process, all in parallel.

A runner's sub-environments are then stepped together: every step sends each
actor its action and waits for all the answers, so a slow simulator costs its
step time once per step, not once per sub-environment. An env class becomes
the actor itself, so a callback reaches its own methods with ``.remote()``
(``algo.workers.foreach_env(lambda env: env.set_task.remote(2))``, as in RLlib);
an env made by a creator or a gymnasium id lives inside a small holder actor
that steps it. The actors reserve no CPU of the runner's (as RLlib's holders),
so they fit in the resources Tune reserves for a trial.

A checkpoint does not keep what runs inside the actors: a restored run starts
new episodes.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from corral.core.environments.env_creators import EnvContext, constructor_arguments
from corral.errors import ConfigError


class _SubEnvironment:
    """The holder actor of an env its creator makes: it steps the env and answers with plain values."""

    def __init__(self, creator: Callable[[EnvContext], gym.Env], context: EnvContext) -> None:
        self.env = creator(context)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        return self.env.reset(seed=seed, options=options)

    def step(self, action: Any) -> Any:
        return self.env.step(action)

    def corral_spaces(self) -> tuple[gym.Space[Any], gym.Space[Any]]:
        return self.env.observation_space, self.env.action_space


def _spaces(env: gym.Env) -> tuple[gym.Space[Any], gym.Space[Any]]:
    return env.observation_space, env.action_space


def make_remote_actors(
    env_class: type | None, creator: Callable[[EnvContext], gym.Env], contexts: list[EnvContext], label: str
) -> list[Any]:
    """One Ray actor per sub-environment: of the env class itself where the config names one, else a holder.

    Args:
        env_class: the config's env class, or None (a creator or a gymnasium id).
        creator: makes one sub-environment from its context (used where ``env_class`` is None).
        contexts: each sub-environment's EnvContext.
        label: how the config names the env, for errors.

    Returns:
        The actor handles, in sub-environment order.

    Raises:
        ConfigError: Ray is not installed.
    """
    try:
        import ray
    except ModuleNotFoundError:
        raise ConfigError("remote_worker_envs=True makes Ray actors: pip install 'corral[ray]'") from None
    if env_class is None:
        holder = ray.remote(num_cpus=0)(_SubEnvironment)
        return [holder.remote(creator, context) for context in contexts]
    # the user's class, with one method that reads its spaces from the driver
    actor_class: Any = ray.remote(num_cpus=0)(type(env_class.__name__, (env_class,), {"corral_spaces": _spaces}))
    arguments = constructor_arguments(env_class, label)
    handles = []
    for context in contexts:
        args, kwargs = arguments(context)
        handles.append(actor_class.remote(*args, **kwargs))
    return handles


class RemoteVectorEnv(gym.vector.VectorEnv):
    """A vector env over sub-environment actors, with gymnasium's next-step autoreset (as ``SyncVectorEnv``).

    Args:
        actors: the sub-environments' actor handles (:func:`make_remote_actors`).

    Raises:
        ConfigError: the sub-environments' spaces differ.
    """

    def __init__(self, actors: list[Any]) -> None:
        import ray

        self._ray = ray
        self.actors = actors
        self.num_envs = len(actors)
        spaces = ray.get([actor.corral_spaces.remote() for actor in actors])
        if any(other != spaces[0] for other in spaces[1:]):
            raise ConfigError(f"remote_worker_envs: the sub-environments' spaces differ: {spaces}")
        self.single_observation_space, self.single_action_space = spaces[0]
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.metadata = {"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP}
        self._autoreset_envs = np.zeros(self.num_envs, dtype=bool)
        self._observations: Any = create_empty_array(self.single_observation_space, self.num_envs)

    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset every sub-environment (sub-environment ``i`` with ``seed + i``, as ``SyncVectorEnv``)."""
        seeds = seed if isinstance(seed, list) else [None if seed is None else seed + i for i in range(self.num_envs)]
        answers = self._ray.get(
            [actor.reset.remote(seed=s, options=options) for actor, s in zip(self.actors, seeds, strict=True)]
        )
        self._autoreset_envs[:] = False
        infos: dict[str, Any] = {}
        for i, (_, info) in enumerate(answers):
            infos = self._add_info(infos, info, i)
        return self._stacked([obs for obs, _ in answers]), infos

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every sub-environment at once (one whose episode ended last step resets instead)."""
        pending = [
            actor.reset.remote() if self._autoreset_envs[i] else actor.step.remote(action)
            for i, (actor, action) in enumerate(zip(self.actors, iterate(self.action_space, actions), strict=True))
        ]
        answers = self._ray.get(pending)
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminated, truncated = np.zeros(self.num_envs, dtype=bool), np.zeros(self.num_envs, dtype=bool)
        observations: list[Any] = []
        infos: dict[str, Any] = {}
        for i, answer in enumerate(answers):
            if self._autoreset_envs[i]:
                obs, info = answer
            else:
                obs, rewards[i], terminated[i], truncated[i], info = answer
            observations.append(obs)
            infos = self._add_info(infos, info, i)
        self._autoreset_envs = terminated | truncated
        return self._stacked(observations), rewards, terminated, truncated, infos

    def _stacked(self, observations: list[Any]) -> Any:
        return copy.deepcopy(concatenate(self.single_observation_space, observations, self._observations))

    def close_extras(self, **kwargs: Any) -> None:
        """End the actors."""
        for actor in self.actors:
            self._ray.kill(actor)
